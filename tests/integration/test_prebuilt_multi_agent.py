"""The langgraph-supervisor and langgraph-swarm quickstarts, guarded, on scripted models.

The graphs come from the real ``create_supervisor`` / ``create_swarm`` (through
``guarded_supervisor`` / ``guarded_swarm``) and the real handoff tools; only the chat
models are scripted.
"""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import MessagesState
from langgraph_supervisor import create_supervisor
from langgraph_swarm import SwarmState, create_handoff_tool

from agent_guards import GuardState
from agent_guards.prebuilt import (
    guarded_react_agent,
    guarded_supervisor,
    guarded_swarm,
    guarded_workers,
)
from agent_guards.testing import ScriptedChatModel, tool_call_message
from agent_guards.tool_guard import annotate_tool
from tests.integration.test_prebuilt_react import OwnChannels, _unanswered


def _again(name: str, args: dict[str, Any]) -> Any:
    return lambda _: tool_call_message(name, args)  # a fresh call id on every call


def _tools(log: dict[str, int]) -> dict[str, Any]:
    @tool
    def web_search(query: str) -> str:
        """Search the web for information."""
        log["web_search"] = log.get("web_search", 0) + 1
        return "FAANG headcount in 2024: 1,977,586"

    @tool
    def add(a: float, b: float) -> float:
        """Add two numbers."""
        log["add"] = log.get("add", 0) + 1
        return a + b

    @tool
    def pay(amount: int) -> str:
        """Pay."""
        log["pay"] = log.get("pay", 0) + 1
        raise PermissionError("403 Forbidden")

    return {
        "web_search": annotate_tool(web_search, read_only=True),
        "add": annotate_tool(add, read_only=True),
        "pay": pay,
    }


def _reasons(out: dict[str, Any]) -> list[tuple[str, str, str]]:
    return [(d.guard, d.verdict.value, d.reason) for d in out.get("guard_log", [])]


async def _run(app: Any, text: str, mode: str, thread: str | None = None) -> dict[str, Any]:
    cfg: dict[str, Any] = {"recursion_limit": 60}
    if thread is not None:
        cfg["configurable"] = {"thread_id": thread}
    inputs = {"messages": [HumanMessage(text)]}
    if mode == "async":
        return await app.ainvoke(inputs, cfg)  # type: ignore[no-any-return]
    return app.invoke(inputs, cfg)  # type: ignore[no-any-return]


# --- langgraph-supervisor -------------------------------------------------------------


def supervisor_app(
    supervisor: list[Any],
    research: list[Any],
    math: list[Any],
    log: dict[str, int],
    checkpointer: Any = None,
) -> tuple[Any, dict[str, ScriptedChatModel]]:
    """The quickstart: a research expert, a math expert (who may also pay), a supervisor."""
    tools = _tools(log)
    models = {
        "supervisor": ScriptedChatModel(script=supervisor, repeat_last=True),
        "research": ScriptedChatModel(script=research, repeat_last=True),
        "math": ScriptedChatModel(script=math, repeat_last=True),
    }
    research_agent = guarded_react_agent(
        models["research"], [tools["web_search"]], name="research_expert"
    )
    math_agent = guarded_react_agent(
        models["math"], [tools["add"], tools["pay"]], name="math_expert"
    )
    workflow = guarded_supervisor(
        [research_agent, math_agent],
        model=models["supervisor"],
        prompt="You are a team supervisor managing a research expert and a math expert.",
    )
    return workflow.compile(
        checkpointer=InMemorySaver() if checkpointer is None else checkpointer
    ), models


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_a_looping_worker_stops_and_the_supervisor_sees_why(mode: str) -> None:
    log: dict[str, int] = {}
    app, models = supervisor_app(
        [_again("transfer_to_research_expert", {}), "FAANG had 1,977,586 people in 2024."],
        [_again("web_search", {"query": "FAANG headcount 2024"})],  # the same call forever
        ["unused"],
        log,
    )
    out = await _run(app, "what's the combined headcount of the FAANG companies?", mode, "l")
    assert len(models["research"].calls) <= 3
    assert log == {"web_search": 1}
    assert _reasons(out) == [
        ("loop_check", "reuse", "repeated_call"),
        ("loop_check", "nudge", "repeated_call"),
        ("loop_check", "stop", "repeated_call"),
    ]  # in the supervisor's state, each decision once
    assert out["usage"] == {"tool_calls": 1}
    stop = [m for m in out["messages"] if m.name == "loop_check"]
    assert len(stop) == 1 and stop[0].content.startswith("I stopped because I kept repeating")
    assert out["messages"][-1].content == "FAANG had 1,977,586 people in 2024."
    assert len(models["supervisor"].calls) == 2
    assert _unanswered(out["messages"]) == []


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_a_permission_denied_tool_runs_once(mode: str) -> None:
    log: dict[str, int] = {}
    app, models = supervisor_app(
        [_again("transfer_to_math_expert", {}), "Payment is not allowed."],
        ["unused"],
        [_again("pay", {"amount": 5})],  # asks again after the refusal
        log,
    )
    out = await _run(app, "pay 5", mode, "p")
    assert log == {"pay": 1}
    assert len(models["math"].calls) == 2  # the second call's pay is answered, not run
    assert [(g, v) for g, v, _ in _reasons(out)] == [("retry_router", "refuse")]
    refusal = [m for m in out["messages"] if m.name == "retry_router"]
    assert refusal and refusal[-1].content.startswith("I can't do that: pay refused")
    assert out["messages"][-1].content == "Payment is not allowed."


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_the_supervisors_own_handoff_loop_is_bounded(mode: str) -> None:
    log: dict[str, int] = {}
    app, models = supervisor_app(
        [_again("transfer_to_research_expert", {})],  # hands over forever
        ["FAANG headcount in 2024: 1,977,586"],  # and gets the same answer every time
        ["unused"],
        log,
    )
    out = await _run(app, "FAANG headcount?", mode, "h")  # no GraphRecursionError
    assert len(models["research"].calls) == 2  # the second round brought nothing new
    assert len(models["supervisor"].calls) == 3
    assert _reasons(out) == [("loop_check", "stop", "repeated_handoff")]
    last = out["messages"][-1]
    assert last.name == "loop_check"
    assert "- research_expert: FAANG headcount in 2024: 1,977,586" in last.content
    assert "transferred" not in last.content.lower()
    assert _unanswered(out["messages"]) == []


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_a_healthy_supervisor_run_completes(mode: str) -> None:
    log: dict[str, int] = {}
    app, models = supervisor_app(
        [
            _again("transfer_to_research_expert", {}),
            _again("transfer_to_math_expert", {}),
            "The combined headcount is 1,977,586; plus 10 is 1,977,596.",
        ],
        [_again("web_search", {"query": "FAANG headcount 2024"}), "Headcount: 1,977,586"],
        [_again("add", {"a": 1977586, "b": 10}), "1,977,596"],
        log,
    )
    out = await _run(app, "FAANG headcount, plus 10?", mode, "ok")
    assert log == {"web_search": 1, "add": 1}
    assert [len(m.calls) for m in models.values()] == [3, 2, 2]
    assert out["messages"][-1].content.startswith("The combined headcount is 1,977,586")
    assert _reasons(out) == []
    assert out["usage"] == {"tool_calls": 2}
    assert [m.name for m in out["messages"] if isinstance(m, AIMessage) and not m.tool_calls] == [
        "research_expert",
        "math_expert",
        "supervisor",
    ]


@pytest.mark.parametrize("output_mode", ["last_message", "full_history"])
def test_the_worker_stop_reaches_the_supervisor_in_either_output_mode(output_mode: str) -> None:
    log: dict[str, int] = {}
    tools = _tools(log)
    research = ScriptedChatModel(script=[_again("web_search", {"query": "q"})], repeat_last=True)
    agent = guarded_react_agent(research, [tools["web_search"]], name="research_expert")
    supervisor = ScriptedChatModel(
        script=[_again("delegate_to_research_expert", {}), "done"], repeat_last=True
    )
    app = guarded_supervisor(
        [agent],
        model=supervisor,
        output_mode=output_mode,
        handoff_tool_prefix="delegate_to_",
    ).compile()
    out = app.invoke({"messages": [HumanMessage("q")]}, {"recursion_limit": 60})
    assert set(supervisor.bound_tools) == {"delegate_to_research_expert"}
    assert out["messages"][-1].content == "done"
    assert [v for _, v, _ in _reasons(out)] == ["reuse", "nudge", "stop"]
    assert log == {"web_search": 1} and len(research.calls) == 3
    searches = [m for m in out["messages"] if isinstance(m, ToolMessage) and m.name == "web_search"]
    assert len(searches) == (0 if output_mode == "last_message" else 3)  # the worker's history


def test_a_workers_escalation_interrupts_the_supervisor_and_resumes() -> None:
    from langgraph.types import Command

    from agent_guards import LoopPolicy

    log: dict[str, int] = {}
    tools = _tools(log)
    research = ScriptedChatModel(script=[_again("web_search", {"query": "q"})], repeat_last=True)
    agent = guarded_react_agent(
        research,
        [tools["web_search"]],
        loop=LoopPolicy(on_stop="escalate"),
        name="research_expert",
    )
    supervisor = ScriptedChatModel(
        script=[_again("transfer_to_research_expert", {}), "stopped it"], repeat_last=True
    )
    app = guarded_supervisor([agent], model=supervisor).compile(checkpointer=InMemorySaver())
    cfg = {"configurable": {"thread_id": "esc"}, "recursion_limit": 60}
    first = app.invoke({"messages": [HumanMessage("q")]}, cfg)
    assert first["__interrupt__"][0].value["guard"] == "loop_check"
    out = app.invoke(Command(resume="stop"), cfg)
    assert out["messages"][-1].content == "stopped it"
    assert [v for _, v, _ in _reasons(out)] == ["reuse", "nudge", "stop"]
    assert log == {"web_search": 1}


@pytest.mark.parametrize("shape", ["supervisor", "swarm"])
def test_decisions_come_back_from_sqlite_as_decisions(shape: str) -> None:
    import sqlite3

    from langgraph.checkpoint.sqlite import SqliteSaver

    from agent_guards import GuardDecision

    log: dict[str, int] = {}
    saver = SqliteSaver(sqlite3.connect(":memory:", check_same_thread=False))
    if shape == "supervisor":
        app, _ = supervisor_app(
            [_again("transfer_to_research_expert", {}), "done"],
            [_again("web_search", {"query": "q"})],
            ["unused"],
            log,
            saver,
        )
    else:
        app, _ = swarm_app([_again("add", {"a": 5, "b": 7})], ["unused"], log, saver)
    cfg = {"configurable": {"thread_id": shape}, "recursion_limit": 60}
    app.invoke({"messages": [HumanMessage("q")]}, cfg)
    assert saver.get_tuple(cfg) is not None  # the run was checkpointed in SQLite
    stored = app.get_state(cfg).values["guard_log"]
    assert [type(d) for d in stored] == [GuardDecision] * 3
    assert [d.verdict.value for d in stored] == ["reuse", "nudge", "stop"]


def test_the_guards_record_nothing_twice_across_turns() -> None:
    log: dict[str, int] = {}
    hand = _again("transfer_to_research_expert", {})
    app, models = supervisor_app(
        [hand, "done", hand, "done again"],
        [_again("web_search", {"query": "q"})],
        ["unused"],
        log,
    )
    cfg = {"configurable": {"thread_id": "turns"}, "recursion_limit": 60}
    app.invoke({"messages": [HumanMessage("first")]}, cfg)
    out = app.invoke({"messages": [HumanMessage("second")]}, cfg)
    assert out["messages"][-1].content == "done again"
    assert [v for _, v, _ in _reasons(out)] == ["reuse", "nudge", "stop"] * 2
    assert out["usage"] == {"tool_calls": log["web_search"]}
    assert len(models["research"].calls) <= 6


def test_the_unguarded_supervisor_doubles_what_the_guarded_one_records_once() -> None:
    """Why guarded_supervisor exists: create_supervisor over the same agents, with the
    guard channels in its state, appends every decision again and adds every count twice."""
    from agent_guards.prebuilt import GuardedReactState, react_agent_hooks

    log: dict[str, int] = {}
    tools = _tools(log)
    research = ScriptedChatModel(script=[_again("web_search", {"query": "q"})], repeat_last=True)
    hooks = react_agent_hooks([])
    workflow = create_supervisor(
        [guarded_react_agent(research, [tools["web_search"]], name="research_expert")],
        model=ScriptedChatModel(
            script=[_again("transfer_to_research_expert", {}), "done"], repeat_last=True
        ),
        pre_model_hook=hooks.pre_model_hook,
        post_model_hook=hooks.post_model_hook,
        state_schema=GuardedReactState,
    )
    out = workflow.compile().invoke({"messages": [HumanMessage("q")]})
    assert [v for _, v, _ in _reasons(out)] == ["reuse", "nudge", "stop"] * 2
    assert out["usage"] == {"tool_calls": 2}
    assert log == {"web_search": 1}


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"post_model_hook": lambda s: {}}, ValueError, "sets post_model_hook itself"),
        ({"state_schema": MessagesState}, ValueError, "GuardedReactState"),
        ({"state_schema": OwnChannels}, ValueError, "channel has no reducer"),
        ({"tools": "not a list"}, TypeError, "tools"),
    ],
)
def test_supervisor_mistakes_fail_when_it_is_built(
    kwargs: dict[str, Any], error: type[Exception], match: str
) -> None:
    worker = guarded_react_agent(ScriptedChatModel(script=["x"]), [], name="research_expert")
    with pytest.raises(error, match=match):
        guarded_supervisor([worker], model=ScriptedChatModel(script=[]), **kwargs)


def test_an_unnamed_worker_is_rejected() -> None:
    worker = guarded_react_agent(ScriptedChatModel(script=["x"]), [])
    with pytest.raises(ValueError, match="every agent needs a name"):
        guarded_supervisor([worker], model=ScriptedChatModel(script=[]))


def test_the_supervisors_own_tools_are_guarded() -> None:
    log: dict[str, int] = {}
    tools = _tools(log)
    worker = guarded_react_agent(ScriptedChatModel(script=["x"]), [], name="research_expert")
    model = ScriptedChatModel(script=[_again("web_search", {"query": "q"})], repeat_last=True)
    app = guarded_supervisor([worker], model=model, tools=[tools["web_search"]]).compile()
    out = app.invoke({"messages": [HumanMessage("q")]}, {"recursion_limit": 60})
    assert log == {"web_search": 1}
    assert len(model.calls) == 3
    assert [v for _, v, _ in _reasons(out)] == ["reuse", "nudge", "stop"]


# --- langgraph-swarm ------------------------------------------------------------------


def swarm_app(
    alice: list[Any], bob: list[Any], log: dict[str, int], checkpointer: Any = None
) -> tuple[Any, dict[str, ScriptedChatModel]]:
    """The quickstart: Alice (an addition expert who may also pay) and Bob (a pirate)."""
    tools = _tools(log)
    models = {
        "alice": ScriptedChatModel(script=alice, repeat_last=True),
        "bob": ScriptedChatModel(script=bob, repeat_last=True),
    }
    alice_agent = guarded_react_agent(
        models["alice"],
        [tools["add"], tools["pay"], create_handoff_tool(agent_name="Bob")],
        prompt="You are Alice, an addition expert.",
        name="Alice",
    )
    bob_agent = guarded_react_agent(
        models["bob"],
        [create_handoff_tool(agent_name="Alice", description="Transfer to Alice")],
        prompt="You are Bob, you speak like a pirate.",
        name="Bob",
    )
    workflow = guarded_swarm([alice_agent, bob_agent], default_active_agent="Alice")
    return workflow.compile(
        checkpointer=InMemorySaver() if checkpointer is None else checkpointer
    ), models


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_a_looping_swarm_agent_stops_and_the_swarm_sees_why(mode: str) -> None:
    log: dict[str, int] = {}
    app, models = swarm_app([_again("add", {"a": 5, "b": 7})], ["unused"], log)
    out = await _run(app, "what's 5 + 7?", mode, "sl")
    assert len(models["alice"].calls) <= 3
    assert log == {"add": 1}
    assert [v for _, v, _ in _reasons(out)] == ["reuse", "nudge", "stop"]
    assert out["usage"] == {"tool_calls": 1}
    assert out["messages"][-1].name == "loop_check"
    assert _unanswered(out["messages"]) == []


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_a_permission_denied_tool_runs_once_in_a_swarm(mode: str) -> None:
    log: dict[str, int] = {}
    app, _models = swarm_app([_again("pay", {"amount": 5})], ["unused"], log)
    out = await _run(app, "pay 5", mode, "sp")
    assert log == {"pay": 1}
    assert [(g, v) for g, v, _ in _reasons(out)] == [("retry_router", "refuse")]
    assert out["messages"][-1].content.startswith("I can't do that: pay refused")
    assert _unanswered(out["messages"]) == []


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_a_handoff_ping_pong_is_bounded(mode: str) -> None:
    log: dict[str, int] = {}
    app, models = swarm_app([_again("transfer_to_bob", {})], [_again("transfer_to_alice", {})], log)
    out = await _run(app, "i'd like to speak to Bob", mode, "pp")
    assert (len(models["alice"].calls), len(models["bob"].calls)) == (2, 1)
    assert _reasons(out) == [("loop_check", "stop", "repeated_handoff")]
    assert out["messages"][-1].name == "loop_check"
    assert _unanswered(out["messages"]) == []


def test_a_healthy_swarm_run_completes_and_the_next_turn_starts_with_bob() -> None:
    log: dict[str, int] = {}
    app, models = swarm_app(
        [_again("add", {"a": 5, "b": 7}), _again("transfer_to_bob", {})],
        ["Arr, 5 + 7 be 12!", "Ahoy again!"],
        log,
    )
    cfg = {"configurable": {"thread_id": "s"}, "recursion_limit": 60}
    out = app.invoke({"messages": [HumanMessage("what's 5 + 7? tell it like a pirate")]}, cfg)
    assert log == {"add": 1}
    assert out["messages"][-1].content == "Arr, 5 + 7 be 12!"
    assert out["active_agent"] == "Bob"
    assert _reasons(out) == []
    assert out["usage"] == {"tool_calls": 1}
    out = app.invoke({"messages": [HumanMessage("hi")]}, cfg)
    assert out["messages"][-1].content == "Ahoy again!"
    assert len(models["alice"].calls) == 2


def test_a_swarm_state_without_the_guard_channels_is_rejected() -> None:
    agent = guarded_react_agent(ScriptedChatModel(script=["x"]), [], name="Alice")
    with pytest.raises(ValueError, match="guard_log, usage"):
        guarded_swarm([agent], default_active_agent="Alice", state_schema=SwarmState)

    class State(SwarmState, GuardState):
        pass

    assert (
        "guard_log"
        in guarded_swarm([agent], default_active_agent="Alice", state_schema=State).channels
    )


def test_guarded_workers_keep_the_agents_names() -> None:
    agent = guarded_react_agent(ScriptedChatModel(script=["x"]), [], name="Alice")
    (worker,) = guarded_workers([agent])
    assert worker.name == "Alice"
    assert worker.invoke({"messages": [HumanMessage("hi")]})["messages"][-1].content == "x"
