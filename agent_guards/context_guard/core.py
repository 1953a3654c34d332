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
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage

from agent_guards.context_guard.model import ArchiveRecord, ContextBudgetError, ContextVerdict
from agent_guards.context_guard.policy import MARKER, ContextPolicy
from agent_guards.context_guard.steps import (
    DEFAULT_COUNTER,
    Counter,
    Labelled,
    PinnedItem,
    TokenCounter,
    assemble,
    atomic_groups,
    make_counter,
    resolve_pins,
    tool_tokens,
    treat_tools,
)
from agent_guards.context_guard.summary import marker, outline_summary, render_history, stable_hash
from agent_guards.context_guard.tokens import usage_scale
from agent_guards.context_guard.verdict import Fitted, decide
from agent_guards.core.errors import InvalidInputError

__all__ = ["fit_context"]

_DEFAULT_POLICY = ContextPolicy()
_NOTE_ROOM = 120  # tokens left for at least a short summary note when keeping the newest group


@dataclass(frozen=True)
class _Budget:
    """The numbers one ``fit_context`` call works with (a value, built per call)."""

    pol: ContextPolicy
    count: Counter
    max_tokens: int
    reserve: int
    budget: int
    tool_tokens: int
    archive: bool


def _check(messages: Sequence[BaseMessage], max_tokens: Any, pol: Any) -> list[BaseMessage]:
    ContextPolicy.coerce(pol)
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
        raise InvalidInputError(f"must be an int >= 1, got {max_tokens!r}", field="max_tokens")
    msgs = list(messages)
    for i, m in enumerate(msgs):
        if not isinstance(m, BaseMessage):
            raise InvalidInputError(
                f"not a message: {type(m).__name__}", item=f"#{i}", field="messages"
            )
    return msgs


def fit_context(
    messages: Sequence[BaseMessage],
    *,
    max_tokens: int,
    policy: ContextPolicy | None = None,
    pinned: Iterable[PinnedItem] | PinnedItem = (),
    tools: Sequence[Any] | None = None,
    token_counter: TokenCounter | None = None,
    archive: bool = True,
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

    Returns:
        A :class:`ContextVerdict`: verdict, usage before and after, the fitted messages, the
        ids kept / summarized / truncated / archived / flagged, and the decision record.

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
    msgs = _check(messages, max_tokens, pol)
    reserve = pol.reserve_for(max_tokens)
    if max_tokens - reserve < 1:
        raise InvalidInputError(
            f"answer reserve {reserve} leaves no room in max_tokens {max_tokens}",
            field="reserve_tokens",
        )
    schemas = tool_tokens(tools)
    count, tok = _counting(msgs, token_counter, schemas)
    b = _Budget(pol, count, max_tokens, reserve, max_tokens - reserve, schemas, archive)
    labels = [m.id or f"#{i}" for i, m in enumerate(msgs)]
    tokens_before = sum(tok.values()) + b.tool_tokens
    pin_ids, extras = resolve_pins(pinned, msgs, labels)

    # 1. assemble; 2. archive long tool results, quote flagged ones
    lead, pins, rest, stale = assemble(msgs, labels, extras)
    body, records, flagged, replaced = treat_tools(rest, tok, pol, archive=archive)
    for m in (*pins, *(m for _, m in body)):
        if id(m) not in tok:
            tok[id(m)] = count(m)
    head = [*lead, *pins]
    out = [*head, *(m for _, m in body)]
    tokens = sum(tok[id(m)] for m in out) + b.tool_tokens

    # 3. compress the middle when at compress_ratio or over the budget
    removed: Labelled = []
    summary: BaseMessage | None = None
    room = 0
    if tokens >= pol.compress_ratio * b.budget or tokens > b.budget:
        body, removed, used = _select(body, head, tok, pin_ids, b)
        if removed:
            summary, room, history = _summarize(removed, pol, b.budget - used, count, archive)
            if history is not None:
                records.append(history)
            if summary is not None:
                tok[id(summary)] = count(summary)
            out = [*head, *([summary] if summary else []), *(m for _, m in body)]
            tokens = sum(tok[id(m)] for m in out) + b.tool_tokens

    changed = len(out) != len(msgs) or any(a is not c for a, c in zip(out, msgs, strict=False))
    fit = Fitted(
        messages=tuple(out),
        tokens=tokens,
        tokens_before=tokens_before,
        budget=b.budget,
        max_tokens=max_tokens,
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
    return decide(pol, fit)


def _counting(
    msgs: list[BaseMessage], token_counter: TokenCounter | None, schemas: int
) -> tuple[Counter, dict[int, int]]:
    """The counter for this call and each message's tokens.

    An estimate (no counter of the model's own) is scaled up by the last reply's
    ``usage_metadata`` when the provider counted more than the estimate did.
    """
    count = make_counter(token_counter)
    tok = {id(m): count(m) for m in msgs}
    if count is DEFAULT_COUNTER:
        scale = usage_scale(msgs, [tok[id(m)] for m in msgs], schemas)
        if scale > 1.0:
            base = count

            def count(m: BaseMessage) -> int:
                return math.ceil(base(m) * scale)

            tok = {id(m): count(m) for m in msgs}
    return count, tok


def _select(
    body: Labelled, head: list[BaseMessage], tok: dict[int, int], pin_ids: set[str], b: _Budget
) -> tuple[Labelled, Labelled, int]:
    """Keep pinned groups, the current question and the most recent groups back to the target.

    Returns (kept, removed, tokens used by everything kept); raises when what must stay
    does not fit.
    """
    groups = atomic_groups([m for _, m in body])
    gtok = [sum(tok[id(body[i][1])] for i in g) for g in groups]
    humans = [i for i, (_, m) in enumerate(body) if isinstance(m, HumanMessage) and not marker(m)]
    last_human = humans[-1] if humans and b.pol.pin_last_human else None
    must = {
        gi
        for gi, g in enumerate(groups)
        if last_human in g or any(body[i][0] in pin_ids for i in g)
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
