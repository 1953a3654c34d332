"""Wiring mistakes a user can make fail when the graph is built, with the fix in the message."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.tools import tool
from langgraph.graph import MessagesState, StateGraph
from langgraph.prebuilt import ToolNode

from agent_guards import LoopState, RetryState, ToolCallGuard, add_loop_check, add_retry_router


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
