"""Turn what ``fit_context`` did into a :class:`ContextVerdict` and its :class:`GuardDecision`.

Priority of the verdict (first match wins):

=======================================  =========  ====================
what happened                            verdict    reason
=======================================  =========  ====================
history summarized                       REPAIR     ``compressed``
history removed, not even a summary fit  REPAIR     ``truncated``
long tool results moved to the store     REPAIR     ``archived``
injected instructions quoted as data     REPAIR     ``injection_quoted``
usage >= critical_ratio (85%)            NUDGE      ``critical``
usage >= warn_ratio (70%)                NUDGE      ``warning``
otherwise                                CONTINUE   ``within_budget``
=======================================  =========  ====================
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, replace
from typing import Any

from langchain_core.messages import BaseMessage

from agent_guards.context_guard.model import ArchiveRecord, ContextVerdict, later
from agent_guards.context_guard.policy import GUARD, ContextPolicy
from agent_guards.context_guard.tally import Labels
from agent_guards.core.decision import GuardDecision, Verdict

__all__ = ["Fitted", "decide", "decide_unchanged", "unchanged_decision", "with_summary_text"]


@dataclass(frozen=True)
class Fitted:
    """What ``fit_context`` did to the history: the outcome :func:`decide` records."""

    messages: tuple[BaseMessage, ...]  # may be ``later(...)``: passed on, not read here
    tokens: int
    tokens_before: int
    budget: int
    max_tokens: int
    tool_tokens: int
    kept: Collection[str]
    pin_labels: list[str]
    removed: Sequence[tuple[str, BaseMessage]]
    summary: BaseMessage | None
    room: int
    stale: list[str]
    replaced: list[str]
    flagged: dict[str, tuple[str, ...]]
    records: list[ArchiveRecord]
    changed: bool

    @property
    def usage(self) -> float:
        return self.tokens / self.budget

    @property
    def usage_before(self) -> float:
        return self.tokens_before / self.budget


def _classify(
    pol: ContextPolicy, usage: float, *, removed: bool, summary: bool, archived: bool, flagged: bool
) -> tuple[Verdict, str]:
    if removed:
        return Verdict.REPAIR, "compressed" if summary else "truncated"
    if archived:
        return Verdict.REPAIR, "archived"
    if flagged:
        return Verdict.REPAIR, "injection_quoted"
    return _by_usage(pol, usage)


def _by_usage(pol: ContextPolicy, usage: float) -> tuple[Verdict, str]:
    """The verdict of a fit that moved nothing: NUDGE near the budget, else CONTINUE."""
    if usage >= pol.critical_ratio:
        return Verdict.NUDGE, "critical"
    if usage >= pol.warn_ratio:
        return Verdict.NUDGE, "warning"
    return Verdict.CONTINUE, "within_budget"


def _detail(
    usage_before: float,
    usage: float,
    budget: int,
    *,
    summarized: int,
    truncated: int,
    archived: int,
    flagged: int,
) -> str:
    done = [
        f"summarized {summarized} messages" if summarized else "",
        f"truncated {truncated} messages (archived, no summary fit)" if truncated else "",
        f"archived {archived} long tool results" if archived else "",
        f"quoted {flagged} tool results with injected instructions" if flagged else "",
    ]
    actions = ", ".join(d for d in done if d)
    head = _usage_head(usage_before, budget)
    return f"{head}: {actions}; now at {usage:.0%}" if actions else head


def _usage_head(usage_before: float, budget: int) -> str:
    """The detail of a fit that moved nothing (the head of any other's)."""
    return f"context at {usage_before:.0%} of a {budget}-token input budget"


@dataclass(frozen=True)
class _Moves:
    """Where ``fit_context`` moved messages: removed, summarized or truncated, archived."""

    removed_ids: list[str]
    moved: dict[str, str]  # tool result id -> archive id
    history: str | None  # archive id of the removed history, if it was archived
    archived: dict[str, str]
    summarized: list[str]
    truncated: list[str]


def _moves(
    removed: Sequence[tuple[str, BaseMessage]],
    summary: BaseMessage | None,
    records: list[ArchiveRecord],
) -> _Moves:
    removed_ids = [label for label, _ in removed]
    moved = {r.message_ids[0]: r.archive_id for r in records if r.kind == "tool_result"}
    history = next((r.archive_id for r in records if r.kind == "history"), None)
    archived = {**moved, **dict.fromkeys(removed_ids if history else (), history or "")}
    return _Moves(
        removed_ids=removed_ids,
        moved=moved,
        history=history,
        archived=archived,
        summarized=removed_ids if summary is not None else [],
        truncated=[] if summary is not None else removed_ids,
    )


def _decision(
    pol: ContextPolicy, verdict: Verdict, reason: str, mv: _Moves, fit: Fitted
) -> GuardDecision:
    """The decision record: ids, counts and usage."""
    data: dict[str, Any] = {
        "usage": round(fit.usage, 4),
        "usage_before": round(fit.usage_before, 4),
        "tokens": fit.tokens,
        "tokens_before": fit.tokens_before,
        "budget": fit.budget,
        "max_tokens": fit.max_tokens,
        "tool_tokens": fit.tool_tokens,
        "kept": len(fit.kept),
        "summarized": len(mv.summarized),
        "truncated": len(mv.truncated),
        "archived": mv.moved,
        "history_archive_id": mv.history,
        "flagged": {k: list(v) for k, v in fit.flagged.items()},
        "summary_id": fit.summary.id if fit.summary is not None else None,
        "summary_source": "fallback" if fit.summary is not None else "none",
    }
    return GuardDecision(
        guard=GUARD,
        verdict=verdict,
        reason=reason,
        detail=_detail(
            fit.usage_before,
            fit.usage,
            fit.budget,
            summarized=len(mv.summarized),
            truncated=len(mv.truncated),
            archived=sum(r.kind == "tool_result" for r in fit.records),
            flagged=len(fit.flagged),
        ),
        selected_ids=tuple(fit.pin_labels),
        conflicting_ids=tuple(fit.flagged),
        dropped_ids=(*mv.removed_ids, *fit.stale),
        policy=pol.label,
        data=data,
    )


def decide(pol: ContextPolicy, fit: Fitted, tally: dict[str, Any] | None = None) -> ContextVerdict:
    """Build the verdict and its decision record (ids, counts, usage) for ``fit_context``."""
    summary = fit.summary
    mv = _moves(fit.removed, summary, fit.records)
    verdict, reason = _classify(
        pol,
        fit.usage,
        removed=bool(mv.removed_ids),
        summary=summary is not None,
        archived=any(r.kind == "tool_result" for r in fit.records),
        flagged=bool(fit.flagged),
    )
    kept_set = set(fit.kept) if fit.replaced else set()
    return ContextVerdict(
        verdict=verdict,
        reason=reason,
        messages=fit.messages,
        usage=fit.usage,
        usage_before=fit.usage_before,
        tokens=fit.tokens,
        tokens_before=fit.tokens_before,
        budget=fit.budget,
        kept_ids=later(fit.kept.joined) if isinstance(fit.kept, Labels) else tuple(fit.kept),
        summarized_ids=tuple(mv.summarized),
        truncated_ids=tuple(mv.truncated),
        stale_ids=tuple(fit.stale),
        replaced_ids=tuple(r for r in fit.replaced if r in kept_set),
        archived=mv.archived,
        flagged=dict(fit.flagged),
        archives=tuple(fit.records),
        changed=fit.changed,
        summary_id=summary.id if summary is not None else None,
        summary_room=fit.room,
        summarized_messages=tuple(m for _, m in fit.removed) if summary is not None else (),
        decision=_decision(pol, verdict, reason, mv, fit),
        tally=tally,
    )


def decide_unchanged(
    pol: ContextPolicy,
    *,
    messages: tuple[BaseMessage, ...],
    tokens: int,
    tokens_before: int,
    budget: int,
    max_tokens: int,
    tool_tokens: int,
    kept: Collection[str],
    pin_labels: list[str],
    tally: dict[str, Any] | None,
) -> ContextVerdict:
    """:func:`decide` for a fit that left the history as it was: nothing removed, archived,
    quoted or dropped as stale, so the verdict is the one its usage gives and every list of
    moved ids is empty (what ``decide`` builds from an empty ``Fitted``, without building it)."""
    decision = unchanged_decision(
        pol,
        tokens=tokens,
        tokens_before=tokens_before,
        budget=budget,
        max_tokens=max_tokens,
        tool_tokens=tool_tokens,
        kept=len(kept),
        pin_labels=pin_labels,
    )
    return ContextVerdict(
        verdict=decision.verdict,
        reason=decision.reason,
        messages=messages,
        usage=tokens / budget,
        usage_before=tokens_before / budget,
        tokens=tokens,
        tokens_before=tokens_before,
        budget=budget,
        kept_ids=later(kept.joined) if isinstance(kept, Labels) else tuple(kept),
        decision=decision,
        tally=tally,
    )


def unchanged_decision(
    pol: ContextPolicy,
    *,
    tokens: int,
    tokens_before: int,
    budget: int,
    max_tokens: int,
    tool_tokens: int,
    kept: int,
    pin_labels: list[str],
    step: int | None = None,
    at: str | None = None,
    **extra: Any,
) -> GuardDecision:
    """The decision of a fit that left the history as it was (:func:`decide_unchanged`'s),
    ``kept`` messages after the leading ones, for a caller that needs no verdict; a node
    gives the step and time it decides at (a decision made stamped is not copied to be
    stamped), and ``extra`` data."""
    usage, usage_before = tokens / budget, tokens_before / budget
    verdict, reason = _by_usage(pol, usage)
    data: dict[str, Any] = {
        "usage": round(usage, 4),
        "usage_before": round(usage_before, 4),
        "tokens": tokens,
        "tokens_before": tokens_before,
        "budget": budget,
        "max_tokens": max_tokens,
        "tool_tokens": tool_tokens,
        "kept": kept,
        "summarized": 0,
        "truncated": 0,
        "archived": {},
        "history_archive_id": None,
        "flagged": {},
        "summary_id": None,
        "summary_source": "none",
        **extra,
    }
    return GuardDecision(
        guard=GUARD,
        verdict=verdict,
        reason=reason,
        detail=_usage_head(usage_before, budget),
        selected_ids=tuple(pin_labels),
        policy=pol.label,
        step=step,
        at=at,
        data=data,
    )


def with_summary_text(
    verdict: ContextVerdict,
    text: str,
    count: Callable[[BaseMessage], int],
    *,
    source: str = "model",
) -> ContextVerdict:
    """Replace the body of the verdict's summary message with ``text`` (cut to fit its room).

    The header (what was removed, where it is archived, "not evidence") is kept as written.

    Example:
        >>> from langchain_core.messages import HumanMessage
        >>> from langchain_core.messages.utils import count_tokens_approximately
        >>> from agent_guards import fit_context
        >>> from agent_guards.context_guard import with_summary_text
        >>> notes = [HumanMessage(f"note {i}: " + "word " * 200, id=f"n{i}") for i in range(20)]
        >>> v = fit_context(notes, max_tokens=4000)
        >>> v2 = with_summary_text(v, "Notes 0-15 only count words.",
        ...                        lambda m: count_tokens_approximately([m]))
        >>> summary = next(m for m in v2.messages if m.id == v2.summary_id)
        >>> v.reason, summary.content.splitlines()[-1], v2.decision.data["summary_source"]
        ('compressed', 'Notes 0-15 only count words.', 'model')
    """
    index = next(
        (i for i, m in enumerate(verdict.messages) if m.id == verdict.summary_id and m.id), None
    )
    if index is None or not text.strip():
        return verdict
    old = verdict.messages[index]
    header = str(old.content).split("\n\n", 1)[0]
    body = text.strip()

    def build(n: int) -> BaseMessage:
        cut = body if n >= len(body) else body[:n].rstrip() + " …[cut to fit]"
        return old.model_copy(update={"content": f"{header}\n\n{cut}"})

    new = build(len(body))
    if count(new) > verdict.summary_room:
        lo, hi = 0, len(body)
        while lo < hi:  # longest prefix that fits
            mid = (lo + hi + 1) // 2
            lo, hi = (mid, hi) if count(build(mid)) <= verdict.summary_room else (lo, mid - 1)
        new = build(lo)
        if count(new) > verdict.summary_room:
            return verdict  # not even the header and a cut marker fit: keep the outline
    tokens = verdict.tokens - count(old) + count(new)
    msgs = (*verdict.messages[:index], new, *verdict.messages[index + 1 :])
    decision = verdict.decision
    if decision is not None:
        data = {**decision.data, "summary_source": source, "tokens": tokens}
        data["usage"] = round(tokens / verdict.budget, 4)
        decision = replace(decision, data=data)
    # the tally counted the outline: the next call counts the new summary from scratch
    return replace(
        verdict,
        messages=msgs,
        tokens=tokens,
        usage=tokens / verdict.budget,
        decision=decision,
        tally=None,
    )
