"""Run every ``benchmarks/bench_*.py`` and print one table (``make bench``).

Each module exposes ``run(quick: bool = False) -> list[dict]`` with rows
``{"name", "value", "unit", "note"}``; ratios (unit ``x``) are measured within one run,
so they compare like with like on whatever machine runs them. Results are also written
to ``bench-results.json`` so two runs can be compared.

Usage: ``python -m benchmarks.run [--quick] [--only NAME] [--json PATH]``
"""

from __future__ import annotations

import argparse
import importlib
import json
import pkgutil
import platform
import sys
import time
from pathlib import Path
from typing import Any

import benchmarks


def discover() -> list[str]:
    return sorted(
        info.name
        for info in pkgutil.iter_modules(benchmarks.__path__)
        if info.name.startswith("bench_")
    )


def run_all(*, quick: bool = False, only: list[str] | None = None) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for name in discover():
        topic = name.removeprefix("bench_")
        if only and topic not in only:
            continue
        module = importlib.import_module(f"benchmarks.{name}")
        started = time.perf_counter()
        for row in module.run(quick=quick):
            rows.append({"topic": topic, **row})
        print(f"  ran {topic} in {time.perf_counter() - started:.1f}s", file=sys.stderr)
    return rows


# The ratios the project reports (issue acceptance): (label, topic, row-name prefix).
HEADLINES = (
    ("guard overhead, reference graph (on / off)", "graph", "guard overhead per run"),
    ("detect_loop, 10k / 100 messages", "loops", "detect_loop cost 10k / 100"),
    ("resolve_evidence, 10k / 1k items", "evidence", "resolve_evidence growth 1,000 -> 10,000"),
    ("fit_context, 10k / 1k messages", "context", "fit_context time, 10,000 / 1,000"),
    ("checkpoint bytes per step, step 1000 / 10", "graph", "bytes per super-step, step 1000"),
    ("model calls until stop, unguarded / guarded", "graph", ""),
    ("import agent_guards / import langgraph.graph", "imports", "import agent_guards /"),
    ("run ledger per tool call, InMemoryStore", "ledger", "run ledger per tool call, InMemory"),
    ("run ledger per tool call, SqliteStore (WAL)", "ledger", "run ledger per tool call, Sqlite"),
)


def headlines(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The headline ratios, picked from the rows of one run."""
    out = []
    for label, topic, prefix in HEADLINES:
        for r in rows:
            if r["topic"] != topic or r["unit"] != "x" or not r["name"].startswith(prefix):
                continue
            if not prefix and "unguarded / guarded" not in r["name"]:
                continue
            name = label if prefix else f"{label}: {r['name'].split(':')[0]}"
            out.append(
                {
                    "topic": "headline",
                    "name": name,
                    "value": r["value"],
                    "unit": "x",
                    "note": r.get("note", ""),
                }
            )
    return out


def format_table(rows: list[dict[str, Any]]) -> str:
    header = f"{'topic':<10} {'benchmark':<58} {'value':>12}  unit  note"
    lines = [header, "-" * len(header)]
    for r in rows:
        value = r["value"]
        shown = f"{value:,.2f}" if isinstance(value, float) else f"{value:,}"
        lines.append(
            f"{r['topic']:<10} {r['name']:<58} {shown:>12}  {r['unit']:<5} {r.get('note', '')}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.run")
    parser.add_argument("--quick", action="store_true", help="small sizes (smoke test)")
    parser.add_argument("--only", action="append", help="run only this topic (repeatable)")
    parser.add_argument("--json", default="bench-results.json", help="where to write results")
    args = parser.parse_args(argv)
    rows = run_all(quick=args.quick, only=args.only)
    top = headlines(rows)
    if top:
        print(format_table(top) + "\n")
    print(format_table(rows))
    meta = {
        "python": platform.python_version(),
        "machine": platform.machine(),
        "quick": args.quick,
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    payload = {"meta": meta, "headlines": top, "rows": rows}
    Path(args.json).write_text(json.dumps(payload, indent=2) + "\n")
    print(f"\nwrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
