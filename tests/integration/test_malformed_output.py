"""Malformed structured output from the model never escapes graph.invoke.

Each malformed plan or review gets one repair attempt with the validation error; a second
malformed answer ends the run on a clarify outcome that says why, recorded as decisions,
and the thread is finished (not stuck replaying the failure at ``next=["plan"]``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pytest
from langchain_core.exceptions import OutputParserException
from langchain_core.messages import BaseMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.memory import InMemoryStore

from agent_guards import Verdict
from agent_guards.graphs.plan_execute import build_graph
from agent_guards.graphs.scenarios import SCENARIOS, RoleScript, scenario_config

SCENARIO = SCENARIOS["procurement_threshold"]
GOOD_STEP = {"id": "s1", "description": "search", "tool": "search_policies", "args": {"query": "q"}}


def _plan(steps: Any) -> str:
    return json.dumps({"steps": steps, "reason": ""})


MALFORMED_PLANS = {
    "dangling depends_on": _plan([{**GOOD_STEP, "depends_on": ["nope"]}]),
    "cycle": _plan(
        [
            {**GOOD_STEP, "depends_on": ["s2"]},
            {"id": "s2", "description": "b", "depends_on": ["s1"]},
        ]
    ),
    "depends on itself": _plan([{**GOOD_STEP, "depends_on": ["s1"]}]),
    "duplicate ids": _plan([GOOD_STEP, GOOD_STEP]),
    "empty id": _plan([{**GOOD_STEP, "id": ""}]),
    "unknown risk": _plan([{**GOOD_STEP, "risk": "extreme"}]),
    "steps not a list": json.dumps({"steps": "search the policies"}),
    "steps of strings": _plan(["search the policies"]),
    "no steps key": json.dumps({"reason": "none"}),
    "not JSON": "Here is my plan: search the policies, then answer.",
}
MALFORMED_REVIEWS = {
    "not JSON": "Looks good to me!",
    "unknown action": json.dumps({"action": "explode"}),
    "revision with a cycle": json.dumps(
        {
            "action": "revise",
            "steps": [
                {"id": "a", "description": "a", "depends_on": ["b"]},
                {"id": "b", "description": "b", "depends_on": ["a"]},
            ],
        }
    ),
}


def _parser_error(messages: Sequence[BaseMessage]) -> str:
    """A structured-output parser that gave up (what langchain raises on bad JSON)."""
    raise OutputParserException('Failed to parse GoalSpec from completion {"intent": ')


MALFORMED_GOALS: dict[str, Any] = {
    "not JSON": "Sure! The goal is: the approval threshold",
    "wrong types": json.dumps({"intent": ["x"], "constraints": "Acme"}),
    "parser exception": _parser_error,
}


def _script(plan: Any = None, review: Any = None, goal: Any = None) -> RoleScript:
    replies = dict(SCENARIO.script().replies)
    if goal is not None:
        replies["parse_goal"] = [goal]
    if plan is not None:
        replies["plan"] = [plan]
    if review is not None:
        replies["review"] = [review]
    return RoleScript(**replies)


def _run(script: RoleScript) -> tuple[dict[str, Any], Any, Any]:
    app = build_graph(
        script.model(), SCENARIO.tools(), checkpointer=InMemorySaver(), store=InMemoryStore()
    )
    config = scenario_config(SCENARIO, "malformed")
    state = app.invoke({"messages": [("user", SCENARIO.message)]}, config)
    return state, app.get_state(config), app


@pytest.mark.parametrize("reply", list(MALFORMED_PLANS.values()), ids=list(MALFORMED_PLANS))
def test_a_malformed_plan_is_repaired_once_then_clarified(reply: str) -> None:
    state, snapshot, _ = _run(_script(plan=reply))
    outcome = state["outcome"]
    assert (outcome["route"], outcome["reason"]) == ("clarify", "malformed_plan")
    assert "invalid twice" in outcome["text"]
    assert snapshot.next == ()  # finished, not waiting to replay the failure
    mine = [d for d in state["guard_log"] if d.reason == "malformed_plan"]
    assert [d.verdict for d in mine] == [Verdict.REPAIR, Verdict.CLARIFY]
    assert state["usage"]["model_calls"] >= 3  # parse + two plan attempts
    assert not state.get("plans")


@pytest.mark.parametrize("reply", list(MALFORMED_GOALS.values()), ids=list(MALFORMED_GOALS))
def test_a_malformed_goal_is_repaired_once_then_clarified(reply: Any) -> None:
    state, snapshot, _ = _run(_script(goal=reply))
    outcome = state["outcome"]
    assert (outcome["route"], outcome["reason"]) == ("clarify", "malformed_goal")
    assert "invalid twice" in outcome["text"]
    assert snapshot.next == ()
    mine = [d for d in state["guard_log"] if d.reason == "malformed_goal"]
    assert [d.verdict for d in mine] == [Verdict.REPAIR, Verdict.CLARIFY]
    assert state["usage"]["model_calls"] == 2  # two goal attempts, nothing after
    assert not state.get("plans") and not state.get("goal")


@pytest.mark.parametrize("reply", list(MALFORMED_REVIEWS.values()), ids=list(MALFORMED_REVIEWS))
def test_a_malformed_review_is_repaired_once_then_clarified(reply: str) -> None:
    state, snapshot, _ = _run(_script(review=reply))
    outcome = state["outcome"]
    assert (outcome["route"], outcome["reason"]) == ("clarify", "malformed_review")
    assert snapshot.next == ()
    mine = [d for d in state["guard_log"] if d.reason == "malformed_review"]
    assert [d.verdict for d in mine] == [Verdict.REPAIR, Verdict.CLARIFY]


def _repaired(messages: Sequence[BaseMessage]) -> str:
    """A model that gets it right once it is shown the validation error."""
    told = any(
        "not a valid plan" in str(m.content) for m in messages if isinstance(m, HumanMessage)
    )
    return _plan([GOOD_STEP]) if told else MALFORMED_PLANS["cycle"]


def test_the_repair_attempt_carries_the_error_and_a_good_answer_goes_on() -> None:
    state, snapshot, _ = _run(_script(plan=_repaired))
    assert state["outcome"]["route"] == "answer"
    assert state["outcome"]["cited"] == ["policy_2026"]
    [repair] = [d for d in state["guard_log"] if d.reason == "malformed_plan"]
    assert repair.verdict is Verdict.REPAIR and "cycle" in repair.detail.lower()
    assert snapshot.next == ()


async def test_async_agrees() -> None:
    script = _script(plan=MALFORMED_PLANS["not JSON"])
    app = build_graph(
        script.model(), SCENARIO.tools(), checkpointer=InMemorySaver(), store=InMemoryStore()
    )
    config = scenario_config(SCENARIO, "malformed-async")
    state = await app.ainvoke({"messages": [("user", SCENARIO.message)]}, config)
    assert (state["outcome"]["route"], state["outcome"]["reason"]) == ("clarify", "malformed_plan")
