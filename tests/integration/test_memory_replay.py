"""A replay of a turn whose memory_resolve wrote back decides as the original turn did."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from langchain_core.messages import HumanMessage

from agent_guards import replay_config
from agent_guards.memory_resolve import load_memories, memory_namespace
from tests.integration.test_replay_config import ALICE, RUN, decisions, user_graph

FROM_NOW_ON = {"key": "report_format", "value": "markdown", "persist": True}


def _turn(graph: Any, mode: str, inputs: Any, config: Any) -> dict[str, Any]:
    if mode == "async":
        return dict(asyncio.run(graph.ainvoke(inputs, config)))
    return dict(graph.invoke(inputs, config))


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_replay_after_the_write_back_makes_the_same_decisions(mode: str) -> None:
    graph = user_graph()
    inputs = {"messages": [HumanMessage("from now on markdown")], "memory_facts": [FROM_NOW_ON]}
    original = _turn(graph, mode, inputs, RUN)
    [first] = [d for d in original["guard_log"] if d.guard == "memory_resolve"]
    assert first.reason == "current_turn_override" and first.data["writes"]
    stored = {r.id: r for r in load_memories(graph.store, memory_namespace(ALICE))}
    assert stored["m_pdf"].status == "superseded" and stored["m_pdf"].prior_status == "active"
    fact_id = first.data["writes"][-1]
    assert stored["m_pdf"].turn == stored[fact_id].turn == fact_id, "the turn is on each write"
    before = next(s for s in graph.get_state_history(RUN) if s.next == ("memory_resolve",))
    for _ in range(2):  # replaying twice changes nothing either
        replayed = _turn(graph, mode, None, replay_config(before, RUN))
        assert decisions(replayed) == decisions(original)
        [again] = [d for d in replayed["guard_log"] if d.guard == "memory_resolve"]
        assert (again.reason, again.data) == (first.reason, first.data)
        assert again.dropped_ids == first.dropped_ids
    after = {r.id: r for r in load_memories(graph.store, memory_namespace(ALICE))}
    assert after == stored, "the replay writes back the same records"


def test_a_later_turn_reads_the_write_back() -> None:
    graph = user_graph()
    inputs = {"messages": [HumanMessage("from now on markdown")], "memory_facts": [FROM_NOW_ON]}
    graph.invoke(inputs, RUN)
    later = {**RUN, "configurable": {**RUN["configurable"], "thread_id": "t2"}}
    out = graph.invoke({"messages": [HumanMessage("send me the report")]}, later)
    [decision] = [d for d in out["guard_log"] if d.guard == "memory_resolve"]
    assert decision.reason == "resolved"
    assert [r.value for r in out["memory_verdict"].inject] == ["markdown"]
