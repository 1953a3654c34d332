"""Cost of gate_plan as plans grow (versions x steps), and the size of the plans channel."""

from __future__ import annotations

from typing import Any

from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from agent_guards.planner_gate import PlanVersion, gate_plan, plan_similarity
from benchmarks._timing import median_us

WORDS = ["收集资料", "分析竞品价格", "对比功能", "确认需求", "输出报告", "search docs", "summarize"]


def _versions(n_versions: int, n_steps: int) -> list[PlanVersion]:
    """An accepted plan followed by revisions; the newest is a proposal after user input."""
    out = []
    for v in range(1, n_versions + 1):
        texts = [f"{WORDS[(i + v) % len(WORDS)]} {i}" for i in range(n_steps)]
        out.append(
            PlanVersion.linear(
                v,
                texts,
                trigger="initial" if v == 1 else "user_input",
                parent=v - 1 if v > 1 else None,
                status="proposed" if v == n_versions else ("accepted" if v == 1 else "rejected"),
                observations=1,
            )
        )
    return out


def run(quick: bool = False) -> list[dict[str, Any]]:
    n = 50 if quick else 500
    small, large = _versions(3, 5), _versions(10, 20)
    t_small = median_us(lambda: gate_plan(small, observations=1), calls=n)
    t_large = median_us(lambda: gate_plan(large, observations=1), calls=max(5, n // 10))
    t_sim = median_us(lambda: plan_similarity(large[0], large[1]), calls=n)
    serde = JsonPlusSerializer()
    kb = len(serde.dumps_typed(large)[1]) / 1024
    kb_small = len(serde.dumps_typed(small)[1]) / 1024
    return [
        {
            "name": "gate_plan, 3 versions x 5 steps",
            "value": round(t_small, 1),
            "unit": "us",
            "note": "per call",
        },
        {
            "name": "gate_plan, 10 versions x 20 steps",
            "value": round(t_large, 1),
            "unit": "us",
            "note": "per call; budget exceeded, similarity still computed",
        },
        {
            "name": "gate_plan cost growth, 10x20 / 3x5",
            "value": round(t_large / t_small, 1),
            "unit": "x",
            "note": "same run; similarity is O(versions x steps^2)",
        },
        {
            "name": "plan_similarity, 20 vs 20 steps",
            "value": round(t_sim, 1),
            "unit": "us",
            "note": "per call, rapidfuzz ratio per step pair",
        },
        {
            "name": "plans channel, 3 versions x 5 steps",
            "value": round(kb_small, 1),
            "unit": "KB",
            "note": "msgpack bytes written when the channel changes",
        },
        {
            "name": "plans channel, 10 versions x 20 steps",
            "value": round(kb, 1),
            "unit": "KB",
            "note": "msgpack bytes written when the channel changes",
        },
    ]


if __name__ == "__main__":  # pragma: no cover
    for row in run():
        print(row)
