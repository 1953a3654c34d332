"""``route_in_node=True``: add_retry_router and add_loop_check after ToolCallGuard's tools node
route from inside the node (``Command(goto=...)``) instead of a conditional edge. The same
nodes run in the same order, with the same messages, decisions, usage and waits as with the
edge, sync and async, on every route; what differs is ``update_state(..., as_node="tools")``,
which needs a ``Command`` to route."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from langchain_core.messages import BaseMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig, RunnableLambda
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph.types import Command

from agent_guards import ToolCallGuard
from agent_guards.loop_check import LoopPolicy, add_loop_check
from agent_guards.retry_router import (
    AmbiguousInput,
    Backoff,
    PermissionDenied,
    PreconditionFailed,
    RetryRouterPolicy,
    RetryState,
    TransientToolError,
    add_retry_router,
)
from agent_guards.testing import ScriptedChatModel, tool_call_message
from agent_guards.tool_guard.node import GuardedToolNode
from tests.integration.test_failures_graph import HTTPStatusError, Scripted

POLICY = RetryRouterPolicy(backoff=Backoff(max_attempts=3, base_delay=1))
CALL = tool_call_message("quote", {"symbol": "X"})

# name: (the tool's faults by call number, the model's script after the user's message)
SCENARIOS: dict[str, tuple[dict[int, BaseException], list[Any]]] = {
    "healthy": ({}, [CALL, "X is 42"]),
    "retry then succeed": (
        {1: TransientToolError("429", retry_after=2), 2: HTTPStatusError(503)},
        [CALL, "X is 42"],
    ),
    "retries run out: fallback": ({n: HTTPStatusError(503) for n in range(1, 9)}, [CALL]),
    "refuse": ({1: PermissionDenied("no access to X")}, [CALL]),
    "replan": ({1: PreconditionFailed("X was delisted")}, [CALL, "X is gone"]),
    "clarify": ({1: AmbiguousInput(question="Which X?", options=["X.NY", "X.L"])}, [CALL]),
    "repeated call: nudge, then stop": ({}, [CALL, CALL, CALL, CALL, CALL, CALL, "done"]),
}


def _graph(routed: bool, faults: dict[int, Any], script: list[Any], waits: list[float], *,
           helper: str = "retry_router", loop: LoopPolicy | None = None,
           node: Callable[[ToolCallGuard, list[Any]], Any] | None = None) -> Any:  # fmt: skip
    model = ScriptedChatModel(script=list(script))
    loop = loop or LoopPolicy()
    guard = ToolCallGuard(retry=POLICY, loop=loop, sleep=waits.append)
    builder = StateGraph(RetryState)

    def call(state: RetryState) -> dict[str, Any]:
        return {"messages": [model.invoke(state["messages"])]}

    async def acall(state: RetryState) -> dict[str, Any]:
        return {"messages": [await model.ainvoke(state["messages"])]}

    builder.add_node("model", RunnableLambda(call, afunc=acall))
    tools = [Scripted(faults).tool()]
    builder.add_node("tools", node(guard, tools) if node else guard.tool_node(tools))
    builder.add_edge(START, "model")
    builder.add_conditional_edges("model", tools_condition)
    if helper == "retry_router":
        add_retry_router(builder, "tools", model="model", tools="tools", policy=POLICY,
                         loop_policy=loop, route_in_node=routed)  # fmt: skip
    else:
        add_loop_check(builder, "tools", continue_to="model", policy=loop, route_in_node=routed)
    return builder.compile(checkpointer=InMemorySaver())


def _plain(guard: ToolCallGuard, tools: list[Any]) -> Any:  # a tools node of the user's
    return ToolNode(tools, wrap_tool_call=guard, awrap_tool_call=guard.awrap,
                    handle_tool_errors=False)  # fmt: skip


def _message(m: BaseMessage) -> tuple[Any, ...]:
    """A message without its id (an id-less message gets a random one from add_messages)."""
    return (m.type, m.name, m.content, getattr(m, "tool_call_id", None),
            getattr(m, "status", None))  # fmt: skip


def _run(routed: bool, name: str, *, sync: bool, helper: str = "retry_router",
         loop: LoopPolicy | None = None) -> dict[str, Any]:  # fmt: skip
    faults, script = SCENARIOS[name]
    waits: list[float] = []
    app = _graph(routed, faults, script, waits, helper=helper, loop=loop)
    config: RunnableConfig = {"configurable": {"thread_id": "t", "agent_guards_now": 0.0},
                              "recursion_limit": 60}  # fmt: skip
    inputs = {"messages": [HumanMessage("quote X")]}
    if sync:
        steps = [next(iter(u)) for u in app.stream(inputs, config, stream_mode="updates")]
    else:

        async def go() -> list[str]:
            return [next(iter(u)) async for u in app.astream(inputs, config, stream_mode="updates")]

        steps = asyncio.run(go())
    out = app.get_state(config).values
    return {
        "steps": steps,
        "messages": [_message(m) for m in out["messages"]],
        "log": [(d.guard, d.verdict.value, d.reason, d.detail) for d in out["guard_log"]],
        "usage": out.get("usage"),
        "waits": waits,
    }


@pytest.mark.parametrize("sync", [True, False], ids=["invoke", "ainvoke"])
@pytest.mark.parametrize("name", list(SCENARIOS))
def test_the_route_from_inside_the_node_is_the_edge_s_route(name: str, sync: bool) -> None:
    routed, edged = _run(True, name, sync=sync), _run(False, name, sync=sync)
    assert routed == edged
    assert routed["steps"][:2] == ["model", "tools"]


@pytest.mark.parametrize("sync", [True, False], ids=["invoke", "ainvoke"])
@pytest.mark.parametrize("on_loop", ["nudge", "truncate"])
@pytest.mark.parametrize(
    "name", ["healthy", "retry then succeed", "repeated call: nudge, then stop"]
)
def test_add_loop_check_routes_from_inside_the_node_as_its_edge_does(
    name: str, on_loop: str, sync: bool
) -> None:
    """With ``on_loop="truncate"`` the route reads ``guard_log`` too (a loop back after the
    cut is stopped): the node hands the route every channel the edge would read."""
    loop = LoopPolicy(on_loop=on_loop)  # type: ignore[arg-type]
    routed = _run(True, name, sync=sync, helper="loop_check", loop=loop)
    assert routed == _run(False, name, sync=sync, helper="loop_check", loop=loop)
    if name.startswith("repeated"):
        assert {"loop_nudge", "loop_stop"} <= set(routed["steps"])


def test_each_scenario_takes_the_route_it_is_named_after() -> None:
    """The equivalence above is only worth what the scenarios cover: every route is taken."""
    taken = {name: set(_run(True, name, sync=True)["steps"]) for name in SCENARIOS}
    assert "retry_finish" in taken["refuse"] and "retry_finish" in taken["clarify"]
    assert "retry_finish" in taken["retries run out: fallback"]
    assert {"loop_nudge", "loop_stop"} <= taken["repeated call: nudge, then stop"]
    assert taken["healthy"] == {"model", "tools"} == taken["replan"]
    assert _run(True, "retry then succeed", sync=True)["waits"] == [
        2.0,
        pytest.approx(1.0, abs=1),
    ]


def test_the_tools_node_draws_its_routes() -> None:
    faults, script = SCENARIOS["healthy"]
    routed, edged = (_graph(r, faults, script, []) for r in (True, False))
    assert isinstance(routed.builder.nodes["tools"].runnable, GuardedToolNode)
    assert "tools" not in routed.builder.branches and "tools" in edged.builder.branches

    def targets(app: Any) -> set[str]:
        return {e.target for e in app.get_graph().edges if e.source == "tools"}

    assert targets(routed) == targets(edged) == {
        "tools", "model", "retry_finish", "loop_nudge", "loop_stop"
    }  # fmt: skip


@pytest.mark.parametrize("helper", ["retry_router", "loop_check"])
def test_route_in_node_needs_the_guard_s_tools_node(helper: str) -> None:
    with pytest.raises(ValueError, match=r"route_in_node=True\): 'tools' is not the tools node"):
        _graph(True, {}, [], [], helper=helper, node=_plain)
    assert "tools" in _graph(False, {}, [], [], helper=helper, node=_plain).builder.branches


def test_a_human_edit_as_the_tools_node_routes_with_the_edge_and_needs_a_command_without() -> None:
    """The HITL pattern: pause before the tools, write the tool's answer by hand as the tools
    node, resume. The edge routes that write; a node that routes itself needs the goto."""
    faults, script = SCENARIOS["healthy"]
    for routed in (False, True):
        app = _graph(routed, faults, script, [])
        cfg: RunnableConfig = {"configurable": {"thread_id": "t"}}
        app.invoke({"messages": [HumanMessage("quote X")]}, cfg, interrupt_before=["tools"])
        call = app.get_state(cfg).values["messages"][-1].tool_calls[0]
        answer = {"messages": [ToolMessage("41 (typed by a person)", tool_call_id=call["id"])]}
        app.update_state(cfg, answer, as_node="tools")
        assert app.get_state(cfg).next == (() if routed else ("model",))
        if routed:
            app.update_state(cfg, Command(goto="model", update=answer), as_node="tools")
            assert app.get_state(cfg).next == ("model",)
        assert app.invoke(None, cfg)["messages"][-1].content == "X is 42"


def test_a_tools_node_routes_for_one_graph_only() -> None:
    node = ToolCallGuard().tool_node([Scripted().tool()])
    for n in range(2):
        builder = StateGraph(RetryState)
        builder.add_node("model", lambda s: {})
        builder.add_node("tools", node)
        if n == 0:
            add_retry_router(builder, "tools", model="model", tools="tools", route_in_node=True)
            continue
        with pytest.raises(ValueError, match="one tools node per graph"):
            add_retry_router(builder, "tools", model="model", tools="tools", route_in_node=True)
