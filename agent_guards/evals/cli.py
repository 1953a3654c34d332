"""``agent-guards eval``: run the slices, print the metrics, gate on regressions.

Modes (one per call):

* default: run the shipped slices (``--slice`` to pick, ``--cases`` to add JSONL files or
  folders), print a metrics table per slice and overall and the failing cases; ``--save``
  writes the run, ``--baseline`` compares with a saved run case by case (fixed / broke /
  changed verdict) and exits 1 when a case that passed before fails now. Without a
  baseline the exit status is 1 when any case fails. ``--json`` prints one JSON object.
* ``--from-thread THREAD --db PATH_OR_URL``: draft regression cases from a recorded thread
  (JSONL to ``--out`` or stdout). ``--graph module:attr`` names the graph that wrote it (a
  demo thread needs none), so each case carries its node's principal key, memory namespace
  and policy.
* ``--ramdocs [PATH]``: the RAMDocs replay (``--labels``, ``--group-entities``).
* ``--dated``: the dated replay (questions whose answer changed over time) against the
  newest-first and majority baselines (``--limit`` questions, ``--seed``).

Example:
    >>> import argparse
    >>> parser = argparse.ArgumentParser(prog="agent-guards eval")
    >>> configure(parser)
    >>> main(parser.parse_args(["--slice", "noise", "--quiet"]))  # doctest: +ELLIPSIS
    10 cases, 0 failed, ...s, policies: ContextPolicy@1, EvidencePolicy@1, ...
    0
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from importlib import import_module
from typing import Any

from agent_guards.evals.cases import SHIPPED_SLICES, load_cases, shipped_case_files
from agent_guards.evals.policies import EvalPolicies
from agent_guards.evals.runner import CaseChange, EvalRun, diff_runs, regressions, run_cases

__all__ = ["configure", "main", "run"]

_COLUMNS = (
    ("cases", "cases"),
    ("pass", "pass_rate"),
    ("conflict_recall", "conflict_detection_recall"),
    ("wrong_arb", "wrong_arbitration_rate"),
    ("abstain_p", "abstain_precision"),
    ("clarify_p", "clarify_precision"),
    ("escalate_p", "human_escalation_precision"),
    ("replans", "replan_rate"),
    ("abort", "no_progress_abort_rate"),
    ("calls_saved", "tool_calls_saved"),
)


# The ``eval`` options, one row each: (flag, argparse keywords). Grouped by mode: the
# default run, drafting from a recorded thread, and the RAMDocs replay.
# fmt: off
_OPTIONS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("--slice", {"action": "append", "metavar": "NAME", "help": "run only this slice "
                 f"(repeatable); shipped: {', '.join(SHIPPED_SLICES)}"}),
    ("--cases", {"action": "append", "metavar": "PATH",
                 "help": "extra JSONL case files or folders of them (repeatable)"}),
    ("--save", {"metavar": "FILE", "help": "save the run (per-case results, policy versions)"}),
    ("--baseline", {"metavar": "FILE", "help": "compare with a saved run; "
                    "exit 1 when a case that passed before fails"}),
    ("--json", {"action": "store_true", "help": "print one JSON object instead of tables"}),
    ("--policies", {"metavar": "MODULE:ATTR",
                    "help": "run under these EvalPolicies (e.g. mypkg.evalconf:POLICIES)"}),
    ("--quiet", {"action": "store_true", "help": "print only the summary line"}),
    ("--from-thread", {"metavar": "THREAD", "help": "draft cases from a recorded thread"}),
    ("--graph", {"metavar": "MODULE:ATTR", "help": "with --from-thread: the graph that wrote "
                 "the thread (module:attr or path/to/file.py:attr, as in langgraph.json); its "
                 "nodes' principal key, namespaces and policies go into the cases"}),
    ("--db", {"metavar": "PATH_OR_URL", "default": ".agent_guards/demo.sqlite",
              "help": "SQLite file or postgresql:// URL of the thread (with --from-thread)"}),
    ("--out", {"metavar": "FILE",
               "help": "where --from-thread writes the cases (default: stdout)"}),
    ("--draft-slice", {"default": "from_thread", "metavar": "NAME",
                       "help": "slice name of the drafted cases"}),
    ("--ramdocs", {"nargs": "?", "const": "", "metavar": "PATH",
                   "help": "replay RAMDocs (default path: data/ramdocs/RAMDocs_test.jsonl)"}),
    ("--labels", {"choices": ("none", "oracle", "oracle_entities"), "default": "none",
                  "help": "RAMDocs: 'oracle' uses the dataset's labels as metadata (upper "
                  "bound), 'oracle_entities' adds each correct document's entity"}),
    ("--group-entities", {"action": "store_true", "help": "RAMDocs: answer per entity "
                          "instead of asking which one (EvidencePolicy(group_entities=True))"}),
    ("--limit", {"type": int, "metavar": "N",
                 "help": "RAMDocs: first N questions only; --dated: N questions (1000)"}),
    ("--keep-unknown", {"action": "store_true", "help": "RAMDocs: count the noise documents' "
                        "'unknown' answers as claims too"}),
    ("--dated", {"action": "store_true", "help": "replay questions whose answer changed over "
                 "time (documents with year, month or day dates) against two baselines"}),
    ("--seed", {"type": int, "metavar": "N", "help": "--dated: seed of the built questions"}),
)
# fmt: on


def configure(parser: argparse.ArgumentParser) -> None:
    """Add the ``eval`` options to ``parser``."""
    for flag, keywords in _OPTIONS:
        parser.add_argument(flag, **keywords)


def _policies(spec: str | None) -> EvalPolicies | None:
    if not spec:
        return None
    module, _, attr = spec.partition(":")
    if not module or not attr:
        raise SystemExit(f"--policies must look like module:attribute, got {spec!r}")
    value = getattr(import_module(module), attr)
    value = value() if callable(value) and not isinstance(value, EvalPolicies) else value
    if not isinstance(value, EvalPolicies):
        raise SystemExit(f"--policies {spec} is a {type(value).__name__}, not EvalPolicies")
    return value


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.2f}"
    return str(value)


def format_table(run: EvalRun) -> str:
    """The metrics per slice and overall, one row each."""
    rows = [(name, m) for name, m in run.by_slice().items()]
    rows.append(("overall", run.metrics | {"cases": len(run.results)}))
    width = max(len(name) for name, _ in rows)
    head = f"{'slice':<{width}}  " + "  ".join(f"{h:>{max(len(h), 5)}}" for h, _ in _COLUMNS)
    lines = [head, "-" * len(head)]
    for name, metrics in rows:
        cells = "  ".join(f"{_cell(metrics.get(key)):>{max(len(h), 5)}}" for h, key in _COLUMNS)
        lines.append(f"{name:<{width}}  {cells}")
    return "\n".join(lines)


def _select(args: argparse.Namespace) -> list[Any]:
    paths: list[Any] = list(shipped_case_files())
    paths.extend(args.cases or ())
    cases = load_cases(paths)
    if args.slice:
        known = sorted({c.slice for c in cases})
        unknown = sorted(set(args.slice) - set(known))
        if unknown:
            raise SystemExit(f"unknown slice(s) {unknown}; known: {', '.join(known)}")
        cases = [c for c in cases if c.slice in args.slice]
    return cases


def _json_report(
    run_: EvalRun,
    baseline: EvalRun | None,
    changes: list[CaseChange],
    broke: list[CaseChange],
    status: int,
) -> dict[str, Any]:
    out = run_.to_dict() | {"slices": run_.by_slice(), "exit_status": status}
    if baseline:
        out["changes"] = [vars(c) | {"failures": list(c.failures)} for c in changes]
        out["regressions"] = [c.case_id for c in broke]
    return out


def _print_baseline(
    args: argparse.Namespace, run_: EvalRun, baseline: EvalRun, changes: list[CaseChange]
) -> None:
    """Policy versions that changed, then the case-by-case changes against the baseline."""
    for guard, label in sorted(run_.policies.items()):
        if baseline.policies.get(guard, label) != label:
            print(f"policy changed: {guard} {baseline.policies[guard]} -> {label}")
    print(f"changes against {args.baseline}:" if changes else "no changes against the baseline")
    for change in changes:
        print(f"  {change}")


def _print_details(
    args: argparse.Namespace, run_: EvalRun, baseline: EvalRun | None, changes: list[CaseChange]
) -> None:
    """The metrics table, the failing cases, and the changes against the baseline."""
    print(format_table(run_))
    shown = {c.case_id for c in changes}
    for r in run_.failed:
        if r.case_id not in shown:  # the changes below show the others
            print(f"FAIL {r.slice}/{r.case_id}: {'; '.join(r.failures)}")
    if baseline:
        _print_baseline(args, run_, baseline, changes)


def _eval(args: argparse.Namespace) -> int:
    cases = _select(args)
    baseline = EvalRun.load(args.baseline) if args.baseline else None
    if baseline is not None and args.slice:  # compare like with like
        baseline.results = [r for r in baseline.results if r.slice in args.slice]
    run_ = run_cases(cases, baseline=baseline, policies=_policies(args.policies))
    if args.save:
        run_.save(args.save)
    changes = diff_runs(baseline, run_) if baseline else []
    broke = regressions(changes)
    status = int(bool(broke)) if baseline else int(bool(run_.failed))
    if args.json:
        out = _json_report(run_, baseline, changes, broke, status)
        print(json.dumps(out, ensure_ascii=False, indent=1, default=str))
        return status
    summary = (
        f"{len(run_.results)} cases, {len(run_.failed)} failed, "
        f"{run_.seconds:.2f}s, policies: {', '.join(sorted(set(run_.policies.values())))}"
    )
    if not args.quiet:
        _print_details(args, run_, baseline, changes)
    print(summary)
    if baseline:
        verdict = f"FAILED: {len(broke)} case(s) passed before and fail now" if broke else "passed"
        print(f"regression gate {verdict}")
    return status


def _thread_graph(args: argparse.Namespace, saver: Any, store: Any) -> Any:
    """The graph that wrote the thread: ``--graph``, else the demo's for a demo thread."""
    from agent_guards.graphs import demo

    if args.graph:
        return demo.load_graph(args.graph, saver, store)
    try:
        return demo._graph_for(argparse.Namespace(thread=args.from_thread), saver, store)
    except SystemExit:  # not a demo thread: drafted from the checkpoints alone
        return None


def _from_thread(args: argparse.Namespace) -> int:
    from agent_guards.evals.traces import draft_cases, open_checkpointer, write_cases

    with open_checkpointer(args.db) as (saver, store):
        graph = _thread_graph(args, saver, store)
        cases, skipped = draft_cases(
            saver,
            args.from_thread,
            slice=args.draft_slice,
            store=store if graph is None else (graph.store or store),
            graph=graph,
        )
    text = write_cases(cases, args.out)
    if args.out is None:
        sys.stdout.write(text)
    note = (
        f" (skipped: {', '.join(f'{g} x{n}' for g, n in sorted(skipped.items()))})"
        if skipped
        else ""
    )
    print(f"{len(cases)} draft case(s) from thread {args.from_thread!r}{note}", file=sys.stderr)
    return 0


def _ramdocs(args: argparse.Namespace) -> int:
    from agent_guards.evals.ramdocs import format_ramdocs, run_ramdocs
    from agent_guards.evidence_resolve.policy import EvidencePolicy

    report = run_ramdocs(
        args.ramdocs or None,
        labels=args.labels,
        limit=args.limit,
        keep_unknown=args.keep_unknown,
        policy=EvidencePolicy(group_entities=args.group_entities),
    )
    print(json.dumps(report, indent=1) if args.json else format_ramdocs(report))
    return 0


def _dated(args: argparse.Namespace) -> int:
    from agent_guards.evals.dated import DEFAULT_SEED, format_dated, run_dated

    seed = DEFAULT_SEED if args.seed is None else args.seed
    report = run_dated(n=args.limit or 1000, seed=seed)
    print(json.dumps(report, indent=1) if args.json else format_dated(report))
    return 0


def main(args: argparse.Namespace) -> int:
    """Run the eval; the exit status is non-zero when a previously passing case fails."""
    if args.from_thread:
        return _from_thread(args)
    if args.ramdocs is not None:
        return _ramdocs(args)
    if args.dated:
        return _dated(args)
    return _eval(args)


def run(argv: Sequence[str] | None = None) -> int:
    """``agent-guards eval`` on its own (``python -m agent_guards.evals.cli``)."""
    parser = argparse.ArgumentParser(prog="agent-guards eval", description=__doc__.split("\n")[0])
    configure(parser)
    return main(parser.parse_args(argv))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(run())
