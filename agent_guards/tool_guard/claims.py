"""Insert-if-absent on LangGraph's stores: how two workers agree on who runs a tool call.

``BaseStore.put`` overwrites, so two workers serving one thread that both read "not run
yet" would both run the call. A claim is an item that only one writer can create: the
first ``claim`` of a key returns True, every later one False, across threads and, on
SQLite and PostgreSQL, across processes. It is one SQL statement on the store's own
table (``INSERT OR IGNORE`` / ``ON CONFLICT DO NOTHING``), so the claimed item reads back
through the store's ordinary ``get`` and ``search``. ``overwrite`` then records what
became of a claimed item in one ``UPDATE`` (``BaseStore.put`` goes through the store's
batch machinery, which costs a third more on SQLite for the same commit).

Supported: ``InMemoryStore`` (one process), ``SqliteStore``, ``PostgresStore`` and their
async variants. Any other store falls back to read-then-write, which is atomic only
within one process; ``is_atomic(store)`` says which applies. The ledger's view of state
(one step's own copy of the entries it read) is written in place.

``count`` counts the items of exactly one namespace in one SQL statement on the same
stores (``search`` would decode every item), and in place on the stores this process
holds (``InMemoryStore``, the ledger's view of state: ``search`` would build an item per
entry, and ``InMemoryStore`` rescans every namespace for each page); elsewhere it counts
``items``, which pages through ``search`` and keeps that namespace's items only.

Example:
    >>> from langgraph.store.memory import InMemoryStore
    >>> store = InMemoryStore()
    >>> claim(store, ("ns",), "k", {"who": "a"}), claim(store, ("ns",), "k", {"who": "b"})
    (True, False)
    >>> store.get(("ns",), "k").value
    {'who': 'a'}
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from collections.abc import Coroutine, Iterator

    from langgraph.store.base import BaseStore, Item

__all__ = [
    "aclaim",
    "aoverwrite",
    "claim",
    "count",
    "in_process",
    "is_atomic",
    "items",
    "overwrite",
    "size",
]

T = TypeVar("T")

_LOCK = threading.Lock()  # serializes read-then-write claims within this process

_SQLITE = (
    "INSERT OR IGNORE INTO store (prefix, key, value, created_at, updated_at) "
    "VALUES (?, ?, ?, CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)"
)
_UPDATE = (
    "UPDATE store SET value = {p}, updated_at = CURRENT_TIMESTAMP WHERE prefix = {p} AND key = {p}"
)
_SQLITE_UPDATE = _UPDATE.format(p="?")
_POSTGRES_UPDATE = _UPDATE.format(p="%s")
_POSTGRES = (
    "INSERT INTO store (prefix, key, value, created_at, updated_at) "
    "VALUES (%s, %s, %s, CURRENT_TIMESTAMP, CURRENT_TIMESTAMP) ON CONFLICT (prefix, key) DO NOTHING"
)


# items whose "status" is not the one given (a missing status counts); SqliteStore keeps
# values as JSON text or bytes, hence the cast
_SQLITE_COUNT = (
    "SELECT COUNT(*) FROM store WHERE prefix = ? "
    "AND json_extract(CAST(value AS TEXT), '$.status') IS NOT ?"
)
_POSTGRES_COUNT = (
    "SELECT COUNT(*) FROM store WHERE prefix = %s AND value->>'status' IS DISTINCT FROM %s"
)
# every item of a namespace, read off the prefix index alone (no value is read)
_SIZE = "SELECT COUNT(*) FROM store WHERE prefix = {p}"
_SQLITE_SIZE = _SIZE.format(p="?")
_POSTGRES_SIZE = _SIZE.format(p="%s")
_PAGE = 100
_MEMORY = ("langgraph.store.memory", "InMemoryStore")
_STATE = ("agent_guards.tool_guard.state_ledger", "StateLedger")
_IN_PROCESS = {_MEMORY, _STATE}  # named, not imported: modules using claims stay langgraph-free


def _kind(store: BaseStore) -> str:
    """Which SQL dialect the store's table speaks ("" when none we know)."""
    module = type(store).__module__
    if module.startswith("langgraph.store.sqlite"):
        return "sqlite"
    if module.startswith("langgraph.store.postgres"):
        return "postgres"
    return ""


def _async_kind(store: BaseStore) -> str:
    """``_kind`` of an async store (AsyncSqliteStore, AsyncPostgresStore: they keep their
    event loop), "" for any other."""
    return _kind(store) if getattr(store, "loop", None) is not None else ""


def is_atomic(store: BaseStore) -> bool:
    """Whether ``claim`` on this store is atomic across processes (SQLite, PostgreSQL)."""
    return bool(_kind(store))


def in_process(store: BaseStore) -> bool:
    """Whether the store's sync API does no I/O: LangGraph's ``InMemoryStore`` (a subclass
    may add I/O, so the class itself only) or the ledger's view of state. An async caller
    may call it on the event loop, where a hop to a worker thread costs more than the call."""
    return _held(store) in _IN_PROCESS


def _held(store: BaseStore) -> tuple[str, str]:
    """``(module, class name)`` of the store, as ``_MEMORY`` and ``_STATE`` name them."""
    kind = type(store)
    return kind.__module__, kind.__name__


def claim(
    store: BaseStore,
    namespace: tuple[str, ...],
    key: str,
    value: Mapping[str, Any],
    *,
    text: str | None = None,
) -> bool:
    """Create ``(namespace, key) = value`` unless the item exists; True when this call did.

    ``text``: ``json.dumps(value)`` when the caller has it already (SQLite stores it as is).
    Sync API: on an async store call it from a worker thread (as the store's own sync
    methods require).
    """
    if _held(store) == _STATE:  # one step's own view of the ledger in state
        return bool(store.add(key, value))  # type: ignore[attr-defined]
    kind, prefix = _kind(store), ".".join(namespace)
    if akind := _async_kind(store):
        return _on_loop(store, _aclaim(store, akind, prefix, key, value, text=text))
    if kind == "sqlite":
        return _sqlite_write(store, _SQLITE, (prefix, key, text or _json(value))) == 1
    if kind == "postgres":
        return _postgres(store, prefix, key, value)
    with _LOCK:
        if store.get(namespace, key) is not None:
            return False
        store.put(namespace, key, dict(value), index=False)
        return True


async def aclaim(
    store: BaseStore,
    namespace: tuple[str, ...],
    key: str,
    value: Mapping[str, Any],
    *,
    text: str | None = None,
) -> bool:
    """:func:`claim` from the event loop: awaited on an async store, run here on a store
    that does no I/O, in a worker thread on any other."""
    if kind := _async_kind(store):
        return await _aclaim(store, kind, ".".join(namespace), key, value, text=text)
    return await _off_loop(store, claim, store, namespace, key, value, text=text)


async def _off_loop(store: BaseStore, func: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """``func(*args, **kwargs)``, a sync call on ``store``, from the event loop: here when
    the store does no I/O, else in a worker thread."""
    if in_process(store):
        return func(*args, **kwargs)
    return await asyncio.to_thread(func, *args, **kwargs)


def _on_loop(store: Any, coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` on an async store's event loop from this (worker) thread; its result."""
    return asyncio.run_coroutine_threadsafe(coro, store.loop).result()


def _count_of(row: Any) -> int:
    """``COUNT(*)`` from a row, a tuple or a psycopg ``dict_row``."""
    return int(row["count"] if isinstance(row, Mapping) else row[0])


def _sqlite_write(store: Any, sql: str, params: tuple[str, ...]) -> int:
    """Run one write statement on a sync ``SqliteStore`` under its own lock; the rows changed.

    On a connection in autocommit mode (as ``SqliteStore.from_conn_string`` opens it) a lone
    statement is its own transaction, as atomic and durable as the ``BEGIN ... COMMIT``
    the store's ``_cursor()`` wraps it in, for two fewer round trips to SQLite. Any other
    connection goes through ``_cursor()`` as the store's own writes do.
    """
    if not store.is_setup:
        store.setup()
    with store.lock:
        conn = store.conn
        if conn.isolation_level is None and not conn.in_transaction:
            return int(conn.execute(sql, params).rowcount)
    with store._cursor() as cursor:  # BEGIN ... COMMIT under the store's own lock
        cursor.execute(sql, params)
        return int(cursor.rowcount)


def _json(value: Mapping[str, Any]) -> str:
    return json.dumps(value if isinstance(value, dict) else dict(value))


def _postgres(store: Any, prefix: str, key: str, value: Mapping[str, Any]) -> bool:
    from psycopg.types.json import Jsonb

    # the store's lock: its own batches share the connection (in pipeline mode) with us
    with store.lock, store._cursor() as cursor:
        cursor.execute(_POSTGRES, (prefix, key, Jsonb(dict(value))))
        return bool(cursor.rowcount == 1)


async def _aclaim(
    store: Any, kind: str, prefix: str, key: str, value: Mapping[str, Any], *, text: str | None
) -> bool:
    if kind == "sqlite":
        return await _asqlite_write(store, _SQLITE, (prefix, key, text or _json(value))) == 1
    from psycopg.types.json import Jsonb

    async with store._cursor() as cursor:
        await cursor.execute(_POSTGRES, (prefix, key, Jsonb(dict(value))))
        return bool(cursor.rowcount == 1)


async def _asqlite_write(store: Any, sql: str, params: tuple[str, ...]) -> int:
    """:func:`_sqlite_write` on an ``AsyncSqliteStore``. Its connection runs every call in
    a thread of its own, so a lone statement in autocommit mode is one trip there where
    ``_cursor()`` takes five (``BEGIN``, cursor, statement, close, ``COMMIT``)."""
    if not store.is_setup:
        await store.setup()
    async with store.lock:
        conn = store.conn
        if conn.isolation_level is None and not conn.in_transaction:
            return int((await conn.execute(sql, params)).rowcount)
    async with store._cursor() as cursor:
        await cursor.execute(sql, params)
        return int(cursor.rowcount)


async def _aoverwrite(store: Any, kind: str, prefix: str, key: str, value: Mapping[str, Any],
                      *, text: str | None) -> bool:  # fmt: skip
    """The one-statement update of :func:`overwrite` on an async store; True when it did."""
    if kind == "sqlite":
        return await _asqlite_write(store, _SQLITE_UPDATE, (text or _json(value), prefix, key)) == 1
    from psycopg.types.json import Jsonb

    async with store._cursor() as cursor:
        await cursor.execute(_POSTGRES_UPDATE, (Jsonb(dict(value)), prefix, key))
        return bool(cursor.rowcount == 1)


def overwrite(
    store: BaseStore,
    namespace: tuple[str, ...],
    key: str,
    value: Mapping[str, Any],
    *,
    text: str | None = None,
) -> None:
    """Set ``(namespace, key) = value``, as ``store.put(..., index=False)`` does; on a SQLite
    or PostgreSQL store, sync or async, an item that exists (a claim) is updated in one
    statement. ``text`` as for :func:`claim`."""
    if _held(store) == _STATE:
        store.add(key, value, replace=True)  # type: ignore[attr-defined]
        return
    kind, prefix = _kind(store), ".".join(namespace)
    if akind := _async_kind(store):
        done = _on_loop(store, _aoverwrite(store, akind, prefix, key, value, text=text))
    elif kind == "sqlite":
        done = _sqlite_write(store, _SQLITE_UPDATE, (text or _json(value), prefix, key)) == 1
    elif kind == "postgres":
        done = _postgres_update(store, prefix, key, value)
    else:
        done = False
    if not done:  # no such item, or a store without SQL
        store.put(namespace, key, dict(value), index=False)


async def aoverwrite(
    store: BaseStore,
    namespace: tuple[str, ...],
    key: str,
    value: Mapping[str, Any],
    *,
    text: str | None = None,
) -> None:
    """:func:`overwrite` from the event loop, as :func:`aclaim` runs ``claim``."""
    kind = _async_kind(store)
    if not kind:
        await _off_loop(store, overwrite, store, namespace, key, value, text=text)
    elif not await _aoverwrite(store, kind, ".".join(namespace), key, value, text=text):
        await store.aput(namespace, key, dict(value), index=False)


def _postgres_update(store: Any, prefix: str, key: str, value: Mapping[str, Any]) -> bool:
    from psycopg.types.json import Jsonb

    with store.lock, store._cursor() as cursor:  # the store's lock, as for a claim
        cursor.execute(_POSTGRES_UPDATE, (Jsonb(dict(value)), prefix, key))
        return bool(cursor.rowcount == 1)


def count(store: BaseStore, namespace: tuple[str, ...], *, status_not: str) -> int:
    """How many items ``namespace`` itself holds (not its sub-namespaces) whose value's
    ``"status"`` is not ``status_not``. Sync API, as for :func:`claim`.

    Example:
        >>> from langgraph.store.memory import InMemoryStore
        >>> store = InMemoryStore()
        >>> for ns, key, status in [(("t1",), "a", "done"), (("t1",), "b", "void"),
        ...                         (("t10",), "c", "done"), (("t1", "x"), "d", "done")]:
        ...     store.put(ns, key, {"status": status})
        >>> count(store, ("t1",), status_not="void")
        1
    """
    params = (".".join(namespace), status_not)
    counted = _sql_count(store, _SQLITE_COUNT, _POSTGRES_COUNT, params)
    if counted is not None:
        return counted
    statuses = _held_statuses(store, namespace)
    if statuses is None:
        statuses = [item.value.get("status") for item in items(store, namespace)]
    return len(statuses) - statuses.count(status_not)


def size(store: BaseStore, namespace: tuple[str, ...]) -> int | None:
    """How many items ``namespace`` itself holds, whatever their values, when the store
    tells without reading them: the length of what an in-process store keeps, a ``COUNT``
    on the SQL stores' prefix index (a twentieth of :func:`count`'s time, which reads every
    value); None for any other store. Sync API, as for :func:`claim`.

    Example:
        >>> from langgraph.store.memory import InMemoryStore
        >>> store = InMemoryStore()
        >>> for key, status in [("a", "done"), ("b", "void")]:
        ...     store.put(("t1",), key, {"status": status})
        >>> size(store, ("t1",)), count(store, ("t1",), status_not="void"), size(store, ("t2",))
        (2, 1, 0)
    """
    held = _held(store)
    if held == _MEMORY:
        return len(store._data.get(namespace) or ())  # type: ignore[attr-defined]
    if held == _STATE:
        return store.size()  # type: ignore[attr-defined,no-any-return]
    return _sql_count(store, _SQLITE_SIZE, _POSTGRES_SIZE, (".".join(namespace),))


def _sql_count(store: BaseStore, sqlite: str, postgres: str, params: tuple[str, ...]) -> int | None:
    """A ``COUNT`` statement (``sqlite`` or ``postgres``, as the store speaks) on a SQL
    store, sync or async; None on any other store."""
    if akind := _async_kind(store):
        sql = sqlite if akind == "sqlite" else postgres
        return _on_loop(store, _aselect_count(store, akind, sql, params))
    kind = _kind(store)
    if kind == "sqlite":  # a read: no transaction; the cursor holds the store's lock
        with store._cursor(transaction=False) as cursor:  # type: ignore[attr-defined]
            cursor.execute(sqlite, params)
            return _count_of(cursor.fetchone())
    if kind == "postgres":  # the store's lock, as for a claim
        with store.lock, store._cursor() as cursor:  # type: ignore[attr-defined]
            cursor.execute(postgres, params)
            return _count_of(cursor.fetchone())
    return None


def _held_statuses(store: BaseStore, namespace: tuple[str, ...]) -> list[Any] | None:
    """The ``"status"`` of each of ``namespace``'s items, read where an in-process store
    keeps them (a snapshot: ``list`` copies a dict's values in one step, so a put from
    another thread cannot change it mid-count); None for every other store."""
    kind = _held(store)
    if kind == _MEMORY:
        held = store._data.get(namespace)  # type: ignore[attr-defined]  # .get adds no key
        return [item.value.get("status") for item in list(held.values())] if held else []
    if kind == _STATE:
        return [value.get("status") for value in store.values()]  # type: ignore[attr-defined]
    return None


def items(store: BaseStore, namespace: tuple[str, ...]) -> Iterator[Item]:
    """Every item of ``namespace`` itself (not its sub-namespaces), a page of ``search``
    at a time. A store whose search matches by string prefix (``langgraph-checkpoint-sqlite``
    before 3.1.1) also returns the namespace ``t10`` for ``t1``: those are skipped."""
    offset = 0
    while True:
        page = store.search(namespace, limit=_PAGE, offset=offset)
        yield from (item for item in page if tuple(item.namespace) == namespace)
        if len(page) < _PAGE:
            return
        offset += _PAGE


async def _aselect_count(store: Any, kind: str, sql: str, params: tuple[str, ...]) -> int:
    cursor_of = store._cursor(transaction=False) if kind == "sqlite" else store._cursor()
    async with cursor_of as cursor:
        await cursor.execute(sql, params)
        return _count_of(await cursor.fetchone())
