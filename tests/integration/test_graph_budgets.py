"""Budgets on the reference graph: a stop returns the confirmed part, and never a fresh quota.

A run that hits its budget answers with what is confirmed and what is missing,
not an error; budgets are cumulative per thread, so a second turn, a retry or a resume
keeps counting where the thread left off.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any, ClassVar

import pytest
from langchain_core.messages import AIMessage, BaseMessage
from langgraph.types import Command

from agent_guards import Budget
from agent_guards.graphs.plan_execute import Policies
from agent_guards.graphs.scenarios import RoleScript, scenario_config
from agent_guards.testing import ScriptedChatModel
from tests.integration._reference import (
    TIGHT,
    async_persistence,
    calls_logged,
    graph_for,
    lookups_scenario,
    payment_scenario,
    persistence,
    run_async,
    run_sync,
)


def _policies(**limits: Any) -> Policies:
    return Policies(budget=Budget(**{"max_steps": 80, **limits}))


# limits -> (reason, confirmed claims, missing claims, tool executions)
BUDGET_STOPS = [
    ({"max_tool_calls": 1}, "max_tool_calls", ["alpha"], ["beta"], ["fetch_alpha"]),
    ({"max_model_calls": 4}, "max_model_calls", ["alpha"], ["beta"], ["fetch_alpha"]),
    ({"max_steps": 6}, "max_steps", ["alpha"], ["beta"], ["fetch_alpha"]),
    ({"max_steps": 9}, "max_steps", ["alpha", "beta"], [], ["fetch_alpha", "fetch_beta"]),
    # the least budgets Policies accepts: the first step's tool call runs, nothing after it
    ({"max_model_calls": 3}, "max_model_calls", ["alpha"], ["beta"], ["fetch_alpha"]),
    ({"max_steps": 4}, "max_steps", ["alpha"], ["beta"], ["fetch_alpha"]),
]


@pytest.mark.parametrize("case", BUDGET_STOPS, ids=lambda c: str(c[0]))
def test_a_run_that_hits_its_budget_returns_the_confirmed_part(
    case: tuple[dict[str, int], str, list[str], list[str], list[str]], tmp_path: Path
) -> None:
    limits, reason, confirmed, missing, executed = case
    scenario = lookups_scenario(tmp_path)
    with persistence("sqlite", tmp_path) as (saver, store):
        state = run_sync(scenario, saver, store, "t", policies=_policies(**limits))
    outcome = state["outcome"]
    assert outcome["route"] == "partial"
    assert outcome["reason"] == reason
    assert outcome["cited"] == [f"doc_{c}" for c in confirmed]
    assert outcome["missing"] == missing
    assert "Partial result" in outcome["text"]
    assert ("Missing: " + (", ".join(missing) or "the remaining steps")) in outcome["text"]
    assert calls_logged(tmp_path) == executed
    # never more than the budget allows: each counter is checked before it is spent
    for key, limit in limits.items():
        assert state["usage"].get(key.removeprefix("max_"), 0) <= limit


@pytest.mark.parametrize(
    ("limits", "least"), [({"max_steps": 3}, 4), ({"max_steps": 1}, 4), ({"max_model_calls": 2}, 3)]
)
def test_a_budget_that_leaves_no_room_for_a_plan_step_fails_at_build_time(
    limits: dict[str, int], least: int
) -> None:
    """Under these limits every run would stop before its first tool call: refused when
    the policies are made, naming the minimum (the smallest budgets above run one call)."""
    (name,) = [k for k in limits if k != "max_steps" or len(limits) == 1]
    with pytest.raises(ValueError, match=rf"{name}={limits[name]} .* need {name} >= {least}"):
        _policies(**limits)


def test_a_run_whose_last_tool_call_spends_the_budget_exactly_still_answers(
    tmp_path: Path,
) -> None:
    """Two lookups against ``max_tool_calls=2``: the step's closing model call and the
    review make no tool call, so the spent tool budget does not stop them."""
    scenario = lookups_scenario(tmp_path)
    with persistence("sqlite", tmp_path) as (saver, store):
        state = run_sync(scenario, saver, store, "t", policies=_policies(max_tool_calls=2))
    outcome = state["outcome"]
    assert (outcome["route"], outcome["cited"]) == ("answer", ["doc_alpha", "doc_beta"])
    assert [s.status.value for s in state["plans"][-1].steps] == ["done", "done"]
    assert calls_logged(tmp_path) == ["fetch_alpha", "fetch_beta"]


async def test_budget_stop_is_the_same_sync_and_async(tmp_path: Path) -> None:
    scenario = lookups_scenario()
    pol = _policies(max_tool_calls=1)
    with persistence("memory", tmp_path) as (saver, store):
        synced = run_sync(scenario, saver, store, "t", policies=pol)
    async with async_persistence("sqlite", tmp_path) as (saver, store):
        state = await run_async(scenario, saver, store, "t", policies=pol)
    assert state["outcome"] == synced["outcome"]
    assert state["usage"] == synced["usage"]
    assert state["guard_log"] == synced["guard_log"]


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_a_second_turn_on_the_thread_keeps_counting_and_trips_earlier(
    kind: str, tmp_path: Path
) -> None:
    """TIGHT (11 model calls) fits turn 1 (8) or the gamma turn (5) alone, not both."""
    scenario = lookups_scenario()
    with persistence(kind, tmp_path) as (saver, store):
        alone = run_sync(scenario, saver, store, "fresh", message="gamma?", policies=TIGHT)
        first = run_sync(scenario, saver, store, "t", policies=TIGHT)
        second = run_sync(scenario, saver, store, "t", message="gamma?", policies=TIGHT)
    assert alone["outcome"]["route"] == "answer"
    assert alone["usage"]["model_calls"] == 5
    assert first["outcome"]["route"] == "answer"
    assert first["usage"]["model_calls"] == 8
    # same question, same thread: the budget the first turn spent is not refunded
    assert second["outcome"]["route"] == "partial"
    assert second["outcome"]["reason"] == "max_model_calls"
    assert second["usage"]["model_calls"] == 11
    assert second["usage"]["model_calls"] - first["usage"]["model_calls"] < 5
    assert second["usage"]["steps"] > first["usage"]["steps"]
    assert second["usage"]["tool_calls"] == first["usage"]["tool_calls"] + 1
    # the new turn's plan was accepted as user input, not refused as critique
    assert [(p.version, p.trigger.value, p.status.value) for p in second["plans"]] == [
        (1, "initial", "accepted"),
        (2, "user_input", "accepted"),
    ]
    assert second["usage"]["replans"] == 1


def test_max_replans_runs_that_many_replans_and_refuses_the_next(tmp_path: Path) -> None:
    """``max_replans=1``: the second turn's plan (the thread's one replan) runs to its
    answer; a third turn, which would need a second replan, stops before any model call."""
    scenario = lookups_scenario(tmp_path)
    pol = _policies(max_replans=1)
    with persistence("memory", tmp_path) as (saver, store):
        first = run_sync(scenario, saver, store, "t", policies=pol)
        second = run_sync(scenario, saver, store, "t", message="gamma?", policies=pol)
        third = run_sync(scenario, saver, store, "t", message="gamma again?", policies=pol)
    assert first["outcome"]["route"] == "answer"
    assert second["outcome"]["route"] == "answer"
    assert second["usage"]["replans"] == 1
    assert second["plans"][-1].status.value == "accepted"
    assert [s.status.value for s in second["plans"][-1].steps] == ["done"]
    assert third["outcome"]["route"] == "partial"
    assert third["outcome"]["reason"] == "max_replans"
    assert "I used 1 of 1 allowed replans" in third["outcome"]["text"]
    assert third["usage"] == second["usage"]  # nothing spent on the refused replan


class _Reporting:
    """A scripted model whose every reply reports 1000 tokens (``usage_metadata``)."""

    used: ClassVar[dict[str, int]] = {
        "input_tokens": 900, "output_tokens": 100, "total_tokens": 1000,
    }  # fmt: skip

    def __init__(self, script: RoleScript) -> None:
        self.script = script

    def reply(self, messages: list[BaseMessage]) -> AIMessage:
        out = self.script(messages)
        if isinstance(out, AIMessage):
            return out.model_copy(update={"usage_metadata": self.used})
        text = out if isinstance(out, str) else json.dumps(out)
        return AIMessage(text, usage_metadata=self.used)

    def model(self) -> ScriptedChatModel:
        return ScriptedChatModel(script=[self.reply], repeat_last=True)


def test_every_model_call_counts_its_tokens(tmp_path: Path) -> None:
    """The goal, the plan and the review count their tokens as the step's model calls
    do, so ``max_tokens=2500`` stops the run after the third call."""
    base = lookups_scenario(tmp_path)
    scenario = replace(base, script=lambda: _Reporting(base.script()))  # type: ignore[arg-type,return-value]
    with persistence("memory", tmp_path) as (saver, store):
        state = run_sync(scenario, saver, store, "t", policies=_policies(max_tokens=2500))
    assert state["usage"]["model_calls"] == 3  # goal, plan, the step's first turn
    assert state["usage"]["tokens"] == 3000
    assert (state["outcome"]["route"], state["outcome"]["reason"]) == ("partial", "max_tokens")


def test_a_retry_after_the_stop_spends_nothing(tmp_path: Path) -> None:
    """Asking again on a thread whose budget is spent: no model call, no tool call."""
    scenario = lookups_scenario(tmp_path)
    pol = _policies(max_model_calls=4)
    with persistence("sqlite", tmp_path) as (saver, store):
        stopped = run_sync(scenario, saver, store, "t", policies=pol)
        again = run_sync(scenario, saver, store, "t", message="Please try again.", policies=pol)
    assert stopped["outcome"]["route"] == again["outcome"]["route"] == "partial"
    assert again["usage"] == stopped["usage"]
    assert calls_logged(tmp_path) == ["fetch_alpha"]
    assert again["outcome"]["cited"] == ["doc_alpha"]  # the confirmed part is still given


def test_a_resume_after_approval_does_not_refresh_the_budget(tmp_path: Path) -> None:
    """The run paused for approval with its model calls spent; the resume gets no new quota."""
    scenario = payment_scenario(tmp_path)
    pol = _policies(max_model_calls=5)
    with persistence("sqlite", tmp_path) as (saver, store):
        graph = graph_for(scenario, saver, store, policies=pol)
        config = scenario_config(scenario, "t")
        paused = graph.invoke({"messages": [("user", scenario.message)]}, config)
        assert "__interrupt__" in paused
        assert paused["usage"]["model_calls"] == 5
        done = graph.invoke(Command(resume=True), config)
    assert done["outcome"]["route"] == "partial"
    assert done["outcome"]["reason"] == "max_model_calls"
    assert done["usage"] == paused["usage"]
    assert calls_logged(tmp_path) == ["create_draft"]  # the payment never ran
