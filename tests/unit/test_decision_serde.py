"""The records state keeps on every step (a GuardDecision, a PlanVersion and its steps, an
Evidence) in a checkpoint: encoded down LangGraph's named-tuple path (the cheap one), to
the very bytes its dataclass path writes, and read back as the same record."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
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


def _plan() -> Any:
    from agent_guards.planner_gate import PlanVersion

    plan = PlanVersion(3, [{"id": "a", "tool": "search", "args": {"q": "rates"}, "risk": "high"},
                           {"id": "b", "depends_on": ["a"], "status": "done"}],
                       trigger="execution_feedback", reason="a failed", parent=2)  # fmt: skip
    assert plan.steps[0].args_key  # a cached property: in the step's __dict__, not a field
    return plan


def _evidence() -> Any:
    from agent_guards.evidence_resolve import Evidence

    item = Evidence.from_dict({"id": "d1", "claim_key": "rate", "value": "4.2%",
                               "effective_at": "2026-01", "source_type": "official"})  # fmt: skip
    assert "_span" in vars(item)  # parsed once and kept: not a field
    return item


@pytest.mark.parametrize(
    "make", [lambda: DECISION, _plan, _evidence], ids=["decision", "plan", "evidence"]
)
def test_the_named_tuple_path_writes_the_bytes_the_dataclass_path_writes(
    make: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agent_guards.core.decision import Checkpointed

    record, serde = make(), guard_serializer()
    fast = serde.dumps_typed(record)
    monkeypatch.delattr(Checkpointed, "_asdict")  # LangGraph's dataclass path
    assert serde.dumps_typed(record) == fast
    assert serde.loads_typed(fast) == record


class _Tag(str):
    """A str subclass: kept as an id only once made a plain str."""


_id_values = st.one_of(
    st.none(),
    st.lists(st.sampled_from(["a", "b", 7, _Tag("t")]), max_size=3),
    st.lists(st.sampled_from(["a", "b", 7, _Tag("t")]), max_size=3).map(tuple),
)


@given(_id_values, _id_values, st.sampled_from([Verdict.STOP, "STOP", " reuse ", "maybe"]))
def test_decision_fields_are_normalized_as_ever(ids: Any, dropped: Any, verdict: Any) -> None:
    """A decision keeps a tuple of str as it is and converts anything else: the fields are
    what ``_ids`` and ``parse_verdict`` make of every value, types included."""
    from agent_guards.core.decision import parse_verdict

    def made() -> Any:
        d = GuardDecision(guard="g", verdict=verdict, reason="r", selected_ids=ids,
                          dropped_ids=dropped)  # fmt: skip
        return repr((d.verdict, d.selected_ids, d.dropped_ids, d.conflicting_ids, d.data))

    def expected() -> Any:
        def norm(v: Any) -> tuple[str, ...]:
            return tuple(str(x) for x in v) if v is not None else ()

        return repr((parse_verdict(verdict), norm(ids), norm(dropped), (), {}))

    outcomes = []
    for build in (made, expected):
        try:
            outcomes.append(("ok", build()))
        except ValueError as err:
            outcomes.append(("error", str(err)))
    assert outcomes[0] == outcomes[1]
