"""Evidence items and the evidence verdict. Pure values: no LangGraph import.

Public names are re-exported from :mod:`agent_guards.evidence_resolve`.

Example:
    >>> e = Evidence("d1", "approval_limit", "50w", source_type="official", updated_at="2026-01-01")
    >>> e.updated_at.year, e.status, e.visible_to(frozenset({"alice"}))
    (2026, 'active', True)
    >>> Evidence.from_dict(e.to_dict()) == e
    True
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import KW_ONLY, asdict, dataclass, field
from datetime import date, datetime
from typing import Any, ClassVar

from agent_guards.core.decision import Checkpointed, GuardDecision, Verdict
from agent_guards.core.errors import InvalidInputError
from agent_guards.core.fields import (
    MAX_INT_BITS,
    from_mapping,
    shown,
    to_confidence,
    to_finite,
    to_ids,
    to_key,
)
from agent_guards.evidence_resolve.timeline import Span, canonical_date

__all__ = ["EVIDENCE_STATUSES", "Arbitration", "ClaimVerdict", "Evidence", "EvidenceVerdict"]

EVIDENCE_STATUSES: tuple[str, ...] = ("active", "draft", "retracted", "superseded")

# Document metadata keys read by Evidence.from_document, first match wins.
_DOC_KEYS: dict[str, tuple[str, ...]] = {
    "id": ("id", "doc_id", "document_id"),
    "claim_key": ("claim_key", "claim"),
    "value": ("value", "claim_value"),
    "entity": ("entity",),
    "source_type": ("source_type", "source_kind"),
    "version": ("version",),
    "updated_at": ("updated_at", "last_modified", "modified_at"),
    "effective_at": ("effective_at", "effective_date", "effective_from"),
    "confidence": ("confidence",),
    "relevance": ("relevance", "relevance_score", "score"),
    "basis": ("basis",),
    "status": ("status",),
    "supersedes": ("supersedes",),
    "allowed": ("allowed", "allowed_principals", "acl"),
    "flags": ("flags",),
}


def _span(value: Any) -> Span | None:
    return None if value is None else Span.parse(value)


@dataclass(frozen=True)
class Evidence(Checkpointed):
    """One claim taken from a document, a tool result or a memory, with its provenance.

    Only ``id``, ``claim_key`` and ``value`` are required. Construction validates every
    field and raises :class:`~agent_guards.core.errors.InvalidInputError` naming the item and
    the field. Dates accept ``datetime``, ``date`` or ISO-8601 strings (no offset = UTC),
    including a year (``"2019"``) or a month (``"2019-04"``) when that is all the source says:
    they are compared at that precision (:attr:`span`), never read as January 1.

    Example:
        >>> from agent_guards import Evidence
        >>> e = Evidence("p26", "approval_limit", "50w", source_type="official",
        ...              effective_at="2026-01-01", allowed=["finance"])
        >>> e.when.isoformat(), e.visible_to(frozenset({"finance"})), e.visible_to(frozenset())
        ('2026-01-01T00:00:00+00:00', True, False)
        >>> Evidence("p19", "approval_limit", "80w", effective_at="2019").span.precision
        'year'
        >>> Evidence("p27", "approval_limit", "60w", confidence=1.5)
        Traceback (most recent call last):
        ...
        agent_guards.core.errors.InvalidInputError: item 'p27' field 'confidence': ...
    """

    id: str
    """Unique id (the citation)."""
    claim_key: str
    """What the claim is about (``"approval_limit"``); only items with one key compete."""
    value: str | int | float | bool
    """The claimed value (``"50w"``); compared after the policy's normalizer."""
    _: KW_ONLY
    entity: str | None = None
    """The entity the claim is about, when several share a name."""
    source_type: str | None = None
    """Source class, weighted by ``EvidencePolicy.source_weights`` (official, internal, ...)."""
    version: str | int | None = None
    """Document version; orders items whose dates are missing."""
    updated_at: datetime | date | str | None = None
    """Last modification (an aware datetime; ``"YYYY"`` / ``"YYYY-MM"`` kept as written).

    A modification date says when a page was touched, not when its value took effect: two
    values ordered only by update dates closer than ``EvidencePolicy.close_days`` are a
    close call."""
    effective_at: datetime | date | str | None = None
    """When the value takes effect (stored like ``updated_at``); preferred over it for recency
    and ``as_of``. Values whose effective dates order them are a timeline: the newest wins."""
    confidence: float | None = None
    """Extraction or source confidence in 0..1."""
    relevance: float | None = None
    """Retrieval score; only a noise floor and the citation order, never a tie-breaker."""
    basis: str | None = None
    """Business definition / measurement basis the value is stated in."""
    status: str = "active"
    """One of active, draft, retracted, superseded. Only active items can be selected."""
    supersedes: tuple[str, ...] = ()
    """Ids this item replaces (beats dates)."""
    allowed: tuple[str, ...] | None = None
    """Principals or groups that may see it; None means everyone."""
    text: str = ""
    """The source text (for citations and injection scanning)."""
    flags: tuple[str, ...] = ()
    """Markers set by other guards (``"injection"``); see ``EvidencePolicy.disqualifying_flags``."""

    def __post_init__(self) -> None:
        if self.allowed is not None:
            # first, and without naming the item: with a malformed access list nobody can
            # tell who may see this item, so its id must not reach an error, log or trace
            allowed = self.allowed
            if isinstance(allowed, str) or not isinstance(allowed, (list, tuple, set, frozenset)):
                allowed = (allowed,)
            if not all(isinstance(a, str) and a for a in allowed):
                raise InvalidInputError(
                    "must be a string or a list of non-empty strings (a malformed access list)",
                    field="allowed",
                )
            listed = sorted(allowed) if isinstance(allowed, (set, frozenset)) else allowed
            object.__setattr__(self, "allowed", tuple(listed))
        item = to_key(self.id, item=None, field="id")
        to_key(self.claim_key, item=item, field="claim_key")
        bad_float = isinstance(self.value, float) and not math.isfinite(self.value)
        huge = isinstance(self.value, int) and self.value.bit_length() > MAX_INT_BITS
        if not isinstance(self.value, (str, int, float)) or bad_float or huge:
            raise InvalidInputError(
                f"must be a str, int, float or bool, got {shown(self.value)}",
                item=item,
                field="value",
            )
        for name in ("entity", "source_type", "basis"):
            if getattr(self, name) is not None and not isinstance(getattr(self, name), str):
                raise InvalidInputError(
                    f"must be a string or None, got {shown(getattr(self, name))}",
                    item=item,
                    field=name,
                )
        if self.version is not None and (
            isinstance(self.version, bool) or not isinstance(self.version, (str, int))
        ):
            raise InvalidInputError(
                f"must be a string, int or None, got {shown(self.version)}",
                item=item,
                field="version",
            )
        if self.status not in EVIDENCE_STATUSES:
            raise InvalidInputError(
                f"must be one of {', '.join(EVIDENCE_STATUSES)}; got {shown(self.status)}",
                item=item,
                field="status",
            )
        if not isinstance(self.text, str):
            raise InvalidInputError(
                f"must be a string, got {shown(self.text)}", item=item, field="text"
            )
        set_ = object.__setattr__
        for name in ("updated_at", "effective_at"):
            set_(self, name, canonical_date(getattr(self, name), item=item, field=name))
        # the ordering date, parsed once (not a field: equality, repr and serialization
        # see only the fields; ``replace`` builds a new item and parses again)
        self.__dict__["_span"] = _span(
            self.effective_at if self.effective_at is not None else self.updated_at
        )
        set_(self, "confidence", to_confidence(self.confidence, item=item, field="confidence"))
        set_(self, "relevance", to_finite(self.relevance, item=item, field="relevance"))
        set_(self, "supersedes", to_ids(self.supersedes, item=item, field="supersedes"))
        set_(self, "flags", to_ids(self.flags, item=item, field="flags"))

    @property
    def span(self) -> Span | None:
        """The date that orders versions (``effective_at``, else ``updated_at``) as a span."""
        if "_span" not in self.__dict__:  # built without __init__ (e.g. copy.copy of a subclass)
            date = self.effective_at if self.effective_at is not None else self.updated_at
            self.__dict__["_span"] = _span(date)
        span: Span | None = self.__dict__["_span"]
        return span

    @property
    def dated_by(self) -> str | None:
        """Which field :attr:`span` comes from (``"effective_at"``, ``"updated_at"`` or None)."""
        if self.effective_at is not None:
            return "effective_at"
        return "updated_at" if self.updated_at is not None else None

    @property
    def when(self) -> datetime | None:
        """The start of :attr:`span` (the earliest instant the date can be)."""
        span = self.span
        return span.start if span is not None else None

    def visible_to(self, identities: frozenset[str]) -> bool:
        """True when ``allowed`` is None or shares one of ``identities``."""
        return self.allowed is None or not identities.isdisjoint(self.allowed)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (dates as ISO strings, tuples as lists)."""
        out = asdict(self)
        for name in ("updated_at", "effective_at"):
            when = out[name]
            out[name] = when.isoformat() if isinstance(when, datetime) else when
        for name in ("supersedes", "flags", "allowed"):
            out[name] = list(out[name]) if out[name] is not None else None
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Evidence:
        """Inverse of :meth:`to_dict`; unknown keys are rejected by name."""
        return from_mapping(cls, data)  # type: ignore[no-any-return]

    @classmethod
    def from_document(
        cls,
        doc: Any,
        *,
        claim_key: str | None = None,
        value: Any = None,
        **overrides: Any,
    ) -> Evidence:
        """Build evidence from a LangChain ``Document`` and its metadata.

        Reads ``doc.id`` (else metadata ``id``/``doc_id``) and the metadata keys named like
        the fields (also ``claim``, ``claim_value``, ``score``/``relevance_score``,
        ``last_modified``, ``effective_date``, ``acl``). ``value`` defaults to metadata
        ``value``, else the page content. Keyword ``overrides`` win over metadata.

        >>> from langchain_core.documents import Document
        >>> doc = Document("Over 50w needs review.", id="p26",
        ...                metadata={"claim_key": "approval_limit", "value": "50w", "score": 0.8})
        >>> ev = Evidence.from_document(doc, source_type="official")
        >>> ev.id, ev.value, ev.relevance, ev.source_type
        ('p26', '50w', 0.8, 'official')
        """
        metadata = getattr(doc, "metadata", None)
        content = getattr(doc, "page_content", None)
        if not isinstance(metadata, Mapping) or not isinstance(content, str):
            raise TypeError(f"expected a langchain Document, got {type(doc).__name__}")
        data: dict[str, Any] = {}
        for name, keys in _DOC_KEYS.items():
            for key in keys:
                if metadata.get(key) is not None:
                    data[name] = metadata[key]
                    break
        if getattr(doc, "id", None):
            data["id"] = doc.id
        if claim_key is not None:
            data["claim_key"] = claim_key
        if value is not None:
            data["value"] = value
        data.setdefault("value", content.strip())
        data["text"] = content
        data.update(overrides)
        if "id" not in data:
            raise InvalidInputError("the document has no id (doc.id or metadata 'id')", field="id")
        return cls.from_dict(data)


@dataclass(frozen=True, kw_only=True)
class Arbitration:
    """What every arbitration outcome carries: the verdict, the value(s) and the ids.

    The base of :class:`ClaimVerdict` and :class:`EvidenceVerdict`; verdicts given as
    strings become :class:`Verdict`, id lists become tuples.

    Example:
        >>> a = Arbitration(verdict="answer", reason="single_source", selected_ids=["a"])
        >>> a.verdict, a.selected_ids
        (<Verdict.ANSWER: 'answer'>, ('a',))
    """

    verdict: Verdict
    reason: str
    value: Any = None
    values: dict[str, Any] = field(default_factory=dict, hash=False)
    selected_ids: tuple[str, ...] = ()
    conflicting_ids: tuple[str, ...] = ()
    caveats: tuple[str, ...] = ()
    """What the answer must say with it: ``weak_source`` (only sources under
    ``EvidencePolicy.min_answer_weight`` back it), ``entity_unconfirmed`` (no item names the
    entity asked about), ``date_imprecise`` (a year or month date may not be in force yet at
    ``as_of``)."""

    _ID_FIELDS: ClassVar[tuple[str, ...]] = ("selected_ids", "conflicting_ids", "caveats")

    def __post_init__(self) -> None:
        object.__setattr__(self, "verdict", Verdict(self.verdict))
        for name in self._ID_FIELDS:
            object.__setattr__(self, name, tuple(getattr(self, name)))


@dataclass(frozen=True, kw_only=True)
class ClaimVerdict(Arbitration):
    """The outcome for one ``claim_key`` when a call arbitrates several claims.

    Example:
        >>> from agent_guards import Evidence, resolve_evidence
        >>> v = resolve_evidence([Evidence("a", "limit", "50w"), Evidence("b", "currency", "CNY")])
        >>> v.reason, sorted(v.claims)
        ('multiple_claims', ['currency', 'limit'])
        >>> c = v.claims["limit"]
        >>> c.verdict.value, c.value, c.selected_ids
        ('answer', '50w', ('a',))
    """

    claim_key: str


@dataclass(frozen=True, kw_only=True)
class EvidenceVerdict(Arbitration):
    """What ``resolve_evidence`` decided, with every id it used, flagged or set aside.

    ``value`` is the answer when there is one; ``values`` lists values side by side, keyed
    by entity (``ambiguous_entity``) or by basis (``per_basis``); ``claims`` holds one
    :class:`ClaimVerdict` per claim key when several were arbitrated at once.

    Example:
        >>> from agent_guards import Evidence, resolve_evidence
        >>> v = resolve_evidence([Evidence("a", "sla", "99.9%", source_type="official"),
        ...                       Evidence("b", "sla", "99.5%", source_type="official")])
        >>> v.verdict.value, v.reason, v.value, v.conflicting_ids
        ('clarify', 'close_call', None, ('a', 'b'))
        >>> v.to_dict()["decision"]["guard"], v.decision.policy
        ('evidence_resolve', 'EvidencePolicy@1')
    """

    decision: GuardDecision
    dropped_ids: tuple[str, ...] = ()
    claim_key: str | None = None
    claims: dict[str, ClaimVerdict] = field(default_factory=dict, hash=False)

    _ID_FIELDS: ClassVar[tuple[str, ...]] = (
        "selected_ids",
        "conflicting_ids",
        "dropped_ids",
        "caveats",
    )

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (verdicts as strings, the decision via ``GuardDecision.to_dict``)."""
        out: dict[str, Any] = {
            "verdict": self.verdict.value,
            "reason": self.reason,
            "value": self.value,
            "values": dict(self.values),
            "selected_ids": list(self.selected_ids),
            "conflicting_ids": list(self.conflicting_ids),
            "dropped_ids": list(self.dropped_ids),
            "caveats": list(self.caveats),
            "claim_key": self.claim_key,
            "claims": {
                k: {**asdict(c), "verdict": c.verdict.value} for k, c in self.claims.items()
            },
            "decision": self.decision.to_dict(),
        }
        for claim in out["claims"].values():
            for name in ("selected_ids", "conflicting_ids", "caveats"):
                claim[name] = list(claim[name])
        return out
