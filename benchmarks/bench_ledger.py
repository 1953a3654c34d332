"""What the run ledger costs per tool call: a guarded tool node with and without it.

One graph step runs one no-op tool call through ``ToolCallGuard().tool_node``; the ledger
adds two writes to the graph's store (the claim of the execution before the tool runs, its
outcome after, each one SQL statement on SQLite; the ledger is read only when a claim
fails): InMemory, or SQLite on a file, bare and with the graph checkpointed by SqliteSaver
(to the store's file with ``durability="sync"`` and with ``"async"``, and to a file of its
own); and through ``ainvoke``, on InMemoryStore and AsyncSqliteStore. SQLite has one
writer per file: with ``"async"`` the step's checkpoint is still being written when the
next step's writes come, and on the same file they wait in SQLite's busy handler (which
sleeps 1 ms and more), ledger or not: that row shows what a shared file costs, and has no
target.
The ratio is per call, measured in one run with the two variants alternating every few
calls. Last, a thread's history: a budgeted call (the budget checks the thread's count of
executions before each call and after its claim) on a thread that has run 5,000 calls
against one that has run 50, on InMemoryStore and SqliteStore. Below the limit a check
takes the number of the thread's entries, which InMemoryStore knows without reading them
and SQLite counts on its prefix index; reading every entry's status made the long thread
1.5x on InMemoryStore and 4x on SQLite (paging through ``search`` before that: 100x).
"""

from __future__ import annotations

import asyncio
import itertools
import sqlite3
import statistics
import tempfile
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage
from langchain_core.tools import tool
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.store.memory import InMemoryStore

from agent_guards import Budget
from agent_guards.tool_guard import RunLedger, ToolCallGuard, annotate_tool
from benchmarks._timing import median_us

_BLOCK = 10  # calls of one variant between two switches


@tool
def noop(i: int) -> str:
    """Do nothing."""
    return "ok"


annotate_tool(noop)  # a write: the ledger path that records intent and outcome


class State(MessagesState):
    usage: dict[str, Any]
    guard_log: list[Any]


def _graph(
    store: Any, ledger: RunLedger | None, saver: Any = None, budget: Budget | None = None
) -> Any:
    builder = StateGraph(State)
    guard = ToolCallGuard(loop=None, retry=None, ledger=ledger, log_decisions=False,
                          count_usage=False, budget=budget)  # fmt: skip
    builder.add_node("tools", guard.tool_node([noop]))
    builder.add_edge(START, "tools")
    return builder.compile(store=store, checkpointer=saver)


def one_call_runner(
    graph: Any,
    loop: asyncio.AbstractEventLoop | None = None,
    thread: str | None = None,
    *,
    durability: str | None = None,
) -> Any:
    """One call per run (on ``thread``, else on one of 50); through ``ainvoke`` on
    ``loop`` when one is given; with the checkpointer's ``durability`` when one is given
    (LangGraph's own default otherwise)."""
    options = {"durability": durability} if durability is not None else {}
    ids = itertools.count()

    def run() -> None:
        n = next(ids)
        call = {"name": "noop", "args": {"i": n}, "id": f"c{n}"}
        state = {"messages": [AIMessage("", tool_calls=[call])]}
        config = {"configurable": {"thread_id": thread or f"t{n % 50}"}}
        if loop is None:
            graph.invoke(state, config, **options)
        else:
            loop.run_until_complete(graph.ainvoke(state, config, **options))

    return run


def _round(ledgered: Any, plain: Any, calls: int) -> tuple[float, float]:
    """One round: ``calls`` of each variant, interleaved in blocks of ``_BLOCK`` calls in
    ABBA order, so a change in the machine's load weighs on both alike; the mean
    microseconds per call of each."""
    blocks, size = max(1, calls // _BLOCK), min(calls, _BLOCK)
    us = {ledgered: 0.0, plain: 0.0}
    for block in range(blocks):
        for fn in (ledgered, plain) if block % 2 == 0 else (plain, ledgered):
            us[fn] += median_us(fn, calls=size, repeats=1) / blocks
    return us[ledgered], us[plain]


def _ratio(
    store: Any,
    calls: int,
    label: str,
    saver: Any = None,
    loop: Any = None,
    *,
    durability: str | None = None,
) -> tuple[float, float, float]:
    """Median over rounds of (with ledger / without), and the two medians. Each
    measurement keeps its ledger apart (``label``): every call is a first execution."""
    plain = one_call_runner(_graph(store, None, saver), loop, durability=durability)
    ledger = RunLedger(namespace=("bench", label))
    ledgered = one_call_runner(_graph(store, ledger, saver), loop, durability=durability)
    return compare(ledgered, plain, calls)


def compare(first: Any, second: Any, calls: int) -> tuple[float, float, float]:
    """After a warm-up, the median over 15 rounds of first / second, and the two medians."""
    for _ in range(_BLOCK):
        first(), second()
    rounds = [_round(first, second, calls) for _ in range(15)]
    ratio = statistics.median(a / b for a, b in rounds)
    return ratio, statistics.median(a for a, _ in rounds), statistics.median(b for _, b in rounds)


def _async_ratios(calls: int, db: Path) -> tuple[tuple[float, float, float], ...]:
    """The same measurement through ``ainvoke``: on InMemoryStore, and on AsyncSqliteStore
    (a file in WAL mode, as above), whose connection runs each statement in its own thread."""
    from langgraph.store.sqlite.aio import AsyncSqliteStore

    loop = asyncio.new_event_loop()
    try:
        memory = _ratio(InMemoryStore(), calls, "async-memory", loop=loop)
        opened = AsyncSqliteStore.from_conn_string(str(db))
        store = loop.run_until_complete(opened.__aenter__())
        try:
            loop.run_until_complete(store.setup())
            for pragma in ("PRAGMA journal_mode=WAL", "PRAGMA synchronous=NORMAL"):
                loop.run_until_complete(store.conn.execute(pragma))
            sqlite = _ratio(store, calls, "async-sqlite", loop=loop)
        finally:
            loop.run_until_complete(opened.__aexit__(None, None, None))
    finally:
        # the stores' batching tasks: cancelled and awaited, not destroyed with the loop
        pending = asyncio.all_tasks(loop)
        for task in pending:
            task.cancel()
        loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        loop.close()
    return memory, sqlite


def _history_ratio(store: Any, calls: int, long: int, short: int) -> tuple[float, float, float]:
    """A budgeted call on a thread with ``long`` executions on record / one with ``short``,
    on ``store``."""
    ledger = RunLedger()
    graph = _graph(store, ledger, budget=Budget(max_tool_calls=10 * long))
    for thread, size in (("long", long), ("short", short)):
        for i in range(size):
            entry = ledger.start(store, thread, f"past{i}", tool="noop", signature=f"noop|{i}",
                                 effect="write", previous={})  # fmt: skip
            assert entry is not None
            ledger.finish(store, thread, f"past{i}", content="ok", ok=True, started=entry)
    return compare(
        one_call_runner(graph, thread="long"), one_call_runner(graph, thread="short"), calls
    )


def run(quick: bool = False) -> list[dict[str, Any]]:
    calls = 10 if quick else 100
    rows: list[dict[str, Any]] = []
    memory = _ratio(InMemoryStore(), calls, "memory")
    with tempfile.TemporaryDirectory() as tmp:
        from langgraph.checkpoint.sqlite import SqliteSaver
        from langgraph.store.sqlite import SqliteStore

        conn = sqlite3.connect(str(Path(tmp) / "store.sqlite"), check_same_thread=False,
                               isolation_level=None)  # fmt: skip
        # WAL with synchronous=NORMAL: the usual setting for a SQLite file written per step
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        store = SqliteStore(conn)
        store.setup()
        sqlite = _ratio(store, calls, "sqlite")
        # the graph also checkpoints each step: to the store's own file, each step written
        # before the next starts (durability="sync", the reference graph's default) or
        # while it runs (LangGraph's "async"), and to a file of its own
        same = SqliteSaver(sqlite3.connect(str(Path(tmp) / "store.sqlite"),
                                           check_same_thread=False))  # fmt: skip
        apart = SqliteSaver(sqlite3.connect(str(Path(tmp) / "checkpoints.sqlite"),
                                            check_same_thread=False))  # fmt: skip
        for saver in (same, apart):
            saver.setup()
        synced = _ratio(store, calls, "synced", same, durability="sync")
        overlapping = _ratio(store, calls, "overlapping", same, durability="async")
        separate = _ratio(store, calls, "separate", apart, durability="async")
        for saver in (same, apart):
            saver.conn.close()
        # a thread's history: the same budgeted call on a long and a short thread
        long, short = (500, 50) if quick else (5000, 50)
        histories = {
            "InMemoryStore": _history_ratio(InMemoryStore(), calls, long, short),
            "SqliteStore": _history_ratio(store, calls, long, short),
        }
        conn.close()
        async_memory, async_sqlite = _async_ratios(calls, Path(tmp) / "async.sqlite")
    shared = (
        "; each step's checkpoint is written while the next step runs, and on one file the "
        "two connections wait for each other in SQLite's busy handler (1 ms and more), "
        "ledger or not: no target"
    )
    for name, (ratio, with_us, without_us), target, why in (
        ("InMemoryStore", memory, "<= 1.15", ""),
        ("SqliteStore", sqlite, "<= 1.15", ""),
        ("SqliteStore, SqliteSaver on its file, durability=sync", synced, "<= 1.15", ""),
        ("SqliteStore, SqliteSaver on its file, durability=async", overlapping, "", shared),
        ("SqliteStore, SqliteSaver on another file", separate, "<= 1.15", ""),
        ("InMemoryStore, async graph (ainvoke)", async_memory, "<= 1.15", ""),
        ("AsyncSqliteStore, async graph (ainvoke)", async_sqlite, "<= 1.15", ""),
    ):
        rows.append(
            {
                "name": f"run ledger per tool call, {name}: with / without",
                "value": round(ratio, 2),
                "unit": "x",
                **({"target": target} if target else {}),
                "note": f"{with_us:.0f} us vs {without_us:.0f} us per guarded no-op call{why}",
            }
        )
    for name, (ratio, long_us, short_us) in histories.items():
        rows.append(
            {
                "name": f"budgeted tool call on {name}, thread with {long:,} / {short} executions",
                "value": round(ratio, 2),
                "unit": "x",
                "target": "<= 1.50",
                "note": f"{long_us:.0f} us vs {short_us:.0f} us per call; two budget checks "
                "per call, each of which reads the number of the thread's entries (the "
                "statuses only near the limit)"
                + ("; on SQLite a COUNT of the prefix index" if name == "SqliteStore" else ""),
            }
        )
    return rows
