"""Cost of checking a composed budget, and of the usage reducer, per step."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

from agent_guards.budget import Budget
from agent_guards.types import merge_usage


def _per_call_us(fn: Callable[[], Any], n: int, repeats: int = 5) -> float:
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(n):
            fn()
        samples.append((time.perf_counter() - start) / n * 1e6)
    return statistics.median(samples)


def run(quick: bool = False) -> list[dict[str, Any]]:
    n = 2_000 if quick else 50_000
    budget = Budget(
        max_steps=100, max_replans=2, max_tool_calls=50, max_model_calls=60, max_tokens=10**6
    )
    cond = budget.stop_condition()
    assert cond is not None
    state = {"usage": {"steps": 10, "tool_calls": 5, "model_calls": 7, "tokens": 900}}
    check = _per_call_us(lambda: cond(state), n)
    merge = _per_call_us(lambda: merge_usage(state["usage"], {"steps": 1, "tool_calls": 1}), n)
    empty = _per_call_us(lambda: None, n)
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
