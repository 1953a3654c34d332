"""The run ledger in async graphs: each step where its store needs it.

On an async store (AsyncSqliteStore, AsyncPostgresStore) a first claim and its outcome are
awaited statements; on a store that does no I/O (InMemoryStore, the ledger in state) the
steps run on the event loop, and one that has to wait for a call another task is running
waits in a worker thread, so that task can finish. Real stores, no mocks.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.graph import START, StateGraph
from langgraph.store.memory import InMemoryStore

from agent_guards import LoopState, ToolCallGuard
from agent_guards.core.signatures import call_signature
from agent_guards.persistence import open_persistence
from agent_guards.tool_guard import RunLedger, annotate_tool

CFG = {"configurable": {"thread_id": "t1"}}


def turn(call_id: str = "pay-1") -> dict[str, Any]:
    call = {"name": "pay", "args": {"invoice": "A-7"}, "id": call_id}
    return {"messages": [AIMessage("", tool_calls=[call])]}


def graph_of(tools: list[Any], store: Any, **guard: Any) -> Any:
    builder = StateGraph(LoopState)
    builder.add_node("tools", ToolCallGuard(**guard).tool_node(tools))
    builder.add_edge(START, "tools")
    return builder.compile(store=store)


def answers(out: dict[str, Any]) -> list[str]:
    return [str(m.content) for m in out["messages"] if isinstance(m, ToolMessage)]


async def test_a_task_waits_off_the_loop_for_the_call_another_task_is_running() -> None:
    """Two runs on one thread in one process ask for the same write. The second must wait
    for the first's outcome without holding the event loop the first needs to finish."""
    entered, release, waiting = asyncio.Event(), asyncio.Event(), threading.Event()
    runs: list[str] = []

    @tool
    async def pay(invoice: str) -> str:
        """Pay an invoice (a write)."""
        runs.append(invoice)
        entered.set()
        await release.wait()
        return f"paid {invoice}"

    def sleep(seconds: float) -> None:  # the ledger's poll while the other run holds the call
        waiting.set()
        threading.Event().wait(seconds)

    graph = graph_of([annotate_tool(pay)], InMemoryStore(), ledger=RunLedger(wait=30), sleep=sleep)
    first = asyncio.ensure_future(graph.ainvoke(turn(), CFG))
    await asyncio.wait_for(entered.wait(), 60)  # a bound: a broken run must not hang the suite
    second = asyncio.ensure_future(graph.ainvoke(turn(), CFG))
    while not (waiting.is_set() or second.done()):  # the loop is free: this still runs
        await asyncio.sleep(0.01)
    release.set()
    outs = await asyncio.gather(first, second)
    assert runs == ["A-7"]  # executed once
    assert [answers(out) for out in outs] == [["paid A-7"], ["paid A-7"]]
    assert [d.reason for d in outs[1]["guard_log"]] == ["recorded_outcome"]


@contextmanager
def sync_store(kind: str, tmp_path: Path) -> Iterator[Any]:
    if kind == "memory":
        yield InMemoryStore()
        return
    with open_persistence(str(tmp_path / "ledger.sqlite")) as (_, store):
        yield store


@pytest.mark.parametrize(("kind", "on_loop"), [("memory", True), ("sqlite", False)])
async def test_a_reconcile_runs_on_the_loop_only_when_the_store_does_no_io(
    kind: str, on_loop: bool, tmp_path: Path
) -> None:
    """The steps before a tool runs, a reconcile of a write that never reported back among
    them, stay on the event loop on InMemoryStore and leave it for a SQLite file."""
    seen: list[bool] = []

    def reconcile(entry: Any) -> str:
        seen.append(threading.current_thread() is threading.main_thread())
        return "paid A-7 (confirmed)"

    @tool
    def pay(invoice: str) -> str:
        """Pay an invoice (a write)."""
        raise AssertionError("a write that may have happened is never re-run")

    ledger = RunLedger(reconcile=reconcile, wait=0)
    with sync_store(kind, tmp_path) as store:
        signature = call_signature("pay", {"invoice": "A-7"})
        ledger.start(store, "t1", "pay-1", tool="pay", signature=signature, effect="write")
        out = await graph_of([annotate_tool(pay)], store, ledger=ledger).ainvoke(turn(), CFG)
    assert answers(out) == ["paid A-7 (confirmed)"]
    assert seen == [on_loop]


async def test_the_ledger_in_state_is_kept_by_an_async_graph() -> None:
    runs: list[str] = []

    @tool
    def pay(invoice: str) -> str:
        """Pay an invoice (a write)."""
        runs.append(invoice)
        return f"paid {invoice}"

    graph = graph_of([annotate_tool(pay)], None, ledger=RunLedger())
    out = await graph.ainvoke(turn(), CFG)
    assert (out["run_ledger"]["pay-1#1"]["status"], runs) == ("done", ["A-7"])
    again = await graph.ainvoke({**turn(), "run_ledger": out["run_ledger"]}, CFG)
    assert (answers(again), runs) == (["paid A-7"], ["A-7"])  # answered from the ledger


@asynccontextmanager
async def async_store(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> AsyncIterator[Any]:
    if kind == "sqlite":
        from langgraph.store.sqlite.aio import AsyncSqliteStore

        async with AsyncSqliteStore.from_conn_string(str(tmp_path / "a.sqlite")) as store:
            await store.setup()
            yield store
        return
    from langgraph.store.postgres.aio import AsyncPostgresStore

    async with AsyncPostgresStore.from_conn_string(
        request.getfixturevalue("postgres_url")
    ) as store:
        await store.setup()
        yield store


@pytest.mark.parametrize("kind", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def test_an_async_store_records_each_execution_once(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """A first execution is claimed and finished on the async store; the same call asked
    again (a resume, a fork) is answered from it, not run."""
    runs: list[str] = []

    @tool
    async def pay(invoice: str) -> str:
        """Pay an invoice (a write)."""
        runs.append(invoice)
        return f"paid {invoice}"

    ledger = RunLedger(namespace=("ledger", f"async-{kind}"))
    async with async_store(kind, tmp_path, request) as store:
        graph = graph_of([annotate_tool(pay)], store, ledger=ledger)
        first = await graph.ainvoke(turn(), CFG)
        again = await graph.ainvoke(turn(), CFG)
        entry = await asyncio.to_thread(ledger.entry, store, "t1", "pay-1")
        executions = await asyncio.to_thread(ledger.executions, store, "t1")
    assert runs == ["A-7"]
    assert answers(first) == answers(again) == ["paid A-7"]
    assert entry is not None
    assert (entry["status"], entry["executions"], entry["content"]) == ("done", 1, "paid A-7")
    assert executions == 1
