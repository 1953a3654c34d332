"""Wiring mistakes a user can make fail when the graph is built, with the fix in the message."""

from __future__ import annotations

import asyncio
from copy import deepcopy
from typing import Any

import pytest
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode

from agent_guards import (
    LoopPolicy,
    LoopState,
    RetryState,
    ToolCallGuard,
    add_loop_check,
    add_retry_router,
    create_loop_check,
    create_retry_router,
)
from agent_guards.evidence_resolve import create_evidence_route
from agent_guards.loop_check import create_reply_check
from agent_guards.retry_router import Backoff, RetryRouterPolicy
from agent_guards.testing import tool_call_message


@tool
def search(q: str) -> str:
    """Search."""
    return q


def builder(state: Any, tools: Any = None) -> Any:
    b = StateGraph(state)
    b.add_node("model", lambda s: {})
    b.add_node("tools", tools if tools is not None else ToolCallGuard().tool_node([search]))
    return b


@pytest.mark.parametrize(
    ("add", "mixin"),
    [
        (lambda b: add_loop_check(b, "tools", continue_to="model"), "LoopState"),
        (lambda b: add_retry_router(b, "tools", model="model", tools="tools"), "RetryState"),
    ],
)
def test_a_plain_messages_state_names_the_mixin(add: Any, mixin: str) -> None:
    with pytest.raises(ValueError, match=rf"no 'guard_log' channel; add the {mixin} mixin"):
        add(builder(MessagesState))


@pytest.mark.parametrize(
    "add",
    [
        lambda b: add_loop_check(b, "tools", continue_to="model"),
        lambda b: add_retry_router(b, "tools", model="model", tools="tools"),
    ],
)
def test_an_edge_already_leaving_the_tools_node_is_refused(add: Any) -> None:
    b = builder(RetryState)
    b.add_edge("tools", "model")  # the tutorial's edge, left in place
    with pytest.raises(ValueError, match=r"remove builder.add_edge\('tools', 'model'\)"):
        add(b)


@pytest.mark.parametrize(
    "add",
    [
        lambda b: add_loop_check(b, "tools", continue_to="model"),
        lambda b: add_retry_router(b, "tools", model="model", tools="tools"),
    ],
)
def test_a_plain_tool_node_is_refused(add: Any) -> None:
    # loop_check's edge alone would let a repeated write run until the stop, uncounted
    b = builder(RetryState, ToolNode([search]))
    with pytest.raises(
        ValueError, match=r"ToolNode without ToolCallGuard; build it with ToolCallGuard\(...\)"
    ):
        add(b)


@pytest.mark.parametrize(
    ("targets", "match"),
    [
        ({"model": "tools", "tools": "model"}, r"are swapped; pass model='model', tools='tools'"),
        ({"model": "model", "tools": "model"}, r"tools='model' is not a ToolNode.*ToolCallGuard"),
        ({"model": "tools", "tools": "tools"}, r"model='tools' is a ToolNode; model= names"),
    ],
)
def test_retry_router_targets_of_the_wrong_kind_are_refused(
    targets: dict[str, str], match: str
) -> None:
    # a retry sent anywhere but the guarded tool node is recorded and never served
    with pytest.raises(ValueError, match=match):
        add_retry_router(builder(RetryState), "tools", **targets)


def test_the_documented_wiring_still_builds() -> None:
    for state in (LoopState, RetryState):
        b = builder(state)
        b.add_edge("__start__", "model")
        b.add_edge("model", "tools")
        if state is LoopState:
            add_loop_check(b, "tools", continue_to="model")
        else:
            add_retry_router(b, "tools", model="model", tools="tools")
        assert "tools" in b.compile().get_graph().nodes


class OwnUsage(MessagesState):
    usage: dict[str, Any]
    guard_log: list[Any]


def test_a_users_own_usage_channel_is_reported_not_silently_replaced() -> None:
    with pytest.raises(ValueError, match=r"'guard_log', 'usage' channel has no reducer"):
        add_loop_check(builder(OwnUsage), "tools", continue_to="model")


@pytest.mark.parametrize(
    "add",
    [
        lambda b: add_loop_check(b, "tools", continue_to="model"),
        lambda b: add_retry_router(b, "tools", model="model", tools="tools"),
    ],
)
def test_an_edge_out_of_the_tools_node_added_after_the_helper_fails_at_compile(add: Any) -> None:
    """The tutorial's edge pasted below the helper: nothing the helper checked could see
    it, and the graph looped past every stop until the recursion limit."""
    b = builder(RetryState)
    add(b)
    b.add_edge("tools", "model")
    with pytest.raises(ValueError, match=r"remove builder.add_edge\('tools', 'model'\)"):
        b.compile()
    b = builder(RetryState)
    add(b)
    b.add_conditional_edges("tools", lambda s: "model", ["model"])
    with pytest.raises(ValueError, match=r"remove builder.add_conditional_edges\('tools', "):
        b.compile()


def test_a_copy_of_a_guarded_builder_checks_and_compiles_itself() -> None:
    b = builder(RetryState)
    add_retry_router(b, "tools", model="model", tools="tools")
    b.add_edge(START, "model")
    copy = deepcopy(b)
    b.add_edge("tools", "model")  # the original only
    assert "tools" in copy.compile().get_graph().nodes
    with pytest.raises(ValueError, match="already has an edge"):
        b.compile()


_EDGES = [
    pytest.param(create_loop_check, "add_loop_check", id="loop_check"),
    pytest.param(create_retry_router, "add_retry_router", id="retry_router"),
    pytest.param(create_reply_check, "add_reply_check", id="reply_check"),
    pytest.param(create_evidence_route, "add_evidence_resolve", id="evidence_route"),
]


def _edge_as_node(edge: Any) -> Any:
    b = StateGraph(LoopState)
    b.add_node("model", lambda s: {})
    b.add_node("check", edge)  # the mistake: an edge added as a node
    b.add_edge(START, "model")
    b.add_edge("model", "check")
    b.add_edge("check", END)
    return b.compile()


@pytest.mark.parametrize(("make", "helper"), _EDGES)
def test_an_edge_added_as_a_node_says_how_to_wire_it(make: Any, helper: str) -> None:
    # Nothing at add_node time sees the edge, so its first run says it (LangGraph alone
    # reports only that a node returned a string), sync and async alike.
    graph = _edge_as_node(make())
    with pytest.raises(TypeError, match=rf"is a conditional edge .*wire it with {helper}\("):
        graph.invoke({"messages": [("user", "hi")]})
    with pytest.raises(TypeError, match=rf"wire it with {helper}\("):
        asyncio.run(graph.ainvoke({"messages": [("user", "hi")]}))


def test_an_edge_asked_for_a_route_inside_a_users_node_still_answers() -> None:
    route = create_loop_check()

    def node(state: Any, config: RunnableConfig) -> dict[str, Any]:
        return {"messages": [("ai", route.invoke(state, config))]}

    async def anode(state: Any, config: RunnableConfig) -> dict[str, Any]:
        return {"messages": [("ai", await route.ainvoke(state, config))]}

    for fn in (node, anode):
        b = StateGraph(LoopState)
        b.add_node("n", fn)
        b.add_edge(START, "n")
        b.add_edge("n", END)
        graph = b.compile()
        state = {"messages": [tool_call_message("search", {"q": "x"})]}
        out = asyncio.run(graph.ainvoke(state)) if fn is anode else graph.invoke(state)
        assert out["messages"][-1].content == "continue"


@pytest.mark.parametrize(
    "add",
    [
        lambda b, p: add_loop_check(b, "tools", continue_to="model", policy=p),
        lambda b, p: add_retry_router(b, "tools", model="model", tools="tools", loop_policy=p),
    ],
)
def test_a_loop_policy_given_to_the_edge_only_is_refused(add: Any) -> None:
    """The tool node kept reusing a tool the edge's policy said not to reuse."""
    b = builder(RetryState)  # ToolCallGuard() has LoopPolicy() by default
    with pytest.raises(ValueError, match=r"pass the same policy to both, ToolCallGuard\(loop="):
        add(b, LoopPolicy(no_reuse_tools=frozenset({"search"})))


def test_a_policy_given_to_the_guard_only_holds_on_the_edge() -> None:
    policy = LoopPolicy(stop_at=5)
    b = builder(RetryState, ToolCallGuard(loop=policy).tool_node([search]))
    add_loop_check(b, "tools", continue_to="model")
    route = b.branches["tools"]["loop_check"].path
    calls = [tool_call_message("search", {"q": "x"}) for _ in range(4)]
    assert route.invoke({"messages": calls}) == "continue"  # the default would stop at 3
    retry = RetryRouterPolicy(backoff=Backoff(max_attempts=7))
    with pytest.raises(ValueError, match=r"ToolCallGuard\(retry=\.\.\.\) with another"):
        add_retry_router(
            builder(RetryState, ToolCallGuard(retry=retry).tool_node([search])), "tools",
            model="model", tools="tools", policy=RetryRouterPolicy(),
        )  # fmt: skip


@pytest.mark.parametrize(
    "add",
    [
        lambda b: add_loop_check(b, "tools", continue_to="model"),
        lambda b: add_retry_router(b, "tools", model="model", tools="tools"),
    ],
)
def test_a_bare_guard_as_the_tools_node_is_refused(add: Any) -> None:
    """add_node("tools", ToolCallGuard()) compiled, then failed at the first tool call
    with "missing 1 required positional argument: 'execute'"."""
    with pytest.raises(ValueError, match=r"add the node as ToolCallGuard\(\.\.\.\)\.tool_node"):
        add(builder(RetryState, ToolCallGuard()))
