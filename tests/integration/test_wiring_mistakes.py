"""Wiring mistakes around the tools node's edge fail early, with the fix in the message.

* loop_check and retry_router on one tools node: refused when the second one is added;
* ``create_retry_router()`` without a path map: refused by LangGraph at compile time, as
  ``create_loop_check()`` is (its labels are not node names);
* a guard node added with ``add_node`` to a state without the guard channels: its first
  run fails naming the mixin (LangGraph would drop its decisions silently).
"""

from __future__ import annotations

from typing import Any, get_args, get_type_hints

import pytest
from langchain_core.messages import HumanMessage
from langchain_core.tools import tool
from langgraph.graph import START, StateGraph
from langgraph.prebuilt import tools_condition

from agent_guards import (
    LoopPolicy,
    RetryState,
    ToolCallGuard,
    add_loop_check,
    add_retry_router,
    create_loop_check,
    create_retry_router,
)
from agent_guards.core.decision import LoopRoute, RetryRoute
from agent_guards.loop_check import add_loop_nodes
from agent_guards.testing import ScriptedChatModel, tool_call_message
from agent_guards.tool_guard import annotate_tool


@tool
def search(q: str) -> str:
    """Search."""
    return "rates are 4%"


annotate_tool(search, read_only=True)


def agent(*, answer: bool = True) -> tuple[Any, ScriptedChatModel]:
    """model -> tools_condition -> tools; the tools node's edge is the test's."""
    script: list[Any] = [tool_call_message("search", {"q": "rates"})]
    model = ScriptedChatModel(script=[*script, "4%"] if answer else script, repeat_last=True)
    b = StateGraph(RetryState)
    b.add_node("model", lambda s: {"messages": [model.invoke(s["messages"])]})
    b.add_node("tools", ToolCallGuard().tool_node([search]))
    b.add_edge(START, "model")
    b.add_conditional_edges("model", tools_condition)
    return b, model


def add_loop(b: Any) -> Any:
    return add_loop_check(b, "tools", continue_to="model")


def add_retry(b: Any) -> Any:
    return add_retry_router(b, "tools", model="model", tools="tools")


# 1. both guards on one tools node


@pytest.mark.parametrize(
    ("first", "second", "helper"),
    [(add_loop, add_retry, "add_retry_router"), (add_retry, add_loop, "add_loop_check")],
)
def test_loop_check_and_retry_router_on_one_tools_node_are_refused(
    first: Any, second: Any, helper: str
) -> None:
    b, _ = agent()
    first(b)
    with pytest.raises(
        ValueError, match=rf"{helper}: 'tools' already has the conditional edge"
    ) as e:
        second(b)
    assert "retry_router already makes loop_check's decisions" in str(e.value)
    assert "loop_policy=LoopPolicy()" in str(e.value)


def test_the_one_edge_for_both_guards_builds_and_stops() -> None:
    b, model = agent(answer=False)
    add_retry_router(b, "tools", model="model", tools="tools", loop_policy=LoopPolicy())
    out = b.compile().invoke({"messages": [HumanMessage("rates?")]}, {"recursion_limit": 30})
    assert [d.verdict.value for d in out["guard_log"]][-1] == "stop"
    assert len(model.calls) == 3


@pytest.mark.parametrize("add", [add_loop, add_retry])
def test_an_edge_of_your_own_leaving_the_tools_node_is_refused(add: Any) -> None:
    b, _ = agent()
    b.add_conditional_edges("tools", lambda s: "model", ["model"])
    with pytest.raises(
        ValueError, match=r"remove builder.add_conditional_edges\('tools', \.\.\.\)"
    ):
        add(b)


# 2. no path map: LangGraph reads the labels from the route's return annotation


@pytest.mark.parametrize("edge", [create_loop_check, create_retry_router])
def test_an_edge_without_a_path_map_is_refused_at_compile(edge: Any) -> None:
    b, model = agent()
    b.add_conditional_edges("tools", edge())
    with pytest.raises(ValueError, match=r"At 'tools' node, '\w+' branch found unknown target"):
        b.compile()
    assert model.calls == []


def test_the_router_annotation_is_one_literal_of_every_label() -> None:
    route = create_retry_router().func
    labels = get_args(get_type_hints(route)["return"])
    assert set(labels) == {*get_args(RetryRoute), *get_args(LoopRoute)}
    assert all(isinstance(label, str) for label in labels)  # one Literal, not a Union


def test_a_complete_hand_written_path_map_runs() -> None:
    b, model = agent(answer=False)
    paths = add_loop_nodes(b, continue_to="model")
    b.add_conditional_edges("tools", create_loop_check(), paths)  # type: ignore[arg-type]
    out = b.compile().invoke({"messages": [HumanMessage("rates?")]})
    assert [d.verdict.value for d in out["guard_log"]] == ["reuse", "nudge", "reuse", "stop"]
    assert len(model.calls) == 3


def test_the_routes_still_answer_outside_a_graph() -> None:
    calls = [tool_call_message("search", {"q": "rates"}) for _ in range(2)]
    assert create_loop_check().invoke({"messages": calls}) == "nudge"
    assert create_retry_router().invoke({"messages": calls[:1]}) == "continue"


def _guard_nodes() -> list[tuple[str, Any, type]]:
    from agent_guards import (
        ContextState,
        EvidenceState,
        MemoryState,
        PlanState,
        create_context_guard,
        create_evidence_resolve,
        create_memory_resolve,
        create_planner_gate,
    )
    from agent_guards.loop_check import LoopState, create_loop_stop
    from agent_guards.retry_router import create_retry_finish

    return [
        ("EvidenceState", create_evidence_resolve(), EvidenceState),
        ("ContextState", create_context_guard(1000), ContextState),
        ("MemoryState", create_memory_resolve(), MemoryState),
        ("PlanState", create_planner_gate(), PlanState),
        ("LoopState", create_loop_stop(), LoopState),
        ("RetryState", create_retry_finish(), RetryState),
    ]


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("index", range(6))
async def test_a_guard_node_on_a_state_without_its_channels_fails_naming_the_mixin(
    index: int, mode: str
) -> None:
    from langgraph.graph import END, MessagesState

    mixin, node, state = _guard_nodes()[index]
    for schema, fails in ((MessagesState, True), (type("S", (MessagesState, state), {}), False)):
        builder = StateGraph(schema)
        builder.add_node("guard", node, destinations=(END,))
        builder.add_edge(START, "guard")
        graph = builder.compile()
        run = {"messages": [HumanMessage("hi")]}
        if fails:
            with pytest.raises(ValueError, match=f"no 'guard_log' channel.*add the {mixin} mixin"):
                graph.invoke(run) if mode == "sync" else await graph.ainvoke(run)
        else:
            graph.invoke(run) if mode == "sync" else await graph.ainvoke(run)


def _nodes_missing_their_own_channels() -> list[tuple[str, Any, str]]:
    from agent_guards import (
        create_context_guard,
        create_evidence_resolve,
        create_memory_resolve,
        create_planner_gate,
    )

    return [
        ("EvidenceState", create_evidence_resolve(), "'evidence', 'evidence_verdict'"),
        ("ContextState", create_context_guard(1000, messages_key="msgs"), "'msgs'"),
        ("MemoryState", create_memory_resolve(), "'memory_facts', 'memory_verdict'"),
        ("PlanState", create_planner_gate(), "'plans'"),
    ]


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("index", range(4))
async def test_a_guard_node_on_a_state_with_the_log_but_not_its_own_channels_fails(
    index: int, mode: str
) -> None:
    """A state with ``guard_log`` (a loop_check state) but not the node's input and verdict
    channels: LangGraph would drop them, and the node would decide on nothing (memory: the
    user's current instruction lost to a stored one)."""
    from langgraph.graph import END, MessagesState
    from langgraph.store.memory import InMemoryStore

    from agent_guards import GuardState

    mixin, node, missing = _nodes_missing_their_own_channels()[index]
    builder = StateGraph(type("S", (MessagesState, GuardState), {}))
    builder.add_node("guard", node, destinations=(END,))
    builder.add_edge(START, "guard")
    graph = builder.compile(store=InMemoryStore())
    run, config = {"messages": [HumanMessage("hi")]}, {"configurable": {"principal": "ann"}}
    with pytest.raises(ValueError, match=f"no {missing} channel.*add the {mixin} mixin"):
        graph.invoke(run, config) if mode == "sync" else await graph.ainvoke(run, config)


def test_add_evidence_resolve_refuses_a_state_without_the_evidence_channels() -> None:
    from langgraph.graph import END

    from agent_guards import EvidenceState, LoopState, add_evidence_resolve

    with pytest.raises(
        ValueError, match=r"no 'evidence', 'evidence_verdict' channel.*EvidenceState"
    ):
        add_evidence_resolve(StateGraph(LoopState), answer=END, clarify=END, abstain=END)
    add_evidence_resolve(StateGraph(EvidenceState), answer=END, clarify=END, abstain=END)


@pytest.mark.parametrize("counted", [True, False])
def test_a_guarded_tool_node_on_a_state_without_the_guard_channels_fails(counted: bool) -> None:
    """Its decisions, its tool count and so its tool budget would be dropped silently."""
    from langgraph.graph import MessagesState

    from agent_guards import Budget

    guard = ToolCallGuard(budget=Budget(max_tool_calls=2))
    if not counted:  # nothing to keep: it runs
        guard = ToolCallGuard(log_decisions=False, count_usage=False)
    graph = StateGraph(MessagesState).add_node("tools", guard.tool_node([search]))
    app = graph.add_edge(START, "tools").compile()
    run = {"messages": [tool_call_message("search", {"q": "rates"})]}
    if counted:
        with pytest.raises(ValueError, match=r"no 'guard_log', 'usage' channel.*GuardState"):
            app.invoke(run)
    else:
        assert app.invoke(run)["messages"][-1].content == "rates are 4%"


def test_loop_check_refuses_a_tool_guard_with_other_keys_or_another_messages_key() -> None:
    from agent_guards.core import StateKeys

    keys = StateKeys(log="decisions", usage="counts")
    b = StateGraph(type("S", (RetryState, keys.schema()), {}))
    b.add_node("model", lambda s: {})
    b.add_node("tools", ToolCallGuard().tool_node([search]))
    with pytest.raises(ValueError, match="pass the same keys= to ToolCallGuard and add_loop_check"):
        add_loop_check(b, "tools", continue_to="model", keys=keys)
    b = StateGraph(RetryState)
    b.add_node("model", lambda s: {})
    b.add_node("tools", ToolCallGuard(messages_key="other").tool_node([search]))
    with pytest.raises(ValueError, match="pass the same messages_key= to ToolCallGuard"):
        add_loop_check(b, "tools", continue_to="model")
    with pytest.raises(ValueError, match="pass the same messages_key= to ToolCallGuard"):
        add_retry_router(b, "tools", model="model", tools="tools")


def test_a_messages_key_the_state_does_not_have_names_the_key_not_a_mixin() -> None:
    """No mixin adds a messages channel: the fix is the key."""
    for add in (
        lambda b: add_loop_check(b, "tools", continue_to="model", messages_key="msgs"),
        lambda b: add_retry_router(b, "tools", model="model", tools="tools", messages_key="msgs"),
    ):
        b = StateGraph(RetryState)
        b.add_node("model", lambda s: {})
        b.add_node("tools", lambda s: {})
        with pytest.raises(
            ValueError, match=r"no 'msgs' channel for the messages; pass messages_key="
        ):
            add(b)
