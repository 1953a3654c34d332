"""The guards on a pydantic or dataclass state (the guard channels declared as fields): they
read it as they read a dict. Before, two paths read the decision log of dict states only."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Any

import pytest
from langchain_core.messages import AnyMessage, HumanMessage
from langchain_core.tools import tool
from langgraph.graph import START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import tools_condition
from pydantic import BaseModel, Field

from agent_guards import (
    LoopPolicy,
    LoopState,
    RetryState,
    ToolCallGuard,
    add_loop_check,
    add_retry_router,
)
from agent_guards.core import GuardDecision, annotate_tool, keep_last, merge_ledger, merge_usage
from agent_guards.testing import ScriptedChatModel, tool_call_message


class PydanticState(BaseModel):
    messages: Annotated[list[AnyMessage], add_messages] = Field(default_factory=list)
    guard_log: Annotated[list[GuardDecision], keep_last()] = Field(default_factory=list)
    usage: Annotated[dict[str, Any], merge_usage] = Field(default_factory=dict)
    run_ledger: Annotated[dict[str, dict[str, Any]], merge_ledger] = Field(default_factory=dict)


@dataclass
class DataclassState:
    messages: Annotated[list[AnyMessage], add_messages] = field(default_factory=list)
    guard_log: Annotated[list[GuardDecision], keep_last()] = field(default_factory=list)
    usage: Annotated[dict[str, Any], merge_usage] = field(default_factory=dict)
    run_ledger: Annotated[dict[str, dict[str, Any]], merge_ledger] = field(default_factory=dict)


OBJECTS = [PydanticState, DataclassState]
runs: list[str] = []


@tool
def salary(employee: str) -> str:
    """HR only."""
    runs.append("salary")
    raise PermissionError("403 Forbidden: HR only")


@tool
def search(q: str) -> str:
    """Search."""
    runs.append("search")
    return "the same long result every time, long enough to count as evidence text"


annotate_tool(search, read_only=True)


def _messages(state: Any) -> list[Any]:
    return state["messages"] if isinstance(state, dict) else state.messages


def _graph(state: Any, tool_: Any, wire: str, policy: LoopPolicy, in_node: bool) -> Any:
    args = {"employee": "kim"} if tool_.name == "salary" else {"q": "x"}
    model = ScriptedChatModel(script=[lambda _: tool_call_message(tool_.name, args)],
                              repeat_last=True)  # fmt: skip
    b = StateGraph(state)
    b.add_node("model", lambda s: {"messages": [model.invoke(_messages(s))]})
    b.add_node("tools", ToolCallGuard(loop=policy).tool_node([tool_]))
    b.add_edge(START, "model")
    b.add_conditional_edges("model", tools_condition)
    if wire == "retry":
        add_retry_router(b, "tools", model="model", tools="tools", loop_policy=policy,
                         route_in_node=in_node)  # fmt: skip
    else:
        add_loop_check(b, "tools", continue_to="model", policy=policy, route_in_node=in_node)
    return b.compile()


def _log(state: Any, tool_: Any, wire: str, policy: LoopPolicy, in_node: bool) -> list[str]:
    runs.clear()
    out = _graph(state, tool_, wire, policy, in_node).invoke(
        {"messages": [HumanMessage("go")]}, {"recursion_limit": 40}
    )
    return [f"{d.verdict.value}:{d.reason}" for d in out["guard_log"]]


# route_in_node: the route decided inside the tools node reads an object state too
IN_NODE = pytest.mark.parametrize("in_node", [False, True], ids=["edge", "in-node"])


@IN_NODE
@pytest.mark.parametrize(
    "state", [RetryState, *OBJECTS], ids=["typeddict", "pydantic", "dataclass"]
)
def test_a_refusal_is_logged_once(state: Any, in_node: bool) -> None:
    assert _log(state, salary, "retry", LoopPolicy(), in_node) == ["refuse:permission"]
    assert runs == ["salary"]


@IN_NODE
@pytest.mark.parametrize("state", [LoopState, *OBJECTS], ids=["typeddict", "pydantic", "dataclass"])
def test_a_loop_after_its_cut_is_stopped(state: Any, in_node: bool) -> None:
    log = _log(state, search, "loop", LoopPolicy(on_loop="truncate"), in_node)
    assert log[-1] == "stop:repeated_call"
    assert runs == ["search"]
