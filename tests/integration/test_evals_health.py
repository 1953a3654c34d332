"""Planning health over final states of real runs of a planner_gate graph."""

from __future__ import annotations

from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command

from agent_guards import PlanState, PlanStep, PlanVersion, add_planner_gate
from agent_guards.evals import planning_health
from agent_guards.planner_gate import Goal, current_plan, mark_step, next_step, progress_update


class State(PlanState, total=False):
    scenario: str


DRAFTS: dict[str, list[PlanVersion]] = {
    "smooth": [PlanVersion.linear(1, ["search", "write"])],
    "missing_goal": [PlanVersion.linear(1, ["search", "write"])],
    "flaky": [
        PlanVersion.linear(1, ["flaky fetch", "write"]),
        PlanVersion.linear(
            2,
            ["download the mirror copy of the report", "write the summary"],
            trigger="execution_feedback",
            parent=1,
        ),
    ],
    "approval": [PlanVersion(1, (PlanStep("s1", "wire 1M to the supplier", risk="high"),))],
}


def planner(state: State) -> dict[str, Any]:
    return {"plans": [DRAFTS[state["scenario"]][len(state.get("plans") or [])]]}


def execute(state: State) -> dict[str, Any]:
    plan = current_plan(state["plans"])
    step = next_step(plan)
    failed = "flaky" in step.description
    plan = mark_step(
        plan, step.id, "failed" if failed else "done", note="timeout" if failed else ""
    )
    return {"plans": [plan], **progress_update(executed=1, observations=1)}


def review(state: State) -> Command[Any]:
    plan = current_plan(state["plans"])
    if plan.is_complete:
        return Command(goto=END)
    if any(s.status.value == "failed" for s in plan.steps):
        return Command(goto="planner")
    return Command(goto="planner_gate")


def build() -> Any:
    builder = StateGraph(State)
    builder.add_node("planner", planner)
    builder.add_node("execute", execute)
    builder.add_node("review", review, destinations=("planner", "planner_gate", END))
    builder.add_node("clarify", lambda state: {})
    add_planner_gate(builder, approval_risk="high", destinations={"escalate": "clarify"})
    builder.add_edge(START, "planner")
    builder.add_edge("planner", "planner_gate")
    builder.add_edge("execute", "review")
    builder.add_edge("clarify", END)
    return builder.compile(checkpointer=InMemorySaver())


def run(graph: Any, thread: str, state: dict[str, Any], resume: Any = None) -> dict[str, Any]:
    config = {"configurable": {"thread_id": thread, "agent_guards_now": "2026-04-01"}}
    out = graph.invoke(state, config)
    if resume is not None:
        out = graph.invoke(Command(resume=resume), config)
    return dict(out)


def test_planning_health_over_a_batch_of_runs() -> None:
    graph = build()
    goal = Goal("book", {"date": ""}, required=("date",))
    outs = [
        run(graph, "smooth", {"scenario": "smooth"}),
        run(graph, "missing", {"scenario": "missing_goal", "goal": goal}),
        run(graph, "flaky", {"scenario": "flaky"}),
        run(graph, "waiting", {"scenario": "approval"}),
        run(graph, "cancelled", {"scenario": "approval"}, resume={"cancel": "changed my mind"}),
    ]
    assert "__interrupt__" in outs[3] and "__interrupt__" not in outs[4]
    health = planning_health(outs)
    assert health["counts"] == {
        "runs": 5,
        "started": 2,  # smooth and flaky ran a step; missing goal clarified; approvals never ran
        "steps_done": 4,  # smooth 2, flaky 2 (v2's two steps)
        "steps_executed": 5,  # ... plus v1's failed first step
        "versions": 6,
        "replans": 1,
        "user_stopped": 1,
        "waiting_on_human": 1,
        "interrupted": 2,
    }
    assert (health["start_rate"], health["step_success_rate"]) == (0.4, 0.8)
    assert (health["replan_rate"], health["replans_per_run"]) == (0.1667, 0.2)
    assert health["user_interruption_rate"] == 0.4


def test_empty_batch_and_bad_input() -> None:
    health = planning_health([])
    assert health["runs"] == 0 and health["start_rate"] is None
    with pytest.raises(ValueError, match=r"states\[0\] must be a mapping"):
        planning_health([["not", "a", "state"]])  # type: ignore[list-item]
