"""loop_check wired into compiled StateGraphs with scripted models (no network)."""

from __future__ import annotations

import sqlite3
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import START, StateGraph
from langgraph.prebuilt import tools_condition
from langgraph.types import Command, interrupt

from agent_guards import ToolCallGuard
from agent_guards.core import GuardDecision, Verdict
from agent_guards.loop_check import (
    LoopPolicy,
    LoopState,
    add_loop_check,
    create_loop_check,
    create_loop_stop,
)
from agent_guards.testing import ScriptedChatModel, tool_call_message
from agent_guards.tool_guard import annotate_tool

LIMIT: RunnableConfig = {"recursion_limit": 60}


class Counter:
    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []


def make_tools(counter: Counter) -> list[Any]:
    @tool
    def search(q: str) -> str:
        """Search the policy base."""
        counter.calls.append({"tool": "search", "q": q})
        return f"The 2026 policy says reviews start above 500k for {q!r} (section 4.2)."

    @tool
    def fetch(doc: str) -> str:
        """Fetch a document."""
        counter.calls.append({"tool": "fetch", "doc": doc})
        return f"Full text of {doc}: reviews above 500k need a second signature."

    @tool
    def clock() -> str:
        """Current time."""
        counter.calls.append({"tool": "clock"})
        return f"It is 2026-01-01T10:00:{len(counter.calls):02d}Z now."

    # all three only read; the clock's answer changes (some tests exempt it from reuse)
    return [annotate_tool(t, read_only=True) for t in (search, fetch, clock)]


def build(
    model: ScriptedChatModel,
    tools: list[Any],
    *,
    policy: LoopPolicy | None = None,
    checkpointer: Any = None,
) -> Any:
    builder = StateGraph(LoopState)

    def call_model(state: LoopState) -> dict[str, Any]:
        return {"messages": [model.invoke(state["messages"])], "usage": {"model_calls": 1}}

    async def acall_model(state: LoopState) -> dict[str, Any]:
        return {"messages": [await model.ainvoke(state["messages"])], "usage": {"model_calls": 1}}

    from langchain_core.runnables import RunnableLambda

    builder.add_node("model", RunnableLambda(call_model, afunc=acall_model))
    builder.add_node("tools", ToolCallGuard(loop=policy or LoopPolicy()).tool_node(tools))
    builder.add_edge(START, "model")
    builder.add_conditional_edges("model", tools_condition)
    add_loop_check(builder, "tools", continue_to="model", policy=policy)
    return builder.compile(checkpointer=checkpointer)


def forever(name: str = "search", args: dict[str, Any] | None = None) -> ScriptedChatModel:
    return ScriptedChatModel(
        script=[tool_call_message(name, args or {"q": "review limit"})], repeat_last=True
    )


def assert_every_call_answered(messages: list[BaseMessage]) -> None:
    answered = [m.tool_call_id for m in messages if isinstance(m, ToolMessage)]
    for i, m in enumerate(messages):
        if isinstance(m, AIMessage) and m.tool_calls:
            following = [x for x in messages[i + 1 :] if isinstance(x, ToolMessage)]
            ids = [x.tool_call_id for x in following[: len(m.tool_calls)]]
            assert sorted(ids) == sorted(c["id"] for c in m.tool_calls)  # type: ignore[type-var]
    assert answered


def verdicts(out: dict[str, Any]) -> list[str]:
    return [d.verdict.value for d in out["guard_log"]]


def test_a_model_repeating_a_call_forever_is_stopped_within_3_repetitions() -> None:
    counter = Counter()
    model = forever()
    out = build(model, make_tools(counter)).invoke(
        {"messages": [HumanMessage("review limit?")]}, LIMIT
    )
    assert len(counter.calls) == 1, "the repeated call must never be executed again"
    assert len(model.calls) == 3
    assert verdicts(out) == ["reuse", "nudge", "reuse", "stop"]
    assert out["usage"] == {"tool_calls": 1, "model_calls": 3}
    final = out["messages"][-1]
    assert isinstance(final, AIMessage) and final.name == "loop_check"
    assert "I stopped because I kept repeating myself: search" in final.content
    assert "loop_check" not in final.content and "repeated_call" not in final.content
    assert "500k" in final.content, "the confirmed partial result is in the final message"
    assert_every_call_answered(out["messages"])
    nudges = [m for m in out["messages"] if isinstance(m, HumanMessage) and m.name == "loop_check"]
    assert len(nudges) == 1


def test_an_a_b_cycle_is_stopped_and_each_call_runs_once() -> None:
    counter = Counter()
    a, b = tool_call_message("search", {"q": "limit"}), tool_call_message("fetch", {"doc": "d1"})

    def alternate(messages: list[BaseMessage]) -> AIMessage:
        return a if sum(isinstance(m, AIMessage) for m in messages) % 2 == 0 else b

    model = ScriptedChatModel(script=[alternate], repeat_last=True)
    out = build(model, make_tools(counter)).invoke({"messages": [HumanMessage("q")]}, LIMIT)
    assert [c["tool"] for c in counter.calls] == ["search", "fetch"]
    assert out["guard_log"][-1].verdict is Verdict.STOP
    # stopped at round 3 of the cycle, as the raw history (every call executed) would be
    assert (out["guard_log"][-1].reason, len(model.calls)) == ("cycle", 6)
    assert_every_call_answered(out["messages"])


def test_a_stale_tool_is_executed_each_time_but_still_stopped() -> None:
    counter = Counter()
    policy = LoopPolicy(no_reuse_tools=frozenset({"clock"}))
    out = build(forever("clock", {}), make_tools(counter), policy=policy).invoke(
        {"messages": [HumanMessage("time?")]}, LIMIT
    )
    assert len(counter.calls) == 3
    assert out["guard_log"][-1].reason == "repeated_call"
    assert out["usage"]["tool_calls"] == 3


def test_an_exempt_poller_really_runs_each_time() -> None:
    """A poller is left out of loop counting, so it must not be answered from a cached result."""
    counter = Counter()
    policy = LoopPolicy(exempt_tools=frozenset({"clock"}))
    script = [tool_call_message("clock", {}) for _ in range(4)] + ["The job finished."]
    out = build(ScriptedChatModel(script=script), make_tools(counter), policy=policy).invoke(
        {"messages": [HumanMessage("wait for the job")]}, LIMIT
    )
    assert len(counter.calls) == 4
    assert not [d for d in out["guard_log"] if d.verdict in (Verdict.REUSE, Verdict.STOP)]
    assert out["messages"][-1].content == "The job finished."


def test_a_failing_call_repeated_is_stopped_as_repeated_failure() -> None:
    @tool
    def flaky(q: str) -> str:
        """Always down."""
        raise ConnectionError(f"connection reset by peer #{q}")

    out = build(forever("flaky", {"q": "x"}), [flaky]).invoke(
        {"messages": [HumanMessage("go")]}, LIMIT
    )
    assert out["guard_log"][-1].reason == "repeated_failure"
    assert out["guard_log"][-1].verdict is Verdict.STOP
    assert out["usage"]["tool_calls"] == 3


def test_duplicate_calls_in_one_turn_run_once() -> None:
    counter = Counter()
    both = AIMessage(
        content="",
        tool_calls=[
            {"name": "search", "args": {"q": "x"}, "id": "d1"},
            {"name": "search", "args": {"q": "x"}, "id": "d2"},
        ],
    )
    model = ScriptedChatModel(script=[both, "done"])
    out = build(model, make_tools(counter)).invoke({"messages": [HumanMessage("q")]}, LIMIT)
    assert len(counter.calls) == 1
    answers = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    assert [m.tool_call_id for m in answers] == ["d1", "d2"]
    assert answers[1].response_metadata["agent_guards"]["duplicate"] is True
    # the duplicate is answered in the turn: one action, so no repetition to nudge
    assert [(d.verdict.value, d.reason) for d in out["guard_log"]] == [
        ("reuse", "duplicate_call"),
    ]
    assert out["messages"][-1].content == "done"


def shapes(tools: list[Any]) -> dict[str, Callable[[ScriptedChatModel], Any]]:
    """The three ways to guard an agent, each building one from a scripted model."""
    from langchain.agents import create_agent

    from agent_guards.middleware import LoopGuardMiddleware
    from agent_guards.prebuilt import guarded_react_agent

    return {
        "graph": lambda model: build(model, tools),
        "react": lambda model: guarded_react_agent(model, tools),
        "create_agent": lambda model: create_agent(
            model, tools=tools, middleware=[LoopGuardMiddleware()]
        ),
    }


@pytest.mark.parametrize("shape", ["graph", "react", "create_agent"])
def test_an_undeclared_tool_answering_anew_each_time_is_stopped_in_every_shape(
    shape: str,
) -> None:
    """A tool that declares nothing may write; a new ticket number each time is the write
    done again, not the world moving. Before, each shape created tickets until LangGraph's
    recursion limit (10 to 15 of them, no decision logged)."""
    made: list[str] = []

    @tool
    def create_ticket(title: str) -> str:
        """Create a support ticket."""
        made.append(title)
        return f"Created ticket #{1000 + len(made)}"

    ask = tool_call_message  # a fresh call id each time, as a real model gives
    model = ScriptedChatModel(
        script=[lambda _: ask("create_ticket", {"title": "printer"})], repeat_last=True
    )
    out = shapes([create_ticket])[shape](model).invoke(
        {"messages": [HumanMessage("open a ticket for the printer")]}, LIMIT
    )
    # after the tools node (graph), the 5th run is seen once it ran; on the model's reply
    # (the hooks and middleware), the 5th ask is stopped before it runs
    assert len(made) == {"graph": 5, "react": 4, "create_agent": 4}[shape]
    assert [(d.verdict.value, d.reason) for d in out["guard_log"]][-1] == (
        "stop",
        "repeated_effect",
    )
    assert_every_call_answered(out["messages"])


@pytest.mark.parametrize("shape", ["graph", "react", "create_agent"])
def test_the_same_read_asked_three_times_in_one_turn_runs_once_and_goes_on(shape: str) -> None:
    counter = Counter()
    triple = AIMessage(
        content="",
        tool_calls=[{"name": "search", "args": {"q": "x"}, "id": f"d{i}"} for i in range(3)],
    )
    model = ScriptedChatModel(script=[triple, "done"])
    out = shapes(make_tools(counter))[shape](model).invoke({"messages": [HumanMessage("q")]})
    assert len(counter.calls) == 1
    assert len(model.calls) == 2
    assert out["messages"][-1].content == "done"
    assert not [d for d in out.get("guard_log", ()) if d.verdict in (Verdict.NUDGE, Verdict.STOP)]


@pytest.mark.parametrize("shape", ["graph", "react", "create_agent"])
def test_a_reused_read_between_new_results_is_progress_in_every_shape(shape: str) -> None:
    # each turn re-reads one document (answered from before) and searches something new
    counter = Counter()
    turns: list[Any] = [
        AIMessage(
            content="",
            tool_calls=[
                {"name": "fetch", "args": {"doc": "d1"}, "id": f"f{k}"},
                {"name": "search", "args": {"q": f"topic {k}"}, "id": f"s{k}"},
            ],
        )
        for k in range(5)
    ]
    model = ScriptedChatModel(script=[*turns, "done"])
    out = shapes(make_tools(counter))[shape](model).invoke({"messages": [HumanMessage("q")]})
    assert out["messages"][-1].content == "done"
    assert [c["tool"] for c in counter.calls].count("fetch") == 1
    assert not [d for d in out.get("guard_log", ()) if d.verdict is Verdict.STOP]


async def test_sync_and_async_paths_agree() -> None:
    sync_counter, async_counter = Counter(), Counter()
    out = build(forever(), make_tools(sync_counter)).invoke(
        {"messages": [HumanMessage("q")]}, LIMIT
    )
    aout = await build(forever(), make_tools(async_counter)).ainvoke(
        {"messages": [HumanMessage("q")]}, LIMIT
    )
    assert verdicts(out) == verdicts(aout)
    assert [d.reason for d in out["guard_log"]] == [d.reason for d in aout["guard_log"]]
    assert out["messages"][-1].content == aout["messages"][-1].content
    assert out["usage"] == aout["usage"]
    assert len(sync_counter.calls) == len(async_counter.calls) == 1


def test_state_round_trips_through_sqlite_in_strict_mode(tmp_path: Path) -> None:
    saver = SqliteSaver(sqlite3.connect(str(tmp_path / "cp.sqlite"), check_same_thread=False))
    graph = build(forever(), make_tools(Counter()), checkpointer=saver)
    cfg: RunnableConfig = {"configurable": {"thread_id": "t1"}, "recursion_limit": 60}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = graph.invoke({"messages": [HumanMessage("q")]}, cfg)
        state = graph.get_state(cfg).values
    assert not [
        w
        for w in caught
        if "serializ" in str(w.message).lower() or "msgpack" in str(w.message).lower()
    ]
    assert state["guard_log"] == out["guard_log"]
    assert all(
        isinstance(d, GuardDecision) and isinstance(d.verdict, Verdict) for d in state["guard_log"]
    )
    reused = [
        m
        for m in state["messages"]
        if isinstance(m, ToolMessage)
        and "reused_from" in m.response_metadata.get("agent_guards", {})
    ]
    assert len(reused) == 2
    assert state["messages"] == out["messages"]


def test_replay_from_a_checkpoint_decides_the_same() -> None:
    saver = InMemorySaver()
    graph = build(forever(), make_tools(Counter()), checkpointer=saver)
    cfg: RunnableConfig = {
        "configurable": {"thread_id": "replay", "agent_guards_now": "2026-01-01T00:00:00Z"},
        "recursion_limit": 60,
    }
    out = graph.invoke({"messages": [HumanMessage("q")]}, cfg)
    history = list(graph.get_state_history(cfg))
    past = next(s for s in history if s.next == ("model",) and len(s.values["messages"]) == 3)
    replayed = graph.invoke(None, {**past.config, "recursion_limit": 60})
    assert replayed["guard_log"][-3:] == out["guard_log"][-3:]
    assert replayed["messages"][-1].content == out["messages"][-1].content


def test_escalation_interrupts_and_a_human_can_stop() -> None:
    policy = LoopPolicy(on_stop="escalate")
    graph = build(forever(), make_tools(Counter()), policy=policy, checkpointer=InMemorySaver())
    cfg: RunnableConfig = {"configurable": {"thread_id": "esc"}, "recursion_limit": 60}
    first = graph.invoke({"messages": [HumanMessage("q")]}, cfg)
    (pending,) = first["__interrupt__"]
    assert pending.value["guard"] == "loop_check"
    assert pending.value["decision"]["verdict"] == "escalate"
    out = graph.invoke(Command(resume="stop"), cfg)
    assert out["messages"][-1].name == "loop_check"
    # the human's stop is the run's last decision (the stop node only writes the ending)
    tail = [(d.verdict.value, d.reason) for d in out["guard_log"]][-2:]
    assert tail == [("escalate", "repeated_call"), ("stop", "human_stop")]
    assert_every_call_answered(out["messages"])


def test_escalation_guidance_goes_to_the_model() -> None:
    def until_told(messages: list[BaseMessage]) -> AIMessage | str:
        if isinstance(messages[-1], HumanMessage) and "answer now" in str(messages[-1].content):
            return "Reviews start above 500k."
        return tool_call_message("search", {"q": "review limit"})

    counter = Counter()
    graph = build(
        ScriptedChatModel(script=[until_told], repeat_last=True),
        make_tools(counter),
        policy=LoopPolicy(on_stop="escalate"),
        checkpointer=InMemorySaver(),
    )
    cfg: RunnableConfig = {"configurable": {"thread_id": "g"}, "recursion_limit": 60}
    graph.invoke({"messages": [HumanMessage("q")]}, cfg)
    out = graph.invoke(Command(resume={"action": "continue", "message": "answer now"}), cfg)
    assert out["messages"][-1].content == "Reviews start above 500k."
    assert any(d.reason == "human_continue" for d in out["guard_log"])
    assert len(counter.calls) == 1


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_an_interrupt_inside_a_tool_passes_through_the_guard(mode: str) -> None:
    @tool
    def approve(amount: int) -> str:
        """Ask a human."""
        answer = interrupt({"amount": amount})
        return f"approved: {answer}"

    model = ScriptedChatModel(script=[tool_call_message("approve", {"amount": 5}), "done"])
    graph = build(model, [approve], checkpointer=InMemorySaver())
    cfg: RunnableConfig = {"configurable": {"thread_id": mode}, "recursion_limit": 60}
    first = (
        graph.invoke({"messages": [HumanMessage("pay")]}, cfg)
        if mode == "sync"
        else await graph.ainvoke({"messages": [HumanMessage("pay")]}, cfg)
    )
    assert first["__interrupt__"][0].value == {"amount": 5}
    assert not any(isinstance(m, ToolMessage) for m in first["messages"])
    resume = Command(resume="yes")
    out = graph.invoke(resume, cfg) if mode == "sync" else await graph.ainvoke(resume, cfg)
    answers = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    assert [m.content for m in answers] == ["approved: yes"] and answers[0].status == "success"


def test_the_edge_routes_bad_input_to_continue() -> None:
    edge = create_loop_check()
    assert edge.invoke({"messages": [42]}) == "continue"
    assert edge.invoke({"messages": []}) == "continue"


def test_the_stop_node_answers_pending_calls() -> None:
    history = [HumanMessage("q")]
    for i in range(2):
        history += [
            tool_call_message("search", {"q": "x"}, id=f"s{i}"),
            ToolMessage("The limit is 500k for purchases.", tool_call_id=f"s{i}", name="search"),
        ]
    history.append(
        AIMessage(
            content="",
            tool_calls=[
                {"name": "search", "args": {"q": "x"}, "id": "s2"},
                {"name": "fetch", "args": {"doc": "d"}, "id": "s3"},
            ],
        )
    )
    update = create_loop_stop().invoke({"messages": history})
    pending = [m for m in update["messages"] if isinstance(m, ToolMessage)]
    assert [m.tool_call_id for m in pending] == ["s2", "s3"]
    assert all(m.status == "error" and "Not executed" in m.content for m in pending)
    assert update["messages"][-1].name == "loop_check"
    assert "500k" in update["messages"][-1].content
    assert update["guard_log"][0].verdict is Verdict.STOP


@pytest.mark.parametrize(
    ("factory", "error"),
    [
        (lambda b: add_loop_check(b, "", continue_to="model"), "source must be a node name"),
        (lambda b: add_loop_check(b, "tools", continue_to=""), "continue_to must be a node name"),
        (
            lambda b: add_loop_check(b, "tools", continue_to="model", policy="x"),
            "policy must be a LoopPolicy",
        ),
    ],
)
def test_wiring_rejects_bad_options(
    factory: Callable[[StateGraph[Any, Any, Any, Any]], Any], error: str
) -> None:
    with pytest.raises((ValueError, TypeError), match=error):
        factory(StateGraph(LoopState))


def test_a_new_user_turn_gets_fresh_results_in_interactive_mode() -> None:
    counter = Counter()
    model = ScriptedChatModel(
        script=[
            tool_call_message("search", {"q": "x"}),
            "first",
            tool_call_message("search", {"q": "x"}),
            "second",
        ]
    )
    graph = build(model, make_tools(counter), checkpointer=InMemorySaver())
    config: RunnableConfig = {"configurable": {"thread_id": "turns"}, "recursion_limit": 60}
    graph.invoke({"messages": [HumanMessage("q1")]}, config)
    out = graph.invoke({"messages": [HumanMessage("q2: has it changed?")]}, config)
    assert len(counter.calls) == 2, "a new user turn is not a repetition"
    assert out["guard_log"] == []


def test_reuse_can_be_switched_off() -> None:
    counter = Counter()
    out = build(forever(), make_tools(counter), policy=LoopPolicy(reuse_results=False)).invoke(
        {"messages": [HumanMessage("q")]}, LIMIT
    )
    assert len(counter.calls) == 3
    assert [d.verdict.value for d in out["guard_log"]] == ["nudge", "stop"]


@pytest.mark.parametrize(
    "policy",
    [LoopPolicy(reuse_results=False), LoopPolicy(no_reuse_tools=frozenset({"transfer"}))],
    ids=["reuse off", "no reuse for the tool"],
)
@pytest.mark.parametrize("shape", ["two turns", "one turn"])
def test_reuse_switched_off_still_refuses_a_repeated_write(policy: LoopPolicy, shape: str) -> None:
    """Switching reuse off means results are never reused; an identical write asked again
    is still not run twice (that is not a reuse but the change done again)."""
    runs: list[int] = []

    @tool
    def transfer(account: str, amount: int) -> str:
        """Move money out of an account."""
        runs.append(amount)
        return f"transferred {amount} from {account}"

    pay = [tool_call_message("transfer", {"account": "A", "amount": 30}) for _ in range(2)]
    turns = [*pay, "done"] if shape == "two turns" else [_one_turn(pay), "done"]
    model = ScriptedChatModel(script=turns)
    out = build(model, [annotate_tool(transfer)], policy=policy).invoke(
        {"messages": [HumanMessage("pay 30 from A")]}, LIMIT
    )
    assert runs == [30]
    refused = "repeated_write" if shape == "two turns" else "duplicate_write"
    assert ("refuse", refused) in [(d.verdict.value, d.reason) for d in out["guard_log"]]


def _one_turn(messages: list[AIMessage]) -> AIMessage:
    """The calls of several assistant messages as one turn (ids kept)."""
    return AIMessage("", tool_calls=[c for m in messages for c in m.tool_calls])


def test_the_escalation_question_is_worded_from_the_policys_texts() -> None:
    from agent_guards.core.texts import TEXTS_ZH
    from agent_guards.loop_check import LoopState, create_loop_escalate

    node = create_loop_escalate(
        continue_to="ask", policy=LoopPolicy(on_stop="escalate", texts=TEXTS_ZH)
    )
    app = (
        StateGraph(LoopState)
        .add_node("ask", node)
        .set_entry_point("ask")
        .compile(checkpointer=InMemorySaver())
    )
    calls = [tool_call_message("search", {"q": "rates"}) for _ in range(3)]
    out = app.invoke({"messages": calls}, {"configurable": {"thread_id": "zh"}})
    question = out["__interrupt__"][0].value["question"]
    assert question == TEXTS_ZH.render("stuck_question", detail="x") and "search" not in question


def test_add_loop_check_alone_retries_a_transient_failure_in_the_tool_call() -> None:
    """No retry edge serves a ``retry`` route here, so before, a 429 reached the model as
    final. add_loop_check has the guarded node retry in the call."""
    from agent_guards.retry_router import Backoff, RetryRouterPolicy, TransientToolError

    calls: list[str] = []

    @tool
    def quote(symbol: str) -> str:
        """Quote a symbol."""
        calls.append(symbol)
        if len(calls) <= 2:
            raise TransientToolError("503 Service Unavailable")
        return f"{symbol} is at 42"

    waited: list[float] = []
    policy = RetryRouterPolicy(backoff=Backoff(max_attempts=3, base_delay=0.5, jitter="none"))
    node = ToolCallGuard(retry=policy, sleep=waited.append).tool_node(
        [annotate_tool(quote, read_only=True)]
    )
    model = ScriptedChatModel(script=[tool_call_message("quote", {"symbol": "ACME"}), "42."])
    builder = StateGraph(LoopState)
    builder.add_node("model", lambda s: {"messages": [model.invoke(s["messages"])]})
    builder.add_node("tools", node)
    builder.add_edge(START, "model")
    builder.add_conditional_edges("model", tools_condition)
    add_loop_check(builder, "tools", continue_to="model")
    out = builder.compile().invoke({"messages": [HumanMessage("ACME?")]})
    assert calls == ["ACME"] * 3 and waited == [0.5, 1.0]
    assert [m.content for m in out["messages"] if isinstance(m, ToolMessage)] == ["ACME is at 42"]
    assert [d.verdict.value for d in out["guard_log"]] == ["retry", "retry"]
    assert len(model.calls) == 2 and out["messages"][-1].content == "42."
    assert node._wrap_tool_call.retry_in_place is True
