"""The ``agent-guards`` command.

Subcommands: ``version``; ``demo`` (run the built-in scenarios on the embedded SQLite
default, scripted model, no network); ``history`` and ``replay`` (inspect a recorded thread
and re-run it from a checkpoint); ``eval`` (the eval slices and the regression gate).

Example:
    >>> main(["version"])  # doctest: +ELLIPSIS
    agent-guards ...
    0
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from importlib import import_module
from importlib.metadata import PackageNotFoundError, version
from types import ModuleType

__all__ = ["graphs_module", "main"]


_GRAPH_HELP = (
    "your graph, module:attr or path/to/file.py:attr as langgraph.json names it (a compiled "
    "graph or a factory); default: the demo's graph for its threads"
)


def package_version() -> str:
    """The installed version of agent-guards."""
    try:
        return version("agent-guards")
    except PackageNotFoundError:  # pragma: no cover - running from a bare checkout
        return "0+unknown"


def graphs_module(name: str) -> ModuleType:
    """Import a module of the reference graphs, ``agent_guards.graphs.<name>``.

    Imported on demand, so ``version`` and ``eval`` never load the reference graph.
    """
    return import_module(f"agent_guards.graphs.{name}")


def _cmd_version(args: argparse.Namespace) -> int:
    print(f"agent-guards {package_version()}")
    return 0


def _cmd_delegate(module: str, func: str) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        result = getattr(graphs_module(module), func)(args)
        return int(result or 0)

    return run


def _eval_cli() -> ModuleType:
    return import_module("agent_guards.evals.cli")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (exposed so the docs and tests can render ``--help``)."""
    parser = argparse.ArgumentParser(
        prog="agent-guards",
        description="Runtime guards for LangGraph agents: demo, history, replay and evals.",
    )
    parser.add_argument("--version", action="version", version=f"agent-guards {package_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("version", help="print the installed version")
    p.set_defaults(func=_cmd_version)

    p = sub.add_parser("demo", help="run the built-in scenarios (SQLite, scripted model)")
    p.add_argument("--scenario", action="append", help="run only this scenario (repeatable)")
    p.add_argument("--list", action="store_true", help="list the scenarios and exit")
    p.add_argument(
        "--db",
        default=".agent_guards/demo.sqlite",
        help="SQLite file path or postgresql:// URL for checkpoints and the store",
    )
    p.add_argument(
        "--model",
        default=None,
        help="provider:name of a real chat model (init_chat_model); default: scripted",
    )
    p.add_argument("--no-baseline", action="store_true", help="skip the unguarded comparison")
    p.set_defaults(func=_cmd_delegate("demo", "demo_main"))

    p = sub.add_parser("history", help="list a thread's checkpoints with plan version and usage")
    p.add_argument("thread", help="thread id (the demo prints it)")
    p.add_argument(
        "--db", default=".agent_guards/demo.sqlite", help="SQLite path or postgresql:// URL"
    )
    p.add_argument("--graph", help=_GRAPH_HELP)
    p.set_defaults(func=_cmd_delegate("demo", "history_main"))

    p = sub.add_parser("replay", help="re-run a thread from a checkpoint and diff the decisions")
    p.add_argument("thread", help="thread id")
    p.add_argument("--checkpoint", required=True, help="checkpoint id (see `history`)")
    p.add_argument(
        "--db", default=".agent_guards/demo.sqlite", help="SQLite path or postgresql:// URL"
    )
    p.add_argument("--graph", help=_GRAPH_HELP)
    p.add_argument(
        "--run-writes",
        action="store_true",
        help="replay even when the thread's ledger is in state and writes done after the "
        "checkpoint would run again",
    )
    p.set_defaults(func=_cmd_delegate("demo", "replay_main"))

    p = sub.add_parser("eval", help="eval slices, regression gate, drafts from threads, RAMDocs")
    _eval_cli().configure(p)
    p.set_defaults(func=lambda args: _eval_cli().main(args))
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 0
    status: int = args.func(args)
    return status


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
