"""The arbitration steps behind ``resolve_evidence``. Private; pure (no LangGraph import).

Within one claim: entity partition, then basis columns (only among the most credible
sources), then value groups ranked by credibility, recency and confidence. Each step is a
dict pass or a sort over the value groups, never a pairwise comparison of items.

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
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from agent_guards.core.decision import Verdict
from agent_guards.core.fields import normalize_text, version_key
from agent_guards.evidence_resolve.model import ClaimVerdict, Evidence
from agent_guards.evidence_resolve.policy import EvidencePolicy

__all__ = ["Arbiter", "Outcome"]

_MIN = datetime.min.replace(tzinfo=timezone.utc)
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

    def as_claim(self, claim_key: str) -> ClaimVerdict:
        return ClaimVerdict(
            claim_key=claim_key,
            verdict=self.verdict,
            reason=self.reason,
            value=self.value,
            values=dict(self.values),
            selected_ids=self.selected,
            conflicting_ids=tuple(sorted(self.conflicting)),
        )


@dataclass
class _Group:
    key: str
    items: list[Evidence]
    weight: float
    recency: tuple[datetime, tuple[tuple[int, Any], ...]]
    when: datetime | None
    confidence: float | None


class Arbiter:
    """Arbitration for one ``resolve_evidence`` call (created per call, holds only the policy)."""

    def __init__(self, policy: EvidencePolicy) -> None:
        self.policy = policy

    # -- claims and status ---------------------------------------------------------------
    def split(
        self, live: Iterable[Evidence]
    ) -> tuple[dict[str, list[Evidence]], dict[str, list[tuple[Evidence, str]]]]:
        """Active candidates per claim, and the inactive (draft, retracted, superseded) ones."""
        items = list(live)
        superseded_by: dict[str, str] = {}
        for item in items:
            if item.status == "active":
                for old in item.supersedes:
                    if old != item.id:
                        superseded_by[old] = min(superseded_by.get(old, item.id), item.id)
        claims: dict[str, list[Evidence]] = defaultdict(list)
        inactive: dict[str, list[tuple[Evidence, str]]] = defaultdict(list)
        names: dict[str, str] = {}
        for item in items:
            norm = normalize_text(item.claim_key)
            names[norm] = min(names.get(norm, item.claim_key), item.claim_key)
            if item.status != "active":
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
        out = self.by_entity(cands)
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

    # -- entity and basis partitions ----------------------------------------------------
    def by_entity(self, cands: list[Evidence]) -> Outcome:
        entities = _partition(cands, lambda e: e.entity)
        if len(entities) < 2:
            return self.by_basis(cands)
        per = {name: self.by_basis(items) for name, items in entities.items()}
        keys = {frozenset(o.keys) if o.verdict is Verdict.ANSWER else None for o in per.values()}
        if len(keys) == 1 and None not in keys and all(len(o.keys) == 1 for o in per.values()):
            return self.by_basis(cands)  # every entity says the same thing
        values = {
            n: o.value if o.value is not None else (dict(o.values) or None) for n, o in per.items()
        }
        return Outcome(
            Verdict.CLARIFY,
            "ambiguous_entity",
            values=values,
            conflicting={e.id: "ambiguous_entity" for e in cands},
            detail=f"Values differ by entity ({', '.join(sorted(values))}); ask which is meant.",
        )

    def by_basis(self, cands: list[Evidence]) -> Outcome:
        top = max(self.policy.weight(e.source_type) for e in cands)
        leaders = [e for e in cands if self.policy.weight(e.source_type) == top]
        bases = _partition(leaders, lambda e: e.basis)
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
        values = {name: o.value for name, o in outs.items()}
        conflicting = dict(leftover)
        for o in outs.values():
            conflicting.update(o.conflicting)
        if len(answered) < len(outs):
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
        recency = max((e.when or _MIN, version_key(e.version)) for e in top)
        confs = [e.confidence for e in top if e.confidence is not None]
        when = recency[0] if recency[0] != _MIN else None
        return _Group(key, items, weight, recency, when, max(confs) if confs else None)

    def _close_in_time(self, group: _Group, newest: _Group) -> bool:
        if group.recency == newest.recency:
            return True
        if group.when is not None and newest.when is not None and group.when != newest.when:
            days = abs((newest.when - group.when).total_seconds()) / 86400
            return days < self.policy.close_window_days
        # dates equal or missing: distinct versions on both sides order them
        return not (group.recency[1] and newest.recency[1])

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
        """Pick one value: credibility first, then recency, then confidence; else a close call."""
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
        newest = max(tier, key=lambda g: (g.recency, g.key))
        contenders = [g for g in tier if g is newest or self._close_in_time(g, newest)]
        if len(contenders) == 1:
            return self._answer(newest, groups, {}, "newer_version")
        ranked = sorted(contenders, key=lambda g: g.key)
        ranked.sort(key=lambda g: g.confidence if g.confidence is not None else -1.0, reverse=True)
        if not self._close_confidence(ranked[0], ranked[1]):
            lower = {e.id: "lower_confidence" for g in contenders for e in g.items}
            return self._answer(ranked[0], groups, lower, "higher_confidence")
        return self._close_call(contenders, groups)

    def _answer(
        self, winner: _Group, groups: list[_Group], preset: dict[str, str], reason: str
    ) -> Outcome:
        conflicting: dict[str, str] = {}
        for g in groups:
            if g is winner:
                continue
            for e in g.items:
                if g.weight < winner.weight:
                    conflicting[e.id] = "less_credible_source"
                else:
                    conflicting[e.id] = preset.get(e.id, "older_version")
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
            "higher_confidence": f"Selected {rep.value!r}: close dates, clearly higher confidence.",
        }
        return Outcome(
            Verdict.ANSWER,
            reason,
            value=rep.value,
            selected=tuple(e.id for e in selected),
            conflicting=conflicting,
            keys=frozenset({winner.key}),
            detail=details[reason],
        )

    def _close_call(self, contenders: list[_Group], groups: list[_Group]) -> Outcome:
        conflicting = {e.id: "close_call" for g in contenders for e in g.items}
        top = contenders[0].weight
        contending = {g.key for g in contenders}
        for g in groups:
            if g.key not in contending:
                why = "less_credible_source" if g.weight < top else "older_version"
                conflicting.update({e.id: why for e in g.items})
        candidates = [
            {"value": self._representative(g).value, "ids": sorted(e.id for e in g.items)}
            for g in contenders
        ]
        verdict = Verdict.ESCALATE if self.policy.high_risk else Verdict.CLARIFY
        shown = ", ".join(repr(c["value"]) for c in candidates)
        return Outcome(
            verdict,
            "close_call",
            conflicting=conflicting,
            candidates=candidates,
            detail=f"Equal authority, close dates and confidence: {shown} cannot be arbitrated.",
        )


def _partition(items: list[Evidence], attr: Any) -> dict[str, list[Evidence]]:
    """Items by a normalized optional attribute (None values are left out); display names."""
    groups: dict[str, list[Evidence]] = defaultdict(list)
    names: dict[str, str] = {}
    for e in items:
        raw = attr(e)
        if raw is None:
            continue
        norm = normalize_text(raw)
        names[norm] = min(names.get(norm, raw), raw)
        groups[norm].append(e)
    return {names[k]: v for k, v in groups.items()}
