"""``resolve_memory``: which memories go into the context. Pure: no LangGraph import.

Priority by source: user_explicit (the current turn) > tool > official > memory > inferred.
Deleted, out-of-scope, superseded, expired and pending records are never injected; each is
listed with its reason. Public names are re-exported from :mod:`agent_guards.memory_resolve`.

Example:
    >>> stored = MemoryRecord("m1", "report_format", "pdf", created_at="2026-01-01")
    >>> now_says = MemoryRecord("t1", "report_format", "markdown", source="user_explicit")
    >>> v = resolve_memory([stored, now_says], now="2026-04-01")
    >>> [r.value for r in v.inject], v.excluded, v.decision.reason
    (['markdown'], {'m1': 'overridden_by:t1'}, 'current_turn_override')
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from agent_guards.core.decision import GuardDecision, Verdict
from agent_guards.core.errors import InvalidInputError
from agent_guards.core.fields import (
    at_position,
    checked_items,
    link_cycles,
    normalize_text,
    to_datetime,
    to_identities,
)
from agent_guards.memory_resolve.model import MemoryRecord, MemoryVerdict, memory_value_key
from agent_guards.memory_resolve.policy import MemoryPolicy

__all__ = ["GUARD", "coerce_record", "resolve_memory", "without_own_writes"]

GUARD = "memory_resolve"
_LONG_TERM = ("memory", "inferred")
_MIN = datetime.min.replace(tzinfo=UTC)


def coerce_record(raw: Any) -> MemoryRecord:
    """A :class:`MemoryRecord` from a record or a dict."""
    if isinstance(raw, MemoryRecord):
        return raw
    if isinstance(raw, Mapping):
        return MemoryRecord.from_dict(raw)
    raise InvalidInputError(
        f"expected MemoryRecord or dict, got {type(raw).__name__}", field="records"
    )


def without_own_writes(
    stored: Iterable[MemoryRecord], current: Iterable[MemoryRecord]
) -> list[MemoryRecord]:
    """The stored records as they were before the write-back of the ``current`` turn.

    A replay of a turn (from a checkpoint before memory_resolve) finds that turn's own
    write-back in the store: the long-term copy of its fact and the records it marked
    superseded, each carrying the turn (``turn``: the current-turn record's id). The copy
    is left out (the turn's fact stands for it) and each superseded record gets its
    ``prior_status`` back, so the replay decides as the original turn did.

    Example:
        >>> old = MemoryRecord("m1", "report_format", "pdf", status="superseded",
        ...                    turn="t1", prior_status="active")
        >>> copy = MemoryRecord("t1", "report_format", "md", supersedes=("m1",), turn="t1")
        >>> fact = MemoryRecord("t1", "report_format", "md", source="user_explicit")
        >>> [(r.id, r.status) for r in without_own_writes([old, copy], [fact])]
        [('m1', 'active')]
    """
    turns = {r.id for r in current if r.source == "user_explicit"}
    out: list[MemoryRecord] = []
    for r in stored:
        if r.turn is None or r.turn not in turns:
            out.append(r)
        elif r.id not in turns and r.prior_status is not None:
            out.append(replace(r, status=r.prior_status, turn=None, prior_status=None))
    return out


def _order(records: Iterable[MemoryRecord]) -> list[MemoryRecord]:
    """Newest first, then most confident, then by id (a total, input-order-free order)."""
    out = sorted(records, key=lambda r: r.id)
    out.sort(
        key=lambda r: (r.created or _MIN, r.confidence if r.confidence is not None else -1.0),
        reverse=True,
    )
    return out


def _strictly_first(values: list[Any]) -> bool:
    """True when every value is known and the largest is unique."""
    if any(v is None for v in values):
        return False
    ranked = sorted(values, reverse=True)
    return len(ranked) < 2 or ranked[0] > ranked[1]


def resolve_memory(
    records: Iterable[Any],
    *,
    now: Any,
    scopes: str | Iterable[str] | None = None,
    policy: MemoryPolicy | None = None,
) -> MemoryVerdict:
    """Decide which memory records to inject: one winner per key.

    Args:
        records: Stored records and the current turn's facts (``source="user_explicit"``);
            dicts are converted.
        now: The run's clock (``datetime``, ``date`` or ISO string); ``valid_until < now``
            expires a record.
        scopes: The scopes this run may read (user id, groups). Records with ``scope=None``
            are global; others need their scope listed. ``None`` reads global records only.
        policy: Ranks and write-back; ``MemoryPolicy()`` when omitted.

    Returns:
        The verdict: ``inject``, ``superseded_ids``, ``expired_ids``, ``excluded`` (id ->
        reason), ``clarify_keys``, ``writes`` (supersede chains to store) and the decision.

    Raises:
        InvalidInputError: A record is malformed or two records share an id.

    Example:
        >>> from agent_guards import MemoryRecord, resolve_memory
        >>> records = [MemoryRecord("m1", "lang", "fr", valid_until="2026-01-01"),
        ...            MemoryRecord("m2", "tz", "UTC+8", scope="user:bob"),
        ...            MemoryRecord("m3", "report_format", "pdf", scope="user:alice")]
        >>> v = resolve_memory(records, now="2026-03-01", scopes="user:alice")
        >>> v.facts, v.expired_ids, v.excluded
        ({'report_format': 'pdf'}, ('m1',), {'m2': 'out_of_scope'})
    """
    policy = MemoryPolicy.coerce(policy)
    clock = to_datetime(now, item=None, field="now")
    if clock is None:
        raise InvalidInputError("is required (the run's clock)", field="now")
    recs: dict[str, MemoryRecord] = {}
    for position, raw in enumerate(checked_items(records, field="records")):
        record = at_position(coerce_record, raw, position, field="records")
        if record.id in recs:
            raise InvalidInputError("duplicate id", item=record.id, field="id")
        recs[record.id] = record
    run = _Run(policy, clock, to_identities(scopes, field="scopes"), recs)
    for _, cands in sorted(run.classify().items()):
        run.pick(cands)
    return run.verdict(run.writes())


@dataclass
class _Run:
    """The bookkeeping of one ``resolve_memory`` call (created per call, then dropped)."""

    policy: MemoryPolicy
    clock: datetime
    scopes: frozenset[str]
    recs: dict[str, MemoryRecord]
    superseded_by: dict[str, str] = field(default_factory=dict)
    superseded: dict[str, str] = field(default_factory=dict)
    expired: dict[str, str] = field(default_factory=dict)
    excluded: dict[str, str] = field(default_factory=dict)
    overridden: dict[str, str] = field(default_factory=dict)
    inject: list[MemoryRecord] = field(default_factory=list)
    clarify: list[str] = field(default_factory=list)
    winners: list[MemoryRecord] = field(default_factory=list)
    unentitled: dict[str, str] = field(default_factory=dict)
    """Old id -> a record whose supersede link did not count (not entitled to it)."""
    cycles: list[list[str]] = field(default_factory=list)

    @property
    def ordered(self) -> list[MemoryRecord]:
        return sorted(self.recs.values(), key=lambda r: r.id)

    def in_scope(self, r: MemoryRecord) -> bool:
        return r.scope is None or r.scope in self.scopes

    def classify(self) -> dict[str, list[MemoryRecord]]:
        """Set aside what can never be injected; the rest by key."""
        self._link_supersedes()
        by_key: dict[str, list[MemoryRecord]] = defaultdict(list)
        for r in self.ordered:
            aside = self._set_aside(r)
            if aside is None:
                by_key[normalize_text(r.key)].append(r)
            else:
                bucket, reason = aside
                bucket[r.id] = reason
        return by_key

    def _link_supersedes(self) -> None:
        """Record, for each superseded id, the first live record entitled to supersede it.

        Links inside a cycle (a supersedes b, b supersedes a) decide nothing: they are
        dropped and reported (``data["supersedes_cycles"]``), and the records compete.
        """
        for r in self.ordered:
            if r.status in ("active", "superseded", "expired"):
                for old in r.supersedes:
                    if old == r.id:
                        continue
                    if self._entitled(r, self.recs.get(old)):
                        self.superseded_by.setdefault(old, r.id)
                    else:
                        self.unentitled.setdefault(old, r.id)
        self.cycles = link_cycles(self.superseded_by)
        for cycle in self.cycles:
            for rid in cycle:
                self.superseded_by.pop(rid, None)

    def _entitled(self, new: MemoryRecord, old: MemoryRecord | None) -> bool:
        """A supersede takes effect only from a record entitled to it: in scope, ranked no
        lower than what it replaces, and (for a user statement) not about authority."""
        if not self.in_scope(new):
            return False
        if old is None:
            return True
        ranks = self.policy.source_ranks
        if ranks[new.source] < ranks[old.source]:
            return False
        return not self._unentitled_claim(new)

    def _unentitled_claim(self, r: MemoryRecord) -> bool:
        """A user statement about the user's own authority (never a fact)."""
        return r.source == "user_explicit" and self.policy.is_authority(r.key)

    def _set_aside(self, r: MemoryRecord) -> tuple[dict[str, str], str] | None:
        """Where ``r`` goes if it can never be injected (the map and the reason), else None."""
        until = r.until
        if r.status == "deleted":
            return self.excluded, "deleted"
        if not self.in_scope(r):
            return self.excluded, "out_of_scope"
        if self._unentitled_claim(r):
            return self.excluded, "unentitled:authority"
        if r.status == "superseded":
            return self.superseded, "superseded"
        if r.id in self.superseded_by:
            return self.superseded, f"superseded_by:{self.superseded_by[r.id]}"
        if r.status == "expired" or (until is not None and until < self.clock):
            return self.expired, "expired"
        if r.status == "pending":
            return self.excluded, "pending"
        if r.source == "inferred" and not self.policy.inject_inferred:
            return self.excluded, "unconfirmed_inferred"
        return None

    def _winner(self, cands: list[MemoryRecord]) -> MemoryRecord | None:
        ranks = self.policy.source_ranks
        top = max(ranks[r.source] for r in cands)
        groups: dict[str, list[MemoryRecord]] = defaultdict(list)
        for r in cands:
            if ranks[r.source] == top:
                groups[memory_value_key(r.value)].append(r)
        heads = [_order(g)[0] for _, g in sorted(groups.items())]
        if len(heads) == 1:
            return heads[0]
        if _strictly_first([h.created for h in heads]):
            return max(heads, key=lambda h: h.created or _MIN)
        if _strictly_first([h.confidence for h in heads]):
            return max(heads, key=lambda h: h.confidence or 0.0)
        return None

    def pick(self, cands: list[MemoryRecord]) -> None:
        """One winner for a key (plus history if the policy keeps it), or a clarify key."""
        winner = self._winner(cands)
        if winner is None:
            key = min(r.key for r in cands)
            self.clarify.append(key)
            self.excluded.update({r.id: f"ambiguous:{key}" for r in cands})
            return
        self.winners.append(winner)
        self.inject.append(winner)
        wkey = memory_value_key(winner.value)
        for r in _order(cands):
            if r is winner:
                continue
            if memory_value_key(r.value) == wkey:
                self.excluded[r.id] = f"same_as:{winner.id}"
            elif self.policy.keep_history:
                self.inject.append(r)
            else:
                self.excluded[r.id] = self.overridden[r.id] = f"overridden_by:{winner.id}"

    def writes(self) -> tuple[MemoryRecord, ...]:
        """Supersede chains for current-turn winners that should outlive the run."""
        mode = self.policy.write_back
        out: list[MemoryRecord] = []
        by_key: dict[str, list[MemoryRecord]] = defaultdict(list)
        for r in self.ordered:
            by_key[normalize_text(r.key)].append(r)
        for winner in sorted(self.winners, key=lambda r: r.id):
            asked = mode == "always" or (mode == "when_asked" and winner.persist)
            if winner.source != "user_explicit" or not asked:
                continue
            olds = [
                r
                for r in by_key[normalize_text(winner.key)]
                if r.id != winner.id
                and r.source in _LONG_TERM
                and r.status in ("active", "pending")
                and r.id not in self.superseded_by
                and self.in_scope(r)
                and (r.until is None or r.until >= self.clock)
            ]
            # each written record names the turn it came from, so a replay of this turn
            # can read the store as it was before (``without_own_writes``)
            out.extend(
                replace(r, status="superseded", turn=winner.id, prior_status=r.status) for r in olds
            )
            chain = tuple(sorted({*winner.supersedes, *(r.id for r in olds)}))
            out.append(
                replace(
                    winner,
                    source="memory",
                    persist=False,
                    status="active",
                    supersedes=chain,
                    created_at=winner.created or self.clock,
                    turn=winner.id,
                    prior_status=None,
                )
            )
        return tuple(out)

    def _summary(self, writes: tuple[MemoryRecord, ...]) -> tuple[Verdict, str, str]:
        current_override = any(
            self.recs[why.split(":", 1)[1]].source == "user_explicit"
            and self.recs[rid].source in _LONG_TERM
            for rid, why in self.overridden.items()
        )
        if self.clarify:
            keys = ", ".join(self.clarify)
            verdict, reason = Verdict.CLARIFY, "ambiguous_memory"
            detail = f"Contradictory records of equal standing for {keys}: ask the user."
        elif current_override:
            verdict, reason = Verdict.CONTINUE, "current_turn_override"
            detail = "The current turn overrides stored memory for this run."
        elif self.inject:
            verdict, reason = Verdict.CONTINUE, "resolved"
            detail = f"{len(self.inject)} record(s) injected."
        else:
            verdict, reason = Verdict.CONTINUE, "no_memory"
            detail = "No memory to inject."
        if writes:
            detail += f" {len(writes)} record(s) written back."
        return verdict, reason, detail

    def verdict(self, writes: tuple[MemoryRecord, ...]) -> MemoryVerdict:
        verdict, reason, detail = self._summary(writes)
        excluded = self.excluded
        conflicting = sorted(
            rid for rid, why in excluded.items() if why.startswith(("overridden_by:", "ambiguous:"))
        )
        dropped = sorted({*self.superseded, *self.expired, *(set(excluded) - set(conflicting))})
        reasons = {**self.superseded, **self.expired, **excluded}
        data: dict[str, Any] = {"reasons": dict(sorted(reasons.items()))}
        if self.clarify:
            data["clarify_keys"] = list(self.clarify)
        if self.unentitled:
            data["unentitled_supersedes"] = dict(sorted(self.unentitled.items()))
        if self.cycles:
            data["supersedes_cycles"] = self.cycles
            detail += f" Supersedes cycle(s) ignored: {self.cycles}."
        if writes:
            data["writes"] = [w.id for w in writes]
        decision = GuardDecision(
            guard=GUARD,
            verdict=verdict,
            reason=reason,
            detail=detail,
            selected_ids=tuple(r.id for r in self.inject),
            conflicting_ids=tuple(conflicting),
            dropped_ids=tuple(dropped),
            policy=self.policy.label,
            data=data,
        )
        return MemoryVerdict(
            inject=tuple(self.inject),
            superseded_ids=tuple(sorted(self.superseded)),
            expired_ids=tuple(sorted(self.expired)),
            excluded=dict(sorted(excluded.items())),
            clarify_keys=tuple(self.clarify),
            decision=decision,
            writes=writes,
        )
