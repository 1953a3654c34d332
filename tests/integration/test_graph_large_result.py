"""A large tool result is stored once: SQLite grows by about its size, not once per step.

The reference graph's ``step_messages`` is a delta channel (``delta_messages``): the result
is in the write of the tools step, the context guard moves it to the store at the next
model call, and no checkpoint copies the step's whole message list again.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.store.sqlite import SqliteStore

from agent_guards import Budget, guard_serializer
from agent_guards.graphs.plan_execute import Policies, build_graph
from agent_guards.serde import add_messages_stable
from benchmarks.bench_graph import long_plan

SIZE = 2 * 1024 * 1024


@tool(response_format="content_and_artifact")
def lookup(i: int) -> tuple[str, list[dict[str, Any]]]:
    """Look up record i (record 2 is a large export)."""
    text = ("x" * 99 + "\n") * (SIZE // 100) if i == 2 else f"record {i}"
    return text, [{"id": f"rec_{i}", "claim_key": "records", "value": "ok"}]


def _graph(tmp_path: Path) -> tuple[Any, sqlite3.Connection]:
    conn = sqlite3.connect(str(tmp_path / "cp.sqlite"), check_same_thread=False)
    store_conn = sqlite3.connect(
        str(tmp_path / "store.sqlite"), check_same_thread=False, isolation_level=None
    )
    store = SqliteStore(store_conn)
    store.setup()
    policies = Policies(budget=Budget(max_steps=60, max_tool_calls=12, max_model_calls=24))
    saver = SqliteSaver(conn, serde=guard_serializer())
    graph = build_graph(
        long_plan(4).model(), [lookup], policies=policies, checkpointer=saver, store=store
    )
    return graph, conn


CONFIG: Any = {
    "recursion_limit": 1_000,
    "configurable": {"thread_id": "big", "agent_guards_now": "2026-06-01"},
}


@pytest.fixture(scope="module")
def big_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    tmp_path = tmp_path_factory.mktemp("big")
    graph, conn = _graph(tmp_path)
    state = graph.invoke({"messages": [("user", "audit the records")]}, CONFIG)
    conn.close()
    return tmp_path, dict(state)


def test_a_large_result_is_stored_about_once(big_run: tuple[Path, dict[str, Any]]) -> None:
    tmp_path, state = big_run
    assert state["outcome"]["route"] == "answer"
    assert os.path.getsize(tmp_path / "cp.sqlite") <= 2 * SIZE


def test_a_rebuilt_state_has_the_ids_the_run_had(big_run: tuple[Path, dict[str, Any]]) -> None:
    tmp_path, state = big_run
    graph, conn = _graph(tmp_path)  # a new saver on the same file: rebuilt from the writes
    history = list(graph.get_state_history(CONFIG))
    conn.close()
    assert [m.id for m in history[0].values["step_messages"]] == [
        m.id for m in state["step_messages"]
    ]
    assert all(m.id for snap in history for m in snap.values.get("step_messages") or [])


def test_ids_given_to_id_less_messages_are_deterministic_and_distinct() -> None:
    def build() -> list[Any]:
        msgs: Any = add_messages_stable([], [HumanMessage("go")])
        msgs = add_messages_stable(msgs, [AIMessage("same"), AIMessage("same")])
        return list(add_messages_stable(msgs, ToolMessage("ok", tool_call_id="c")))

    first, again = build(), build()
    assert [m.id for m in first] == [m.id for m in again]
    assert len({m.id for m in first}) == 4
    assert add_messages_stable(first, [AIMessage("x", id="keep")])[-1].id == "keep"
