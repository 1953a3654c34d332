"""`make bench` keeps working: every benchmark module runs in quick mode and yields rows,
the headline ratios carry their targets, and the README table is regenerated from a run.
No timing is asserted: only that the figures are computed from real runs."""

from __future__ import annotations

import functools
import json
import math
import re
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from benchmarks.run import (
    README_END,
    README_START,
    discover,
    format_table,
    main,
    meets,
    run_all,
)


@functools.cache
def _quick_rows(module: str) -> list[dict[str, Any]]:
    """One quick run of a benchmark module's rows, shared by the tests that read them."""
    return run_all(quick=True, only=[module.removeprefix("bench_")])


@pytest.mark.parametrize("module", discover())
def test_benchmark_runs_quick(module: str) -> None:
    rows = _quick_rows(module)
    assert rows, f"{module} returned no rows"
    for row in rows:
        assert set(row) >= {"topic", "name", "value", "unit"}
        assert isinstance(row["value"], (int, float)) and math.isfinite(row["value"])
    assert module.removeprefix("bench_") in format_table(rows)


def test_headlines_carry_their_targets_and_the_readme_table_is_regenerated(
    tmp_path: Path,
) -> None:
    readme = tmp_path / "README.md"
    readme.write_text(f"intro\n{README_START}\nold table\n{README_END}\nrest\n")
    out = tmp_path / "bench.json"
    argv = ["--quick", "--only", "tokens", "--only", "context", "--json", str(out)]
    assert main([*argv, "--readme", str(readme)]) == 0
    payload = json.loads(out.read_text())
    heads = {h["name"]: h for h in payload["headlines"]}
    idle = heads["fit_context under the threshold, 10k / 100 messages"]
    assert idle["target"] == "<= 1.50" and idle["met"] == meets(idle["value"], "<= 1.50")
    text = readme.read_text()
    assert "old table" not in text and text.startswith("intro\n") and text.endswith("rest\n")
    assert "| fit_context under the threshold, 10k / 100 messages |" in text


def test_token_rows_come_from_a_real_tokenizer_or_say_why_not() -> None:
    rows = run_all(quick=True, only=["tokens"])
    if rows[0]["unit"] == "skip":
        assert "no real tokenizer" in rows[0]["note"]
        return
    zh = next(r for r in rows if r["name"] == "token counter / o200k, chinese")
    assert zh["target"] == "0.80-1.20" and 0 < zh["value"] < 5
    assert "count_tokens_approximately" in zh["note"]


@pytest.mark.parametrize(
    ("value", "target", "met"),
    [(1.2, "<= 1.20", True), (1.21, "<= 1.20", False), (0.8, "0.80-1.20", True), (2, "", None)],
)
def test_targets_read_as_written(value: float, target: str, met: bool | None) -> None:
    assert meets(value, target) is met


def test_guard_costs_come_from_the_guarded_run_and_leave_the_guards_as_they_were() -> None:
    from agent_guards import ToolCallGuard
    from agent_guards.context_guard.graph import ContextGuardNode
    from benchmarks.bench_graph import guard_costs

    before = (ContextGuardNode.run, ToolCallGuard.__call__)
    rows = {r["name"]: r for r in guard_costs(quick=True)}
    assert (ContextGuardNode.run, ToolCallGuard.__call__) == before
    assert all(r["value"] > 0 for r in rows.values())
    # the quick plan has 6 steps: two model calls per step (the call, then "done"), one
    # gate per step plus the one that accepts the plan
    assert rows["context_guard per model call (inside the agent node)"]["note"].startswith("12 ")
    assert rows["planner_gate per plan step"]["note"].startswith("7 gate runs")
    route = rows["retry_router + loop_check route per tool turn (in the tools node)"]
    assert "the route itself" in route["note"] and route["value"] > 0


def test_the_overhead_rows_give_the_middle_half_of_their_pairs() -> None:
    from benchmarks.bench_graph import guard_overhead

    rows = {r["name"]: r for r in guard_overhead(quick=True)}
    for name in (
        "guard overhead per run: guards on / off",
        "guard overhead per super-step: on / off",
    ):
        row = rows[name]
        low, high = map(float, re.findall(r"(\d+\.\d\d)x", row["note"]))
        # quartiles of the same pairs whose median is the value (each rounded to 0.01)
        assert low <= high and low - 0.005 <= row["value"] <= high + 0.005


def test_instruction_counts_are_of_the_plan_the_time_rows_run() -> None:
    from benchmarks.bench_graph import _run

    rows = {r["name"]: r for r in _quick_rows("bench_graph")}
    per_run = rows["guard overhead per run, instructions: guards on / off"]
    if per_run["unit"] == "skip":
        assert "no valgrind" in per_run["note"]
        return
    counted = re.match(r"(\d+)M vs (\d+)M instructions per run of the 4-step plan", per_run["note"])
    assert counted, per_run["note"]
    on, off = int(counted[1]), int(counted[2])
    # the note rounds each count to a million: the ratio lies between what the bounds give
    # (its own three decimals rounded too)
    assert (on - 0.5) / (off + 0.5) - 5e-4 <= per_run["value"] <= (on + 0.5) / (off - 0.5) + 5e-4
    # the super-steps counted under valgrind are those of the same plan run here
    steps = (_run(True, 4, InMemorySaver()), _run(False, 4, InMemorySaver()))
    per_step = rows["guard overhead per super-step, instructions: guards on / off"]
    assert per_step["note"] == f"{steps[0]} vs {steps[1]} super-steps"
    assert per_step["value"] == pytest.approx(per_run["value"] * steps[1] / steps[0], abs=0.002)


def test_the_budget_check_on_a_long_thread_is_measured_on_both_stores() -> None:
    rows = [r for r in _quick_rows("bench_ledger") if r["name"].startswith("budgeted tool call")]
    stores = [r["name"].split(",")[0].removeprefix("budgeted tool call on ") for r in rows]
    assert stores == ["InMemoryStore", "SqliteStore"]
    for row in rows:
        assert "thread with 500 / 50 executions" in row["name"] and row["target"] == "<= 1.50"
        assert re.match(r"\d+ us vs \d+ us per call", row["note"]), row["note"]
