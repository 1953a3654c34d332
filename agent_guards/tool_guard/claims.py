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
within one process; ``is_atomic(store)`` says which applies.

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
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from langgraph.store.base import BaseStore

__all__ = ["claim", "is_atomic", "overwrite"]

_LOCK = threading.Lock()  # serializes read-then-write claims within this process

_SQLITE = (
    "INSERT OR IGNORE INTO store (prefix, key, value, created_at, updated_at) "
    "VALUES (?, ?, ?, CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)"
)
_UPDATE = (
    "UPDATE store SET value = {p}, updated_at = CURRENT_TIMESTAMP WHERE prefix = {p} AND key = {p}"
)
_POSTGRES = (
    "INSERT INTO store (prefix, key, value, created_at, updated_at) "
    "VALUES (%s, %s, %s, CURRENT_TIMESTAMP, CURRENT_TIMESTAMP) ON CONFLICT (prefix, key) DO NOTHING"
)


def _kind(store: BaseStore) -> str:
    """Which SQL dialect the store's table speaks ("" when none we know)."""
    module = type(store).__module__
    if module.startswith("langgraph.store.sqlite"):
        return "sqlite"
    if module.startswith("langgraph.store.postgres"):
        return "postgres"
    return ""


def is_atomic(store: BaseStore) -> bool:
    """Whether ``claim`` on this store is atomic across processes (SQLite, PostgreSQL)."""
    return bool(_kind(store))


def claim(store: BaseStore, namespace: tuple[str, ...], key: str, value: Mapping[str, Any]) -> bool:
    """Create ``(namespace, key) = value`` unless the item exists; True when this call did.

    Sync API: on an async store call it from a worker thread (as the store's own sync
    methods require).
    """
    kind = _kind(store)
    prefix = ".".join(namespace)
    if kind and getattr(store, "loop", None) is not None:  # AsyncSqliteStore, AsyncPostgresStore
        future = asyncio.run_coroutine_threadsafe(
            _aclaim(store, kind, prefix, key, value),
            store.loop,  # type: ignore[attr-defined]
        )
        return future.result()
    if kind == "sqlite":
        return _sqlite(store, prefix, key, value)
    if kind == "postgres":
        return _postgres(store, prefix, key, value)
    with _LOCK:
        if store.get(namespace, key) is not None:
            return False
        store.put(namespace, key, dict(value), index=False)
        return True


def _sqlite(store: Any, prefix: str, key: str, value: Mapping[str, Any]) -> bool:
    with store._cursor() as cursor:  # BEGIN ... COMMIT under the store's own lock
        cursor.execute(_SQLITE, (prefix, key, json.dumps(dict(value))))
        return bool(cursor.rowcount == 1)


def _postgres(store: Any, prefix: str, key: str, value: Mapping[str, Any]) -> bool:
    from psycopg.types.json import Jsonb

    # the store's lock: its own batches share the connection (in pipeline mode) with us
    with store.lock, store._cursor() as cursor:
        cursor.execute(_POSTGRES, (prefix, key, Jsonb(dict(value))))
        return bool(cursor.rowcount == 1)


async def _aclaim(store: Any, kind: str, prefix: str, key: str, value: Mapping[str, Any]) -> bool:
    if kind == "sqlite":
        async with store._cursor() as cursor:
            await cursor.execute(_SQLITE, (prefix, key, json.dumps(dict(value))))
            return bool(cursor.rowcount == 1)
    from psycopg.types.json import Jsonb

    async with store._cursor() as cursor:
        await cursor.execute(_POSTGRES, (prefix, key, Jsonb(dict(value))))
        return bool(cursor.rowcount == 1)


def overwrite(
    store: BaseStore, namespace: tuple[str, ...], key: str, value: Mapping[str, Any]
) -> None:
    """Set ``(namespace, key) = value``, as ``store.put(..., index=False)`` does; on a sync
    SQLite or PostgreSQL store, an item that exists (a claim) is updated in one statement."""
    kind = _kind(store)
    if kind and getattr(store, "loop", None) is None:
        prefix = ".".join(namespace)
        if kind == "sqlite":
            with store._cursor() as cursor:  # type: ignore[attr-defined]
                cursor.execute(_UPDATE.format(p="?"), (json.dumps(dict(value)), prefix, key))
                if cursor.rowcount == 1:
                    return
        else:
            from psycopg.types.json import Jsonb

            with store.lock, store._cursor() as cursor:  # type: ignore[attr-defined]
                cursor.execute(_UPDATE.format(p="%s"), (Jsonb(dict(value)), prefix, key))
                if cursor.rowcount == 1:
                    return
    store.put(namespace, key, dict(value), index=False)
