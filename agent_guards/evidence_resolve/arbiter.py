"""The arbitration steps behind ``resolve_evidence``. Private; pure (no LangGraph import).

Within one claim: entity partition, then basis columns (only among the most credible
sources), then value groups ranked by credibility, then by the timeline their dates put them
on, then by confidence; what none of these orders is a close call. Each step is a dict pass
or a sort over the value groups, never a pairwise comparison of items.

Example:
    >>> from agent_guards.evidence_resolve.model import Evidence
    >>> from agent_guards.evidence_resolve.policy import EvidencePolicy
    >>> a = Arbiter(EvidencePolicy())
    >>> out = a.arbitrate([Evidence("f1", "k", "1", source_type="forum"),
    ...                    Evidence("o1", "k", "2", source_type="official")])
    >>> out.reason, out.value, out.conflicting
    ('source_credibility', '2', {'f1': 'less_credible_source'})
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from agent_guards.core.decision import Verdict
from agent_guards.core.fields import link_cycles, normalize_text, version_key
from agent_guards.evidence_resolve.model import ClaimVerdict, Evidence
from agent_guards.evidence_resolve.policy import EvidencePolicy
from agent_guards.evidence_resolve.timeline import Span

__all__ = ["Arbiter", "Outcome"]

_MIN = datetime.min.replace(tzinfo=UTC)
_CAUTION = {Verdict.ANSWER: 0, Verdict.ABSTAIN: 1, Verdict.CLARIFY: 2, Verdict.ESCALATE: 3}


@dataclass
class Outcome:
    """The result for one claim (or a part of it) before it becomes a verdict."""

    verdict: Verdict
    reason: str
    value: Any = None
    values: dict[str, Any] = field(default_factory=dict)
    selected: tuple[str, ...] = ()
    conflicting: dict[str, str] = field(default_factory=dict)
    dropped: dict[str, str] = field(default_factory=dict)
    candidates: list[dict[str, Any]] = field(default_factory=list)
    detail: str = ""
    keys: frozenset[str] = frozenset()
    """Normalized values this outcome selected (to sort out inactive items)."""
    caveats: set[str] = field(default_factory=set)

    def as_claim(self, claim_key: str) -> ClaimVerdict:
        return ClaimVerdict(
            claim_key=claim_key,
            verdict=self.verdict,
            reason=self.reason,
            value=self.value,
            values=dict(self.values),
            selected_ids=self.selected,
            conflicting_ids=tuple(sorted(self.conflicting)),
            caveats=tuple(sorted(self.caveats)),
        )


@dataclass
class _Group:
    """One value's items, scored by its most credible sources."""

    key: str
    items: list[Evidence]
    weight: float
    span: Span | None
    """The latest date the value is stated in force (None: no dated item)."""
    updated: bool
    """``span`` is an update date: the ``close_days`` window applies."""
    tentative: bool
    """Only year or month dates that may not be in force yet at ``as_of``."""
    version: tuple[tuple[int, Any], ...]
    confidence: float | None


@dataclass(frozen=True)
class Scope:
    """What the question fixes for one call: its date and entity, and what they imply."""

    as_of: datetime | None = None
    entity: str | None = None
    """The entity asked about (normalized by ``EvidencePolicy.name_key``)."""
    maybe: frozenset[str] = frozenset()
    """Ids whose year or month date may not be in force yet at ``as_of``."""
    revived: frozenset[str] = frozenset()
    """Superseded ids whose every successor is not yet in force at ``as_of``."""
    entity_elsewhere: frozenset[str] = frozenset()
    """Normalized claim keys with items about another entity (set aside)."""


def _merge(outs: Iterable[Outcome], into: Outcome) -> Outcome:
    """``into`` with the dropped items and caveats of the partial outcomes ``outs``."""
    for out in outs:
        into.dropped.update(out.dropped)
        into.caveats |= out.caveats
    return into


class Arbiter:
    """Arbitration for one ``resolve_evidence`` call (created per call, holds only inputs)."""

    def __init__(self, policy: EvidencePolicy, scope: Scope | None = None) -> None:
        self.policy = policy
        self.scope = scope or Scope()
        self.in_cycle: frozenset[str] = frozenset()

    # -- claims and status ---------------------------------------------------------------
    def _superseded_by(self, items: list[Evidence]) -> dict[str, str]:
        """Old id -> the smallest id of an item in force that supersedes it.

        A link only counts from a source entitled to it: one no less credible than the item
        it replaces (a forum post saying it supersedes the official document does not).
        """
        by_id = {item.id: item for item in items}
        out: dict[str, str] = {}
        for item in items:
            active = item.status == "active" or item.id in self.scope.revived
            if active and item.id not in self.scope.maybe:
                for old in item.supersedes:
                    if old != item.id and self.may_supersede(item, by_id.get(old)):
                        out[old] = min(out.get(old, item.id), item.id)
        # links in a cycle (a supersedes b, b supersedes a) decide nothing: the items compete,
        # and the outcome says so (caveat ``supersedes_cycle``)
        self.in_cycle = frozenset(i for cycle in link_cycles(out) for i in cycle)
        return {old: new for old, new in out.items() if old not in self.in_cycle}

    def may_supersede(self, new: Evidence, old: Evidence | None) -> bool:
        """Whether ``new``'s source is entitled to replace ``old`` (no less credible)."""
        weight = self.policy.weight
        return old is None or weight(new.source_type) >= weight(old.source_type)

    def split(
        self, live: Iterable[Evidence]
    ) -> tuple[dict[str, list[Evidence]], dict[str, list[tuple[Evidence, str]]]]:
        """Active candidates per claim, and the inactive (draft, retracted, superseded) ones.

        Under ``as_of`` a superseded item whose successors were not in force yet is active.
        """
        items = list(live)
        superseded_by = self._superseded_by(items)
        claims: dict[str, list[Evidence]] = defaultdict(list)
        inactive: dict[str, list[tuple[Evidence, str]]] = defaultdict(list)
        names: dict[str, str] = {}
        for item in items:
            norm = normalize_text(item.claim_key)
            names[norm] = min(names.get(norm, item.claim_key), item.claim_key)
            if item.status != "active" and item.id not in self.scope.revived:
                inactive[norm].append((item, item.status))
            elif item.id in superseded_by:
                inactive[norm].append((item, f"superseded_by:{superseded_by[item.id]}"))
            else:
                claims[norm].append(item)
        return (
            {names[k]: v for k, v in claims.items()},
            {names[k]: v for k, v in inactive.items()},
        )

    def claim(
        self, key: str, cands: list[Evidence], inactive: Mapping[str, list[tuple[Evidence, str]]]
    ) -> Outcome:
        """Resolve one claim; inactive items that disagree with the answer are conflicting."""
        out = self._for_entity(key, cands)
        if any(c.id in self.in_cycle for c in cands):
            out.caveats.add("supersedes_cycle")
        for item, why in inactive.get(key, ()):
            disagrees = self.policy.normalize(item.value) not in out.keys
            if out.verdict is Verdict.ANSWER and disagrees:
                out.conflicting[item.id] = why
            else:
                out.dropped[item.id] = why
        if out.reason == "consistent" and any(
            why.startswith("superseded") for why in out.conflicting.values()
        ):
            out.reason = "superseded"
            out.detail = f"Selected {out.value!r}; the versions it replaces are recorded."
        return out

    def _for_entity(self, key: str, cands: list[Evidence]) -> Outcome:
        """Arbitrate the claim; a named entity needs evidence of its own."""
        entity = self.scope.entity
        if entity is None or any(c.entity is not None for c in cands):
            return self.by_entity(cands)
        if normalize_text(key) in self.scope.entity_elsewhere:
            return Outcome(
                Verdict.ABSTAIN,
                "no_entity_evidence",
                dropped={c.id: "entity_unspecified" for c in cands},
                detail=f"No evidence is about {entity!r}: the items found are about other "
                "entities or do not say which one.",
            )
        out = self.by_entity(cands)
        if out.verdict is Verdict.ANSWER:
            out.caveats.add("entity_unconfirmed")
        return out

    # -- entity and basis partitions ----------------------------------------------------
    def by_entity(self, cands: list[Evidence]) -> Outcome:
        entities = _partition(cands, lambda e: e.entity, self.policy.name_key)
        if len(entities) < 2:
            return self.by_basis(cands)
        per = {name: self.by_basis(items) for name, items in sorted(entities.items())}
        keys = {frozenset(o.keys) if o.verdict is Verdict.ANSWER else None for o in per.values()}
        if len(keys) == 1 and None not in keys and all(len(o.keys) == 1 for o in per.values()):
            return self.by_basis(cands)  # every entity says the same thing
        if self.policy.group_entities and all(o.verdict is Verdict.ANSWER for o in per.values()):
            return self._per_entity(cands, per)
        values: dict[str, Any] = {}
        candidates: list[dict[str, Any]] = []
        for name, o in per.items():
            if o.verdict is Verdict.ANSWER:
                values[name] = o.value if o.value is not None else dict(o.values)
                candidates.append({"entity": name, "value": values[name], "ids": list(o.selected)})
            else:  # the entity's own values conflict: list them, never drop them
                values[name] = [c["value"] for c in o.candidates] or None
                candidates.extend({"entity": name, **c} for c in o.candidates)
        out = Outcome(
            Verdict.CLARIFY,
            "ambiguous_entity",
            values=values,
            conflicting={e.id: "ambiguous_entity" for e in cands},
            candidates=candidates,
            detail=f"Values differ by entity ({', '.join(values)}); ask which is meant.",
        )
        out = _merge(per.values(), out)
        out.dropped = {i: why for i, why in out.dropped.items() if i not in out.conflicting}
        return out

    def _per_entity(self, cands: list[Evidence], per: Mapping[str, Outcome]) -> Outcome:
        """Every entity answered: their values side by side (``group_entities``)."""
        values = {n: o.value if o.value is not None else dict(o.values) for n, o in per.items()}
        conflicting = {e.id: "entity_unspecified" for e in cands if e.entity is None}
        for o in per.values():
            conflicting.update(o.conflicting)
        out = Outcome(
            Verdict.ANSWER,
            "per_entity",
            values=values,
            selected=tuple(sorted(i for o in per.values() for i in o.selected)),
            conflicting=conflicting,
            keys=frozenset(k for o in per.values() for k in o.keys),
            detail=f"Values differ by entity ({', '.join(values)}), listed side by side.",
        )
        return _merge(per.values(), out)

    def by_basis(self, cands: list[Evidence]) -> Outcome:
        top = max(self.policy.weight(e.source_type) for e in cands)
        leaders = [e for e in cands if self.policy.weight(e.source_type) == top]
        bases = _partition(leaders, lambda e: e.basis, normalize_text)
        if len(bases) < 2:
            return self.arbitrate(cands)
        norm_names = {normalize_text(name): name for name in bases}
        columns: dict[str, list[Evidence]] = defaultdict(list)
        leftover: dict[str, str] = {}
        for e in cands:
            name = norm_names.get(normalize_text(e.basis)) if e.basis is not None else None
            if name is None:
                leftover[e.id] = "basis_unspecified" if e.basis is None else "less_credible_source"
            else:
                columns[name].append(e)
        outs = {name: self.arbitrate(items) for name, items in sorted(columns.items())}
        answered = [o for o in outs.values() if o.verdict is Verdict.ANSWER]
        if len(answered) == len(outs) and len({k for o in answered for k in o.keys}) == 1:
            return self.arbitrate(cands)  # every basis says the same thing
        return _merge(outs.values(), self._columns(outs, leftover, len(answered) < len(outs)))

    def _columns(
        self, outs: Mapping[str, Outcome], leftover: dict[str, str], stuck: bool
    ) -> Outcome:
        """The per-basis outcome: side by side, or the worst column's verdict when one is stuck."""
        values = {name: o.value for name, o in outs.items()}
        conflicting = dict(leftover)
        for o in outs.values():
            conflicting.update(o.conflicting)
        if stuck:
            worst = max(outs.values(), key=lambda o: _CAUTION[o.verdict])
            conflicting.update({i: worst.reason for o in outs.values() for i in o.selected})
            return Outcome(
                worst.verdict,
                worst.reason,
                values=values,
                conflicting=conflicting,
                candidates=[c for o in outs.values() for c in o.candidates],
                detail=f"Per basis, at least one conflict cannot be arbitrated: {worst.detail}",
            )
        return Outcome(
            Verdict.ANSWER,
            "per_basis",
            values=values,
            selected=tuple(sorted(i for o in outs.values() for i in o.selected)),
            conflicting=conflicting,
            keys=frozenset(k for o in outs.values() for k in o.keys),
            detail=f"Values stated in different bases ({', '.join(values)}), side by side.",
        )

    # -- value groups -------------------------------------------------------------------
    def _group(self, key: str, items: list[Evidence]) -> _Group:
        weight = max(self.policy.weight(e.source_type) for e in items)
        top = [e for e in items if self.policy.weight(e.source_type) == weight]
        version = max(version_key(e.version) for e in top)
        confs = [e.confidence for e in top if e.confidence is not None]
        confidence = max(confs) if confs else None
        dated = [(e.span, e) for e in top if e.span is not None]
        if not dated:
            return _Group(key, items, weight, None, False, False, version, confidence)
        certain = [(s, e) for s, e in dated if e.id not in self.scope.maybe]
        as_of = self.scope.as_of
        pool = certain or [(s.until(as_of) if as_of else s, e) for s, e in dated]
        # the latest start; on a tie the narrowest span (the most precise date)
        span, rep = max(pool, key=lambda p: (p[0].start, p[0].start - p[0].end, p[1].id))
        updated = rep.dated_by == "updated_at"
        return _Group(key, items, weight, span, updated, not certain, version, confidence)

    def _newer(self, new: _Group, old: _Group) -> bool:
        """``new`` is known to be in force after ``old`` (both dated, ``new`` in force)."""
        assert new.span is not None and old.span is not None
        if new.tentative or not old.span.before(new.span):
            return False
        if new.updated or old.updated:
            days = (new.span.start - old.span.start).total_seconds() / 86400
            return days >= self.policy.close_window_days
        return True

    def _timeline(self, tier: list[_Group]) -> tuple[list[_Group], dict[str, str]]:
        """The groups nothing orders after another (contenders), and why the others lost."""
        dated = [g for g in tier if g.span is not None and not g.tentative]
        leaders: list[_Group] = []
        for updated in (False, True):  # the latest two of each kind can beat every other
            kind = sorted((g for g in dated if g.updated is updated), key=_latest, reverse=True)
            leaders.extend(kind[:2])
        lost: dict[str, str] = {}
        for g in tier:
            if g.span is None:
                if dated:
                    lost[g.key] = "undated"
            elif any(h is not g and self._newer(h, g) for h in leaders):
                lost[g.key] = "older_version"
        contenders = [g for g in tier if g.key not in lost]
        if len(contenders) > 1 and all(g.version for g in contenders):
            top = max(g.version for g in contenders)
            if sum(g.version == top for g in contenders) == 1:
                lost.update({g.key: "older_version" for g in contenders if g.version != top})
                contenders = [g for g in contenders if g.version == top]
        return contenders, lost

    def _close_confidence(self, best: _Group, second: _Group) -> bool:
        if best.confidence is None or second.confidence is None:
            return True
        gap = best.confidence - second.confidence
        return gap == 0 or gap < self.policy.close_confidence

    def _representative(self, group: _Group) -> Evidence:
        items = sorted(group.items, key=lambda e: e.id)
        items.sort(
            key=lambda e: (
                self.policy.weight(e.source_type),
                (e.when or _MIN, version_key(e.version)),
                e.confidence if e.confidence is not None else -1.0,
            ),
            reverse=True,
        )
        return items[0]

    def arbitrate(self, cands: list[Evidence]) -> Outcome:
        """Pick one value: credibility, then the timeline, then confidence; else a close call."""
        by_value: dict[str, list[Evidence]] = defaultdict(list)
        for e in cands:
            by_value[self.policy.normalize(e.value)].append(e)
        groups = [self._group(k, v) for k, v in sorted(by_value.items())]
        if len(groups) == 1:
            return self._answer(groups[0], groups, {}, "consistent")
        top = max(g.weight for g in groups)
        tier = [g for g in groups if g.weight == top]
        if len(tier) == 1:
            return self._answer(tier[0], groups, {}, "source_credibility")
        contenders, lost = self._timeline(tier)
        if len(contenders) == 1:
            return self._answer(contenders[0], groups, lost, "newer_version")
        ranked = sorted(contenders, key=lambda g: g.key)
        ranked.sort(key=lambda g: g.confidence if g.confidence is not None else -1.0, reverse=True)
        if not self._close_confidence(ranked[0], ranked[1]):
            lower = {g.key: "lower_confidence" for g in contenders}
            return self._answer(ranked[0], groups, lost | lower, "higher_confidence")
        return self._close_call(contenders, groups, lost)

    def _answer(
        self, winner: _Group, groups: list[_Group], lost: dict[str, str], reason: str
    ) -> Outcome:
        conflicting: dict[str, str] = {}
        for g in groups:
            if g is winner:
                continue
            why = "less_credible_source" if g.weight < winner.weight else lost.get(g.key)
            conflicting.update({e.id: why or "older_version" for e in g.items})
        rep = self._representative(winner)
        selected = sorted(
            winner.items, key=lambda e: (e.relevance is None, -(e.relevance or 0.0), e.id)
        )
        details = {
            "consistent": f"{len(winner.items)} item(s) agree on {rep.value!r}.",
            "source_credibility": f"Selected {rep.value!r} from the most credible source "
            f"({rep.source_type}); less credible disagreeing items flagged.",
            "newer_version": f"Selected {rep.value!r}, the newest version of equal authority; "
            "older versions recorded as conflicting.",
            "higher_confidence": f"Selected {rep.value!r}: dates do not order the values, "
            "clearly higher confidence.",
        }
        out = Outcome(
            Verdict.ANSWER,
            reason,
            value=rep.value,
            selected=tuple(e.id for e in selected),
            conflicting=conflicting,
            keys=frozenset({winner.key}),
            detail=details[reason],
        )
        if winner.tentative:
            out.caveats.add("date_imprecise")
        return self._weigh(out, winner)

    def _weigh(self, out: Outcome, winner: _Group) -> Outcome:
        """A value backed only by weak sources: a caveat, or no answer under ``high_risk``."""
        if winner.weight >= self.policy.min_answer_weight:
            return out
        if not self.policy.high_risk:
            out.caveats.add("weak_source")
            out.detail += f" Only weak sources (weight {winner.weight:g}) back it: say so."
            return out
        return Outcome(
            Verdict.ABSTAIN,
            "weak_source",
            conflicting=out.conflicting,
            dropped=dict.fromkeys(out.selected, "weak_source"),
            candidates=[{"value": out.value, "ids": sorted(out.selected)}],
            detail=f"Only weak sources (weight {winner.weight:g} < "
            f"{self.policy.min_answer_weight:g}) back {out.value!r}; high risk: no answer.",
        )

    def _close_call(
        self, contenders: list[_Group], groups: list[_Group], lost: dict[str, str]
    ) -> Outcome:
        conflicting = {e.id: "close_call" for g in contenders for e in g.items}
        top = contenders[0].weight
        contending = {g.key for g in contenders}
        for g in groups:
            if g.key not in contending:
                why = "less_credible_source" if g.weight < top else lost.get(g.key)
                conflicting.update({e.id: why or "older_version" for e in g.items})
        candidates = [
            {"value": self._representative(g).value, "ids": sorted(e.id for e in g.items)}
            for g in contenders
        ]
        verdict = Verdict.ESCALATE if self.policy.high_risk else Verdict.CLARIFY
        shown = ", ".join(repr(c["value"]) for c in candidates)
        why = (
            "dates that do not order them at their precision (or update dates within close_days)"
            if all(g.span is not None for g in contenders)
            else "no date or version that orders them"
        )
        return Outcome(
            verdict,
            "close_call",
            conflicting=conflicting,
            candidates=candidates,
            detail=f"Equal authority, {why}, close confidence: {shown} cannot be arbitrated.",
        )


def _latest(group: _Group) -> datetime:
    return group.span.start if group.span is not None else _MIN


def _partition(
    items: list[Evidence], attr: Callable[[Evidence], str | None], key: Callable[[str], str]
) -> dict[str, list[Evidence]]:
    """Items by a normalized optional attribute (None values are left out); display names."""
    groups: dict[str, list[Evidence]] = defaultdict(list)
    names: dict[str, str] = {}
    for e in items:
        raw = attr(e)
        if raw is None:
            continue
        norm = key(raw)
        names[norm] = min(names.get(norm, raw), raw)
        groups[norm].append(e)
    return {names[k]: v for k, v in groups.items()}
