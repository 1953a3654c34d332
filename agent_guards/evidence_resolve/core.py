"""``resolve_evidence``: arbitrate retrieved evidence. Pure: no LangGraph import.

Order: permission > entity > version (supersedes links and statuses) > source credibility >
time (among sources of equal authority) > basis > relevance > (never) model summary.
Version decides among versions of one document (an explicit ``supersedes`` link or status),
time among sources of equal authority: across authorities a less credible source never wins
by being newer or more numerous. It answers when these decide, flags what lost, and asks
only when they do not. The work is a few dict passes plus sorts of the value groups, so it
grows as n log n. Public names are re-exported from :mod:`agent_guards.evidence_resolve`.

Example:
    >>> docs = [
    ...     Evidence("p24", "approval_limit", "100w", source_type="official",
    ...              updated_at="2024-06-01", confidence=0.95),
    ...     Evidence("p26", "approval_limit", "50w", source_type="official",
    ...              updated_at="2026-01-01", confidence=0.93),
    ... ]
    >>> v = resolve_evidence(docs)
    >>> v.verdict.value, v.value, v.selected_ids, v.conflicting_ids, v.reason
    ('answer', '50w', ('p26',), ('p24',), 'newer_version')
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from agent_guards.core.decision import GuardDecision, Verdict
from agent_guards.core.errors import InvalidInputError
from agent_guards.core.fields import (
    at_position,
    checked_items,
    normalize_text,
    shown,
    to_datetime,
    to_identities,
)
from agent_guards.evidence_resolve.arbiter import Arbiter, Outcome, Scope
from agent_guards.evidence_resolve.boundary import ACL_KEYS, acl_of, may_see
from agent_guards.evidence_resolve.model import Evidence, EvidenceVerdict
from agent_guards.evidence_resolve.policy import EvidencePolicy, fold_typography

__all__ = ["GUARD", "coerce_evidence", "is_visible", "resolve_evidence"]

GUARD = "evidence_resolve"
_CAUTION = {Verdict.ANSWER: 0, Verdict.ABSTAIN: 1, Verdict.CLARIFY: 2, Verdict.ESCALATE: 3}


def is_visible(raw: Any, identities: frozenset[str]) -> bool:
    """Whether ``identities`` may see ``raw`` (an ``Evidence``, a dict or a ``Document``).

    Read from the raw ``allowed`` / ``allowed_principals`` / ``acl`` without validating
    anything else, so an item the caller may not see is never converted, extracted or
    reported. A malformed access list is not visible (fail closed).

    >>> is_visible({"id": "a", "allowed": ["hr"]}, frozenset({"alice"}))
    False
    >>> is_visible({"id": "a", "acl": [["hr"]]}, frozenset({"hr"}))
    False
    """
    return may_see(raw, identities) is True


def coerce_evidence(raw: Any) -> Evidence:
    """An :class:`Evidence` from an ``Evidence``, a dict or a LangChain ``Document``.

    Example:
        >>> from agent_guards.evidence_resolve import coerce_evidence
        >>> ev = coerce_evidence({"id": "d1", "claim_key": "sla", "value": "99.9%",
        ...                       "updated_at": "2026-01-01"})
        >>> type(ev).__name__, ev.value, ev.updated_at.isoformat(), coerce_evidence(ev) is ev
        ('Evidence', '99.9%', '2026-01-01T00:00:00+00:00', True)
    """
    if isinstance(raw, Evidence):
        return raw
    if isinstance(raw, Mapping):
        return Evidence.from_dict(_acl_spelled_allowed(raw))
    if hasattr(raw, "page_content") and hasattr(raw, "metadata"):
        return Evidence.from_document(raw)
    raise InvalidInputError(
        f"expected Evidence, dict or Document, got {type(raw).__name__}", field="items"
    )


def _acl_spelled_allowed(raw: Mapping[str, Any]) -> Mapping[str, Any]:
    """A dict whose access list is spelled ``acl`` / ``allowed_principals``, as ``allowed``."""
    if "allowed" in raw or not any(key in raw for key in ACL_KEYS):
        return raw
    data = {k: v for k, v in raw.items() if k not in ACL_KEYS}
    data["allowed"] = acl_of(raw)
    return data


def resolve_evidence(
    items: Iterable[Any],
    *,
    policy: EvidencePolicy | None = None,
    principal: str | Iterable[str] | None = None,
    entity: str | None = None,
    basis: str | None = None,
    as_of: Any = None,
    claim_key: str | None = None,
) -> EvidenceVerdict:
    """Decide what the evidence supports: ANSWER, CLARIFY, ABSTAIN or ESCALATE.

    Args:
        items: ``Evidence`` items (dicts and LangChain ``Document``s are converted).
        policy: Weights and thresholds; ``EvidencePolicy()`` when omitted.
        principal: The caller's identities (user id, groups). Items whose ``allowed`` names
            none of them are removed first and appear nowhere in the result. ``None`` sees
            only items with ``allowed=None``. Take it from the run's config, never from
            model output.
        entity: The entity the question is about; items about other entities are dropped.
            With no item about it, the claim abstains (``no_entity_evidence``) when other
            entities are named, else it is answered with the caveat ``entity_unconfirmed``.
        basis: The business basis asked for; items stated in other bases are dropped.
        as_of: Answer as of this date: items not yet effective then are dropped; an item
            superseded later answers for the time it was in force; a year or month date
            that contains ``as_of`` may or may not be in force yet (compared as such).
        claim_key: Arbitrate only this claim; items of other claims are dropped.

    Returns:
        The verdict, with ``selected_ids`` / ``conflicting_ids`` / ``dropped_ids`` and a
        reason code; ``verdict.decision`` is the :class:`GuardDecision` to log.

    Raises:
        InvalidInputError: A visible item is malformed or two visible items share an id
            (the message names the item and the field).

    Example:
        >>> from agent_guards import Evidence, resolve_evidence
        >>> docs = [Evidence("wiki", "owner", "alice", source_type="forum"),
        ...         Evidence("hr", "owner", "bob", source_type="official", allowed=["hr"])]
        >>> resolve_evidence(docs).value  # "hr" is invisible without a principal
        'alice'
        >>> v = resolve_evidence(docs, principal="hr")
        >>> v.value, v.reason, v.selected_ids, v.conflicting_ids
        ('bob', 'source_credibility', ('hr',), ('wiki',))
    """
    policy = EvidencePolicy.coerce(policy)
    identities = to_identities(principal)
    when = to_datetime(as_of, item=None, field="as_of")
    want_entity = _query_text(entity, "entity")
    want_basis = _query_text(basis, "basis")
    want_claim = _query_text(claim_key, "claim_key")
    if want_entity is not None:
        want_entity = policy.name_key(want_entity)
    if want_basis is not None:
        want_basis = _basis(want_basis)
    if want_claim is not None:
        want_claim = normalize_text(want_claim)
    visible = _visible_items(items, identities)
    dropped, live = _filter_items(
        visible,
        policy=policy,
        as_of=when,
        entity=want_entity,
        basis=want_basis,
        claim=want_claim,
    )
    maybe: frozenset[str] = frozenset()
    if when is not None:
        live, maybe = _refine(visible, live, dropped, policy, when)
    scope = _scope(visible, live, dropped, as_of=when, entity=want_entity, maybe=maybe)
    return _arbitrate(Arbiter(policy, scope), visible, live, dropped)


def _refine(
    visible: Mapping[str, Evidence],
    live: list[Evidence],
    dropped: dict[str, str],
    policy: EvidencePolicy,
    as_of: Any,
) -> tuple[list[Evidence], frozenset[str]]:
    """Year and month dates that contain ``as_of``, read with the finer dates of their value.

    A coarse date (``"2032"``) is refined by a finer one of the same claim, entity and value
    inside it (``"2032-05-15"``): in force if that one is, not yet if all such are not yet;
    perhaps otherwise. Returns the live items left and the ids still perhaps in force.
    """
    unsure = [e for e in live if e.span is not None and e.span.status(as_of) == "maybe"]
    if not unsure:
        return live, frozenset()
    peers: dict[tuple[str, str | None, str], list[Evidence]] = {}
    for e in visible.values():
        usable = dropped.get(e.id) in (None, "not_yet_effective") and e.status == "active"
        if usable and e.span is not None:
            peers.setdefault(_value_key(e, policy), []).append(e)
    maybe: set[str] = set()
    for item in unsure:
        assert item.span is not None
        inside = {
            p.span.status(as_of)
            for p in peers.get(_value_key(item, policy), ())
            if p.span is not None and p.span.within(item.span)
        }
        if "in_force" in inside:
            continue
        if inside == {"not_yet"}:
            dropped[item.id] = "not_yet_effective"
        else:
            maybe.add(item.id)
    return [e for e in live if e.id not in dropped], frozenset(maybe)


def _value_key(item: Evidence, policy: EvidencePolicy) -> tuple[str, str | None, str]:
    entity = policy.name_key(item.entity) if item.entity is not None else None
    return normalize_text(item.claim_key), entity, policy.normalize(item.value)


def _scope(
    visible: Mapping[str, Evidence],
    live: list[Evidence],
    dropped: Mapping[str, str],
    *,
    as_of: Any,
    entity: str | None,
    maybe: frozenset[str],
) -> Scope:
    """What ``as_of`` and ``entity`` imply for the arbitration (see :class:`Scope`)."""
    successors: dict[str, list[str]] = {}
    for e in visible.values():
        for old in e.supersedes:
            successors.setdefault(old, []).append(e.id)
    revived = frozenset(
        e.id
        for e in live
        if as_of is not None
        and e.status == "superseded"
        and successors.get(e.id)
        and all(dropped.get(i) == "not_yet_effective" for i in successors[e.id])
    )
    elsewhere = frozenset(
        normalize_text(visible[i].claim_key) for i, why in dropped.items() if why == "other_entity"
    )
    return Scope(as_of, entity, maybe, revived, elsewhere)


def _visible_items(items: Iterable[Any], identities: frozenset[str]) -> dict[str, Evidence]:
    """The items the caller may see, by id; an invisible item is never even validated."""
    visible: dict[str, Evidence] = {}
    for position, raw in enumerate(checked_items(items, field="items")):
        seen = may_see(raw, identities)
        if seen is None:
            # nobody can tell who may see it, so the error names its position, never its
            # id or value
            raise InvalidInputError(
                f"the item at position {position} has a malformed access list (a string or a "
                "list of non-empty strings is expected); it is withheld",
                item=f"#{position}",
                field="allowed",
            )
        if not seen:
            continue
        item = at_position(coerce_evidence, raw, position)
        if not item.visible_to(identities):  # pragma: no cover - _visible saw the same ACL
            continue
        if item.id in visible:
            raise InvalidInputError("duplicate id", item=item.id, field="id")
        visible[item.id] = item
    return visible


def _filter_items(
    visible: Mapping[str, Evidence],
    *,
    policy: EvidencePolicy,
    as_of: Any,
    entity: str | None,
    basis: str | None,
    claim: str | None,
) -> tuple[dict[str, str], list[Evidence]]:
    """Split the visible items, in id order, into dropped (id -> reason) and live ones."""
    dropped: dict[str, str] = {}
    live: list[Evidence] = []
    for item in sorted(visible.values(), key=lambda e: e.id):
        reason = _drop_reason(
            item, policy=policy, as_of=as_of, entity=entity, basis=basis, claim=claim
        )
        if reason:
            dropped[item.id] = reason
        else:
            live.append(item)
    return dropped, live


def _arbitrate(
    arbiter: Arbiter,
    visible: Mapping[str, Evidence],
    live: list[Evidence],
    dropped: dict[str, str],
) -> EvidenceVerdict:
    """Arbitrate the live items claim by claim and combine the outcomes into one verdict."""
    policy = arbiter.policy
    if not visible:
        outcome = Outcome(Verdict.ABSTAIN, "no_evidence", detail="No evidence was retrieved.")
        return _verdict(policy, outcome, dropped, {}, None)
    claims, inactive = arbiter.split(live)
    if not claims:
        dropped.update({item.id: why for pairs in inactive.values() for item, why in pairs})
        if dropped and set(dropped.values()) == {"other_entity"}:  # the entity asked has none
            outcome = Outcome(
                Verdict.ABSTAIN,
                "no_entity_evidence",
                detail="No evidence is about the entity asked: every item is about another.",
            )
        else:
            outcome = Outcome(
                Verdict.ABSTAIN, "no_usable_evidence", detail="No usable evidence after filtering."
            )
        return _verdict(policy, outcome, dropped, {}, None)
    outcomes = {key: arbiter.claim(key, cands, inactive) for key, cands in sorted(claims.items())}
    for out in outcomes.values():
        dropped.update(out.dropped)
    for key, pairs in inactive.items():
        if key not in outcomes:
            dropped.update({item.id: why for item, why in pairs})
    if len(outcomes) == 1:
        key, outcome = next(iter(outcomes.items()))
        return _verdict(policy, outcome, dropped, {}, key)
    return _verdict(policy, _combine(outcomes), dropped, outcomes, None)


def _query_text(value: Any, field: str) -> str | None:
    """A query string as given (None passes); blank or non-string values are rejected."""
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise InvalidInputError(f"must be a non-empty string, got {shown(value)}", field=field)
    return value


def _drop_reason(
    item: Evidence,
    *,
    policy: EvidencePolicy,
    as_of: Any,
    entity: str | None,
    basis: str | None,
    claim: str | None,
) -> str:
    flags = sorted(policy.disqualifying_flags.intersection(item.flags))
    if flags:
        return flags[0]
    if claim is not None and normalize_text(item.claim_key) != claim:
        return "other_claim"
    if item.relevance is not None and item.relevance < policy.min_relevance:
        return "low_relevance"
    if as_of is not None and item.span is not None and item.span.status(as_of) == "not_yet":
        return "not_yet_effective"
    if entity is not None and item.entity is not None and policy.name_key(item.entity) != entity:
        return "other_entity"
    if basis is not None and item.basis is not None and _basis(item.basis) != basis:
        return "other_basis"
    return ""


def _basis(text: str) -> str:
    return normalize_text(fold_typography(text))


def _combine(outcomes: Mapping[str, Outcome]) -> Outcome:
    worst = max(outcomes.values(), key=lambda o: _CAUTION[o.verdict])
    selected = sorted({i for o in outcomes.values() for i in o.selected})
    conflicting = {k: v for o in outcomes.values() for k, v in o.conflicting.items()}
    reason = "multiple_claims" if worst.verdict is Verdict.ANSWER else worst.reason
    detail = " ".join(f"[{key}] {o.detail}" for key, o in outcomes.items())
    caveats = {c for o in outcomes.values() for c in o.caveats}
    return Outcome(
        worst.verdict,
        reason,
        selected=tuple(selected),
        conflicting=conflicting,
        detail=detail,
        caveats=caveats,
    )


def _verdict(
    policy: EvidencePolicy,
    outcome: Outcome,
    dropped: Mapping[str, str],
    claims: Mapping[str, Outcome],
    claim_key: str | None,
) -> EvidenceVerdict:
    dropped_ids = tuple(sorted(dropped))
    conflicting_ids = tuple(sorted(outcome.conflicting))
    data: dict[str, Any] = {}
    if outcome.value is not None:
        data["value"] = outcome.value
    if outcome.values:
        data["values"] = dict(outcome.values)
    if outcome.conflicting:
        data["conflicting"] = dict(sorted(outcome.conflicting.items()))
    if dropped:
        data["dropped"] = dict(sorted(dropped.items()))
    if outcome.candidates:
        data["candidates"] = [dict(c) for c in outcome.candidates]
    if outcome.caveats:
        data["caveats"] = sorted(outcome.caveats)
    if claim_key is not None:
        data["claim_key"] = claim_key
    per_claim = {key: out.as_claim(key) for key, out in claims.items()}
    if per_claim:
        data["claims"] = {
            key: {"verdict": c.verdict.value, "reason": c.reason, "value": c.value}
            for key, c in per_claim.items()
        }
    decision = GuardDecision(
        guard=GUARD,
        verdict=outcome.verdict,
        reason=outcome.reason,
        detail=outcome.detail,
        selected_ids=outcome.selected,
        conflicting_ids=conflicting_ids,
        dropped_ids=dropped_ids,
        policy=policy.label,
        data=data,
    )
    return EvidenceVerdict(
        verdict=outcome.verdict,
        reason=outcome.reason,
        decision=decision,
        value=outcome.value,
        values=dict(outcome.values),
        selected_ids=outcome.selected,
        conflicting_ids=conflicting_ids,
        dropped_ids=dropped_ids,
        caveats=tuple(sorted(outcome.caveats)),
        claim_key=claim_key,
        claims=per_claim,
    )
