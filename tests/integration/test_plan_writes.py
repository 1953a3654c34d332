"""An invalid ``plans`` write is dropped with a decision; the thread stays readable."""

from __future__ import annotations

import logging
from typing import Annotated, Any, TypedDict

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, StateGraph

from agent_guards.core import GuardDecision, Verdict
from agent_guards.planner_gate import PlanState, PlanVersion, merge_plans
from agent_guards.serde import delta_channel


class DeltaPlans(TypedDict, total=False):
    plans: Annotated[list[PlanVersion], delta_channel(merge_plans)]


BAD_WRITES: list[Any] = [
    [{"version": 2, "steps": [{"id": "a", "depends_on": ["missing"]}]}],
    {"version": 2, "steps": "not a list"},
    "junk",
    [{"steps": []}],
]


@pytest.mark.parametrize("schema", [PlanState, DeltaPlans], ids=["plain", "delta"])
@pytest.mark.parametrize("bad", BAD_WRITES)
def test_get_state_works_after_a_bad_plans_write(
    schema: Any, bad: Any, caplog: pytest.LogCaptureFixture
) -> None:
    builder = StateGraph(schema)
    builder.add_node("write", lambda state: {"plans": bad})
    graph = builder.add_edge(START, "write").compile(checkpointer=InMemorySaver())
    cfg: Any = {"configurable": {"thread_id": "t"}}
    v1 = PlanVersion.linear(1, ["search"])
    with caplog.at_level(logging.WARNING, logger="agent_guards.planner_gate"):
        out = graph.invoke({"plans": [v1]}, cfg)
    assert out["plans"] == [v1], "the invalid write is dropped, the valid plan kept"
    snapshot = graph.get_state(cfg)
    assert snapshot.values["plans"] == [v1] and snapshot.next == ()
    assert next(s.values["plans"] for s in graph.get_state_history(cfg)) == [v1]
    graph.update_state(cfg, {"plans": "junk from a client"})
    assert graph.get_state(cfg).values["plans"] == [v1]
    decisions = [r.decision for r in caplog.records if hasattr(r, "decision")]
    assert decisions and all(isinstance(d, GuardDecision) for d in decisions)
    first = decisions[0]
    assert (first.guard, first.verdict, first.reason) == ("planner_gate", Verdict.REFUSE,
                                                          "invalid_input")  # fmt: skip
    assert first.data["position"] == 0 and "#0" in first.detail


def test_valid_writes_in_the_same_batch_are_kept() -> None:
    v1, v2 = PlanVersion.linear(1, ["a"]), PlanVersion.linear(2, ["b"], parent=1)
    merged = merge_plans([v1], [{"version": 3, "steps": 7}, v2.to_dict()])
    assert [v.id for v in merged] == ["v1", "v2"]
    assert merge_plans(["junk", v1], None) == [v1]
