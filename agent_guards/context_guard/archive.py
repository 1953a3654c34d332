"""Archive plumbing: where archived context lives in a ``BaseStore`` and the tool that reads it.

Public names are re-exported from :mod:`agent_guards.context_guard`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Annotated, Any

from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, StructuredTool
from langgraph.prebuilt import InjectedStore
from langgraph.store.base import BaseStore, Item, PutOp

from agent_guards.context_guard.injection import quote_untrusted
from agent_guards.context_guard.model import ArchiveRecord
from agent_guards.evidence_resolve.boundary import identities_of

__all__ = [
    "DEFAULT_NAMESPACE",
    "READER_TOOL_NAME",
    "archive_ops",
    "archive_scope",
    "check_namespace",
    "create_archive_reader_tool",
    "read_page",
]

DEFAULT_NAMESPACE: tuple[str, ...] = ("agent_guards", "context_archive")
READER_TOOL_NAME = "read_archived"


def check_namespace(namespace: Sequence[str]) -> tuple[str, ...]:
    """A valid store namespace (non-empty labels without ``.``), or ValueError naming it."""
    ns = (namespace,) if isinstance(namespace, str) else tuple(namespace)
    if not ns or not all(isinstance(p, str) and p and "." not in p for p in ns):
        raise ValueError(
            "namespace must be a non-empty tuple of non-empty labels without '.', "
            f"got {namespace!r}"
        )
    return ns


def archive_scope(namespace: Sequence[str], config: Mapping[str, Any] | None) -> tuple[str, ...]:
    """Where one run's archive lives: ``namespace`` + the principal's and the thread's label.

    An archived tool result holds whatever the tool returned to that caller, so it is only
    readable by the same principal on the same thread: the reader tool looks in the scope
    of the run that calls it, and an archive id from another thread or principal is not
    found. The labels are digests (store labels cannot hold ``.``, and a digest cannot be
    spelled to reach another scope). A call with no thread and no principal (the reader
    used outside a graph) reads and writes ``namespace`` itself.

    >>> cfg = {"configurable": {"thread_id": "t1", "principal": "alice"}}
    >>> scope = archive_scope(DEFAULT_NAMESPACE, cfg)
    >>> scope[:2] == DEFAULT_NAMESPACE, scope[2][:2], scope[3][:2]
    (True, 'p-', 't-')
    >>> scope == archive_scope(DEFAULT_NAMESPACE, {"configurable": {"thread_id": "t2",
    ...                                                             "principal": "alice"}})
    False
    >>> archive_scope(DEFAULT_NAMESPACE, None) == DEFAULT_NAMESPACE
    True
    """
    ns = check_namespace(namespace)
    configurable = (config or {}).get("configurable") or {}
    thread = configurable.get("thread_id") if isinstance(configurable, Mapping) else None
    principal = configurable.get("principal") if isinstance(configurable, Mapping) else None
    if thread is None and principal is None:
        return ns
    who = sorted(identities_of(config))
    return (*ns, _label("p", json.dumps(who)), _label("t", json.dumps(str(thread))))


def _label(prefix: str, text: str) -> str:
    return f"{prefix}-{hashlib.sha256(text.encode()).hexdigest()[:32]}"


def archive_ops(namespace: tuple[str, ...], records: Sequence[ArchiveRecord]) -> list[PutOp]:
    """Store writes for archive records (idempotent: keys are content hashes, so a replay
    writes the same items again); run them with ``store.batch`` or ``store.abatch``."""
    return [PutOp(namespace, r.archive_id, r.to_value(), index=False) for r in records]


def read_page(item: Item | None, archive_id: str, offset: int, page_chars: int) -> str:
    """One page of an archived record, with a header saying where the next page starts."""
    if item is None:
        return f"No archived record with id {archive_id!r}. Archive ids look like 'arc-0123abcd…'."
    value = item.value
    content = str(value.get("content", ""))
    total = len(content)
    start = max(0, min(int(offset), total))
    end = min(total, start + page_chars)
    page = content[start:end]
    flags = [str(f) for f in value.get("flags") or ()]
    if flags:
        page = quote_untrusted(page, flags, source="archived tool result")
    more = (
        f' More: call read_archived(archive_id="{archive_id}", offset={end}).'
        if end < total
        else ""
    )
    head = (
        f"[archive {archive_id} ({value.get('kind', '?')}, messages "
        f"{', '.join(value.get('message_ids') or [])}): characters {start}-{end} of {total}.{more}]"
    )
    return f"{head}\n{page}"


def create_archive_reader_tool(
    store: BaseStore | None = None,
    *,
    namespace: Sequence[str] = DEFAULT_NAMESPACE,
    page_chars: int = 4000,
    name: str = READER_TOOL_NAME,
) -> BaseTool:
    """A tool that lets the model read archived context back by archive id, a page at a time.

    Args:
        store: Where the context guard archived content. ``None``: the graph's store, injected
            by ``ToolNode`` (compile the graph with ``store=``).
        namespace: The namespace the context guard writes to (same default).
        page_chars: Characters per page; keep it below the guard's ``archive_over_tokens``
            so a page read back is not archived again.
        name: The tool's name (the guard never archives results of ``read_archived``).

    Example:
        >>> from langgraph.store.memory import InMemoryStore
        >>> store = InMemoryStore()
        >>> store.put(DEFAULT_NAMESPACE, "arc-1", {"kind": "tool_result", "content": "x" * 10,
        ...     "message_ids": ["t1"]})
        >>> tool = create_archive_reader_tool(store, page_chars=4)
        >>> head, page = tool.invoke({"archive_id": "arc-1", "offset": 4}).splitlines()
        >>> page, "characters 4-8 of 10" in head, 'offset=8' in head
        ('xxxx', True, True)
    """
    ns = check_namespace(namespace)
    _check_reader_options(store, page_chars=page_chars, name=name)
    read, aread = _readers(store, ns, page_chars)
    if store is None:
        return _injected_store_tool(read, aread, name=name)
    return _fixed_store_tool(read, aread, name=name)


_READER_DESCRIPTION = (
    "Read context that was archived to keep the conversation small (long tool results, "
    "older messages). Pass the archive id quoted in the context; use offset to page."
)


def _check_reader_options(store: Any, *, page_chars: Any, name: Any) -> None:
    if isinstance(page_chars, bool) or not isinstance(page_chars, int) or page_chars < 1:
        raise ValueError(f"page_chars must be an int >= 1, got {page_chars!r}")
    if not isinstance(name, str) or not name:
        raise ValueError(f"name must be a non-empty string, got {name!r}")
    if store is not None and not isinstance(store, BaseStore):
        raise TypeError(f"store must be a langgraph BaseStore, got {type(store).__name__}")


def _readers(
    fixed: BaseStore | None, ns: tuple[str, ...], page_chars: int
) -> tuple[Callable[..., str], Callable[..., Awaitable[str]]]:
    """``read`` and ``aread`` of a page, from ``fixed`` or else from the injected store."""

    def _pick(injected: Any) -> BaseStore:
        chosen = fixed if fixed is not None else injected
        if chosen is None:
            raise ValueError(
                "read_archived needs a store: pass store= or compile the graph with one"
            )
        return chosen

    def read(
        archive_id: str, offset: int = 0, injected_store: Any = None, config: Any = None
    ) -> str:
        item = _pick(injected_store).get(archive_scope(ns, config), archive_id)
        return read_page(item, archive_id, offset, page_chars)

    async def aread(
        archive_id: str, offset: int = 0, injected_store: Any = None, config: Any = None
    ) -> str:
        item = await _pick(injected_store).aget(archive_scope(ns, config), archive_id)
        return read_page(item, archive_id, offset, page_chars)

    return read, aread


def _injected_store_tool(
    read: Callable[..., str], aread: Callable[..., Awaitable[str]], *, name: str
) -> BaseTool:
    """The tool reading from the graph's store, injected by ``ToolNode``."""

    def read_injected(
        archive_id: str,
        offset: int = 0,
        injected_store: Annotated[Any, InjectedStore()] = None,
        *,
        config: RunnableConfig,
    ) -> str:
        return read(archive_id, offset, injected_store, config)

    async def aread_injected(
        archive_id: str,
        offset: int = 0,
        injected_store: Annotated[Any, InjectedStore()] = None,
        *,
        config: RunnableConfig,
    ) -> str:
        return await aread(archive_id, offset, injected_store, config)

    return StructuredTool.from_function(
        read_injected, coroutine=aread_injected, name=name, description=_READER_DESCRIPTION
    )


def _fixed_store_tool(
    read: Callable[..., str], aread: Callable[..., Awaitable[str]], *, name: str
) -> BaseTool:
    """The tool reading from the store it was given."""

    def read_fixed(archive_id: str, offset: int = 0, *, config: RunnableConfig) -> str:
        return read(archive_id, offset, None, config)

    async def aread_fixed(archive_id: str, offset: int = 0, *, config: RunnableConfig) -> str:
        return await aread(archive_id, offset, None, config)

    return StructuredTool.from_function(
        read_fixed, coroutine=aread_fixed, name=name, description=_READER_DESCRIPTION
    )
