"""The run ledger without a store: kept in a state channel, read and written as a store.

A graph compiled without a ``BaseStore`` can still keep the ledger, in the ``run_ledger``
channel of its state (:class:`~agent_guards.core.GuardState`). The tool node reads the
entries its step started from and returns what it wrote as part of its update; the
channel's reducer (:func:`~agent_guards.core.state.merge_ledger`) merges them by key. This
view lets :class:`~agent_guards.tool_guard.RunLedger` run unchanged on top of that.

What state can and cannot keep, compared with a store:

- it keeps the record of every execution (intent, outcome, effect, attempts, digest) and
  the per-call budget check against it; a call past its time limit stays ``started``, and
  counted;
- a node's update lands when the step ends, so an intent is not on record *before* the
  tool runs: a crash inside the tool node loses that step's entries with its messages;
- the channel is part of the checkpoint, so a fork from an earlier checkpoint gets the
  ledger (and the budget) of that checkpoint back, and two workers share nothing.

The last two are what only a store gives; the docs say when to compile with one.

Example:
    >>> from agent_guards.tool_guard import RunLedger
    >>> view = StateLedger({"c1#1": {"call_id": "c1", "status": "done", "executions": 1}})
    >>> ledger = RunLedger()
    >>> ledger.executions(view, "thread"), ledger.entry(view, "thread", "c1")["status"]
    (1, 'done')
    >>> _ = ledger.start(view, "thread", "c2", tool="pay", signature="s", effect="write")
    >>> sorted(view.writes), view.writes["c2#1"]["status"]
    (['c2#1'], 'started')
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any, Literal

from langgraph.store.base import (
    NOT_PROVIDED,
    BaseStore,
    GetOp,
    Item,
    NotProvided,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
)

__all__ = ["StateLedger"]

_EPOCH = datetime.fromtimestamp(0, UTC)  # entries carry their own times (``started_at``)


class StateLedger(BaseStore):
    """One thread's ledger entries from state, with the writes made through it kept apart.

    ``entries`` is the ``run_ledger`` channel as the step read it (never modified);
    ``writes`` is what to return in the node's update. Namespaces are ignored: the state
    holds one thread's ledger. Only what the ledger uses is served: get, put and search
    without a query or filter.
    """

    def __init__(self, entries: Mapping[str, Mapping[str, Any]] | None = None) -> None:
        self.entries: Mapping[str, Mapping[str, Any]] = entries or {}
        self.writes: dict[str, dict[str, Any]] = {}
        self._sorted: list[str] | None = None  # the keys in order, for paging through them

    def _value(self, key: str) -> Mapping[str, Any] | None:
        return self.writes[key] if key in self.writes else self.entries.get(key)

    def values(self) -> list[Mapping[str, Any]]:
        """Every entry as this step sees it (its own writes over what it read)."""
        kept = [value for key, value in self.entries.items() if key not in self.writes]
        return [*kept, *self.writes.values()]

    def size(self) -> int:
        """How many entries there are as this step sees them (its own writes included)."""
        return len(self.entries) + sum(key not in self.entries for key in self.writes)

    # get and put as BaseStore serves them, minus the batch of one operation they would
    # build (the ledger makes three of them per tool call); a namespace that is not plainly
    # valid goes through BaseStore, whose checks name what is wrong with it
    def get(
        self, namespace: tuple[str, ...], key: str, *, refresh_ttl: bool | None = None
    ) -> Item | None:
        if not _plain(namespace):
            return super().get(namespace, key, refresh_ttl=refresh_ttl)
        return self._item(namespace, str(key))

    def put(
        self,
        namespace: tuple[str, ...],
        key: str,
        value: Mapping[str, Any],
        index: Literal[False] | list[str] | None = None,
        *,
        ttl: float | NotProvided | None = NOT_PROVIDED,
    ) -> None:
        if value is None or ttl not in (NOT_PROVIDED, None) or not _plain(namespace):
            return super().put(namespace, key, value, index, ttl=ttl)  # a delete, a TTL
        self._put(str(key), value)
        return None

    def add(self, key: str, value: Mapping[str, Any], *, replace: bool = False) -> bool:
        """Write the entry ``key`` unless it exists (``replace``: in any case); True when
        written. What ``claims.claim`` and ``claims.overwrite`` do on this view, without the
        item a ``get`` builds and the namespace checks (the ledger's own namespace)."""
        if not replace and self._value(key) is not None:
            return False
        self._put(key, value)
        return True

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        return [self._run(op) for op in ops]

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        return self.batch(ops)

    def _item(self, namespace: tuple[str, ...], key: str) -> Item | None:
        value = self._value(key)
        if value is None:
            return None
        return Item(value=dict(value), key=key, namespace=namespace,
                    created_at=_EPOCH, updated_at=_EPOCH)  # fmt: skip

    def _put(self, key: str, value: Mapping[str, Any]) -> None:
        if key not in self.writes and key not in self.entries:
            self._sorted = None
        self.writes[key] = dict(value)

    def _run(self, op: Op) -> Result:
        if isinstance(op, GetOp):
            return self._item(op.namespace, op.key)
        if isinstance(op, PutOp) and op.value is not None:
            self._put(op.key, op.value)
            return None
        if isinstance(op, SearchOp) and op.query is None and not op.filter:
            if self._sorted is None:
                self._sorted = sorted({*self.entries, *self.writes})
            keys = self._sorted[op.offset : op.offset + op.limit]
            return [
                SearchItem(op.namespace_prefix, key, dict(self._value(key) or {}), _EPOCH, _EPOCH)
                for key in keys
            ]
        raise NotImplementedError(f"the run ledger kept in state does not serve {op!r}")


def _plain(namespace: Any) -> bool:
    """Whether ``namespace`` passes every store's checks: a tuple of non-empty string
    labels without ``.`` or NUL, not rooted at ``langgraph`` (what the ledger writes)."""
    return (
        type(namespace) is tuple
        and bool(namespace)
        and namespace[0] != "langgraph"
        and all(type(v) is str and v and "." not in v and "\x00" not in v for v in namespace)
    )
