"""planner_gate inside compiled graphs: critique loops, execution feedback, approval, replay."""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import HumanMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.errors import GraphRecursionError
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.types import Command, interrupt

import agent_guards.planner_gate.graph as plan_node
from agent_guards.core import GuardDecision, Verdict
from agent_guards.planner_gate import (
    Goal,
    PlanState,
    PlanStatus,
    PlanStep,
    PlanVersion,
    StepStatus,
    add_planner_gate,
    carry_over,
    current_plan,
    mark_step,
    next_step,
    progress_update,
)
from agent_guards.testing import ScriptedChatModel, faulty_tool

NOW = "2026-01-05T09:00:00+00:00"
PLAN_SCHEMA: dict[str, Any] = {"title": "PlanDraft", "type": "object"}


class State(MessagesState, PlanState):
    trigger: str
    answer: str


def draft(texts: list[str], trigger: str = "initial", **first: Any) -> dict[str, Any]:
    """What the scripted planner model replies: a plan draft as JSON."""
    steps: list[dict[str, Any]] = [
        {"id": f"s{i}", "description": t, "depends_on": [f"s{i - 1}"] if i > 1 else []}
        for i, t in enumerate(texts, start=1)
    ]
    steps[0].update(first)
    return {"steps": steps, "trigger": trigger, "reason": f"{trigger} round"}


def make_planner(model: ScriptedChatModel) -> Any:
    planner_model = model.with_structured_output(PLAN_SCHEMA)

    def planner(state: State) -> dict[str, Any]:
        plans = state.get("plans") or []
        reply = planner_model.invoke([HumanMessage("生成一份竞品分析的计划")])
        version = PlanVersion.from_dict(
            {"version": len(plans) + 1, "parent": plans[-1].version if plans else None, **reply}
        )
        base = current_plan(plans)
        return {"plans": [carry_over(base, version) if base else version]}

    return planner


def cfg(thread: str = "t", **extra: Any) -> RunnableConfig:
    return {"configurable": {"thread_id": thread, "agent_guards_now": NOW}, **extra}


def summary(log: list[GuardDecision]) -> list[tuple[str, str, tuple[str, ...]]]:
    return [(d.verdict.value, d.reason, d.selected_ids) for d in log if d.guard == "planner_gate"]


def finish(name: str) -> Any:
    def node(state: State) -> dict[str, Any]:
        return {"answer": name}

    return node


# --- the planner that critiques itself instead of executing -------------------------------

SEED_SCRIPT = [
    draft(["收集资料", "分析", "输出"]),
    draft(["先明确目标", "再收集资料", "再分析"], "critique"),
    draft(["确认需求", "收集资料", "分析"], "critique"),
    draft(["继续拆分子任务", "收集资料", "分析"], "critique"),
]


def seed_loop_graph(
    model: ScriptedChatModel, *, gate: bool = True, checkpointer: Any = None
) -> Any:
    """planner -> (gate) -> critic -> planner: the critic always asks for a finer plan."""
    builder = StateGraph(State)
    builder.add_node("planner", make_planner(model))
    builder.add_node("critic", lambda s: Command(goto="planner"), destinations=("planner",))
    builder.add_node("clarify", finish("clarify"))
    builder.add_node("stop", finish("stop"))
    builder.add_edge(START, "planner")
    if gate:
        add_planner_gate(
            builder, destinations={"execute": "critic", "escalate": "clarify", "stop": "stop"}
        )
        builder.add_edge("planner", "planner_gate")
    else:
        builder.add_edge("planner", "critic")
    builder.add_edge("clarify", END)
    builder.add_edge("stop", END)
    return builder.compile(checkpointer=checkpointer)


def test_without_the_gate_the_seed_loop_runs_into_the_recursion_limit() -> None:
    model = ScriptedChatModel(script=SEED_SCRIPT, repeat_last=True)
    with pytest.raises(GraphRecursionError):
        seed_loop_graph(model, gate=False).invoke({}, cfg(recursion_limit=40))
    assert len(model.calls) >= 19


def test_the_gate_stops_the_seed_loop_at_round_three() -> None:
    model = ScriptedChatModel(script=SEED_SCRIPT)
    out = seed_loop_graph(model).invoke({}, cfg(recursion_limit=40))
    assert summary(out["guard_log"]) == [
        ("execute", "initial_plan", ("v1",)),
        ("execute", "critique_only", ("v1",)),
        ("clarify", "no_new_evidence", ()),
    ]
    assert out["answer"] == "clarify"
    assert len(model.calls) == 3
    assert [v.status for v in out["plans"]] == [
        PlanStatus.ACCEPTED,
        PlanStatus.REJECTED,
        PlanStatus.REJECTED,
    ]
    assert all(d.at == NOW and d.step is not None for d in out["guard_log"])
    assert "replans" not in out.get("usage", {})  # nothing was accepted


# --- plan and execute: critique after every step, execution feedback, approval --------------


def pe_graph(
    model: ScriptedChatModel,
    search: Any,
    *,
    review_to: str = "planner",
    checkpointer: Any = None,
    **gate: Any,
) -> Any:
    """planner -> gate -> executor -> review -> (planner | gate | END).

    After a failed step review asks the planner for a new plan; after a good step it goes to
    ``review_to``: the planner (which then critiques its own plan) or straight to the gate.
    """

    def executor(state: State) -> dict[str, Any]:
        plan = current_plan(state["plans"])
        assert plan is not None
        step = next_step(plan)
        assert step is not None
        try:
            result = search.invoke(step.args or {"q": step.description}) if step.tool else "ok"
        except TimeoutError as err:
            failed = mark_step(plan, step.id, "failed", note=f"timeout: {err}")
            return {
                "plans": [failed],
                "trigger": "execution_feedback",
                **progress_update(executed=1, observations=1),
            }
        done = mark_step(plan, step.id, "done", evidence_ids=[f"ev-{step.id}"], note=str(result))
        return {
            "plans": [done],
            "trigger": "critique",
            **progress_update(executed=1, observations=1),
        }

    def review(state: State) -> Command[Any]:
        plan = current_plan(state["plans"])
        if plan is not None and plan.is_complete:
            return Command(goto=END, update={"answer": "done"})
        if state.get("trigger") == "execution_feedback":  # a step failed: ask for a new plan
            return Command(goto="planner", update={"trigger": "critique"})
        return Command(goto=review_to)

    builder = StateGraph(State)
    builder.add_node("planner", make_planner(model))
    builder.add_node("executor", executor)
    builder.add_node("review", review, destinations=("planner", "planner_gate", END))
    builder.add_node("clarify", finish("clarify"))
    builder.add_node("escalate", finish("escalate"))
    gate.setdefault("destinations", {"execute": "executor"})
    add_planner_gate(builder, **gate)
    builder.add_edge(START, "planner")
    builder.add_edge("planner", "planner_gate")
    builder.add_edge("executor", "review")
    builder.add_edge("clarify", END)
    builder.add_edge("escalate", END)
    return builder.compile(checkpointer=checkpointer)


@tool
def search(q: str) -> str:
    """Search the web."""
    return f"results for {q}"


def test_critique_after_each_step_never_replaces_the_running_plan() -> None:
    model = ScriptedChatModel(
        script=[
            draft(["收集资料", "分析", "输出"]),
            draft(["先明确目标", "再收集资料", "再分析"], "critique"),
            draft(["确认需求", "收集资料", "分析"], "critique"),
        ]
    )
    out = pe_graph(model, search).invoke({}, cfg())
    assert summary(out["guard_log"]) == [
        ("execute", "initial_plan", ("v1",)),
        ("execute", "critique_only", ("v1",)),
        ("execute", "critique_only", ("v1",)),
    ]
    v1, v2, v3 = out["plans"]
    assert v1.is_complete and [s.evidence_ids for s in v1.steps] == [
        ("ev-s1",),
        ("ev-s2",),
        ("ev-s3",),
    ]
    assert (v2.status, v3.status) == (PlanStatus.REJECTED, PlanStatus.REJECTED)
    assert (v2.executed_steps, v2.observations) == (1, 1)  # what the gate saw, recorded
    assert out["answer"] == "done"


def feedback_run() -> tuple[ScriptedChatModel, Any]:
    model = ScriptedChatModel(
        script=[
            draft(["搜索竞品价格", "写结论"], tool="search"),
            draft(["查官方价格表", "写结论"], "execution_feedback"),
        ]
    )
    flaky = faulty_tool(search, fail_on={1: TimeoutError("upstream slow")})
    return model, flaky


def test_execution_feedback_is_the_trigger_that_gets_a_replan_accepted() -> None:
    model, flaky = feedback_run()
    out = pe_graph(model, flaky, review_to="planner_gate").invoke({}, cfg())
    assert summary(out["guard_log"]) == [
        ("execute", "initial_plan", ("v1",)),
        ("replan", "execution_feedback", ("v2",)),
        ("execute", "next_step", ("v2",)),
    ]
    v1, v2 = out["plans"]
    assert v1.step("s1").status is StepStatus.FAILED and "timeout" in v1.step("s1").note
    assert v2.status is PlanStatus.ACCEPTED and v2.is_complete
    assert out["usage"]["replans"] == 1
    assert out["executed_since_plan"] == 2  # reset by the gate, then counted again


async def test_sync_and_async_paths_agree() -> None:
    model, flaky = feedback_run()
    sync_out = pe_graph(model, flaky, review_to="planner_gate").invoke({}, cfg("sync"))
    model, flaky = feedback_run()
    async_out = await pe_graph(model, flaky, review_to="planner_gate").ainvoke({}, cfg("async"))
    assert sync_out["guard_log"] == async_out["guard_log"]
    assert sync_out["plans"] == async_out["plans"]


def approval_graph(model: ScriptedChatModel, pay: Any) -> Any:
    return pe_graph(
        model,
        pay,
        review_to="planner_gate",
        checkpointer=InMemorySaver(),
        approval_risk="high",
        destinations={"execute": "executor", "stop": END},
    )


def approval_script() -> ScriptedChatModel:
    plan = draft(["核对发票", "付款"])
    plan["steps"][1].update(tool="search", risk="high", args={"q": "pay 500"})
    return ScriptedChatModel(script=[plan])


def test_a_high_risk_step_waits_for_approval_and_runs_when_approved() -> None:
    pay = faulty_tool(search)
    graph = approval_graph(approval_script(), pay)
    first = graph.invoke({}, cfg("ok"))
    request = first["__interrupt__"][0].value
    assert request["type"] == "plan_step_approval" and request["step"]["id"] == "s2"
    assert request["risk"] == "high" and pay.calls == 0
    out = graph.invoke(
        Command(resume={"approved": True, "by": "ops", "note": "invoice ok"}), cfg("ok")
    )
    step = out["plans"][0].step("s2")
    assert step.approved is True and step.status is StepStatus.DONE and pay.calls == 1
    assert summary(out["guard_log"])[-2:] == [
        ("execute", "next_step", ("v1",)),
        ("execute", "approved", ("v1",)),
    ]
    assert (
        out["guard_log"][-1].detail == "Step s2 of v1 (high risk) was approved by ops: invoice ok."
    )
    assert out["answer"] == "done"


async def test_approval_works_on_the_async_path() -> None:
    pay = faulty_tool(search)
    graph = approval_graph(approval_script(), pay)
    first = await graph.ainvoke({}, cfg("async-approval"))
    assert first["__interrupt__"][0].value["step"]["id"] == "s2"
    out = await graph.ainvoke(Command(resume="approve"), cfg("async-approval"))
    assert out["plans"][0].step("s2").approved is True and pay.calls == 1


@pytest.mark.parametrize(
    ("resume", "reason"),
    [("reject", "approval_rejected"), ({"cancel": "user left"}, "cancelled")],
)
def test_a_rejected_or_cancelled_step_never_runs(resume: Any, reason: str) -> None:
    pay = faulty_tool(search)
    graph = approval_graph(approval_script(), pay)
    graph.invoke({}, cfg("no"))
    out = graph.invoke(Command(resume=resume), cfg("no"))
    assert pay.calls == 0
    step = out["plans"][0].step("s2")
    assert step.status is StepStatus.CANCELLED and step.approved is False
    assert summary(out["guard_log"])[-1] == ("stop", reason, ("v1",))
    assert "answer" not in out  # stop -> END, nothing executed after


# --- bad input, interrupts, replay, serialization -------------------------------------------


def test_bad_input_becomes_an_invalid_input_decision_and_leaves_state_alone() -> None:
    model = ScriptedChatModel(script=[draft(["a", "b"]), draft(["c"], "initial")])
    graph = seed_loop_graph(model, checkpointer=InMemorySaver())
    out = graph.invoke({}, cfg("bad"))
    last = out["guard_log"][-1]
    assert (last.verdict, last.reason) == (Verdict.ESCALATE, "invalid_input")
    assert (last.data["item"], last.data["field"]) == ("v2", "trigger")
    assert out["plans"][-1].status is PlanStatus.PROPOSED  # not marked
    assert out["answer"] == "clarify"  # escalate was routed to the clarify node


def test_an_interrupt_inside_the_gate_passes_through(monkeypatch: pytest.MonkeyPatch) -> None:
    real = plan_node.gate_checked  # the gate_plan the node runs on checked versions

    def holding(*args: Any, **kwargs: Any) -> Any:
        interrupt({"hold": True})
        return real(*args, **kwargs)

    monkeypatch.setattr(plan_node, "gate_checked", holding)
    graph = seed_loop_graph(ScriptedChatModel(script=SEED_SCRIPT), checkpointer=InMemorySaver())
    first = graph.invoke({}, cfg("hold"))
    assert first["__interrupt__"][0].value == {"hold": True}
    assert not first.get("guard_log")  # nothing decided yet
    second = graph.invoke(Command(resume=True), cfg("hold"))
    assert summary(second["guard_log"]) == [("execute", "initial_plan", ("v1",))]


def same(d: GuardDecision) -> dict[str, Any]:
    return {k: v for k, v in d.to_dict().items() if k != "step"}


class SeedPlanner:
    """Deterministic planner (no model): the critique rounds, indexed by how many plans exist."""

    def __call__(self, state: State) -> dict[str, Any]:
        n = len(state.get("plans") or [])
        return {"plans": [PlanVersion.from_dict({"version": n + 1, **SEED_SCRIPT[n]})]}


def test_replay_from_any_checkpoint_gives_the_same_decisions() -> None:
    builder = StateGraph(State)
    builder.add_node("planner", SeedPlanner())
    builder.add_node("critic", lambda s: Command(goto="planner"), destinations=("planner",))
    builder.add_node("clarify", finish("clarify"))
    add_planner_gate(
        builder, destinations={"execute": "critic", "escalate": "clarify", "stop": END}
    )
    builder.add_edge(START, "planner")
    builder.add_edge("planner", "planner_gate")
    builder.add_edge("clarify", END)
    graph = builder.compile(checkpointer=InMemorySaver())
    original = graph.invoke({}, cfg("replay"))
    history = list(graph.get_state_history(cfg("replay")))
    gate_points = [h for h in history if h.next == ("planner_gate",)]
    assert len(gate_points) == 3
    for snapshot in gate_points:
        past = snapshot.config
        replayed = graph.invoke(
            None, {**past, "configurable": {**past["configurable"], "agent_guards_now": NOW}}
        )
        # the step differs by one: LangGraph numbers a replayed run as a fork of the checkpoint
        assert [same(d) for d in replayed["guard_log"]] == [same(d) for d in original["guard_log"]]
        assert replayed["plans"] == original["plans"]


def test_state_round_trips_through_sqlite_in_strict_mode(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    db = tmp_path / "plans.sqlite"
    goal = Goal(
        "competitive_analysis", {"region": "华东", "period": "2025"}, required=("region", "period")
    )
    model = ScriptedChatModel(
        script=[
            draft(["收集资料", "分析", "输出"], tool="search", risk="medium", timeout_s=3.0),
            draft(["先明确目标", "再收集资料", "再分析"], "critique"),
            draft(["确认需求", "收集资料", "分析"], "critique"),
        ]
    )
    saver = SqliteSaver(sqlite3.connect(str(db), check_same_thread=False))
    with caplog.at_level(logging.WARNING):
        out = pe_graph(model, search, checkpointer=saver).invoke({"goal": goal}, cfg("sql"))
        reopened = SqliteSaver(sqlite3.connect(str(db), check_same_thread=False))
        values = pe_graph(model, search, checkpointer=reopened).get_state(cfg("sql")).values
    assert not [
        r
        for r in caplog.records
        if "serializ" in r.getMessage().lower() or "blocked" in r.getMessage().lower()
    ]
    assert values["plans"] == out["plans"] and values["guard_log"] == out["guard_log"]
    assert values["goal"] == goal
    v1 = values["plans"][0]
    assert isinstance(v1, PlanVersion) and isinstance(v1.steps[0], PlanStep)
    assert v1.steps[0].status is StepStatus.DONE and v1.steps[0].timeout_s == 3.0
    assert values["guard_log"][0].verdict is Verdict.EXECUTE


def test_a_goal_missing_a_required_constraint_is_clarified_before_any_step() -> None:
    goal = Goal("competitive_analysis", {"region": "华东"}, required=("region", "period"))
    model = ScriptedChatModel(script=[draft(["收集资料", "分析"])])
    out = pe_graph(model, search).invoke({"goal": goal}, cfg("goal"))
    assert summary(out["guard_log"]) == [("clarify", "missing_constraints", ())]
    assert out["guard_log"][0].data["missing"] == ["period"]
    assert out["answer"] == "clarify" and out["plans"][0].status is PlanStatus.REJECTED


# -- wiring mistakes fail when the graph is built -----------------------------------------------


def test_add_planner_gate_on_a_state_without_plans_names_the_mixin() -> None:
    builder = StateGraph(MessagesState)
    builder.add_node("run", lambda s: {})
    with pytest.raises(ValueError, match=r"no 'plans', 'guard_log' channel; add the PlanState"):
        add_planner_gate(builder, destinations={"execute": "run", "clarify": END, "escalate": END})


def test_add_planner_gate_with_a_default_route_to_a_missing_node_names_the_option() -> None:
    builder = StateGraph(State)
    builder.add_node("executor", lambda s: {})
    with pytest.raises(ValueError, match=r"by default .*escalate -> 'escalate'.*destinations="):
        add_planner_gate(builder, destinations={"execute": "executor"})
    # routes you name may lead to nodes you add later
    add_planner_gate(builder, destinations={"execute": "executor", "clarify": "ask",
                                            "escalate": "ask", "stop": END})  # fmt: skip
    builder.add_node("ask", lambda s: {})
    builder.add_edge(START, "planner_gate")
    assert "planner_gate" in builder.compile().get_graph().nodes


def test_add_planner_gate_with_a_misspelt_execute_node_names_that_route() -> None:
    builder = StateGraph(State)
    builder.add_node("executor", lambda s: {})
    # replan follows execute unless named, so the misspelt execute node is what to fix
    with pytest.raises(ValueError, match=r"destinations\['execute'\]='exector' is not a node"):
        add_planner_gate(builder, destinations={"execute": "exector", "clarify": END,
                                                "escalate": END})  # fmt: skip
    add_planner_gate(builder, destinations={"execute": "executor", "clarify": END,
                                            "escalate": END})  # fmt: skip
    assert "planner_gate" in builder.nodes
