"""Guard channels under the user's names (``StateKeys``): a ``usage`` or ``guard_log`` of the
user's own is left alone, and a mismatch is refused when the graph is built."""

from __future__ import annotations

import operator
from typing import Annotated, Any

import pytest
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import tools_condition

from agent_guards import (
    Budget,
    Evidence,
    GuardDecision,
    LoopPolicy,
    PlanVersion,
    ToolCallGuard,
    add_evidence_resolve,
    add_loop_check,
    add_planner_gate,
    add_retry_router,
)
from agent_guards.core import StateKeys, annotate_tool
from agent_guards.planner_gate import progress_update
from agent_guards.planner_gate.graph import merge_plans
from agent_guards.retry_router import describe_failure, failure_message
from agent_guards.testing import ScriptedChatModel, tool_call_message

KEYS = StateKeys(log="guard_decisions", usage="guard_usage")
EXECUTED: list[str] = []


@tool
def search(q: str) -> str:
    """Search."""
    EXECUTED.append(q)
    return f"results for {q}"


annotate_tool(search, read_only=True)


@tool
def pay(amount: int) -> ToolMessage | str:
    """Pay."""
    EXECUTED.append(f"pay {amount}")
    raise PermissionError("403 Forbidden: not allowed to pay")


class UserState(MessagesState, KEYS.schema()):  # type: ignore[misc]
    # the user's own fields of the names the guards use by default
    usage: Annotated[int, operator.add]
    guard_log: list[str]


def react(model: ScriptedChatModel, guard: ToolCallGuard, *, keys: StateKeys = KEYS) -> Any:
    builder = StateGraph(UserState)
    builder.add_node("model", lambda s: {"messages": [model.invoke(s["messages"])], "usage": 1})
    builder.add_node("tools", guard.tool_node([search, pay]))
    builder.add_edge(START, "model")
    builder.add_conditional_edges("model", tools_condition)
    add_retry_router(
        builder, "tools", model="model", tools="tools", loop_policy=LoopPolicy(), keys=keys
    )
    return builder.compile(checkpointer=InMemorySaver())


def test_a_loop_stops_and_the_users_own_fields_are_untouched() -> None:
    EXECUTED.clear()
    model = ScriptedChatModel(script=[tool_call_message("search", {"q": "rates"})] * 6)
    graph = react(model, ToolCallGuard(keys=KEYS))
    config = {"configurable": {"thread_id": "keys-loop"}}
    out = graph.invoke(
        {"messages": [("user", "rates?")], "usage": 100, "guard_log": ["mine"]}, config
    )
    decisions = out["guard_decisions"]
    assert all(isinstance(d, GuardDecision) for d in decisions)
    assert [d.verdict.value for d in decisions][-1] == "stop"
    assert EXECUTED == ["rates"]  # one execution; the repeats were answered from it
    assert out["guard_usage"]["tool_calls"] == 1
    assert out["usage"] == 100 + len(model.calls)  # the user's own counter: only theirs
    assert out["guard_log"] == ["mine"]


def test_a_refusal_is_logged_under_the_users_name() -> None:
    EXECUTED.clear()
    model = ScriptedChatModel(script=[tool_call_message("pay", {"amount": 5}), AIMessage("ok")])
    out = react(model, ToolCallGuard(keys=KEYS)).invoke(
        {"messages": [("user", "pay 5")], "usage": 0, "guard_log": []},
        {"configurable": {"thread_id": "keys-refuse"}},
    )
    assert EXECUTED == ["pay 5"]
    assert [d.verdict.value for d in out["guard_decisions"]] == ["refuse"]
    assert out["guard_log"] == [] and out["guard_usage"]["tool_calls"] == 1


def test_the_tool_budget_reads_the_renamed_usage() -> None:
    EXECUTED.clear()
    calls = [tool_call_message("search", {"q": f"q{i}"}) for i in range(4)]
    model = ScriptedChatModel(script=[*calls, AIMessage("done")])
    guard = ToolCallGuard(keys=KEYS, budget=Budget(max_tool_calls=2))
    out = react(model, guard).invoke(
        {"messages": [("user", "go")], "usage": 0, "guard_log": []},
        {"configurable": {"thread_id": "keys-budget"}},
    )
    assert EXECUTED == ["q0", "q1"] and out["guard_usage"]["tool_calls"] == 2


def test_a_tool_guard_with_other_keys_is_refused_at_build_time() -> None:
    model = ScriptedChatModel(script=[])
    with pytest.raises(ValueError, match=r"pass the same keys= to ToolCallGuard and"):
        react(model, ToolCallGuard())  # the guard writes guard_log / usage: the user's


def test_the_users_own_usage_without_keys_is_refused_with_the_fix() -> None:
    class Clash(MessagesState):
        guard_log: Annotated[list[Any], operator.add]
        usage: int  # the user's own, no reducer

    builder = StateGraph(Clash)
    builder.add_node("model", lambda s: {})
    builder.add_node("tools", ToolCallGuard().tool_node([search]))
    with pytest.raises(ValueError, match=r"'usage' channel has no reducer.*keys=StateKeys"):
        add_loop_check(builder, "tools", continue_to="model")


def test_renamed_channels_missing_from_the_state_name_keys_schema() -> None:
    builder = StateGraph(MessagesState)
    builder.add_node("model", lambda s: {})
    builder.add_node("tools", ToolCallGuard(keys=KEYS).tool_node([search]))
    with pytest.raises(ValueError, match=r"no 'guard_decisions' channel; add keys.schema\(\)"):
        add_loop_check(builder, "tools", continue_to="model", keys=KEYS)


def test_evidence_and_planner_gate_write_the_renamed_log() -> None:
    class EvidenceUser(UserState):
        evidence: list[Evidence]
        evidence_verdict: Any

    builder = StateGraph(EvidenceUser)
    builder.add_edge(START, "evidence_resolve")
    add_evidence_resolve(builder, answer="__end__", clarify="__end__", abstain="__end__", keys=KEYS)
    out = builder.compile().invoke(
        {"evidence": [Evidence("a", "limit", "50w")], "usage": 0, "guard_log": []}
    )
    assert [d.reason for d in out["guard_decisions"]] == ["consistent"]
    assert out["guard_log"] == []

    class PlanUser(UserState):
        plans: Annotated[list[PlanVersion], merge_plans]
        goal: Any
        progress: Annotated[dict[str, int], lambda a, b: {**(a or {}), **(b or {})}]

    plan_builder = StateGraph(PlanUser)
    plan_builder.add_node("run", lambda s: progress_update(executed=1))
    add_planner_gate(
        plan_builder,
        destinations={"execute": "run", "clarify": "__end__", "escalate": "__end__"},
        keys=KEYS,
    )
    plan_builder.add_edge(START, "planner_gate")
    out = plan_builder.compile().invoke(
        {"plans": [PlanVersion.linear(1, ["search", "write"])], "usage": 0, "guard_log": []}
    )
    assert [d.reason for d in out["guard_decisions"]] == ["initial_plan"]
    assert out["guard_log"] == [] and out["usage"] == 0
    assert out["guard_usage"].get("replans", 0) == 0


def test_state_keys_reject_bad_names() -> None:
    with pytest.raises(ValueError, match=r"StateKeys.log must be a Python identifier"):
        StateKeys(log="guard log")
    with pytest.raises(ValueError, match=r"must differ"):
        StateKeys(log="x", usage="x")
    with pytest.raises(TypeError, match=r"ToolCallGuard.keys must be a StateKeys"):
        ToolCallGuard(keys={"log": "x"})  # type: ignore[arg-type]


def test_failure_message_helpers_still_route_with_renamed_keys() -> None:
    # the router edge reads only messages: the same routes with any keys
    from agent_guards import create_retry_router

    call = AIMessage("", tool_calls=[{"name": "pay", "args": {}, "id": "c1"}])
    error = failure_message(describe_failure(403), tool="pay", tool_call_id="c1")
    route = create_retry_router(keys=KEYS)
    assert route.invoke({"messages": [call, error]}) == "refuse"


def test_a_create_agent_state_with_its_own_usage_is_refused_before_anything_runs() -> None:
    from langchain.agents import AgentState, create_agent

    from agent_guards.middleware import LoopGuardMiddleware, RetryRouterMiddleware

    class Mine(AgentState[Any]):
        usage: int

    EXECUTED.clear()
    for middleware in (LoopGuardMiddleware(), RetryRouterMiddleware()):
        model = ScriptedChatModel(script=[tool_call_message("search", {"q": "x"})])
        agent = create_agent(model, [search], middleware=[middleware], state_schema=Mine)
        with pytest.raises(ValueError, match=r"'usage' holds a int value.*rename your field"):
            agent.invoke({"messages": [("user", "hi")], "usage": 3})
        assert model.calls == [] and EXECUTED == []


def test_context_guard_and_memory_resolve_write_the_renamed_log() -> None:
    from langchain_core.messages import HumanMessage

    from agent_guards import create_context_guard, create_memory_resolve

    class ContextUser(UserState):
        context_pins: Any
        context_tally: Any
        memory_facts: Any  # the memory node's input and verdict: without them it refuses
        memory_verdict: Any

    builder = StateGraph(ContextUser)
    builder.add_node("fit", create_context_guard(1000, keys=KEYS))
    builder.add_node("memory", create_memory_resolve(keys=KEYS))
    builder.add_edge(START, "fit")
    builder.add_edge("fit", "memory")
    out = builder.compile().invoke(
        {"messages": [HumanMessage("hi", id="h")], "usage": 0, "guard_log": ["mine"]}
    )
    assert [d.guard for d in out["guard_decisions"]] == ["context_guard", "memory_resolve"]
    assert out["guard_log"] == ["mine"]
