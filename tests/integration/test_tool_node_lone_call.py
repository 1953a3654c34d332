"""The guarded tools node runs a turn of one call on its own thread, and every other turn in
ToolNode's pool, with what ToolNode gives: the same messages, commands, errors, injected
state and runtime, and interrupts, on the same graph with LangGraph's ``ToolNode`` in its
place. Real graphs, no mocks."""

from __future__ import annotations

import asyncio
import contextvars
import threading
from typing import Annotated, Any

import pytest
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.runnables import RunnableLambda
from langchain_core.tools import InjectedToolCallId, tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import InjectedState, ToolNode
from langgraph.prebuilt.tool_node import ToolRuntime
from langgraph.types import Command, Send, interrupt

from agent_guards.tool_guard.node import GuardedToolNode

SEEN: contextvars.ContextVar[str] = contextvars.ContextVar("seen", default="caller")
threads: list[int] = []


@tool
def where(i: int) -> str:
    """Report the thread the call ran on."""
    threads.append(threading.get_ident())
    return f"ran {i}"


@tool(response_format="content_and_artifact")
def with_artifact(i: int) -> tuple[str, dict[str, int]]:
    """Content and an artifact."""
    return f"record {i}", {"i": i}


@tool
def as_command(i: int, tool_call_id: Annotated[str, InjectedToolCallId]) -> Command[Any]:
    """Answer with a command that also writes ``note``."""
    answer = ToolMessage(f"noted {i}", tool_call_id=tool_call_id)
    return Command(update={"messages": [answer], "note": f"n{i}"})


@tool
def reads_state(i: int, state: Annotated[dict[str, Any], InjectedState]) -> str:
    """Read the graph's state."""
    return f"{len(state['messages'])} messages, note {state.get('note')!r}"


@tool
def reads_runtime(i: int, runtime: ToolRuntime) -> str:
    """Read the tool runtime LangGraph injects."""
    return f"{runtime.tool_call_id} of {len(runtime.tools)} tools, {runtime.store is None}"


@tool
def fails(i: int) -> str:
    """Fail."""
    raise ValueError(f"bad input {i}")


@tool
def asks(i: int) -> str:
    """Pause the run for a human's answer."""
    return f"answer: {interrupt(f'confirm {i}')}"


@tool
def starts_a_loop(i: int) -> str:
    """A sync tool that runs a coroutine of its own."""

    async def twice() -> int:
        return 2 * i

    return f"{asyncio.run(twice())}"


TOOLS = [where, with_artifact, as_command, reads_state, reads_runtime, fails, asks, starts_a_loop]


class State(MessagesState):
    note: str


def _graph(node_type: type[ToolNode], **kwargs: Any) -> Any:
    builder = StateGraph(State)
    builder.add_node("tools", node_type(TOOLS, **kwargs))
    builder.add_edge(START, "tools")
    return builder.compile(checkpointer=InMemorySaver())


def _turn(*calls: tuple[str, int]) -> dict[str, Any]:
    tool_calls = [{"name": n, "args": {"i": i}, "id": f"c{k}"} for k, (n, i) in enumerate(calls)]
    return {"messages": [AIMessage("", tool_calls=tool_calls)], "note": "-"}


def _outcome(graph: Any, turn: Any, config: Any) -> list[Any]:
    """The turn's outcome without the ids messages get at random: its messages, ``note``
    and interrupts, or the error it raised."""
    try:
        result = graph.invoke(turn, config)
    except Exception as err:  # the error is the outcome compared
        return [type(err).__name__, str(err).splitlines()[0]]
    return _same(result)


def _same(result: dict[str, Any]) -> list[Any]:
    return [
        (type(m).__name__, m.content, getattr(m, "tool_call_id", None),
         getattr(m, "artifact", None), getattr(m, "status", None))
        for m in result["messages"]
    ] + [result.get("note"), [i.value for i in result.get("__interrupt__", [])]]  # fmt: skip


TURNS = {
    "plain": [("where", 1)],
    "artifact": [("with_artifact", 2)],
    "command": [("as_command", 3)],
    "injected state": [("reads_state", 4)],
    "tool runtime": [("reads_runtime", 5)],
    "error": [("fails", 6)],
    "interrupt": [("asks", 7)],
    "two calls": [("where", 8), ("as_command", 9)],
}


@pytest.mark.parametrize("errors", [True, False], ids=["errors handled", "errors raised"])
@pytest.mark.parametrize("turn", TURNS)
def test_a_turn_ends_as_under_toolnode(turn: str, errors: bool) -> None:
    results = []
    for node_type in (ToolNode, GuardedToolNode):
        graph = _graph(node_type, handle_tool_errors=errors)
        results.append(_outcome(graph, _turn(*TURNS[turn]), {"configurable": {"thread_id": "t"}}))
    assert results[0] == results[1]


def _sent(node_type: type[ToolNode]) -> Any:
    """Each tool call of the model's turn sent to the tools node on its own (the Send API,
    as ``create_agent`` dispatches them): every turn of the node is a lone call."""
    builder = StateGraph(State)
    builder.add_node("tools", node_type(TOOLS))

    def each_call(state: State) -> list[Send]:
        calls = state["messages"][-1].tool_calls
        return [
            Send("tools", {"__type": "tool_call_with_context", "tool_call": c, "state": state})
            for c in calls
        ]

    builder.add_conditional_edges(START, each_call, ["tools"])
    return builder.compile(checkpointer=InMemorySaver())


@pytest.mark.parametrize("turn", ["two calls", "command", "injected state", "tool runtime"])
def test_calls_sent_one_by_one_end_as_under_toolnode(turn: str) -> None:
    results = []
    for node_type in (ToolNode, GuardedToolNode):
        config = {"configurable": {"thread_id": "sent"}}
        results.append(_outcome(_sent(node_type), _turn(*TURNS[turn]), config))
    assert results[0] == results[1]
    assert len(results[1][0]) >= 1 and "Error" not in str(results[1])


def test_an_interrupted_lone_call_resumes_as_under_toolnode() -> None:
    answers = []
    for node_type in (ToolNode, GuardedToolNode):
        graph, config = _graph(node_type), {"configurable": {"thread_id": "resume"}}
        graph.invoke(_turn(("asks", 1)), config)
        answers.append(_same(graph.invoke(Command(resume="yes"), config)))
    assert answers[0] == answers[1]
    assert answers[1][1][1] == "answer: yes"


def _marks(request: Any, execute: Any) -> Any:
    """A tool-call wrapper that sets a context variable the caller must not see."""
    SEEN.set(request.tool_call["id"])
    return execute(request)


def test_a_lone_call_runs_on_the_nodes_thread_and_two_in_the_pool() -> None:
    graph = _graph(GuardedToolNode, wrap_tool_call=_marks)
    seen_after: list[str] = []

    def then(state: Any, out: Any, config: Any) -> Any:  # what the node runs after the calls
        seen_after.append(SEEN.get())
        return out

    graph.builder.nodes["tools"].runnable.route_with(RunnableLambda(str), then, None)
    threads.clear()
    graph.invoke(_turn(("where", 1)), {"configurable": {"thread_id": "one"}})
    assert threads == [threading.get_ident()]  # Pregel runs a lone task on the caller's thread
    threads.clear()
    graph.invoke(_turn(("where", 1), ("where", 2)), {"configurable": {"thread_id": "two"}})
    assert threading.get_ident() not in threads and len(threads) == 2
    assert seen_after == ["caller", "caller"]  # each call ran in a copy of the node's context


def test_a_lone_call_under_a_running_event_loop_runs_in_the_pool() -> None:
    """``graph.invoke`` called where an event loop runs (a notebook cell): the lone call
    runs in the pool, as under ToolNode, so a sync tool may still start a loop of its own."""
    graph = _graph(GuardedToolNode)

    async def main() -> list[Any]:
        threads.clear()
        graph.invoke(_turn(("where", 1)), {"configurable": {"thread_id": "loop-where"}})
        out = graph.invoke(_turn(("starts_a_loop", 21)), {"configurable": {"thread_id": "loop"}})
        return [threading.get_ident() in threads, out["messages"][-1].content]

    assert asyncio.run(main()) == [False, "42"]
