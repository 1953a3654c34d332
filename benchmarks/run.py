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
    print(format_table(rows))
    meta = {
        "python": platform.python_version(),
        "machine": platform.machine(),
        "quick": args.quick,
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    Path(args.json).write_text(json.dumps({"meta": meta, "rows": rows}, indent=2) + "\n")
    print(f"\nwrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
