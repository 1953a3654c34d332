"""A GuardDecision in a checkpoint: encoded down LangGraph's named-tuple path (the cheap
one), to the very bytes its dataclass path writes, and read back as the same decision."""

from __future__ import annotations

from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, StateGraph

from agent_guards import GuardDecision, GuardState, Verdict, guard_serializer

DECISION = GuardDecision(
    guard="loop_check",
    verdict="nudge",
    reason="repeated_call",
    detail="search(q) ran twice",
    selected_ids=["c1", "c2"],
    policy="LoopPolicy@1",
    step=3,
    at="2026-06-01T00:00:00+00:00",
    data={"window": [1, 2], "nested": {"verdict": Verdict.STOP}},
)


def _graph() -> Any:
    def decide(state: GuardState) -> dict[str, Any]:
        return {"guard_log": [DECISION]}

    builder = StateGraph(GuardState)
    builder.add_node("decide", decide)
    builder.add_edge(START, "decide")
    return builder.compile(checkpointer=InMemorySaver())


def test_a_decision_checkpointed_by_a_plain_saver_loads_as_the_same_decision() -> None:
    app, config = _graph(), {"configurable": {"thread_id": "t"}}
    app.invoke({}, config)
    [back] = app.get_state(config).values["guard_log"]
    assert type(back) is GuardDecision and back == DECISION
    assert (back.step, back.at, back.selected_ids) == (3, DECISION.at, ("c1", "c2"))
    assert back.data == {"window": [1, 2], "nested": {"verdict": Verdict.STOP}}


def test_the_named_tuple_path_writes_the_bytes_the_dataclass_path_writes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    serde = guard_serializer()
    fast = serde.dumps_typed(DECISION)
    monkeypatch.delattr(GuardDecision, "_asdict")  # LangGraph's dataclass path
    assert serde.dumps_typed(DECISION) == fast
    assert serde.loads_typed(fast) == DECISION
