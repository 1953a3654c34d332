"""`make bench` keeps working: every benchmark module runs in quick mode and yields rows."""

from __future__ import annotations

import math

import pytest

from benchmarks.run import discover, format_table, run_all


@pytest.mark.parametrize("module", discover())
def test_benchmark_runs_quick(module: str) -> None:
    rows = run_all(quick=True, only=[module.removeprefix("bench_")])
    assert rows, f"{module} returned no rows"
    for row in rows:
        assert set(row) >= {"topic", "name", "value", "unit"}
        assert isinstance(row["value"], (int, float)) and math.isfinite(row["value"])
    assert module.removeprefix("bench_") in format_table(rows)
