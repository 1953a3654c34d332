"""Approval and cancel on the reference graph: the cancel protocol.

A high-risk step pauses in planner_gate (``interrupt``); ``Command(resume=True)`` runs it;
``Command(resume={"cancel": ...})`` stops new calls, runs the compensation hooks of the
completed side-effect steps, and records the cancelled run. The user can also cancel in
their own words: a new message that only asks to stop ("stop", "never mind", "算了"), or
such an answer to the approval question; a message with a task in it is never a cancel.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from agent_guards import GuardDecision, PlanStep
from agent_guards.graphs.plan_execute import Policies, build_graph, run_config
from agent_guards.graphs.scenarios import RoleScript, scenario_config
from agent_guards.planner_gate import StepStatus
from agent_guards.testing import tool_call_message
from agent_guards.tool_guard import RunLedger
from tests.integration._reference import (
    CONFLICT,
    async_persistence,
    calls_logged,
    graph_for,
    memory_persistence,
    payment_scenario,
    payment_tools,
    persistence,
)


class Undo:
    """A compensation hook that records the steps it undid."""

    def __init__(self) -> None:
        self.undone: list[PlanStep] = []

    def __call__(self, step: PlanStep) -> str:
        self.undone.append(step)
        return f"deleted the draft made by {step.id}"


def _pause(graph: Any, config: Any, message: str) -> dict[str, Any]:
    paused = dict(graph.invoke({"messages": [("user", message)]}, config))
    assert "__interrupt__" in paused
    return paused


def _gate(log: list[GuardDecision]) -> list[tuple[str, str, tuple[str, ...]]]:
    return [(d.verdict.value, d.reason, d.dropped_ids) for d in log if d.guard == "planner_gate"]


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_a_high_risk_step_pauses_before_it_runs(kind: str, tmp_path: Path) -> None:
    scenario = payment_scenario(tmp_path, Undo())
    with persistence(kind, tmp_path) as (saver, store):
        graph = graph_for(scenario, saver, store)
        config = scenario_config(scenario, "t")
        paused = _pause(graph, config, scenario.message)
        snapshot = graph.get_state(config)
    (question,) = paused["__interrupt__"]
    assert question.value["type"] == "plan_step_approval"
    assert question.value["step"]["id"] == "s2"
    assert question.value["risk"] == "high"
    assert snapshot.next == ("planner_gate",)
    assert calls_logged(tmp_path) == ["create_draft"]
    # the paused gate has not written yet: its decision is logged when the human answers
    assert _gate(paused["guard_log"]) == [("execute", "initial_plan", ())]


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_approval_runs_the_step(kind: str, tmp_path: Path) -> None:
    undo = Undo()
    scenario = payment_scenario(tmp_path, undo)
    with persistence(kind, tmp_path) as (saver, store):
        graph = graph_for(scenario, saver, store)
        config = scenario_config(scenario, "t")
        _pause(graph, config, scenario.message)
        done = graph.invoke(Command(resume={"approved": True, "by": "ops"}), config)
    assert done["outcome"]["route"] == "answer"
    assert done["outcome"]["cited"] == ["payment_7"]
    assert calls_logged(tmp_path) == ["create_draft", "send_payment"]
    assert undo.undone == []
    assert ("execute", "approved", ()) in _gate(done["guard_log"])
    step = done["plans"][-1].step("s2")
    assert step.approved is True and step.status is StepStatus.DONE


@pytest.mark.parametrize(
    ("resume", "reason"),
    [
        ({"cancel": "user cancelled"}, "cancelled"),
        ("reject", "approval_rejected"),
        ({"approved": False, "by": "ops", "note": "too large"}, "approval_rejected"),
    ],
)
@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_cancel_stops_new_calls_compensates_and_records(
    kind: str, resume: Any, reason: str, tmp_path: Path
) -> None:
    undo = Undo()
    scenario = payment_scenario(tmp_path, undo)
    with persistence(kind, tmp_path) as (saver, store):
        graph = graph_for(scenario, saver, store)
        config = scenario_config(scenario, "t")
        paused = _pause(graph, config, scenario.message)
        done = graph.invoke(Command(resume=resume), config)
        assert graph.get_state(config).next == ()
    outcome = done["outcome"]
    assert outcome["route"] == "cancelled"
    assert outcome["reason"] == reason
    # no new model or tool call after the answer
    assert done["usage"] == paused["usage"]
    assert calls_logged(tmp_path) == ["create_draft"]
    # the completed side effect was undone, once, and the record says so
    assert [s.id for s in undo.undone] == ["s1"]
    assert outcome["compensated"] == ["deleted the draft made by s1"]
    assert "Undone: deleted the draft made by s1" in outcome["text"]
    last = done["messages"][-1]
    assert isinstance(last, AIMessage) and last.name == "respond"
    assert last.content == outcome["text"]
    # the decision is in guard_log, and the step is marked cancelled
    assert _gate(done["guard_log"])[-1] == ("stop", reason, ("s2",))
    assert done["plans"][-1].step("s2").status is StepStatus.CANCELLED
    assert done["plans"][-1].step("s1").status is StepStatus.DONE


def _transfer_run(call_amount: int) -> tuple[dict[str, Any], list[int]]:
    """A high-risk transfer approved with corrected arguments (amount 50 instead of 100),
    then a model that calls transfer with ``call_amount``: what ran, and the final state."""
    paid: list[int] = []

    @tool
    def transfer(amount: int) -> str:
        """Wire money to the vendor."""
        paid.append(amount)
        return f"sent {amount}"

    step = {"id": "s1", "description": "pay the invoice", "tool": "transfer",
            "args": {"amount": 100}, "risk": "high"}  # fmt: skip
    script = RoleScript(
        parse_goal=[json.dumps({"intent": "pay", "dimensions": ["payment"]})],
        plan=[json.dumps({"steps": [step]})],
        agent=[tool_call_message("transfer", {"amount": call_amount}), "paid"],
        review=[json.dumps({"action": "finish"})],
    )
    graph = build_graph(script.model(), [transfer], checkpointer=InMemorySaver())
    config = run_config(Policies(), thread_id="pay")
    _pause(graph, config, "Pay the invoice.")
    done = graph.invoke(Command(resume={"approved": True, "by": "ops", "args": {"amount": 50}}),
                        config)  # fmt: skip
    return done, paid


def test_an_approved_step_runs_only_the_call_that_was_approved() -> None:
    """The human approved transfer(amount=50): a model that calls transfer(amount=100000)
    runs nothing, the step ends refused, and the refusal is a decision."""
    done, paid = _transfer_run(100_000)
    assert paid == []
    assert done["outcome"]["route"] == "refuse"
    assert done["outcome"]["reason"] == "planner_gate: not_approved"
    (refusal,) = [d for d in done["guard_log"] if d.reason == "not_approved"]
    assert refusal.guard == "planner_gate" and refusal.verdict.value == "refuse"
    assert refusal.data["args"] == {"amount": 50}
    assert refusal.data["calls"] == [{"name": "transfer", "args": {"amount": 100_000}}]
    step = done["plans"][-1].step("s1")
    assert step.approved is True and step.status is StepStatus.FAILED
    assert done["usage"].get("tool_calls", 0) == 0


def test_an_approved_step_runs_the_call_with_the_corrected_arguments() -> None:
    done, paid = _transfer_run(50)
    assert paid == [50]
    assert not [d for d in done["guard_log"] if d.reason == "not_approved"]
    assert done["plans"][-1].step("s1").status is StepStatus.DONE


def test_a_cancel_without_compensations_still_records_the_run(tmp_path: Path) -> None:
    scenario = payment_scenario(tmp_path)  # no hooks registered
    with persistence("memory", tmp_path) as (saver, store):
        graph = graph_for(scenario, saver, store)
        config = scenario_config(scenario, "t")
        _pause(graph, config, scenario.message)
        done = graph.invoke(Command(resume={"cancel": "changed my mind"}), config)
    assert done["outcome"]["route"] == "cancelled"
    assert "compensated" not in done["outcome"]
    assert "changed my mind" in done["outcome"]["text"]


def test_another_worker_resumes_the_pause_from_sqlite(tmp_path: Path) -> None:
    """The pause lives in the checkpoint: a fresh graph on the same file answers it."""
    undo = Undo()
    scenario = payment_scenario(tmp_path, undo)
    config = scenario_config(scenario, "t")
    with persistence("sqlite", tmp_path) as (saver, store):
        _pause(graph_for(scenario, saver, store), config, scenario.message)
    with persistence("sqlite", tmp_path) as (saver, store):
        done = graph_for(scenario, saver, store).invoke(
            Command(resume={"cancel": "user cancelled"}), config
        )
    assert done["outcome"]["route"] == "cancelled"
    assert [s.id for s in undo.undone] == ["s1"]


@pytest.mark.parametrize("resume", [True, {"cancel": "user cancelled"}])
async def test_async_approval_and_cancel_match_sync(resume: Any, tmp_path: Path) -> None:
    sync_dir, async_dir = tmp_path / "sync", tmp_path / "async"
    sync_dir.mkdir()
    async_dir.mkdir()
    scenario = payment_scenario(sync_dir, Undo())
    with persistence("memory", tmp_path) as (saver, store):
        graph = graph_for(scenario, saver, store)
        config = scenario_config(scenario, "t")
        _pause(graph, config, scenario.message)
        synced = graph.invoke(Command(resume=resume), config)
    scenario = payment_scenario(async_dir, Undo())
    async with async_persistence("sqlite", tmp_path) as (saver, store):
        graph = graph_for(scenario, saver, store)
        paused = await graph.ainvoke({"messages": [("user", scenario.message)]}, config)
        assert "__interrupt__" in paused
        done = await graph.ainvoke(Command(resume=resume), config)
    assert done["outcome"] == synced["outcome"]
    assert done["guard_log"] == synced["guard_log"]
    assert done["usage"] == synced["usage"]
    assert calls_logged(async_dir) == calls_logged(sync_dir)


def test_compensations_for_unknown_tools_are_rejected_at_build_time() -> None:
    scenario = payment_scenario()
    with pytest.raises(ValueError, match=r"compensations for unknown tools \['refund'\]"):
        build_graph(scenario.script().model(), payment_tools(), compensations={"refund": Undo()})


def test_tools_and_hooks_a_user_may_get_wrong_are_refused_at_build_time() -> None:
    """Each names the item and the fix: before, a duplicate name let the last tool answer
    for both, and a hook that is not callable failed only when a cancel needed it."""
    model, tools = payment_scenario().script().model(), payment_tools()
    name = tools[0].name
    impostor = tools[0].model_copy(update={"description": "another tool, same name"})
    cases: list[tuple[Any, dict[str, Any], type[Exception], str]] = [
        ([*tools, impostor], {}, ValueError, rf"tool names must be unique, \['{name}'\]"),
        (tools[0], {}, TypeError, "tools must be a list of LangChain tools"),
        ([*tools, lambda x: x], {}, TypeError, rf"tools\[{len(tools)}\] is a function.*@tool"),
        (tools, {"compensations": {name: "undo"}}, TypeError, rf"compensations\['{name}'\]"),
    ]
    for given, options, error, message in cases:
        with pytest.raises(error, match=message):
            build_graph(model, given, **options)
    with pytest.raises(
        TypeError, match=r"chat model, got str: .*init_chat_model\('openai:gpt-4o'\)"
    ):
        build_graph("openai:gpt-4o", tools)
    with pytest.raises(TypeError, match=r"store must be a LangGraph BaseStore.*got dict"):
        build_graph(model, tools, store={})


def test_cancel_run_names_a_missing_thread_and_a_thread_that_never_ran() -> None:
    from agent_guards.graphs.plan_execute import cancel_run

    saver, store = memory_persistence()
    graph = graph_for(payment_scenario(), saver, store)
    with pytest.raises(ValueError, match="cancel_run needs the run's thread"):
        cancel_run(graph, {"configurable": {}})
    with pytest.raises(ValueError, match="thread 'nobody' has no run to cancel"):
        cancel_run(graph, {"configurable": {"thread_id": "nobody"}})


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_a_run_without_a_thread_is_refused_naming_it(kind: str, tmp_path: Path) -> None:
    """The graph's own configurable (its durability) turns off LangGraph's check, and the
    checkpointer failed with a bare KeyError; sync and async runs, and copies, name the fix."""
    import asyncio

    scenario = payment_scenario()
    with persistence(kind, tmp_path) as (saver, store):
        graph = graph_for(scenario, saver, store)
        state = {"messages": [("user", scenario.message)]}
        for given in (None, {"configurable": {"principal": "ops"}}):
            with pytest.raises(ValueError, match=r"needs config\['configurable'\]\['thread_id'\]"):
                graph.invoke(state, given)
        with pytest.raises(ValueError, match="thread_id"):
            asyncio.run(graph.ainvoke(state))
        with pytest.raises(ValueError, match="thread_id"):
            graph.with_config(tags=["copy"]).invoke(state)
        assert graph.get_state({"configurable": {"thread_id": "t"}}).values == {}  # nothing ran


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_a_high_risk_conflict_escalates_to_a_reviewer(kind: str, tmp_path: Path) -> None:
    """respond -> escalate interrupts; the reviewer's answer is recorded on resume."""
    with persistence(kind, tmp_path) as (saver, store):
        graph = graph_for(CONFLICT, saver, store)
        config = scenario_config(CONFLICT, "t")
        paused = _pause(graph, config, CONFLICT.message)
        assert graph.get_state(config).next == ("escalate",)
        done = graph.invoke(Command(resume="use doc_a"), config)
    (question,) = paused["__interrupt__"]
    assert question.value["type"] == "escalation"
    assert question.value["reason"] == "close_call"
    assert done["outcome"]["route"] == "escalate"
    assert done["outcome"]["human"] == "use doc_a"
    assert done["messages"][-1].content == "A reviewer decided: use doc_a"
    evidence = [d for d in done["guard_log"] if d.guard == "evidence_resolve"]
    assert (evidence[-1].verdict.value, set(evidence[-1].conflicting_ids)) == (
        "escalate",
        {"doc_a", "doc_b"},
    )
    assert done["usage"] == paused["usage"]


def test_cancel_undoes_writes_of_every_plan_version_newest_first_once_each() -> None:
    """A replan may drop a step that already wrote: it is undone all the same, and a step
    carried over from version to version is undone once."""
    from agent_guards import PlanVersion
    from agent_guards.graphs.outcomes import compensate

    def step(sid: str, tool: str, status: str, **args: Any) -> PlanStep:
        return PlanStep(sid, f"{tool} {args}", tool=tool, args=args, status=status)

    v1 = PlanVersion(
        1,
        [step("s1", "create_draft", "done", n=1), step("s2", "create_draft", "done", n=2)],
    )
    # v2 keeps s1 (carried over, done) and drops s2, which had already written
    v2 = PlanVersion(
        2,
        [step("s1", "create_draft", "done", n=1), step("s3", "create_draft", "done", n=3)],
        trigger="execution_feedback",
        parent=1,
    )
    undo = Undo()
    assert compensate({"plans": [v1, v2]}, {"create_draft": undo}) == [
        "deleted the draft made by s3",
        "deleted the draft made by s1",
        "deleted the draft made by s2",
    ]
    assert [s.id for s in undo.undone] == ["s3", "s1", "s2"]


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_a_run_can_be_cancelled_between_steps_not_only_at_an_approval(
    kind: str, tmp_path: Path
) -> None:
    from agent_guards.graphs.plan_execute import cancel_run

    undo = Undo()
    scenario = payment_scenario(tmp_path, undo)
    with persistence(kind, tmp_path) as (saver, store):
        graph = graph_for(scenario, saver, store)
        config = scenario_config(scenario, "t")
        # the caller stops the run after the first step, before the approval is asked for
        graph.invoke(
            {"messages": [("user", scenario.message)]}, config, interrupt_after=["record_step"]
        )
        paused = graph.get_state(config)
        assert paused.values["plans"][-1].step("s1").status is StepStatus.DONE
        done = cancel_run(graph, config, "the user changed their mind")
        assert graph.get_state(config).next == ()
    assert done["outcome"]["route"] == "cancelled"
    assert done["outcome"]["compensated"] == ["deleted the draft made by s1"]
    assert done["outcome"]["text"].startswith("Cancelled: the user changed their mind")
    assert calls_logged(tmp_path) == ["create_draft"]  # nothing ran after the cancel
    assert done["usage"]["model_calls"] == paused.values["usage"]["model_calls"]


def test_calls_pending_when_the_run_is_cancelled_are_answered_not_run(tmp_path: Path) -> None:
    from agent_guards.graphs.plan_execute import cancel_run

    scenario = payment_scenario(tmp_path, Undo())
    with persistence("memory", tmp_path) as (saver, store):
        graph = graph_for(scenario, saver, store)
        config = scenario_config(scenario, "t")
        graph.invoke({"messages": [("user", scenario.message)]}, config, interrupt_before=["tools"])
        assert graph.get_state(config).next == ("tools",)
        done = cancel_run(graph, config, "stop now")
    assert calls_logged(tmp_path) == []  # the pending create_draft never ran
    assert done["outcome"]["route"] == "cancelled"
    assert ("stop", "cancelled") in [(d.verdict.value, d.reason) for d in done["guard_log"]]


# -- a cancel from the user's own words -------------------------------------------------------


def _said(decisions: list[GuardDecision], guard: str) -> list[tuple[str, str, tuple[str, ...]]]:
    return [(d.verdict.value, d.reason, d.selected_ids) for d in decisions if d.guard == guard]


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
@pytest.mark.parametrize("words", ["stop", "Please cancel it!", "never mind", "算了，别做了"])
def test_a_user_message_asking_to_stop_cancels_an_unfinished_run(
    kind: str, words: str, tmp_path: Path
) -> None:
    undo = Undo()
    scenario = payment_scenario(tmp_path, undo)
    with persistence(kind, tmp_path) as (saver, store):
        graph = graph_for(scenario, saver, store)
        config = scenario_config(scenario, "t")
        paused = _pause(graph, config, scenario.message)  # waiting for the approval of s2
        done = graph.invoke({"messages": [("user", words)]}, config)
        assert graph.get_state(config).next == ()
    assert done["outcome"]["route"] == "cancelled"
    assert done["outcome"]["detail"] == f"the user said {words!r}"
    assert done["usage"]["model_calls"] == paused["usage"]["model_calls"]  # no model call
    assert calls_logged(tmp_path) == ["create_draft"]  # s2 never ran
    assert [s.id for s in undo.undone] == ["s1"]
    assert _said(done["guard_log"], "cancel") == [("stop", "compensated", ("s1",))]


def test_stop_before_the_first_plan_cancels_the_run(tmp_path: Path) -> None:
    """The goal is parsed and the run paused before planning: "stop" ends it, no plan made."""
    scenario = payment_scenario(tmp_path, Undo())
    with persistence("memory", tmp_path) as (saver, store):
        graph = graph_for(scenario, saver, store)
        config = scenario_config(scenario, "t")
        paused = graph.invoke({"messages": [("user", scenario.message)]}, config,
                              interrupt_before=["plan"])  # fmt: skip
        done = graph.invoke({"messages": [("user", "stop")]}, config)
    assert done["outcome"]["route"] == "cancelled"
    assert not done.get("plans")
    assert done["usage"]["model_calls"] == paused["usage"]["model_calls"]


def test_stop_while_a_reviewer_is_asked_cancels_the_run(tmp_path: Path) -> None:
    with persistence("memory", tmp_path) as (saver, store):
        graph = graph_for(CONFLICT, saver, store)
        config = scenario_config(CONFLICT, "t")
        paused = _pause(graph, config, CONFLICT.message)
        assert graph.get_state(config).next == ("escalate",)
        done = graph.invoke({"messages": [("user", "never mind")]}, config)
        assert graph.get_state(config).next == ()
    assert done["outcome"]["route"] == "cancelled"
    assert done["usage"]["model_calls"] == paused["usage"]["model_calls"]


def test_an_approval_answered_with_stop_cancels_the_run(tmp_path: Path) -> None:
    undo = Undo()
    scenario = payment_scenario(tmp_path, undo)
    with persistence("memory", tmp_path) as (saver, store):
        graph = graph_for(scenario, saver, store)
        config = scenario_config(scenario, "t")
        _pause(graph, config, scenario.message)
        done = graph.invoke(Command(resume="stop, cancel it"), config)
    assert (done["outcome"]["route"], done["outcome"]["reason"]) == ("cancelled", "cancelled")
    assert calls_logged(tmp_path) == ["create_draft"]
    assert [s.id for s in undo.undone] == ["s1"]


def test_in_flight_calls_are_answered_and_recorded_when_the_user_says_stop(
    tmp_path: Path,
) -> None:
    scenario = payment_scenario(tmp_path, Undo())
    with persistence("memory", tmp_path) as (saver, store):
        graph = graph_for(scenario, saver, store)
        config = scenario_config(scenario, "t")
        graph.invoke({"messages": [("user", scenario.message)]}, config, interrupt_before=["tools"])
        (turn,) = [m for m in graph.get_state(config).values["step_messages"] if m.type == "ai"]
        done = graph.invoke({"messages": [("user", "stop")]}, config)
    assert calls_logged(tmp_path) == []  # the pending create_draft never ran
    call_ids = tuple(c["id"] for c in turn.tool_calls)
    answers = [m for m in done["step_messages"] if getattr(m, "tool_call_id", None) in call_ids]
    assert [m.content.startswith("[cancel] Not executed") for m in answers] == [True] * len(
        call_ids
    )
    assert [ids for _, reason, ids in _said(done["guard_log"], "cancel")] == [
        (i,) for i in call_ids
    ]


@pytest.mark.parametrize("words", ["cancel my order 42", "stop the server on box 3"])
def test_a_task_that_mentions_stopping_is_not_a_cancel(words: str, tmp_path: Path) -> None:
    """A message with a task in it goes to the model as the user's new input."""
    undo = Undo()
    scenario = payment_scenario(tmp_path, undo)
    with persistence("memory", tmp_path) as (saver, store):
        graph = graph_for(scenario, saver, store)
        config = scenario_config(scenario, "t")
        paused = _pause(graph, config, scenario.message)
        done = graph.invoke({"messages": [("user", words)]}, config)
    assert done["outcome"].get("route") != "cancelled"
    assert done["usage"]["model_calls"] > paused["usage"]["model_calls"]  # the model read it
    assert undo.undone == [] and _said(done["guard_log"], "cancel") == []


@pytest.mark.parametrize("kept", ["store", "state"])
def test_a_cancel_undoes_a_write_no_plan_step_lists(kept: str, tmp_path: Path) -> None:
    """Step s1's model also calls ``hold_funds``, a write the plan never named: the ledger
    holds it (in the store, or in state when the graph has none), so the cancel undoes it
    too (by its call id), and records it. The two calls ran side by side in one tool node,
    so neither is the newer: the order between them is whichever thread started first."""
    from langchain_core.tools import tool

    from agent_guards.graphs.scenarios import RoleScript, Scenario
    from agent_guards.testing import tool_call_message
    from agent_guards.tool_guard import annotate_tool
    from tests.integration._reference import _payment_script

    @tool
    def hold_funds(amount: int) -> str:
        """Reserve funds for a payment (a write)."""
        return f"held {amount}"

    def script() -> RoleScript:
        base = _payment_script()
        calls = tool_call_message("create_draft", {})
        calls.tool_calls.append({"name": "hold_funds", "args": {"amount": 70}, "id": "hold-1"})
        return RoleScript(
            parse_goal=base.replies["parse_goal"], plan=base.replies["plan"],
            agent={"s1": [calls, "draft created, funds held"], "s2": base.replies["agent"]["s2"]},
            review=base.replies["review"],
        )  # fmt: skip

    undo = Undo()
    tools = [*payment_tools(tmp_path), annotate_tool(hold_funds)]
    scenario = Scenario("held", "a write outside the plan", "Pay invoice 7.", script,
                        lambda: tools, "answer",
                        compensations={"create_draft": undo, "hold_funds": undo})  # fmt: skip
    with persistence("sqlite", tmp_path) as (saver, store):
        if kept == "state":
            graph = graph_for(scenario, saver, None, ledger=RunLedger())
        else:
            graph = graph_for(scenario, saver, store)
        config = scenario_config(scenario, "t")
        _pause(graph, config, scenario.message)
        done = graph.invoke(Command(resume={"cancel": "changed my mind"}), config)
        in_state = graph.get_state(config).values.get("run_ledger", {})
    assert ("hold-1#1" in in_state) == (kept == "state")
    assert sorted((s.id, s.tool, str(s.args)) for s in undo.undone) == [
        ("hold-1", "hold_funds", "{'amount': 70}"),
        ("s1", "create_draft", "{}"),
    ]
    said = [ids for _, reason, ids in _said(done["guard_log"], "cancel")]
    assert sorted(said) == [("hold-1",), ("s1",)]
    assert said == [(s.id,) for s in undo.undone]  # each undo recorded, in the order it ran


def test_an_approval_in_a_graph_without_a_checkpointer_fails_naming_the_fix() -> None:
    """The payment step's approval: without a checkpointer LangGraph returned the pause as
    __interrupt__ and the resume then failed; now the run says what to add."""
    scenario = payment_scenario()
    graph = graph_for(scenario, None, None)
    with pytest.raises(ValueError, match="no checkpointer, so the run could never be resumed"):
        graph.invoke({"messages": [("user", scenario.message)]}, scenario_config(scenario, "t"))
