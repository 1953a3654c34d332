"""The running tally of ``fit_context``: what the history held at the last fit. Pure.

Before each model call the guard needs the history's token total and a few facts about it
(where the pinned content sits, which pinned ids resolved to what, the last reply that
reported ``usage_metadata``, the longest tool result that stayed in place). The tally keeps
them for the fitted messages, so the next call only counts and scans what was appended since.
It is a plain dict (msgpack-safe, a few fields whatever the history's length) that a node
keeps in state; a replay from a checkpoint reads the same tally and decides the same.

A tally is trusted only when the message at its recorded end still has its recorded id,
the list is at least that long, and it was made under the same policy, counter and archive
setting (``basis``); anything else is counted from scratch. What the tally cannot see is a
message replaced in place, with the same id at the same position, before its end. It is
recounted when the newest reply's ``usage_metadata.input_tokens`` says the model was sent
more than twice what the tally holds, and whenever the usage reaches ``compress_ratio``
(compression always works from a full count).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterator, Mapping, Sequence
from itertools import chain
from typing import Any, TypeGuard

from langchain_core.language_models import BaseLanguageModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from agent_guards.context_guard.policy import ContextPolicy
from agent_guards.context_guard.steps import DEFAULT_COUNTER, Counter, TokenCounter
from agent_guards.context_guard.summary import marker, stable_hash

__all__ = [
    "Labels",
    "Tally",
    "basis_of",
    "biggest_tool_result",
    "last_usage",
    "prefix_labels",
    "remember_labels",
    "reports_total",
    "scaled_total",
    "tally_end",
]

Tally = dict[str, Any]
"""``v``, ``basis``, ``n``, ``last`` (id of message ``n - 1``), ``tokens`` (unscaled total),
``lead`` (leading system messages), ``head`` (``lead`` plus pinned messages), ``pinned``
(pinned id -> [label, "id" or "call"]), ``usage`` ([index, total_tokens, estimate] of the
last reply reporting it, or None), ``biggest`` (unscaled tokens of the longest tool result
left in place)."""

VERSION = 1
STALE_USAGE = 2.0
"""A reply whose ``input_tokens`` exceeds this many times the tally's total means the history
changed where the tally cannot see: it is counted from scratch."""

_BASES: dict[int, tuple[ContextPolicy, str]] = {}


def basis_of(
    pol: ContextPolicy, token_counter: TokenCounter | None, count: Counter, archive: bool
) -> str:
    """What a tally's counts depend on besides the messages: the policy, counter, archive."""
    known = _BASES.get(id(pol))
    if known is None or known[0] is not pol:
        if len(_BASES) > 64:
            _BASES.clear()
        known = _BASES[id(pol)] = (pol, stable_hash(pol.label, repr(pol)))
    if count is DEFAULT_COUNTER:
        kind = "estimate"
    elif isinstance(token_counter, BaseLanguageModel):
        kind = "model:" + type(token_counter).__qualname__
    else:
        kind = "fn:" + str(getattr(token_counter, "__qualname__", type(token_counter).__name__))
    return f"{known[1]}|{kind}|{int(archive)}"


def tally_end(messages: Sequence[BaseMessage], tally: Mapping[str, Any] | None, basis: str) -> int:
    """How many leading messages ``tally`` still covers (0: count from scratch)."""
    if type(tally) is not dict and not isinstance(tally, Mapping):
        return 0
    if tally.get("v") != VERSION or tally.get("basis") != basis:
        return 0
    n, last = tally.get("n"), tally.get("last")
    if not _count(n) or n < 1 or not isinstance(last, str):
        return 0
    # the cheap test first: a new step's history is shorter or ends elsewhere
    if len(messages) < n or getattr(messages[n - 1], "id", None) != last:
        return 0
    if not _well_formed(tally, n):
        return 0
    usage = tally.get("usage")
    if usage is not None and reports_total(messages[usage[0]]) is None:
        return 0  # the reply it read usage from is not where it was
    return n


def _count(value: object) -> TypeGuard[int]:
    if type(value) is int:  # what this module writes: decided without the bool check
        return value >= 0
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _well_formed(t: Mapping[str, Any], n: int) -> bool:
    """Every field of ``t`` has the shape this module writes (a tally read from state may
    have been written by hand, or damaged)."""
    lead, head = t.get("lead"), t.get("head")
    if not (_count(t.get("tokens")) and _count(t.get("biggest"))):
        return False
    if not (_count(lead) and _count(head) and lead <= head <= n):
        return False
    pinned = t.get("pinned")
    if not isinstance(pinned, Mapping) or not all(
        isinstance(k, str)
        and isinstance(v, (list, tuple))
        and len(v) == 2
        and isinstance(v[0], str)
        and v[1] in ("id", "call")
        for k, v in pinned.items()
    ):
        return False
    usage = t.get("usage")
    return usage is None or (
        isinstance(usage, (list, tuple))
        and len(usage) == 3
        and all(_count(x) for x in usage)
        and usage[0] < n
    )


def reports_total(m: BaseMessage) -> int | None:
    """``usage_metadata["total_tokens"]`` of a reply that reports a usable one."""
    if not isinstance(m, AIMessage) or not m.usage_metadata:
        return None
    total = m.usage_metadata.get("total_tokens")
    return total if isinstance(total, int) and not isinstance(total, bool) and total > 0 else None


def last_usage(messages: Sequence[BaseMessage], raw: Sequence[int]) -> list[int] | None:
    """[index, total_tokens, unscaled estimate up to and including it] of the last reply."""
    for i in range(len(messages) - 1, -1, -1):
        total = reports_total(messages[i])
        if total is not None:
            return [i, total, sum(raw[: i + 1])]
    return None


def scaled_total(raw: int, scale: float) -> int:
    """An unscaled total under the ``usage_metadata`` scale (one rounding, for any history)."""
    return math.ceil(raw * scale) if scale > 1.0 else raw


def biggest_tool_result(
    messages: Sequence[BaseMessage], raw: Sequence[int], pol: ContextPolicy
) -> int:
    """Unscaled tokens of the longest tool result a later, larger scale could still archive."""
    best = 0
    for m, t in zip(messages, raw, strict=True):
        if isinstance(m, ToolMessage) and t > best and m.name not in pol.archive_exempt_tools:
            mark = marker(m)
            if not (mark.get("archive_id") or mark.get("flags") is not None):
                best = t
    return best


class Labels(Collection[str]):
    """Labels (id or ``#index``) of the kept messages ``messages[head:]`` of one fit, joined
    only when read: the labels of the fit before it plus those of the messages appended
    since. A history that only grows is neither relabelled nor copied on each fit."""

    __slots__ = ("_before", "_joined", "_new", "_size")

    def __init__(self, new: tuple[str, ...], before: Labels | None = None) -> None:
        self._before = before
        self._new = new
        self._size = len(new) + (len(before) if before is not None else 0)
        self._joined: tuple[str, ...] | None = new if before is None else None

    def __len__(self) -> int:
        return self._size

    def __iter__(self) -> Iterator[str]:
        return iter(self.joined())

    def __contains__(self, label: object) -> bool:
        return label in self.joined()

    def joined(self) -> tuple[str, ...]:
        """All the labels, in order (joined on the first read, then kept)."""
        if self._joined is None:
            parts: list[tuple[str, ...]] = []
            link = self
            while link._joined is None:  # a loop, not recursion: a chain can be long
                parts.append(link._new)
                assert link._before is not None  # the first link of a chain is joined
                link = link._before
            self._joined = link._joined + tuple(chain.from_iterable(reversed(parts)))
            self._before = None  # the links before it are not needed any more
        return self._joined


# Labels of the tallied messages, per process: a pure cache (a miss recomputes the same).
_LABELS: dict[int, tuple[BaseMessage, int, int, Labels]] = {}
_LABELS_SIZE = 32


def prefix_labels(messages: Sequence[BaseMessage], head: int, n: int) -> Labels:
    """Labels (id or ``#index``) of ``messages[head:n]``, remembered from the last fit."""
    last = messages[n - 1]
    hit = _LABELS.get(id(last))
    if hit is not None and hit[0] is last and hit[1] == n and hit[2] == head:
        return hit[3]
    return Labels(tuple(messages[i].id or f"#{i}" for i in range(head, n)))


def remember_labels(messages: Sequence[BaseMessage], head: int, labels: Labels) -> None:
    """Keep the labels of ``messages[head:]`` for the next fit of the same history."""
    if not messages:
        return
    if len(_LABELS) >= _LABELS_SIZE:
        _LABELS.pop(next(iter(_LABELS)))
    last = messages[-1]
    _LABELS[id(last)] = (last, len(messages), head, labels)
