"""Memory records and the verdict. Pure values: no LangGraph import.

Example:
    >>> r = MemoryRecord("m1", "report_format", "pdf", created_at="2026-01-01", scope="user:alice")
    >>> r.source, r.status, r.created_at.year
    ('memory', 'active', 2026)
    >>> MemoryRecord.from_dict(r.to_dict()) == r
    True
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import KW_ONLY, asdict, dataclass, field
from datetime import date, datetime
from types import MappingProxyType
from typing import Any, Literal

from agent_guards.core.decision import GuardDecision, Verdict
from agent_guards.core.errors import InvalidInputError
from agent_guards.core.fields import (
    MAX_INT_BITS,
    from_mapping,
    normalize_value,
    shown,
    to_confidence,
    to_datetime,
    to_ids,
    to_key,
)

__all__ = [
    "DEFAULT_SOURCE_RANKS",
    "MEMORY_SOURCES",
    "MEMORY_STATUSES",
    "MemoryRecord",
    "MemoryVerdict",
    "memory_value_key",
]


MEMORY_SOURCES: tuple[str, ...] = ("user_explicit", "tool", "official", "memory", "inferred")


MEMORY_STATUSES: tuple[str, ...] = ("active", "pending", "superseded", "expired", "deleted")


DEFAULT_SOURCE_RANKS: Mapping[str, int] = MappingProxyType(
    {"user_explicit": 5, "tool": 4, "official": 3, "memory": 2, "inferred": 1}
)


WriteBack = Literal["never", "when_asked", "always"]


def _json_like(value: Any, depth: int = 0) -> bool:
    """A JSON value: scalars (finite floats, printable ints), lists, str-keyed dicts, <= 64 deep."""
    if value is None or isinstance(value, (str, bool)):
        return True
    if isinstance(value, int):
        return value.bit_length() <= MAX_INT_BITS
    if isinstance(value, float):
        return math.isfinite(value)
    if depth >= 64:
        return False
    if isinstance(value, (list, tuple)):
        return all(_json_like(v, depth + 1) for v in value)
    if isinstance(value, Mapping):
        return all(isinstance(k, str) and _json_like(v, depth + 1) for k, v in value.items())
    return False


def memory_value_key(value: Any) -> str:
    """Comparison key of a memory value (scalars as in evidence; lists/dicts as sorted JSON).

    >>> memory_value_key(" Markdown ") == memory_value_key("markdown")
    True
    """
    if isinstance(value, (list, tuple, Mapping)):
        return json.dumps(value, sort_keys=True, ensure_ascii=False).casefold()
    return "null" if value is None else normalize_value(value)


@dataclass(frozen=True)
class MemoryRecord:
    """One remembered fact or preference, with the fields that govern it.

    ``source`` ranks it (user_explicit > tool > official > memory > inferred); ``scope``
    says whose it is (None = global); ``valid_until`` ends it whatever the store's TTL says;
    ``status`` and ``supersedes`` keep an auditable history (nothing is deleted).

    Example:
        >>> from agent_guards import MemoryRecord
        >>> r = MemoryRecord("m1", "report_format", "pdf", valid_until="2026-06-30")
        >>> r.source, r.until.isoformat()  # a date alone: the whole day
        ('memory', '2026-06-30T23:59:59.999999+00:00')
        >>> MemoryRecord("m2", "lang", "fr", source="rumor")
        Traceback (most recent call last):
        ...
        agent_guards.core.errors.InvalidInputError: item 'm2' field 'source': must be one of ...
    """

    id: str
    """Unique id (the store key)."""
    key: str
    """What it is about (``"report_format"``); one winner per key is injected."""
    value: Any = field(hash=False)
    """A JSON-like value."""
    _: KW_ONLY
    source: str = "memory"
    """user_explicit (the current turn), tool, official, memory (long-term) or inferred."""
    scope: str | None = None
    """Whose record it is (``"user:alice"``); None is global."""
    confidence: float | None = None
    """Confidence in 0..1."""
    created_at: datetime | date | str | None = None
    """When it was stated or learned (normalized to an aware datetime)."""
    valid_until: datetime | date | str | None = None
    """Hard end of validity (independent of a store TTL)."""
    status: str = "active"
    """active, pending (unconfirmed), superseded, expired or deleted."""
    supersedes: tuple[str, ...] = ()
    """Ids this record replaces."""
    persist: bool = False
    """The user asked to keep this beyond the current run (``"from now on ..."``)."""
    turn: str | None = None
    """Set by a write-back: the id of the current-turn record whose write-back wrote this
    record (None otherwise). A replay of that turn recognizes its own write-back by it."""
    prior_status: str | None = None
    """Set by a write-back on a record it marked superseded: the status it had before."""

    def __post_init__(self) -> None:
        item = to_key(self.id, item=None, field="id")
        to_key(self.key, item=item, field="key")
        if not _json_like(self.value):
            raise InvalidInputError(
                f"must be a JSON-like value, got {shown(self.value)}", item=item, field="value"
            )
        if isinstance(self.value, tuple):
            object.__setattr__(self, "value", list(self.value))
        for name, allowed in (("source", MEMORY_SOURCES), ("status", MEMORY_STATUSES)):
            if getattr(self, name) not in allowed:
                raise InvalidInputError(
                    f"must be one of {', '.join(allowed)}; got {shown(getattr(self, name))}",
                    item=item,
                    field=name,
                )
        if self.scope is not None and (not isinstance(self.scope, str) or not self.scope):
            raise InvalidInputError(
                f"must be a non-empty string or None, got {shown(self.scope)}",
                item=item,
                field="scope",
            )
        for name in ("turn", "prior_status"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, str) or not value):
                raise InvalidInputError(
                    f"must be a non-empty string or None, got {shown(value)}",
                    item=item,
                    field=name,
                )
        if self.prior_status is not None and self.prior_status not in MEMORY_STATUSES:
            raise InvalidInputError(
                f"must be one of {', '.join(MEMORY_STATUSES)}; got {shown(self.prior_status)}",
                item=item,
                field="prior_status",
            )
        if not isinstance(self.persist, bool):
            raise InvalidInputError(
                f"must be a bool, got {shown(self.persist)}", item=item, field="persist"
            )
        set_ = object.__setattr__
        set_(self, "created_at", to_datetime(self.created_at, item=item, field="created_at"))
        # a date alone is the whole day: "valid until 2026-06-30" still holds on the 30th
        until = to_datetime(self.valid_until, item=item, field="valid_until", day_end=True)
        set_(self, "valid_until", until)
        set_(self, "confidence", to_confidence(self.confidence, item=item, field="confidence"))
        set_(self, "supersedes", to_ids(self.supersedes, item=item, field="supersedes"))

    @property
    def created(self) -> datetime | None:
        """``created_at`` as a datetime (None when unknown)."""
        return self.created_at if isinstance(self.created_at, datetime) else None

    @property
    def until(self) -> datetime | None:
        """``valid_until`` as a datetime (None when open-ended)."""
        return self.valid_until if isinstance(self.valid_until, datetime) else None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (dates as ISO strings); what the store helpers save."""
        out = asdict(self)
        out["created_at"] = self.created.isoformat() if self.created else None
        out["valid_until"] = self.until.isoformat() if self.until else None
        out["supersedes"] = list(self.supersedes)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> MemoryRecord:
        """Inverse of :meth:`to_dict`; unknown keys are rejected by name."""
        return from_mapping(cls, data)  # type: ignore[no-any-return]


@dataclass(frozen=True, kw_only=True)
class MemoryVerdict:
    """What to inject, what not (and why), which keys need a question, and what to write.

    Every record that is not injected is in ``superseded_ids``, ``expired_ids`` or
    ``excluded`` (id -> reason, e.g. ``overridden_by:<id>``, ``pending``, ``out_of_scope``).

    Example:
        >>> from agent_guards import MemoryRecord, resolve_memory
        >>> records = [MemoryRecord("a", "lang", "fr"), MemoryRecord("b", "lang", "de")]
        >>> v = resolve_memory(records, now="2026-01-01")  # equal standing: ask the user
        >>> v.verdict, v.clarify_keys, v.inject, v.excluded
        (<Verdict.CLARIFY: 'clarify'>, ('lang',), (),
         {'a': 'ambiguous:lang', 'b': 'ambiguous:lang'})
    """

    inject: tuple[MemoryRecord, ...] = ()
    superseded_ids: tuple[str, ...] = ()
    expired_ids: tuple[str, ...] = ()
    excluded: dict[str, str] = field(default_factory=dict, hash=False)
    clarify_keys: tuple[str, ...] = ()
    decision: GuardDecision
    writes: tuple[MemoryRecord, ...] = ()
    """Records the store should hold after this turn (supersede chains); applied by the node."""

    def __post_init__(self) -> None:
        for name in ("inject", "superseded_ids", "expired_ids", "clarify_keys", "writes"):
            object.__setattr__(self, name, tuple(getattr(self, name)))

    @property
    def verdict(self) -> Verdict:
        """The decision's verdict (CONTINUE, or CLARIFY when ``clarify_keys`` is set)."""
        return self.decision.verdict

    @property
    def facts(self) -> dict[str, Any]:
        """Key -> value of each key's winner (the first injected record per key)."""
        out: dict[str, Any] = {}
        for record in self.inject:
            out.setdefault(record.key, record.value)
        return out
