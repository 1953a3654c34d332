"""The pure core of the context guard: ``fit_context``. Imports nothing from LangGraph.

Order of work (cheapest and most reversible first):

1. assemble: leading system messages, then pinned content, then the rest of the history;
2. tool results longer than ``archive_over_tokens`` move to the store (a reference with the
   archive id stays, so the call/result pair is intact); flagged ones are quoted as data;
3. at ``compress_ratio`` (or over the budget) the middle of the history becomes one summary
   message; recent messages are kept back to ``target_ratio``; an AIMessage's tool calls and
   their ToolMessages move together; pinned content and the current question always stay;
4. truncation (removal with only a note) is the last resort, when not even a summary fits.

Everything removed is archived too (``archive_dropped``), so it stays readable by id.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.messages.utils import count_tokens_approximately

from agent_guards.context_guard.model import (
    ArchiveRecord,
    ContextBudgetError,
    ContextVerdict,
    later,
)
from agent_guards.context_guard.policy import MARKER, ContextPolicy
from agent_guards.context_guard.steps import (
    DEFAULT_COUNTER,
    Counter,
    Labelled,
    PinnedItem,
    TokenCounter,
    assemble,
    atomic_groups,
    call_labels,
    make_counter,
    pin_extras,
    pin_items,
    resolve_pins,
    scanner,
    tool_tokens,
    treat_tool,
    treat_tools,
)
from agent_guards.context_guard.summary import marker, outline_summary, render_history, stable_hash
from agent_guards.context_guard.tally import (
    STALE_USAGE,
    VERSION,
    Labels,
    Tally,
    basis_of,
    biggest_tool_result,
    last_usage,
    prefix_labels,
    remember_labels,
    reports_total,
    scaled_total,
    tally_end,
)
from agent_guards.context_guard.tokens import usage_scale
from agent_guards.context_guard.verdict import Fitted, decide, decide_unchanged
from agent_guards.core.errors import InvalidInputError
from agent_guards.core.fields import shown
from agent_guards.core.signatures import is_guard_message

__all__ = ["fit_context"]

_DEFAULT_POLICY = ContextPolicy()
_NOTE_ROOM = 120  # tokens left for at least a short summary note when keeping the newest group


class FitBudget(NamedTuple):
    """The numbers one ``fit_context`` call works with (a value: ``budget_of`` builds it)."""

    pol: ContextPolicy
    raw: Counter
    max_tokens: int
    reserve: int
    budget: int
    tool_tokens: int
    archive: bool
    basis: str


def budget_of(
    pol: ContextPolicy,
    max_tokens: int,
    token_counter: TokenCounter | None,
    tools: Sequence[Any] | None,
    archive: bool,
) -> FitBudget:
    """The numbers a fit works with that its arguments alone give (checked by the caller):
    a node works them out once, as its window, policy, counter and tools stay the same."""
    raw = make_counter(token_counter)
    reserve = pol.reserve_for(max_tokens)
    return FitBudget(
        pol,
        raw,
        max_tokens,
        reserve,
        max_tokens - reserve,
        tool_tokens(tools),
        archive,
        basis_of(pol, token_counter, raw, archive),
    )


def _over(tokens: int, b: FitBudget) -> bool:
    """Whether a fit at ``tokens`` has to compress: at ``compress_ratio``, or over the budget."""
    return tokens >= b.pol.compress_ratio * b.budget or tokens > b.budget


def _check(max_tokens: Any, pol: Any) -> None:
    ContextPolicy.coerce(pol)
    if (
        isinstance(max_tokens, bool)
        or not isinstance(max_tokens, int)
        or not 1 <= max_tokens < 2**63
    ):
        raise InvalidInputError(f"must be an int >= 1, got {shown(max_tokens)}", field="max_tokens")


def _check_messages(msgs: Sequence[Any], start: int) -> None:
    for i in range(start, len(msgs)):
        if not isinstance(msgs[i], BaseMessage):
            raise InvalidInputError(
                f"not a message: {type(msgs[i]).__name__}", item=f"#{i}", field="messages"
            )


def fit_context(
    messages: Sequence[BaseMessage],
    *,
    max_tokens: int,
    policy: ContextPolicy | None = None,
    pinned: Iterable[PinnedItem] | PinnedItem = (),
    tools: Sequence[Any] | None = None,
    token_counter: TokenCounter | None = None,
    archive: bool = True,
    tally: Mapping[str, Any] | None = None,
) -> ContextVerdict:
    """Fit ``messages`` into a model's window without losing what must stay.

    Args:
        messages: The history, as a graph holds it (LangChain messages).
        max_tokens: The model's context window in tokens.
        policy: Thresholds and sizes; :class:`ContextPolicy` defaults (70/85/90%) if omitted.
        pinned: Content that always survives verbatim: ids of messages (or tool calls) in
            ``messages``, and extra messages (task constraints, the current step, evidence in
            use) placed right after the leading system messages. Earlier pinned messages the
            guard wrote that are not pinned any more are dropped as stale.
        tools: Tools bound to the model; their schemas count against the budget.
        token_counter: The model itself (its own counter) or a ``messages -> int`` callable,
            called one message at a time. When omitted (or the model has no counter of its
            own) :func:`~agent_guards.context_guard.tokens.count_tokens_cjk` estimates (CJK
            text at o200k rates), scaled up by the last reply's ``usage_metadata``.
        archive: False when there is no store: nothing is moved out, compression still runs.
        tally: The ``tally`` of the verdict of the previous call on the same history (a node
            keeps it in state). Only the messages appended since are counted and scanned; a
            tally that no longer matches the history is ignored and everything is counted
            (see :mod:`~agent_guards.context_guard.tally` for what is recounted when). The
            verdict is the same with or without it.

    Returns:
        A :class:`ContextVerdict`: verdict, usage before and after, the fitted messages, the
        ids kept / summarized / truncated / archived / flagged, the decision record, and
        the ``tally`` to pass to the next call.

    Raises:
        ContextBudgetError: The system prompt, pinned content and tool schemas alone exceed
            the budget (the message says by how much). Nothing pinned is ever cut.
        InvalidInputError: A pinned id is not in the history, or an item is not a message.

    Example:
        >>> from langchain_core.messages import HumanMessage, SystemMessage
        >>> msgs = [SystemMessage("Be brief.", id="s"), HumanMessage("hi", id="h")]
        >>> v = fit_context(msgs, max_tokens=1000)
        >>> v.verdict, v.reason, v.messages == tuple(msgs), v.changed
        (<Verdict.CONTINUE: 'continue'>, 'within_budget', True, False)
        >>> try:
        ...     fit_context(msgs, max_tokens=20, pinned=[HumanMessage("x" * 400)])
        ... except ContextBudgetError as err:
        ...     print(f"over by {err.over_by} tokens")
        over by 50 tokens
    """
    pol = _DEFAULT_POLICY if policy is None else policy
    _check(max_tokens, pol)
    if type(messages) not in (list, tuple) and (
        not isinstance(messages, Iterable) or isinstance(messages, (str, bytes, Mapping))
    ):
        raise InvalidInputError(
            f"expected a list of messages, got {type(messages).__name__}", field="messages"
        )
    msgs = messages if isinstance(messages, (list, tuple)) else list(messages)
    reserve = pol.reserve_for(max_tokens)
    if max_tokens - reserve < 1:
        raise InvalidInputError(
            f"answer reserve {reserve} leaves no room in max_tokens {max_tokens}",
            field="reserve_tokens",
        )
    if isinstance(pinned, Iterator):  # read once: more than one path may look at the pins
        pinned = list(pinned)
    b = budget_of(pol, max_tokens, token_counter, tools, archive)
    start = tally_end(msgs, tally, b.basis)
    _check_messages(msgs, start)
    if start and tally is not None:
        fast = _incremental(msgs, tally, start, pin_items(pinned), b)
        if fast is not None:
            return fast
    history = msgs if isinstance(msgs, list) else list(msgs)
    return _unchanged_full(history, pinned, b) or _full(history, pinned, b)


def _read_counts(count: Counter, msgs: Sequence[BaseMessage], start: int = 0) -> list[int]:
    """Each message's tokens; a message that cannot be read as text (an int too long for
    str(), a malformed content block) is named, by id or position, with its field."""
    try:
        return [count(m) for m in msgs]
    except (ValueError, TypeError, KeyError, AttributeError, OverflowError, RecursionError):
        pass
    for i, m in enumerate(msgs):
        try:
            count(m)
        except (ValueError, TypeError, KeyError, AttributeError, OverflowError, RecursionError):
            calls = isinstance(m, AIMessage) and bool(m.tool_calls)
            raise InvalidInputError(
                "cannot be read as text", item=m.id or f"#{start + i}", field=_unread(m, calls)
            ) from None
    return [count(m) for m in msgs]


def _unread(m: BaseMessage, calls: bool) -> str:
    """The field of a message the counter could not read: its content or its tool calls."""
    try:
        count_tokens_approximately([m.model_copy(update={"tool_calls": []})] if calls else [m])
    except Exception:
        return "content"
    return "tool_calls" if calls else "content"


def _full(
    msgs: list[BaseMessage], pinned: Iterable[PinnedItem] | PinnedItem, b: FitBudget
) -> ContextVerdict:
    """Count, assemble, archive and (when needed) compress the whole history."""
    pol = b.pol
    raw = dict(zip(map(id, msgs), _read_counts(b.raw, msgs), strict=True))
    scale = _scale_of(msgs, raw, b)
    count = _scaled(b.raw, scale)
    tok = raw if scale <= 1.0 else {k: math.ceil(v * scale) for k, v in raw.items()}
    labels = [m.id or f"#{i}" for i, m in enumerate(msgs)]
    tokens_before = scaled_total(sum(raw[id(m)] for m in msgs), scale) + b.tool_tokens
    pin_ids, extras, how = resolve_pins(pinned, msgs, labels)

    # 1. assemble; 2. archive long tool results, quote flagged ones
    lead, pins, rest, stale = assemble(msgs, labels, extras)
    body, records, flagged, replaced = treat_tools(rest, tok, pol, archive=b.archive)
    for m in (*pins, *(m for _, m in body)):
        if id(m) not in tok:
            raw[id(m)] = b.raw(m)
            tok[id(m)] = count(m)
    head = [*lead, *pins]
    out = [*head, *(m for _, m in body)]
    tokens = scaled_total(sum(raw[id(m)] for m in out), scale) + b.tool_tokens

    # 3. compress the middle when at compress_ratio or over the budget
    removed: Labelled = []
    summary: BaseMessage | None = None
    room = 0
    if _over(tokens, b):
        whole = body
        body, removed, used = _select(body, head, tok, pin_ids, b)
        if removed:
            summary, room, history = _summarize(removed, pol, b.budget - used, count, b.archive)
            if history is not None:
                records.append(history)
            if summary is not None:
                raw[id(summary)] = b.raw(summary)
                tok[id(summary)] = count(summary)
            out = [*head, *_with_summary(whole, body, removed, summary)]
            tokens = scaled_total(sum(raw[id(m)] for m in out), scale) + b.tool_tokens

    changed = len(out) != len(msgs) or any(a is not c for a, c in zip(out, msgs, strict=False))
    fit = Fitted(
        messages=tuple(out),
        tokens=tokens,
        tokens_before=tokens_before,
        budget=b.budget,
        max_tokens=b.max_tokens,
        tool_tokens=b.tool_tokens,
        kept=[label for label, _ in body],
        pin_labels=sorted(pin_ids) + [e.id or "" for e in extras],
        removed=removed,
        summary=summary,
        room=room,
        stale=stale,
        replaced=replaced,
        flagged=flagged,
        records=records,
        changed=changed,
    )
    out_raw = [raw[id(m)] for m in out]
    if len(out) > len(head) and isinstance(out[len(head)], SystemMessage):
        # a later system message the compression brought next to the head: a fit of this
        # history from scratch takes it into the leading ones (and puts pins after it), so
        # no tally can stand for what that fit does; the next fit counts from scratch
        return decide(pol, fit, None)
    tally = _tally_of(out, out_raw, lead=len(lead), head=len(head), how=how, b=b)
    if tally is not None:
        labels_out = (m.id or f"#{i}" for i, m in enumerate(out) if i >= len(head))
        remember_labels(out, len(head), Labels(tuple(labels_out)))
    return decide(pol, fit, tally)


def _unchanged_full(
    msgs: list[BaseMessage], pinned: Iterable[PinnedItem] | PinnedItem, b: FitBudget
) -> ContextVerdict | None:
    """``_full`` for a history it leaves as it is, the usual case before a model call: no
    pinned message to place, no earlier pin to drop as stale, no tool result to archive or
    quote, usage under ``compress_ratio``. Assembly then keeps every message where it is
    (the leading system messages, then the rest), so the verdict is the one the usage
    gives; None when any of that does not hold (``_full`` decides). Read errors and bad
    pins are raised in ``_full``'s order (counts first, then pins)."""
    raw = _read_counts(b.raw, msgs)
    labels = [m.id or f"#{i}" for i, m in enumerate(msgs)]
    pin_ids, extras, how = resolve_pins(pinned, msgs, labels)
    kept = None if extras else _kept_as_is(msgs, labels, raw, b)
    if kept is None:
        return None
    tokens, lead = kept
    tally = _tally_of(msgs, raw, lead=lead, head=lead, how=how, b=b)
    if tally is not None:
        remember_labels(msgs, lead, Labels(tuple(labels[lead:])))
    return decide_unchanged(
        b.pol,
        messages=tuple(msgs),
        tokens=tokens,
        tokens_before=tokens,
        budget=b.budget,
        max_tokens=b.max_tokens,
        tool_tokens=b.tool_tokens,
        kept=labels[lead:],
        pin_labels=sorted(pin_ids),
        tally=tally,
    )


def _kept_as_is(
    msgs: Sequence[BaseMessage], labels: list[str], raw: list[int], b: FitBudget
) -> tuple[int, int] | None:
    """The tokens of a history that a fit from scratch with no pinned message to place
    leaves as it is, and how many system messages lead it; None when that fit moves
    something (usage at ``compress_ratio``, an earlier pin to drop as stale, a tool result
    to archive or quote)."""
    scale = usage_scale(msgs, raw, b.tool_tokens) if b.raw is DEFAULT_COUNTER else 1.0
    tokens = scaled_total(sum(raw), scale) + b.tool_tokens
    if _over(tokens, b) or any(marker(m).get("role") == "pinned" for m in msgs):
        return None  # a stale pin: assembly drops it
    if not _tools_untouched(msgs, labels, raw, scale, b):
        return None
    lead = 0
    while lead < len(msgs) and isinstance(msgs[lead], SystemMessage):
        lead += 1
    return tokens, lead


def fit_unchanged(
    msgs: list[BaseMessage], ids: list[str], tally: Mapping[str, Any] | None, b: FitBudget
) -> tuple[int, int, Tally] | None:
    """What a node needs of a fit that leaves its history as it is, without the verdict:
    the tokens counted, how many messages are kept after the leading ones, and the tally.

    For the usual fit before a model call, when the only pins are the ids ``ids`` of
    messages in the history: ``fit_context(msgs, pinned=ids, tally=tally, ...)`` takes one
    of its short paths (``_unchanged_full``, or ``_incremental`` from the tally) and
    decides the same numbers. None for any other fit, and for input those paths would
    reject (``fit_context`` then decides, or names what is wrong); nothing is raised."""
    try:
        n = tally_end(msgs, tally, b.basis)
        if not all(isinstance(m, BaseMessage) for m in msgs[n:]):
            return None
        if n and tally is not None:
            return _grown_unchanged(msgs, tally, n, ids, b)
        labels = [m.id or f"#{i}" for i, m in enumerate(msgs)]
        if not set(ids).issubset(labels):
            return None  # pinned by a tool call id, or not in the history
        raw = _read_counts(b.raw, msgs)
        kept = _kept_as_is(msgs, labels, raw, b)
        if kept is None:
            return None
        tokens, lead = kept
        tally = _tally_of(msgs, raw, lead=lead, head=lead, how=_by_id(ids), b=b)
        return None if tally is None else (tokens, len(msgs) - lead, tally)
    except Exception:  # bad input: fit_context names it
        return None


def _grown_unchanged(
    msgs: list[BaseMessage], t: Mapping[str, Any], n: int, ids: list[str], b: FitBudget
) -> tuple[int, int, Tally] | None:
    """``fit_unchanged`` from a tally that covers the first ``n`` messages: what
    ``_incremental`` decides when no pinned message sits after the leading ones and every
    pin is a message id."""
    head = int(t["head"])
    if int(t["lead"]) != head or n <= head:
        return None  # pinned messages in place, or no history after them yet
    new = msgs[n:]
    if any(marker(m).get("role") == "pinned" for m in new):
        return None
    labels = [m.id or f"#{n + j}" for j, m in enumerate(new)]
    before = t.get("pinned") or {}
    for item in ids:
        prev = before.get(item)
        if not (item in labels or (prev is not None and prev[1] == "id")):
            return None  # pinned by a tool call id: _pins_again resolves it
    grown = _growth(msgs, t, n, b)
    if grown is None:
        return None
    raw_new, scale = grown
    if not _tools_untouched(new, labels, raw_new, scale, b):
        return None
    raw_in = int(t["tokens"]) + sum(raw_new)
    tokens = scaled_total(raw_in, scale) + b.tool_tokens
    if _over(tokens, b):
        return None
    tally = _tally_on(t, msgs, out_new=new, out_raw=raw_new, raw_out=raw_in, how=_by_id(ids), b=b)
    return None if tally is None else (tokens, len(msgs) - head, tally)


def _by_id(ids: list[str]) -> dict[str, list[str]]:
    """How pins that are all message ids resolve (the tally's ``pinned``)."""
    return {i: [i, "id"] for i in ids}


def _scale_of(msgs: list[BaseMessage], raw: dict[int, int], b: FitBudget) -> float:
    """How much ``usage_metadata`` scales the estimate up (1 for a counter of the model's)."""
    if b.raw is not DEFAULT_COUNTER:
        return 1.0
    return usage_scale(msgs, [raw[id(m)] for m in msgs], b.tool_tokens)


def _scaled(base: Counter, scale: float) -> Counter:
    """The one-message counter under ``scale`` (each message rounded up)."""
    if scale <= 1.0:
        return base

    def count(m: BaseMessage) -> int:
        return math.ceil(base(m) * scale)

    return count


def _tally_of(
    out: list[BaseMessage],
    out_raw: list[int],
    *,
    lead: int,
    head: int,
    how: dict[str, list[str]],
    b: FitBudget,
) -> Tally | None:
    """The tally of the fitted messages, the next call's history (None without an id)."""
    if not out or not out[-1].id:
        return None
    return {
        "v": VERSION,
        "basis": b.basis,
        "n": len(out),
        "last": out[-1].id,
        "tokens": sum(out_raw),
        "lead": lead,
        "head": head,
        "pinned": how,
        "usage": last_usage(out, out_raw),
        "biggest": biggest_tool_result(out[head:], out_raw[head:], b.pol),
    }


def _incremental(
    msgs: Sequence[BaseMessage], t: Mapping[str, Any], n: int, items: list[Any], b: FitBudget
) -> ContextVerdict | None:
    """The fit from ``t`` and the messages after it, when nothing before them must change;
    None when the whole history has to be looked at (the full path decides the same)."""
    head = int(t["head"])
    extras = _same_pins(msgs, items, int(t["lead"]), head, n)
    new = msgs[n:]
    labels = [m.id or f"#{n + j}" for j, m in enumerate(new)]
    how = _pins_again(items, t.get("pinned") or {}, new, labels)
    if extras is None or how is None:
        return None
    grown = _growth(msgs, t, n, b)
    if grown is None:
        return None
    raw_new, scale = grown
    pin_labels = sorted(label for label, _ in how.values()) + [e.id or "" for e in extras]
    if not _tools_untouched(new, labels, raw_new, scale, b):
        step = _Step(t, n, new, labels, raw_new, scale, how, pin_labels)
        return _incremental_treated(msgs, step, b)
    raw_in = int(t["tokens"]) + sum(raw_new)
    tokens = scaled_total(raw_in, scale) + b.tool_tokens
    if _over(tokens, b):
        return None
    # nothing before the tally's end changes and nothing after it is rewritten, so neither
    # the history nor its labels are copied here
    kept = Labels(tuple(labels), before=prefix_labels(msgs, head, n))
    tally = _tally_on(t, msgs, out_new=new, out_raw=raw_new, raw_out=raw_in, how=how, b=b)
    if tally is not None:
        remember_labels(msgs, head, kept)
    return decide_unchanged(
        b.pol,
        messages=_as_given(msgs),
        tokens=tokens,
        tokens_before=tokens,
        budget=b.budget,
        max_tokens=b.max_tokens,
        tool_tokens=b.tool_tokens,
        kept=kept,
        pin_labels=pin_labels,
        tally=tally,
    )


def _growth(
    msgs: Sequence[BaseMessage], t: Mapping[str, Any], n: int, b: FitBudget
) -> tuple[list[int], float] | None:
    """The tokens of each message appended since the tally and the usage scale of the
    whole; None when the tally cannot stand for what came before them: a reply says the
    model was sent far more, or a result left in place is now long enough to archive."""
    raw_new = _read_counts(b.raw, msgs[n:], n)
    stale, usage = _usage(msgs, t, n, raw_new, b)
    if stale:
        return None
    scale = usage_scale([msgs[usage[0]]], [usage[2]], b.tool_tokens) if usage else 1.0
    limit = b.pol.archive_over_tokens
    if b.archive and limit is not None and math.ceil(int(t["biggest"]) * scale) > limit:
        return None
    return raw_new, scale


@dataclass(frozen=True)
class _Step:
    """What ``_incremental`` read from the tally and the messages appended since."""

    t: Mapping[str, Any]
    n: int
    new: Sequence[BaseMessage]
    labels: list[str]
    raw_new: list[int]
    scale: float
    how: dict[str, list[str]]
    pin_labels: list[str]


def _incremental_treated(
    msgs: Sequence[BaseMessage], s: _Step, b: FitBudget
) -> ContextVerdict | None:
    """``_incremental`` when tool results appended since the tally are archived or quoted."""
    pol, t, n, scale = b.pol, s.t, s.n, s.scale
    raw_in = int(t["tokens"]) + sum(s.raw_new)
    tok = {
        id(m): r if scale <= 1.0 else math.ceil(r * scale)
        for m, r in zip(s.new, s.raw_new, strict=True)
    }
    body, records, flagged, replaced = treat_tools(
        list(zip(s.labels, s.new, strict=True)), tok, pol, archive=b.archive
    )
    out_new = [m for _, m in body]
    out_raw = [r if m is o else b.raw(m) for m, o, r in zip(out_new, s.new, s.raw_new, strict=True)]
    raw_out = raw_in - sum(s.raw_new) + sum(out_raw)
    tokens = scaled_total(raw_out, scale) + b.tool_tokens
    if _over(tokens, b):
        return None
    out = [*msgs[:n], *out_new]  # written back: the history and its labels are copied
    kept = Labels(tuple(s.labels), before=prefix_labels(msgs, int(t["head"]), n))
    tally = _tally_on(t, out, out_new=out_new, out_raw=out_raw, raw_out=raw_out, how=s.how, b=b)
    if tally is not None:
        remember_labels(out, int(t["head"]), kept)
    fit = Fitted(
        messages=tuple(out),
        tokens=tokens,
        tokens_before=scaled_total(raw_in, scale) + b.tool_tokens,
        budget=b.budget,
        max_tokens=b.max_tokens,
        tool_tokens=b.tool_tokens,
        kept=kept,
        pin_labels=s.pin_labels,
        removed=[],
        summary=None,
        room=0,
        stale=[],
        replaced=replaced,
        flagged=flagged,
        records=records,
        changed=bool(replaced),
    )
    return decide(pol, fit, tally)


def _tools_untouched(
    msgs: Sequence[BaseMessage],
    labels: Sequence[str],
    raw: Sequence[int],
    scale: float,
    b: FitBudget,
) -> bool:
    """Whether ``treat_tools`` leaves every tool result in ``msgs`` as it is (nothing to
    archive, nothing to quote)."""
    scan = scanner(b.pol.injection)
    for m, label, r in zip(msgs, labels, raw, strict=True):
        if isinstance(m, ToolMessage):
            t = r if scale <= 1.0 else math.ceil(r * scale)
            if treat_tool(m, label, t, b.pol, b.archive, scan=scan)[0] is not m:
                return False
    return True


def _as_given(msgs: Sequence[BaseMessage]) -> tuple[BaseMessage, ...]:
    """The history, unchanged, as the verdict's messages: a tuple as it is; a list copied
    when the verdict's ``messages`` is first read (up to its length now: messages appended
    to it since are not part of it)."""
    if isinstance(msgs, tuple):
        return msgs
    size = len(msgs)
    return later(lambda: tuple(msgs) if len(msgs) == size else tuple(msgs[:size]))


def _same_pins(
    msgs: Sequence[BaseMessage], items: list[Any], lead: int, head: int, n: int
) -> list[BaseMessage] | None:
    """This call's pinned messages, when they are exactly those already in place after the
    leading system messages and nothing after the tally moves into that head."""
    if n <= head or any(not isinstance(i, (str, BaseMessage)) for i in items):
        return None  # no history after the head yet: assembly may still reorder it
    extras = pin_extras(items)
    if len(extras) != head - lead:
        return None
    for e, old in zip(extras, msgs[lead:head], strict=True):
        if old.id != e.id or type(old) is not type(e) or old.content != e.content:
            return None
    ids = {e.id for e in extras}
    for m in msgs[n:]:
        if m.id in ids or marker(m).get("role") == "pinned":
            return None
    return extras


def _pins_again(
    items: list[Any], before: Mapping[str, Any], new: Sequence[BaseMessage], labels: list[str]
) -> dict[str, list[str]] | None:
    """Pinned ids resolved as the full path would: a message id first, else the latest
    message with that tool call; None when one is not known from the tally or the new part."""
    wanted = [i for i in items if isinstance(i, str)]
    if not wanted:
        return {}
    known = set(labels)
    calls: dict[str, str] | None = None  # read only for an id pinned by its tool call
    how: dict[str, list[str]] = {}
    for item in wanted:
        prev = before.get(item)
        if item in known or (prev is not None and prev[1] == "id"):
            how[item] = [item, "id"]
            continue
        if calls is None:
            calls = call_labels(new, labels)
        if item in calls:
            how[item] = [calls[item], "call"]
        elif prev is not None:
            how[item] = [str(prev[0]), "call"]
        else:
            return None
    return how


def _usage(
    msgs: Sequence[BaseMessage], t: Mapping[str, Any], n: int, raw_new: list[int], b: FitBudget
) -> tuple[bool, list[int] | None]:
    """The last reply reporting usage ([index, total, estimate]), and True first when it
    says the model was sent far more than the tally holds (the history changed out of its
    sight)."""
    if b.raw is not DEFAULT_COUNTER:
        return False, None
    for j in range(len(raw_new) - 1, -1, -1):
        m = msgs[n + j]
        total = reports_total(m)
        if total is None:
            continue
        meta = m.usage_metadata if isinstance(m, AIMessage) else None
        sent = meta.get("input_tokens") if meta else None
        before = int(t["tokens"]) + sum(raw_new[:j]) + b.tool_tokens
        if isinstance(sent, int) and sent > STALE_USAGE * max(before, 1):
            return True, None
        return False, [n + j, total, int(t["tokens"]) + sum(raw_new[: j + 1])]
    usage = t.get("usage")
    return False, [int(x) for x in usage] if usage else None


def _tally_on(
    t: Mapping[str, Any],
    out: Sequence[BaseMessage],
    *,
    out_new: Sequence[BaseMessage],
    out_raw: list[int],
    raw_out: int,
    how: dict[str, list[str]],
    b: FitBudget,
) -> Tally | None:
    """``t`` moved on by the appended messages (as they are after this fit)."""
    if not out or not out[-1].id:
        return None
    n = int(t["n"])
    usage = last_usage(out_new, out_raw)
    if usage is not None:
        usage = [n + usage[0], usage[1], int(t["tokens"]) + usage[2]]
    return {
        **t,
        "n": len(out),
        "last": out[-1].id,
        "tokens": raw_out,
        "pinned": how,
        "usage": usage if usage is not None else t.get("usage"),
        "biggest": max(int(t["biggest"]), biggest_tool_result(out_new, out_raw, b.pol)),
    }


def _users(message: BaseMessage) -> bool:
    """A human turn the user wrote (not a summary, not a guard's nudge)."""
    return (
        isinstance(message, HumanMessage) and not marker(message) and not is_guard_message(message)
    )


def _system(message: BaseMessage) -> bool:
    """A system message someone wrote (not a guard's pin or note)."""
    return isinstance(message, SystemMessage) and not marker(message)


def _select(
    body: Labelled, head: list[BaseMessage], tok: dict[int, int], pin_ids: set[str], b: FitBudget
) -> tuple[Labelled, Labelled, int]:
    """Keep pinned groups, the current question and the most recent groups back to the target.

    Returns (kept, removed, tokens used by everything kept); raises when what must stay
    does not fit.
    """
    groups = atomic_groups([m for _, m in body])
    gtok = [sum(tok[id(body[i][1])] for i in g) for g in groups]
    # the current question is the user's: a guard's own human turn (a loop nudge, a
    # summary) never takes its place
    humans = [i for i, (_, m) in enumerate(body) if _users(m)]
    last_human = humans[-1] if humans and b.pol.pin_last_human else None
    # a system message later in the history (an instruction added mid-run) is the system
    # prompt too: it is never summarized into background
    must = {
        gi
        for gi, g in enumerate(groups)
        if last_human in g or any(body[i][0] in pin_ids or _system(body[i][1]) for i in g)
    }
    system = sum(tok[id(m)] for m in head if not marker(m))
    pinned = sum(tok[id(m)] for m in head) - system
    history = sum(gtok[g] for g in must)
    used = b.tool_tokens + system + pinned + history
    if used > b.budget:
        parts = (
            f"system prompt {system}, pinned content {pinned}, pinned history and current "
            f"question {history}, tool schemas {b.tool_tokens}"
        )
        raise ContextBudgetError(
            needed=used, budget=b.budget, max_tokens=b.max_tokens, reserve=b.reserve, parts=parts
        )
    allowance = int(b.pol.target_ratio * b.budget) - min(b.pol.summary_max_tokens, b.budget - used)
    kept = set(must)
    for gi in range(len(groups) - 1, -1, -1):
        if gi in must:
            continue
        # the newest group (the latest tool results) may use the whole budget but a note
        limit = max(allowance, b.budget - _NOTE_ROOM) if gi == len(groups) - 1 else allowance
        if used + gtok[gi] > limit:
            break
        kept.add(gi)
        used += gtok[gi]
    keep = sorted(i for gi in kept for i in groups[gi])
    drop = sorted(i for gi in range(len(groups)) if gi not in kept for i in groups[gi])
    return [body[i] for i in keep], [body[i] for i in drop], used


def _with_summary(
    order: Labelled, kept: Labelled, removed: Labelled, summary: BaseMessage | None
) -> list[BaseMessage]:
    """The kept history with the summary where the removed messages were: after the last
    of them in ``order``, so nothing kept changes places around it (the current question
    stays before the tool results summarized for it, which the model would call again)."""
    msgs = [m for _, m in kept]
    if summary is None or not removed:
        return msgs
    position = {id(m): i for i, (_, m) in enumerate(order)}
    last = position[id(removed[-1][1])]
    at = sum(1 for _, m in kept if position[id(m)] < last)
    return [*msgs[:at], summary, *msgs[at:]]


def _summarize(
    removed: list[tuple[str, BaseMessage]],
    pol: ContextPolicy,
    free: int,
    count: Counter,
    archive: bool,
) -> tuple[BaseMessage | None, int, ArchiveRecord | None]:
    ids = [label for label, _ in removed]
    labels = {id(m): label for label, m in removed}
    msgs = [m for _, m in removed]
    history = None
    if archive and pol.archive_dropped:
        text = render_history(msgs, labels)
        history = ArchiveRecord(
            "arc-" + stable_hash("history", *ids, text), "history", tuple(ids), text
        )
    where = (
        f"; their full text is archived as {history.archive_id} (read it with read_archived)"
        if history
        else ""
    )
    span = ids[0] if len(ids) == 1 else f"{ids[0]} … {ids[-1]}"
    header = (
        f"[Context summary by agent_guards: {len(ids)} earlier messages ({span}) were removed "
        f"to fit the context window{where}. This is background, not evidence: cite original "
        "records by id; pinned task constraints override it.]"
    )
    sid = "agent_guards-summary-" + stable_hash(*ids)
    info = {"role": "summary", "count": len(ids), "first": ids[0], "last": ids[-1]}
    if history:
        info["archive_id"] = history.archive_id

    def make(text: str) -> BaseMessage:
        return HumanMessage(content=text, id=sid, additional_kwargs={MARKER: dict(info)})

    room = min(pol.summary_max_tokens, free)
    summary = outline_summary(msgs, header=header, room=room, count=count, labels=labels, make=make)
    return summary, room, history
