"""Cost of checking a composed budget, and of the usage reducer, per step."""

from __future__ import annotations

from typing import Any

from agent_guards.budget import Budget
from agent_guards.core import merge_usage
from benchmarks._timing import median_us


def run(quick: bool = False) -> list[dict[str, Any]]:
    n = 2_000 if quick else 50_000
    budget = Budget(
        max_steps=100, max_replans=2, max_tool_calls=50, max_model_calls=60, max_tokens=10**6
    )
    cond = budget.stop_condition()
    assert cond is not None
    state = {"usage": {"steps": 10, "tool_calls": 5, "model_calls": 7, "tokens": 900}}
    check = median_us(lambda: cond(state), calls=n)
    merge = median_us(lambda: merge_usage(state["usage"], {"steps": 1, "tool_calls": 1}), calls=n)
    empty = median_us(lambda: None, calls=n)
    return [
        {
            "name": "budget check, 5 limits (per call)",
            "value": round(check, 2),
            "unit": "us",
            "note": "",
        },
        {
            "name": "usage reducer merge (per call)",
            "value": round(merge, 2),
            "unit": "us",
            "note": "",
        },
        {
            "name": "budget check / empty lambda call",
            "value": round(check / empty, 1),
            "unit": "x",
            "note": "same run",
        },
    ]
