"""Load and save :class:`~agent_guards.memory_resolve.MemoryRecord` s in a LangGraph ``BaseStore``.

Works with ``InMemoryStore``, ``SqliteStore`` and ``PostgresStore`` (and their async
variants). Each record is one store item: the key is the record id, the value is
``record.to_dict()``. Validity lives in the value (``valid_until``, ``status``), so it does
not depend on the store's sliding TTL; nothing is deleted, superseded records stay for audit.
Namespace labels cannot contain ``.``: :func:`namespace_label` escapes user ids like
``alice@example.com``.

Example:
    >>> from langgraph.store.memory import InMemoryStore
    >>> from agent_guards.memory_resolve import MemoryRecord
    >>> store = InMemoryStore()
    >>> ns = memory_namespace("alice@example.com")
    >>> ns
    ('memories', 'alice@example%2Ecom')
    >>> save_memories(store, ns, [MemoryRecord("m1", "report_format", "pdf", status="pending")])
    >>> confirm_memory(store, ns, "m1").status
    'active'
    >>> [r.value for r in load_memories(store, ns)]
    ['pdf']
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import Any

from langgraph.store.base import BaseStore

from agent_guards.core.errors import InvalidInputError
from agent_guards.core.fields import namespace_label
from agent_guards.memory_resolve.model import MemoryRecord

__all__ = [
    "aconfirm_memory",
    "aload_memories",
    "asave_memories",
    "confirm_memory",
    "load_memories",
    "memory_namespace",
    "namespace_label",
    "save_memories",
]

PAGE_SIZE = 100


def memory_namespace(principal: str, *, prefix: Sequence[str] = ("memories",)) -> tuple[str, ...]:
    """The namespace of one principal's memories: ``(*prefix, escaped principal)``.

    Example:
        >>> from agent_guards.memory_resolve import memory_namespace
        >>> memory_namespace("alice@example.com")
        ('memories', 'alice@example%2Ecom')
        >>> memory_namespace("bob", prefix=("acme", "memories"))
        ('acme', 'memories', 'bob')
    """
    return (*_check_namespace(tuple(prefix)), namespace_label(principal))


def _check_namespace(namespace: Sequence[str]) -> tuple[str, ...]:
    ns = tuple(namespace)
    bad = [label for label in ns if not isinstance(label, str) or not label or "." in label]
    if not ns or bad:
        raise ValueError(
            f"namespace must be non-empty labels without '.', got {ns!r} "
            "(escape ids with namespace_label)"
        )
    return ns


def _record(key: str, value: Any, created_at: Any = None) -> MemoryRecord:
    if not isinstance(value, dict):
        raise InvalidInputError(f"stored value is not a dict: {value!r}", item=key, field="value")
    if "data" in value and not {"key", "value"} & set(value):
        # LangGraph's documented shape, {"data": ...}: a free-text memory, keyed by its id
        # (it takes part in arbitration only through a key: store {"key":, "value":} for that)
        return MemoryRecord(key, f"memory:{key}", value["data"], created_at=created_at)
    data = dict(value)
    data.setdefault("id", key)
    if data["id"] != key:
        raise InvalidInputError(
            f"stored id {data['id']!r} differs from the store key", item=key, field="id"
        )
    return MemoryRecord.from_dict(data)


def _records(page: Iterable[Any], ns: tuple[str, ...], invalid: list[Any] | None) -> list[Any]:
    out = []
    for item in page:
        if tuple(item.namespace) != ns:
            continue
        try:
            out.append(_record(item.key, item.value, getattr(item, "created_at", None)))
        except InvalidInputError as err:
            if invalid is None:
                raise
            invalid.append(err)
    return out


def load_memories(
    store: BaseStore, namespace: Sequence[str], *, invalid: list[InvalidInputError] | None = None
) -> list[MemoryRecord]:
    """Every record in ``namespace`` (not its sub-namespaces), sorted by id.

    Items in LangGraph's documented shape (``{"data": ...}``) are read as free-text memories
    keyed by their id. With ``invalid`` (a list), a stored value that is no valid record is
    skipped and its error appended there, so one bad item never hides the others.

    Raises:
        InvalidInputError: A stored value is not a valid record (names the key and field),
            unless ``invalid`` collects it.

    Example:
        >>> from langgraph.store.memory import InMemoryStore
        >>> from agent_guards import MemoryRecord
        >>> from agent_guards.memory_resolve import load_memories, memory_namespace, save_memories
        >>> store, ns = InMemoryStore(), memory_namespace("alice")
        >>> records = [MemoryRecord("m2", "tz", "UTC"), MemoryRecord("m1", "lang", "fr")]
        >>> save_memories(store, ns, records)
        >>> save_memories(store, (*ns, "archive"), [MemoryRecord("old", "lang", "de")])
        >>> [(r.id, r.value) for r in load_memories(store, ns)]  # sorted, no sub-namespaces
        [('m1', 'fr'), ('m2', 'UTC')]
    """
    ns = _check_namespace(namespace)
    out: list[MemoryRecord] = []
    offset = 0
    while True:
        page = store.search(ns, limit=PAGE_SIZE, offset=offset)
        out.extend(_records(page, ns, invalid))
        if len(page) < PAGE_SIZE:
            return sorted(out, key=lambda r: r.id)
        offset += PAGE_SIZE


async def aload_memories(
    store: BaseStore, namespace: Sequence[str], *, invalid: list[InvalidInputError] | None = None
) -> list[MemoryRecord]:
    """Async :func:`load_memories` (falls back to the sync API for sync-only stores).

    Example:
        >>> import asyncio
        >>> from langgraph.store.memory import InMemoryStore
        >>> from agent_guards import MemoryRecord
        >>> from agent_guards.memory_resolve import aload_memories, save_memories
        >>> store = InMemoryStore()
        >>> save_memories(store, ("memories", "alice"), [MemoryRecord("m1", "lang", "fr")])
        >>> [(r.id, r.value) for r in asyncio.run(aload_memories(store, ("memories", "alice")))]
        [('m1', 'fr')]
    """
    ns = _check_namespace(namespace)
    out: list[MemoryRecord] = []
    offset = 0
    while True:
        try:
            page = await store.asearch(ns, limit=PAGE_SIZE, offset=offset)
        except NotImplementedError:  # e.g. SqliteStore: sync only
            return load_memories(store, ns, invalid=invalid)
        out.extend(_records(page, ns, invalid))
        if len(page) < PAGE_SIZE:
            return sorted(out, key=lambda r: r.id)
        offset += PAGE_SIZE


def _check_records(records: Iterable[MemoryRecord]) -> list[MemoryRecord]:
    out = list(records)
    for r in out:
        if not isinstance(r, MemoryRecord):
            raise TypeError(f"expected MemoryRecord, got {type(r).__name__}")
    return out


def save_memories(
    store: BaseStore,
    namespace: Sequence[str],
    records: Iterable[MemoryRecord],
    *,
    ttl_minutes: float | None = None,
) -> None:
    """Put each record under its id (idempotent: saving the same records twice is a no-op).

    ``ttl_minutes`` is passed to stores that support TTL (``store.supports_ttl``) and left
    out for the others (``InMemoryStore``): the store then keeps the record, and its own
    ``valid_until`` is what ``resolve_memory`` checks either way.

    Example:
        >>> from langgraph.store.memory import InMemoryStore
        >>> from agent_guards import MemoryRecord
        >>> from agent_guards.memory_resolve import memory_namespace, save_memories
        >>> store, ns = InMemoryStore(), memory_namespace("alice")
        >>> record = MemoryRecord("m1", "report_format", "pdf")
        >>> save_memories(store, ns, [record]); save_memories(store, ns, [record])
        >>> [(item.key, item.value["value"]) for item in store.search(ns)]  # key = record id
        [('m1', 'pdf')]
    """
    ns = _check_namespace(namespace)
    ttl_minutes = _ttl(store, ttl_minutes)
    for r in _check_records(records):
        if ttl_minutes is None:
            store.put(ns, r.id, r.to_dict())
        else:
            store.put(ns, r.id, r.to_dict(), ttl=ttl_minutes)


async def asave_memories(
    store: BaseStore,
    namespace: Sequence[str],
    records: Iterable[MemoryRecord],
    *,
    ttl_minutes: float | None = None,
) -> None:
    """Async :func:`save_memories` (falls back to the sync API for sync-only stores).

    Example:
        >>> import asyncio
        >>> from langgraph.store.memory import InMemoryStore
        >>> from agent_guards import MemoryRecord
        >>> from agent_guards.memory_resolve import asave_memories, load_memories
        >>> store, ns = InMemoryStore(), ("memories", "alice")
        >>> asyncio.run(asave_memories(store, ns, [MemoryRecord("m1", "lang", "fr")]))
        >>> [(r.id, r.value) for r in load_memories(store, ns)]
        [('m1', 'fr')]
    """
    ns = _check_namespace(namespace)
    ttl_minutes = _ttl(store, ttl_minutes)
    items = _check_records(records)
    for index, r in enumerate(items):
        try:
            if ttl_minutes is None:
                await store.aput(ns, r.id, r.to_dict())
            else:
                await store.aput(ns, r.id, r.to_dict(), ttl=ttl_minutes)
        except NotImplementedError:
            save_memories(store, ns, items[index:], ttl_minutes=ttl_minutes)
            return


def _ttl(store: BaseStore, ttl_minutes: float | None) -> float | None:
    """The TTL to pass: None for a store without TTL, which would refuse the put."""
    number = isinstance(ttl_minutes, (int, float)) and not isinstance(ttl_minutes, bool)
    if ttl_minutes is not None and not (number and ttl_minutes > 0):
        raise ValueError(f"ttl_minutes must be a positive number or None, got {ttl_minutes!r}")
    return ttl_minutes if getattr(store, "supports_ttl", False) else None


def _confirmed(record: MemoryRecord) -> MemoryRecord:
    source = "memory" if record.source == "inferred" else record.source
    return replace(record, status="active", source=source)


def confirm_memory(
    store: BaseStore, namespace: Sequence[str], record_id: str
) -> MemoryRecord | None:
    """Confirm a pending record: status active, an inferred source becomes ``memory``.

    Returns the saved record, or None when there is no such record.

    Example:
        >>> from langgraph.store.memory import InMemoryStore
        >>> from agent_guards import MemoryRecord
        >>> from agent_guards.memory_resolve import confirm_memory, save_memories
        >>> store, ns = InMemoryStore(), ("memories", "alice")
        >>> guess = MemoryRecord("g1", "lang", "de", source="inferred", status="pending")
        >>> save_memories(store, ns, [guess])
        >>> r = confirm_memory(store, ns, "g1")
        >>> r.status, r.source, confirm_memory(store, ns, "missing")
        ('active', 'memory', None)
    """
    ns = _check_namespace(namespace)
    item = store.get(ns, record_id)
    if item is None:
        return None
    record = _confirmed(_record(item.key, item.value))
    save_memories(store, ns, [record])
    return record


async def aconfirm_memory(
    store: BaseStore, namespace: Sequence[str], record_id: str
) -> MemoryRecord | None:
    """Async :func:`confirm_memory`.

    Example:
        >>> import asyncio
        >>> from langgraph.store.memory import InMemoryStore
        >>> from agent_guards import MemoryRecord
        >>> from agent_guards.memory_resolve import aconfirm_memory, save_memories
        >>> store, ns = InMemoryStore(), ("memories", "alice")
        >>> save_memories(store, ns, [MemoryRecord("m1", "lang", "fr", status="pending")])
        >>> asyncio.run(aconfirm_memory(store, ns, "m1")).status
        'active'
    """
    ns = _check_namespace(namespace)
    try:
        item = await store.aget(ns, record_id)
    except NotImplementedError:
        return confirm_memory(store, ns, record_id)
    if item is None:
        return None
    record = _confirmed(_record(item.key, item.value))
    await asave_memories(store, ns, [record])
    return record
