"""``claim``: insert-if-absent on each store LangGraph ships (one winner, readable back)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import pytest
from langgraph.store.memory import InMemoryStore

from agent_guards.persistence import open_persistence
from agent_guards.tool_guard.claims import (
    aclaim,
    aoverwrite,
    claim,
    count,
    is_atomic,
    overwrite,
    size,
)

NS = ("agent_guards", "ledger", "t1")


@contextmanager
def sync_store(kind: str, tmp_path: Path, postgres_url: str | None) -> Iterator[Any]:
    if kind == "memory":
        yield InMemoryStore()
        return
    db = postgres_url if kind == "postgres" else str(tmp_path / "claims.sqlite")
    assert db is not None
    with open_persistence(db) as (_, store):
        yield store


@pytest.fixture
def pg(request: pytest.FixtureRequest) -> str | None:
    if "postgres" not in request.node.name:
        return None
    return str(request.getfixturevalue("postgres_url"))


@pytest.mark.parametrize(
    "kind", ["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def test_the_first_claim_wins_and_reads_back(kind: str, tmp_path: Path, pg: str | None) -> None:
    with sync_store(kind, tmp_path, pg) as store:
        key = f"call-{kind}#1"
        assert claim(store, NS, key, {"status": "started", "by": "a"}) is True
        assert claim(store, NS, key, {"status": "started", "by": "b"}) is False
        assert store.get(NS, key).value == {"status": "started", "by": "a"}
        assert [i.key for i in store.search(NS) if i.key == key] == [key]
        overwrite(store, NS, key, {"status": "done", "by": "a"})  # the outcome overwrites
        item = store.get(NS, key)
        assert item.value == {"status": "done", "by": "a"} and item.updated_at >= item.created_at
        assert [i.value["status"] for i in store.search(NS) if i.key == key] == ["done"]
        overwrite(store, NS, f"{key}-new", {"status": "not_run"})  # no claim: created
        assert store.get(NS, f"{key}-new").value == {"status": "not_run"}
        assert is_atomic(store) is (kind != "memory")


@asynccontextmanager
async def async_sqlite(tmp_path: Path) -> AsyncIterator[Any]:
    from langgraph.store.sqlite.aio import AsyncSqliteStore

    async with AsyncSqliteStore.from_conn_string(str(tmp_path / "claims.sqlite")) as store:
        await store.setup()
        yield store


async def test_claims_on_an_async_store_run_from_a_worker_thread(tmp_path: Path) -> None:
    async with async_sqlite(tmp_path) as store:
        first = await asyncio.to_thread(claim, store, NS, "c#1", {"by": "a"})
        second = await asyncio.to_thread(claim, store, NS, "c#1", {"by": "b"})
        assert (first, second) == (True, False)
        assert (await store.aget(NS, "c#1")).value == {"by": "a"}


@pytest.mark.postgres
async def test_claims_on_async_postgres_run_from_a_worker_thread(postgres_url: str) -> None:
    from langgraph.store.postgres.aio import AsyncPostgresStore

    async with AsyncPostgresStore.from_conn_string(postgres_url) as store:
        await store.setup()
        first = await asyncio.to_thread(claim, store, NS, "apg#1", {"by": "a"})
        second = await asyncio.to_thread(claim, store, NS, "apg#1", {"by": "b"})
        assert (first, second) == (True, False)
        assert (await store.aget(NS, "apg#1")).value == {"by": "a"}


def _fill(run: Any, prefix: str) -> None:
    """Items for ``count``: two that count in ``(prefix, "t1")``, and four that do not;
    for ``size``: three in ``(prefix, "t1")`` (the ``not_run`` one too)."""
    run(claim, ("led", prefix, "t1"), "a", {"status": "done"})  # the ledger's own insert
    run(claim, ("led", prefix, "t1"), "b", {"status": "started"})
    run(overwrite, ("led", prefix, "t1"), "c", {"status": "not_run"})  # the store's put
    run(claim, ("led", prefix, "t10"), "d", {"status": "done"})
    run(claim, ("led", prefix, "t1", "sub"), "e", {"status": "done"})
    run(claim, ("led", prefix, "T1"), "f", {"status": "done"})


@pytest.mark.parametrize(
    "kind", ["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def test_count_reads_one_namespace_exactly(kind: str, tmp_path: Path, pg: str | None) -> None:
    with sync_store(kind, tmp_path, pg) as store:
        _fill(lambda fn, *args: fn(store, *args), f"sync-{kind}")
        assert count(store, ("led", f"sync-{kind}", "t1"), status_not="not_run") == 2
        assert size(store, ("led", f"sync-{kind}", "t1")) == 3
        assert size(store, ("led", f"sync-{kind}", "none")) == 0


async def test_count_on_async_stores_runs_from_a_worker_thread(tmp_path: Path) -> None:
    async with async_sqlite(tmp_path) as store:
        ns = ("led", "async-sqlite", "t1")
        await asyncio.to_thread(_fill, lambda fn, *args: fn(store, *args), "async-sqlite")
        assert await asyncio.to_thread(count, store, ns, status_not="not_run") == 2
        assert await asyncio.to_thread(size, store, ns) == 3


@pytest.mark.postgres
async def test_count_on_async_postgres_runs_from_a_worker_thread(postgres_url: str) -> None:
    from langgraph.store.postgres.aio import AsyncPostgresStore

    async with AsyncPostgresStore.from_conn_string(postgres_url) as store:
        await store.setup()
        ns = ("led", "async-postgres", "t1")
        await asyncio.to_thread(_fill, lambda fn, *args: fn(store, *args), "async-postgres")
        assert await asyncio.to_thread(count, store, ns, status_not="not_run") == 2
        assert await asyncio.to_thread(size, store, ns) == 3


@pytest.mark.parametrize(
    "kind",
    ["memory", "sqlite", "async-sqlite", pytest.param("async-postgres", marks=pytest.mark.postgres)],
)  # fmt: skip
async def test_aclaim_and_aoverwrite_from_the_event_loop(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """The async forms on each store: one winner, the outcome written over the claim, a
    key never claimed created."""
    async with any_store(kind, tmp_path, request) as store:
        ns = ("agent_guards", "ledger", kind)
        assert await aclaim(store, ns, "c#1", {"status": "started", "by": "a"}) is True
        assert await aclaim(store, ns, "c#1", {"status": "started", "by": "b"}) is False
        await aoverwrite(store, ns, "c#1", {"status": "done", "by": "a"})
        await aoverwrite(store, ns, "c#2", {"status": "not_run"})
        read = [await asyncio.to_thread(store.get, ns, key) for key in ("c#1", "c#2")]
        assert [item.value for item in read] == [
            {"status": "done", "by": "a"},
            {"status": "not_run"},
        ]


@asynccontextmanager
async def any_store(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> AsyncIterator[Any]:
    if kind in ("memory", "sqlite"):
        with sync_store(kind, tmp_path, None) as store:
            yield store
    elif kind == "async-sqlite":
        async with async_sqlite(tmp_path) as store:
            yield store
    else:
        from langgraph.store.postgres.aio import AsyncPostgresStore

        url = request.getfixturevalue("postgres_url")
        async with AsyncPostgresStore.from_conn_string(url) as store:
            await store.setup()
            yield store
