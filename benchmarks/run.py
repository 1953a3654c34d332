"""Run every ``benchmarks/bench_*.py`` and print one table (``make bench``).

Each module exposes ``run(quick: bool = False) -> list[dict]`` with rows
``{"name", "value", "unit", "note"}``; ratios (unit ``x``) are measured within one run,
so they compare like with like on whatever machine runs them. Results are also written
to ``bench-results.json`` so two runs can be compared.

Headline rows carry the project's target beside each ratio ("<= 1.20", "0.80-1.20") and
whether this run met it; ``--readme`` rewrites the README's benchmark table from them.
Rows that carry a ``matrix`` dict (one per scenario and variant) are also printed as one
table with a column per key, which ``--readme`` writes between the ``bench-matrix`` markers.

Usage: ``python -m benchmarks.run [--quick] [--only NAME] [--json PATH] [--readme [PATH]]``
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


# The ratios the project reports (issue acceptance): (label, topic, row-name prefix, target).
# A target is "<= x", ">= x" or "a-b"; "" shows the ratio without one.
HEADLINES = (
    (
        "guard overhead per run, reference graph (on / off)",
        "graph",
        "guard overhead per run: guards on / off",
        "<= 1.20",
    ),
    (
        "guard overhead per run, CPU time (on / off)",
        "graph",
        "guard overhead per run, CPU time",
        "<= 1.20",
    ),
    (
        "guard overhead per super-step (on / off)",
        "graph",
        "guard overhead per super-step:",
        "<= 1.05",
    ),
    (
        "guard overhead per run, instructions (on / off)",
        "graph",
        "guard overhead per run, instructions",
        "",
    ),
    (
        "guard overhead per super-step, instructions (on / off)",
        "graph",
        "guard overhead per super-step, instructions",
        "",
    ),
    (
        "guard overhead per run, every tool turn in ToolNode's pool (on / off)",
        "graph",
        "guard overhead per run, every tool turn",
        "",
    ),
    (
        "tools node, a turn of one call: guarded node / ToolNode, no guard",
        "graph",
        "tools node turn of one call",
        "",
    ),
    ("detect_loop, 10k / 100 messages", "loops", "detect_loop cost 10k / 100", "<= 1.50"),
    (
        "fit_context under the threshold, 1k / 100 messages",
        "context",
        "fit_context under the threshold, 1,000 / 100",
        "<= 1.50",
    ),
    (
        "fit_context under the threshold, 10k / 100 messages",
        "context",
        "fit_context under the threshold, 10,000 / 100",
        "<= 1.50",
    ),
    (
        "fit_context compressing, 10k / 1k messages",
        "context",
        "fit_context time, 10,000 / 1,000",
        "",
    ),
    ("token counter / o200k, Chinese", "tokens", "token counter / o200k, chinese", "0.80-1.20"),
    (
        "token counter / o200k, English prose",
        "tokens",
        "token counter / o200k, english, prose",
        "0.80-1.20",
    ),
    (
        "token counter / o200k, English technical",
        "tokens",
        "token counter / o200k, english, technical",
        "0.80-1.20",
    ),
    ("token counter / o200k, mixed", "tokens", "token counter / o200k, mixed", "0.80-1.20"),
    (
        "large tool result: SQLite checkpoint growth / result size",
        "graph",
        "large tool result",
        "<= 2.00",
    ),
    (
        "checkpoint bytes per step, step 1000 / 10",
        "graph",
        "bytes per super-step, step 1000",
        "<= 1.10",
    ),
    ("resolve_evidence, 10k / 1k items", "evidence", "resolve_evidence growth 1,000 -> 10,000", ""),
    ("model calls until stop, unguarded / guarded", "graph", "", ""),
    ("import agent_guards / import langgraph.graph", "imports", "import agent_guards /", ""),
    (
        "run ledger per tool call, InMemoryStore",
        "ledger",
        "run ledger per tool call, InMemoryStore:",
        "<= 1.15",
    ),
    (
        "run ledger per tool call, SqliteStore (WAL)",
        "ledger",
        "run ledger per tool call, SqliteStore:",
        "<= 1.15",
    ),
    (
        "run ledger per tool call, SqliteStore + SqliteSaver, one file, durability=sync",
        "ledger",
        "run ledger per tool call, SqliteStore, SqliteSaver on its file, durability=sync",
        "<= 1.15",
    ),
    (
        "run ledger per tool call, SqliteStore + SqliteSaver, one file, durability=async",
        "ledger",
        "run ledger per tool call, SqliteStore, SqliteSaver on its file, durability=async",
        "",
    ),
    (
        "run ledger per tool call, SqliteStore + SqliteSaver, two files",
        "ledger",
        "run ledger per tool call, SqliteStore, SqliteSaver on another file",
        "<= 1.15",
    ),
    (
        "run ledger per tool call, InMemoryStore, async graph (ainvoke)",
        "ledger",
        "run ledger per tool call, InMemoryStore, async graph",
        "<= 1.15",
    ),
    (
        "run ledger per tool call, AsyncSqliteStore, async graph (ainvoke)",
        "ledger",
        "run ledger per tool call, AsyncSqliteStore",
        "<= 1.15",
    ),
    (
        "budgeted tool call on InMemoryStore, thread with 5,000 / 50 executions",
        "ledger",
        "budgeted tool call on InMemoryStore,",
        "<= 1.50",
    ),
    (
        "budgeted tool call on SqliteStore (WAL), thread with 5,000 / 50 executions",
        "ledger",
        "budgeted tool call on SqliteStore,",
        "<= 1.50",
    ),
    (
        "retry storm, 50 callers on one 429 tool: peak retries/s, budget / cap",
        "retry_storm",
        "retry storm, 50 callers on one 429 tool: peak retries/s with the",
        "<= 1.00",
    ),
)


def meets(value: float, target: str) -> bool | None:
    """Whether ``value`` meets ``target`` ("<= x", ">= x", "a-b"); None without a target.

    Example:
        >>> meets(1.1, "<= 1.20"), meets(0.7, "0.80-1.20"), meets(3.0, "")
        (True, False, None)
    """
    target = target.strip()
    if not target:
        return None
    if target.startswith("<="):
        return value <= float(target[2:])
    if target.startswith(">="):
        return value >= float(target[2:])
    low, high = (float(x) for x in target.split("-"))
    return low <= value <= high


def _headline(label: str, row: dict[str, Any], target: str) -> dict[str, Any]:
    target = target or str(row.get("target", ""))
    return {
        "topic": "headline",
        "name": label,
        "value": row["value"],
        "unit": row["unit"],
        "target": target,
        "met": meets(float(row["value"]), target) if row["unit"] == "x" else None,
        "note": row.get("note", ""),
    }


def headlines(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The headline ratios, picked from the rows of one run, each with its target."""
    out = []
    for label, topic, prefix, target in HEADLINES:
        for r in rows:
            if r["topic"] != topic or r["unit"] not in ("x", "skip"):
                continue
            if prefix and not r["name"].startswith(prefix):
                continue
            if not prefix and "unguarded / guarded" not in r["name"]:
                continue
            name = label if prefix else f"{label}: {r['name'].split(':')[0]}"
            out.append(_headline(name, r, target))
    return out


def _shown(value: Any) -> str:
    return f"{value:,.2f}" if isinstance(value, float) else f"{value:,}"


def _status(row: dict[str, Any]) -> str:
    if row.get("unit") == "skip":
        return "skip"
    met = row.get("met", meets(float(row["value"]), str(row.get("target", ""))))
    return "" if met is None else "ok" if met else "MISS"


def format_table(rows: list[dict[str, Any]]) -> str:
    header = f"{'topic':<10} {'benchmark':<62} {'value':>10}  unit  {'target':<10} {'':<4}  note"
    lines = [header, "-" * len(header)]
    for r in rows:
        lines.append(
            f"{r['topic']:<10} {r['name']:<62} {_shown(r['value']):>10}  {r['unit']:<5} "
            f"{r.get('target', '')!s:<10} {_status(r):<4}  {r.get('note', '')}"
        )
    return "\n".join(lines)


README_START = "<!-- bench-results: start (python -m benchmarks.run --readme) -->"
README_END = "<!-- bench-results: end -->"


def readme_table(headline_rows: list[dict[str, Any]]) -> str:
    """The README's benchmark table (markdown) from the headline rows of one run."""
    lines = ["| benchmark | value | target | | note |", "|---|---:|---|---|---|"]
    for r in headline_rows:
        note = str(r.get("note", "")).replace("|", "/")
        lines.append(
            f"| {r['name']} | {_shown(r['value'])} {r['unit']} | {r.get('target', '')} "
            f"| {_status(r)} | {note} |"
        )
    return "\n".join(lines)


def replace_readme_table(text: str, table: str) -> str:
    """``text`` with the block between the README markers replaced by ``table``.

    Example:
        >>> doc = f"intro\\n{README_START}\\nold\\n{README_END}\\nrest"
        >>> replace_readme_table(doc, "| new |").splitlines()[2]
        '| new |'
    """
    return replace_block(text, README_START, README_END, table)


MATRIX_START = "<!-- bench-matrix: start (python -m benchmarks.run --readme) -->"
MATRIX_END = "<!-- bench-matrix: end -->"


def matrix_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The ``matrix`` dicts of the rows that carry one (a row per scenario and variant)."""
    return [r["matrix"] for r in rows if isinstance(r.get("matrix"), dict)]


def _cell(value: Any) -> str:
    return (f"{value:,}" if isinstance(value, int) else str(value)).replace("|", "/")


def matrix_table(cells: list[dict[str, Any]], *, markdown: bool = False) -> str:
    """The matrix rows as one table: a column per key, in first-seen order, empty ones dropped.

    Example:
        >>> print(matrix_table([{"case": "a", "calls": 1200}, {"case": "b", "calls": 3}]))
        case  calls
        ----  -----
        a     1,200
        b     3
    """
    columns = [
        c for c in dict.fromkeys(k for m in cells for k in m) if any(m.get(c) for m in cells)
    ]
    grid = [[_cell(m.get(c, "")) for c in columns] for m in cells]
    if markdown:
        numeric = [all(isinstance(m.get(c), int) for m in cells) for c in columns]
        rule = "".join("---:|" if n else "---|" for n in numeric)
        lines = ["| " + " | ".join(columns) + " |", "|" + rule]
        return "\n".join([*lines, *("| " + " | ".join(row) + " |" for row in grid)])
    widths = [max(len(c), *(len(row[i]) for row in grid)) for i, c in enumerate(columns)]
    lines = [columns, ["-" * w for w in widths], *grid]
    return "\n".join(
        "  ".join(v.ljust(w) for v, w in zip(line, widths, strict=True)).rstrip() for line in lines
    )


def replace_block(text: str, start: str, end: str, table: str) -> str:
    """``text`` with the block between ``start`` and ``end`` replaced by ``table``."""
    head, found, tail = text.partition(start)
    if not found or end not in tail:
        raise ValueError(f"README has no {start!r} ... {end!r} block")
    return f"{head}{start}\n{table}\n{end}{tail.split(end, 1)[1]}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.run")
    parser.add_argument("--quick", action="store_true", help="small sizes (smoke test)")
    parser.add_argument("--only", action="append", help="run only this topic (repeatable)")
    parser.add_argument("--json", default="bench-results.json", help="where to write results")
    parser.add_argument(
        "--readme",
        nargs="?",
        const="README.md",
        help="regenerate the README's benchmark table from this run (default README.md)",
    )
    args = parser.parse_args(argv)
    rows = run_all(quick=args.quick, only=args.only)
    top = headlines(rows)
    if top:
        print(format_table(top) + "\n")
    print(format_table(rows))
    cells = matrix_rows(rows)
    if cells:
        print("\n" + matrix_table(cells))
    meta = {
        "python": platform.python_version(),
        "machine": platform.machine(),
        "quick": args.quick,
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    payload = {"meta": meta, "headlines": top, "rows": rows}
    Path(args.json).write_text(json.dumps(payload, indent=2) + "\n")
    print(f"\nwrote {args.json}")
    if args.readme:
        path = Path(args.readme)
        text = path.read_text()
        if top:  # a run without headline rows (--only savings) leaves that table alone
            text = replace_readme_table(text, readme_table(top))
        if cells and MATRIX_START in text:
            text = replace_block(text, MATRIX_START, MATRIX_END, matrix_table(cells, markdown=True))
        path.write_text(text)
        print(f"regenerated the benchmark table in {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
