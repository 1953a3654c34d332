"""resolve_evidence growth (10 .. 10,000 items) and the evidence node's cost in a graph step."""

from __future__ import annotations

import itertools
import math
import random
from datetime import UTC, datetime, timedelta
from typing import Any

from langgraph.graph import END, START, StateGraph

from agent_guards.evidence_resolve import (
    Evidence,
    EvidenceState,
    create_evidence_resolve,
    resolve_evidence,
)
from agent_guards.graph import runnable
from benchmarks._timing import median_us

DAY0 = datetime(2024, 1, 1, tzinfo=UTC)
SOURCES = ["official", "internal", "memory", "forum"]


def make_items(n: int, seed: int = 7) -> list[Evidence]:
    """A mixed retrieval result: ~20 items per claim, 7 values, sources, dates, versions."""
    rng = random.Random(seed)
    claims = max(1, n // 20)
    return [
        Evidence(
            f"d{i}",
            f"claim{i % claims}",
            f"{rng.randrange(7)}00,000",
            source_type=rng.choice(SOURCES),
            version=rng.randrange(1, 9),
            updated_at=DAY0 + timedelta(days=rng.randrange(900)),
            confidence=round(rng.random(), 2),
            relevance=round(rng.random(), 2),
            entity=rng.choice([None, None, None, "a", "b"]),
            basis=rng.choice([None, None, None, "finance", "ops"]),
            status=rng.choice(["active"] * 8 + ["draft", "superseded"]),
            allowed=rng.choice([None, None, ("staff",), ("hr",)]),
        )
        for i in range(n)
    ]


def _noop(state: Any, config: Any) -> dict[str, Any]:
    return {}


def _graph(node: Any) -> Any:
    builder = StateGraph(EvidenceState)
    builder.add_node("node", node)
    builder.add_edge(START, "node")
    builder.add_edge("node", END)
    return builder.compile()


def run(quick: bool = False) -> list[dict[str, Any]]:
    sizes = [10, 100, 1_000] if quick else [10, 100, 1_000, 10_000]
    rows: list[dict[str, Any]] = []
    per_call: dict[int, float] = {}
    for n in sizes:
        items = make_items(n)
        calls = max(1, (200 if quick else 2_000) // n)
        repeats = 3 if quick else 5
        per_call[n] = median_us(
            lambda items=items: resolve_evidence(items, principal="staff"),
            calls=calls,
            repeats=repeats,
        )
        rows.append(
            {
                "name": f"resolve_evidence, {n:,} items (per call)",
                "value": round(per_call[n], 1),
                "unit": "us",
                "note": f"{per_call[n] / n:.2f} us/item",
            }
        )
    for small, big in itertools.pairwise(sizes):
        ratio = per_call[big] / per_call[small]
        nlogn = big * math.log(big) / (small * math.log(small))
        rows.append(
            {
                "name": f"resolve_evidence growth {small:,} -> {big:,} items",
                "value": round(ratio, 2),
                "unit": "x",
                "note": f"linear 10x, n log n {nlogn:.1f}x",
            }
        )

    state = {"evidence": make_items(10), "evidence_query": {}}
    config = {"configurable": {"principal": "staff", "agent_guards_now": "2026-06-01"}}
    empty = _graph(lambda s: {})
    wrapped = _graph(runnable("empty", _noop))
    guard = _graph(create_evidence_resolve())
    calls, repeats = (20, 3) if quick else (300, 5)
    t_empty = median_us(lambda: empty.invoke(state, config), calls=calls, repeats=repeats)
    t_wrapped = median_us(lambda: wrapped.invoke(state, config), calls=calls, repeats=repeats)
    t_guard = median_us(lambda: guard.invoke(state, config), calls=calls, repeats=repeats)
    rows += [
        {
            "name": "graph step: empty node (10 evidence items in state)",
            "value": round(t_empty, 1),
            "unit": "us",
            "note": "invoke, no checkpointer",
        },
        {
            "name": "graph step: empty node built like a guard (RunnableLambda)",
            "value": round(t_wrapped, 1),
            "unit": "us",
            "note": f"+{t_wrapped - t_empty:.0f} us for the sync+async wrapper alone",
        },
        {
            "name": "graph step: evidence_resolve node",
            "value": round(t_guard, 1),
            "unit": "us",
            "note": f"+{t_guard - t_empty:.0f} us per step",
        },
        {
            "name": "evidence_resolve node / empty node",
            "value": round(t_guard / t_empty, 2),
            "unit": "x",
            "note": "same graph shape, same state",
        },
    ]
    return rows


if __name__ == "__main__":
    for row in run():
        print(row)
