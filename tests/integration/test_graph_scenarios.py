"""The six demo scenarios on the reference graph: route, key decisions, cost, persistence.

Each scenario runs on InMemorySaver and on SqliteSaver (a file, ``guard_serializer()``,
strict msgpack), sync and async; both paths must give the same decisions, the same usage
and the same answer, and no run may end in GraphRecursionError.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langgraph.errors import GraphRecursionError

from agent_guards import Evidence, GuardDecision, PlanVersion
from agent_guards.budget import recursion_limit_for
from agent_guards.evidence_resolve import EvidenceVerdict
from agent_guards.graphs.plan_execute import SUPERSTEPS_PER_STEP
from agent_guards.graphs.scenarios import SCENARIOS, run_baseline, scenario_config
from tests.integration._reference import (
    async_persistence,
    brief,
    graph_for,
    no_serde_events,
    persistence,
    run_async,
    run_sync,
)

GATE = ("planner_gate", "execute", "initial_plan")

# scenario -> (route, key decisions in order, tool executions, model calls)
EXPECTED: dict[str, tuple[str, list[tuple[str, str, str]], int, int]] = {
    "procurement_threshold": (
        "answer",
        [GATE, ("evidence_resolve", "answer", "multiple_claims")],
        1,
        5,
    ),
    "pdf_vs_markdown": (
        "answer",
        [
            ("memory_resolve", "continue", "current_turn_override"),
            GATE,
            ("evidence_resolve", "answer", "consistent"),
        ],
        1,
        5,
    ),
    "planner_loop": (
        "answer",
        [
            GATE,
            ("planner_gate", "execute", "critique_only"),
            ("planner_gate", "execute", "critique_only"),
            ("planner_gate", "stop", "replan_budget"),
            ("evidence_resolve", "answer", "consistent"),
        ],
        1,
        9,
    ),
    "duplicate_tool_call": (
        "answer",
        [
            GATE,
            ("loop_check", "reuse", "repeated_call"),
            ("loop_check", "nudge", "repeated_call"),
            ("loop_check", "reuse", "repeated_call"),
            ("loop_check", "stop", "repeated_call"),
            ("evidence_resolve", "answer", "consistent"),
        ],
        1,
        6,
    ),
    "rate_limit_storm": (
        "abstain",
        [
            GATE,
            ("retry_router", "retry", "transient"),
            ("retry_router", "retry", "transient"),
            ("retry_router", "retry", "transient"),
            ("retry_router", "fallback", "circuit_open"),
            ("evidence_resolve", "abstain", "no_evidence"),
        ],
        3,
        4,
    ),
    "permission_denied": (
        "refuse",
        [
            GATE,
            ("retry_router", "refuse", "permission"),  # once: the finish node does not repeat it
        ],
        1,
        3,
    ),
}


def test_the_table_covers_every_builtin_scenario() -> None:
    assert set(EXPECTED) == set(SCENARIOS)
    assert all(SCENARIOS[n].expect_route == EXPECTED[n][0] for n in EXPECTED)


def _check_specifics(name: str, state: dict[str, Any]) -> None:
    """What each scenario's trace is about, beyond the route."""
    outcome = state["outcome"]
    log: list[GuardDecision] = state["guard_log"]
    if name == "procurement_threshold":
        assert outcome["cited"] == ["policy_2026"]
        assert outcome["conflicting"] == ["policy_2024"]
        assert "50w" in outcome["text"] and "100w" not in outcome["text"]
        verdict = state["evidence_verdict"]
        assert isinstance(verdict, EvidenceVerdict)
        # the legal-only draft is invisible to the analyst: nowhere in verdict, log, evidence
        visible = repr((verdict, log, state["evidence"], state["plans"], outcome))
        assert "draft_2027" not in visible and "30w" not in visible
    elif name == "pdf_vs_markdown":
        assert outcome["format"] == "markdown"
        assert outcome["text"].startswith("## Answer")
        memory = next(d for d in log if d.guard == "memory_resolve")
        assert memory.conflicting_ids == ("m_pdf",)
        assert [r.key for r in state["memory_verdict"].inject] == ["report_format"]
    elif name == "planner_loop":
        plans: list[PlanVersion] = state["plans"]
        assert [(p.version, p.status.value, p.trigger.value) for p in plans] == [
            (1, "accepted", "initial"),
            (2, "rejected", "critique"),
            (3, "rejected", "critique"),
            (4, "rejected", "critique"),
        ]
        gate = [d for d in log if d.guard == "planner_gate"]
        assert [d.dropped_ids for d in gate] == [(), ("v2",), ("v3",), ("v4",)]
        assert all(d.selected_ids == ("v1",) for d in gate)
        assert "replans" not in state["usage"]  # no critique-only plan was ever accepted
        assert outcome["cited"] == ["mkt_1"]
    elif name == "duplicate_tool_call":
        stop = [d for d in log if d.guard == "loop_check"][-1]
        assert stop.selected_ids == ("call_s1_0", "call_s1_1", "call_s1_2")
        assert outcome["cited"] == ["order_42"]
        assert state["plans"][0].steps[0].status.value == "failed"
    elif name == "rate_limit_storm":
        retries = [d for d in log if d.guard == "retry_router"]
        assert {d.selected_ids for d in retries} == {("call_s1_0",)}
        assert outcome["missing"] == ["eur_usd"]
    elif name == "permission_denied":
        assert "not retried" in outcome["text"]
        assert state["plans"][0].steps[0].status.value == "failed"


def _check_run(name: str, state: dict[str, Any]) -> None:
    route, key, tool_calls, model_calls = EXPECTED[name]
    assert state["outcome"]["route"] == route
    assert brief(state["guard_log"]) == key
    usage = state["usage"]
    assert usage["tool_calls"] == tool_calls
    assert usage["model_calls"] == model_calls
    budget = SCENARIOS[name].policies.budget
    assert budget.max_steps is not None and usage["steps"] <= budget.max_steps
    assert budget.max_model_calls is not None and usage["model_calls"] <= budget.max_model_calls
    assert budget.max_tool_calls is not None and usage["tool_calls"] <= budget.max_tool_calls
    assert all(isinstance(d, GuardDecision) for d in state["guard_log"])
    assert all(isinstance(p, PlanVersion) for p in state["plans"])
    assert all(isinstance(e, Evidence) for e in state.get("evidence") or [])
    _check_specifics(name, state)


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_scenario_sync(name: str, kind: str, tmp_path: Path) -> None:
    scenario = SCENARIOS[name]
    with no_serde_events(), persistence(kind, tmp_path) as (saver, store):
        state = run_sync(scenario, saver, store, f"{name}-1")
        _check_run(name, state)
        graph = graph_for(scenario, saver, store)
        config = scenario_config(scenario, f"{name}-1")
        snapshot = graph.get_state(config)
        assert snapshot.next == ()  # finished: not paused, not cut off
        # the recursion limit is the budget's backstop and was never near
        limit = recursion_limit_for(scenario.policies.budget, nodes_per_step=SUPERSTEPS_PER_STEP)
        assert config["recursion_limit"] == limit
        assert snapshot.metadata is not None and snapshot.metadata["step"] < limit // 2
        # the checkpoint reads back typed and equal
        assert snapshot.values["guard_log"] == state["guard_log"]
        assert snapshot.values["plans"] == state["plans"]


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
@pytest.mark.parametrize("name", sorted(SCENARIOS))
async def test_scenario_async_matches_sync(name: str, kind: str, tmp_path: Path) -> None:
    scenario = SCENARIOS[name]
    with persistence(kind, tmp_path) as (saver, store):
        synced = run_sync(scenario, saver, store, f"{name}-sync")
    async with async_persistence(kind, tmp_path) as (saver, store):
        state = await run_async(scenario, saver, store, f"{name}-async")
    _check_run(name, state)
    assert state["guard_log"] == synced["guard_log"]
    assert state["usage"] == synced["usage"]
    assert state["outcome"] == synced["outcome"]
    assert state["plans"] == synced["plans"]


def test_a_sqlite_thread_reads_back_typed_in_a_new_process_like_connection(
    tmp_path: Path,
) -> None:
    """Close everything, open the file again (as after a restart): same typed state."""
    scenario = SCENARIOS["procurement_threshold"]
    with persistence("sqlite", tmp_path) as (saver, store):
        state = run_sync(scenario, saver, store, "t")
    with no_serde_events(), persistence("sqlite", tmp_path) as (saver, store):
        values = graph_for(scenario, saver, store).get_state(scenario_config(scenario, "t")).values
    assert values["guard_log"] == state["guard_log"]
    assert values["evidence_verdict"] == state["evidence_verdict"]
    assert isinstance(values["goal"], type(state["goal"]))
    assert values["usage"] == state["usage"]


@pytest.mark.parametrize("name", ["planner_loop", "duplicate_tool_call"])
def test_the_unguarded_baseline_runs_into_the_recursion_limit(name: str) -> None:
    """What the guards save: the same script loops until LangGraph's limit without them."""
    baseline = run_baseline(SCENARIOS[name], steps=120)
    assert baseline.ended.startswith("GraphRecursionError")
    assert baseline.model_calls > 50 * EXPECTED[name][3]


def test_no_builtin_scenario_raises_with_the_derived_limit() -> None:
    """The derived recursion_limit is the only backstop; every scenario stops before it."""
    from tests.integration._reference import memory_persistence

    for name, scenario in SCENARIOS.items():
        saver, store = memory_persistence()
        try:
            run_sync(scenario, saver, store, name)
        except GraphRecursionError:  # pragma: no cover - the failure this test is for
            pytest.fail(f"{name} ended in GraphRecursionError")
