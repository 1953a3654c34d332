"""The run ledger without a store: kept in the state's ``run_ledger`` channel.

Graphs compiled without a store keep the record of every execution in state, the budget is
checked per call against it, and a state without the channel is refused before anything
runs. What only a store gives (one account across forks) is pinned too, as the docs say.
"""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Annotated, Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import tools_condition
from langgraph.store.memory import InMemoryStore

from agent_guards import Budget, LoopState, ToolCallGuard, add_loop_check
from agent_guards.core import StateKeys, keep_last, merge_usage
from agent_guards.testing import ScriptedChatModel
from agent_guards.tool_guard import RunLedger
from tests.integration.test_run_ledger import CFG, World, before_tools, build, replies

STORY = (("get_balance", {}), ("transfer", {"amount": 30}), ("get_balance", {}))


def entries(out: Any, key: str = "run_ledger") -> list[tuple[str, str, str]]:
    """(tool, effect, status) per execution, in the order the calls were made."""
    ledger = out[key]
    return [(e["tool"], e["effect"], e["status"]) for _, e in sorted(ledger.items())]


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_every_execution_is_recorded_in_state(mode: str) -> None:
    world = World()
    graph = build(replies(*STORY), world, InMemorySaver(), None)
    state = {"messages": [HumanMessage("pay 30 and show the balance")]}
    out = graph.invoke(state, CFG) if mode == "sync" else await graph.ainvoke(state, CFG)
    assert world.runs == ["get_balance", "transfer", "get_balance"]
    assert entries(out) == [
        ("get_balance", "read", "done"),
        ("transfer", "write", "done"),
        ("get_balance", "read", "done"),
    ]
    answers = [m.content for m in out["messages"] if isinstance(m, ToolMessage)]
    assert answers[-1] == "balance 70"  # the read after the write ran again: not stale
    assert out["run_ledger"]["call-1#1"]["digest"] and out["usage"]["tool_calls"] == 3
    assert len(out["run_ledger"]) == out["usage"]["tool_calls"]


def test_the_ledger_in_state_survives_a_sqlite_checkpoint(tmp_path: Path) -> None:
    from langgraph.checkpoint.sqlite import SqliteSaver

    db = str(tmp_path / "run.sqlite")
    with closing(sqlite3.connect(db, check_same_thread=False)) as conn:
        build(replies(*STORY), World(), SqliteSaver(conn), None).invoke(
            {"messages": [HumanMessage("pay")]}, CFG
        )
    with closing(sqlite3.connect(db, check_same_thread=False)) as conn:
        state = build(replies(), World(), SqliteSaver(conn), None).get_state(CFG).values
    assert entries(state)[1] == ("transfer", "write", "done")


def test_a_turn_past_the_budget_runs_only_what_is_left() -> None:
    world = World()
    calls = [{"name": "fetch", "args": {"i": i}, "id": f"c{i}"} for i in range(200)]
    model = ScriptedChatModel(script=[AIMessage("", tool_calls=calls), "done"])
    graph = build(model, world, InMemorySaver(), None, budget=Budget(max_tool_calls=40))
    out = graph.invoke({"messages": [HumanMessage("fetch all")]}, CFG)
    assert len(world.runs) == 40 and len(out["run_ledger"]) == 40
    answers = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    assert len(answers) == 200  # every pending call answered
    assert sum(m.content.startswith("[budget]") for m in answers) == 160


def test_a_state_without_the_channel_is_refused_before_anything_runs() -> None:
    class Plain(MessagesState):  # the guards' usage and log, but no run_ledger
        usage: Annotated[dict[str, Any], merge_usage]
        guard_log: Annotated[list[Any], keep_last()]

    world = World()
    model = replies(("transfer", {"amount": 30}))
    builder = StateGraph(Plain)
    builder.add_node("model", lambda s: {"messages": [model.invoke(s["messages"])]})
    builder.add_node("tools", ToolCallGuard(ledger=RunLedger()).tool_node(world.tools()))
    builder.add_edge(START, "model")
    builder.add_conditional_edges("model", tools_condition)
    builder.add_edge("tools", "model")
    with pytest.raises(ValueError, match=r"no 'run_ledger' channel: subclass GuardState"):
        builder.compile().invoke({"messages": [HumanMessage("pay")]})
    assert world.runs == []


def test_a_renamed_channel_holds_the_ledger() -> None:
    keys = StateKeys(ledger="tool_record")

    class State(MessagesState, keys.schema()):  # type: ignore[misc]
        pass

    world = World()
    model = replies(("fetch", {"i": 1}))
    builder = StateGraph(State)
    builder.add_node("model", lambda s: {"messages": [model.invoke(s["messages"])]})
    guard = ToolCallGuard(ledger=RunLedger(), keys=keys)
    builder.add_node("tools", guard.tool_node(world.tools()))
    builder.add_edge(START, "model")
    builder.add_conditional_edges("model", tools_condition)
    add_loop_check(builder, "tools", continue_to="model", keys=keys)
    out = builder.compile().invoke({"messages": [HumanMessage("fetch")]})
    assert entries(out, "tool_record") == [("fetch", "read", "done")]
    assert "run_ledger" not in out


@pytest.mark.parametrize("store", [None, "memory"])
def test_only_a_store_keeps_one_account_across_forks(store: str | None) -> None:
    """In state, a fork from before a write gets that checkpoint's ledger back, so the write
    runs again; the store's ledger answers it from the recorded outcome."""
    world = World()
    graph = build(replies(*STORY), world, InMemorySaver(), InMemoryStore() if store else None)
    graph.invoke({"messages": [HumanMessage("pay")]}, CFG)
    graph.invoke(None, before_tools(graph, "call-1"))
    assert world.runs.count("transfer") == (1 if store else 2)


def test_loop_state_declares_the_channel() -> None:
    assert "run_ledger" in LoopState.__annotations__
