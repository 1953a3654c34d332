"""The run ledger reads one thread's entries only, whatever the store's search matches.

``langgraph-checkpoint-sqlite`` 3.1.0 (the floor the ``sqlite`` extra declares) searched a
namespace prefix with ``LIKE 'agent_guards.ledger.t1%'``: the ledger of thread ``t1`` also
returned thread ``t10``'s entries, so ``t1`` was charged ``t10``'s tool calls and a cancel
of ``t1`` would have compensated ``t10``'s writes. ``make floors`` runs this file on 3.1.0.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from langgraph.store.memory import InMemoryStore
from langgraph.store.sqlite import SqliteStore

from agent_guards.tool_guard import RunLedger
from agent_guards.tool_guard import ledger as ledger_module
from agent_guards.tool_guard.claims import count, items
from agent_guards.tool_guard.state_ledger import StateLedger

LEDGER = RunLedger()


@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    if request.param == "memory":
        yield InMemoryStore()
        return
    conn = sqlite3.connect(tmp_path / "ledger.sqlite", check_same_thread=False,
                           isolation_level=None)  # fmt: skip
    with closing(conn):
        sqlite_store = SqliteStore(conn)
        sqlite_store.setup()
        yield sqlite_store


def _run(store: Any, thread: str, call: str, *, effect: str = "write") -> dict[str, Any]:
    entry = LEDGER.start(store, thread, call, tool="invoice", signature=f"invoice|{call}",
                         effect=effect, previous={})  # fmt: skip
    assert entry is not None
    LEDGER.finish(store, thread, call, content=f"created {call}", ok=True, started=entry)
    return entry


def test_a_thread_is_charged_its_own_executions_only(store: Any) -> None:
    _run(store, "t1", "a")
    for i in range(3):
        _run(store, "t10", f"b{i}")
    _run(store, "t1-retry", "c")
    voided = _run(store, "t1", "d")
    LEDGER.void(store, "t1", voided)  # it never happened: not counted
    assert LEDGER.executions(store, "t1") == 1
    assert LEDGER.executions(store, "t10") == 3
    assert LEDGER.executions(store, "nobody") == 0


def test_a_cancel_sees_its_own_thread_s_writes_only(store: Any) -> None:
    _run(store, "t1", "a")
    _run(store, "t1", "r", effect="read")
    _run(store, "t10", "b")
    assert [e["call_id"] for e in LEDGER.done_writes(store, "t1")] == ["a"]


def test_count_skips_sub_namespaces_and_counts_entries_without_a_status(store: Any) -> None:
    store.put(("led", "t1"), "x", {"status": "done"})
    store.put(("led", "t1"), "y", {"other": 1})  # no status: counted
    store.put(("led", "t1"), "z", {"status": "not_run"})
    store.put(("led", "t1", "sub"), "w", {"status": "done"})
    store.put(("led", "t10"), "v", {"status": "done"})
    assert count(store, ("led", "t1"), status_not="not_run") == 2


def test_count_in_place_agrees_with_paging_through_search() -> None:
    """InMemoryStore and the ledger's view of state are counted where they keep their
    entries (search would build an item per entry, and InMemoryStore rescans every
    namespace for each page): the count is the one the pages give, past one page too."""
    memory = InMemoryStore()
    entries: dict[str, dict[str, Any]] = {}
    for i in range(250):  # more than two pages of 100
        value = {"status": ("done", "not_run", "started")[i % 3], "n": i}
        memory.put(("led", "t1"), f"k{i}", value)
        entries[f"k{i}"] = value
    memory.put(("led", "t1", "sub"), "w", {"status": "done"})
    memory.put(("led", "t10"), "v", {"status": "done"})
    paged = sum(1 for item in items(memory, ("led", "t1")) if item.value["status"] != "not_run")
    assert paged == 167
    assert count(memory, ("led", "t1"), status_not="not_run") == paged
    assert count(memory, ("led", "nobody"), status_not="not_run") == 0

    view = StateLedger(entries)
    view.put(("led", "t1"), "k1", {"status": "done"})  # was not_run: the step's own write wins
    view.put(("led", "t1"), "new", {"status": "not_run"})
    assert count(view, ("led", "t1"), status_not="not_run") == paged + 1
    assert count(view, ("led", "t1"), status_not="not_run") == sum(
        1 for item in items(view, ("led", "t1")) if item.value["status"] != "not_run"
    )


def test_a_budgeted_call_reads_an_in_process_ledger_without_searching_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Paging through search made each budget check cost the thread's whole history (an
    item built per entry, and every namespace rescanned per page: a call on a thread of
    5,000 executions took 100x one on a thread of 50)."""
    memory = InMemoryStore()
    for i in range(120):
        _run(memory, "t1", f"c{i}")

    def no_search(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the ledger searched the store to count it")

    monkeypatch.setattr(InMemoryStore, "search", no_search)
    monkeypatch.setattr(StateLedger, "search", no_search)
    assert LEDGER.executions(memory, "t1") == 120
    view = StateLedger({f"c{i}#1": {"status": "done"} for i in range(120)})
    assert LEDGER.executions(view, "t1") == 120


def test_under_a_limit_the_ledger_size_stands_for_the_count(
    store: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A budget check reads no entry while the thread is below its limit: the number of
    entries (at least the count) stands for it, so the check does not grow with the thread;
    at the limit the count is exact, so an execution that never happened frees its unit."""
    _run(store, "t1", "a")
    LEDGER.void(store, "t1", _run(store, "t1", "b"))  # never happened: not counted
    _run(store, "t10", "c")
    assert LEDGER.executions(store, "t1", under=2) == 1  # two entries, not under 2: counted
    monkeypatch.setattr(ledger_module, "count", _no_count)
    assert LEDGER.executions(store, "t1", under=3) == 2  # under 3: their number, none read
    assert LEDGER.executions(store, "nobody", under=1) == 0
    view = StateLedger({"a#1": {"status": "done"}, "b#1": {"status": "not_run"}})
    view.put(("ledger", "t1"), "b#1", {"status": "not_run"})  # a write over an entry
    view.put(("ledger", "t1"), "c#1", {"status": "started"})  # and a new one
    assert LEDGER.executions(view, "t1", under=4) == 3


def _no_count(*args: Any, **kwargs: Any) -> Any:
    raise AssertionError("the ledger read its entries' statuses below the limit")


@pytest.mark.parametrize("thread", ["user.42", "alice@example.com", "a%2Eb", "a.b%", "a\x00b", ""])
def test_any_thread_id_gets_a_ledger_of_its_own(store: Any, thread: str) -> None:
    # A store label cannot hold "." or NUL nor be empty: the thread id is escaped, and no two
    # ids share a scope ("a.b" and the literal "a%2Eb" stay apart)
    for other in ("a.b", "a%2Eb", "user", "42"):
        if other != thread:
            _run(store, other, "x")
    _run(store, thread, "a")
    entry = LEDGER.entry(store, thread, "a")
    assert entry is not None and entry["status"] == "done"
    assert LEDGER.executions(store, thread) == 1
    assert [item.key for item in items(store, LEDGER.scope(thread))] == ["a#1"]


def test_the_scope_keeps_a_plain_thread_id_as_it_is() -> None:
    # ledgers recorded before ids were escaped stay where they are
    assert LEDGER.scope("t1") == ("agent_guards", "ledger", "t1")
    assert len({LEDGER.scope(t) for t in ("a.b", "a%2Eb", "a%2eb", "", "%")}) == 5
