"""Steps of ``fit_context``: counting, pins, assembly, tool results, atomic groups. Pure."""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from langchain_core.language_models import BaseLanguageModel
from langchain_core.messages import AIMessage, BaseMessage, SystemMessage, ToolMessage
from langchain_core.messages.utils import count_tokens_approximately
from langchain_core.tools import BaseTool

from agent_guards.context_guard.injection import InjectionPolicy, quote_untrusted, scan_injection
from agent_guards.context_guard.model import ArchiveRecord
from agent_guards.context_guard.policy import MARKER, ContextPolicy
from agent_guards.context_guard.summary import archive_reference, marker, stable_hash
from agent_guards.context_guard.tokens import cached_counter, has_own_counter
from agent_guards.core.errors import InvalidInputError
from agent_guards.core.signatures import safe_str

__all__ = [
    "Counter",
    "PinnedItem",
    "TokenCounter",
    "assemble",
    "atomic_groups",
    "call_labels",
    "make_counter",
    "pin_extras",
    "pin_items",
    "resolve_pins",
    "scanner",
    "tool_tokens",
    "treat_tool",
    "treat_tools",
]

Counter = Callable[[BaseMessage], int]
TokenCounter = Callable[[Sequence[BaseMessage]], int] | BaseLanguageModel[Any]
PinnedItem = str | BaseMessage
Labelled = list[tuple[str, BaseMessage]]


DEFAULT_COUNTER: Counter = cached_counter()
"""The default one-message counter: ``count_tokens_cjk`` (o200k-like), memoized."""


def make_counter(token_counter: TokenCounter | None) -> Counter:
    """One-message token counter: a model's own counter, a list counter, or the CJK-aware
    estimate (``count_tokens_cjk``) for None and for a model without a counter of its own."""
    if token_counter is None:
        return DEFAULT_COUNTER
    if isinstance(token_counter, BaseLanguageModel):
        if not has_own_counter(token_counter):
            return DEFAULT_COUNTER
        model = token_counter
        return lambda m: model.get_num_tokens_from_messages([m])
    if callable(token_counter):
        fn = token_counter
        return lambda m: int(fn([m]))
    raise TypeError(
        f"token_counter must be a chat model, a callable(messages) -> int, or None; "
        f"got {type(token_counter).__name__}"
    )


_TOOL_TOKENS: dict[tuple[Any, ...], tuple[tuple[Any, ...], int]] = {}


def _schema_key(tool: Any) -> tuple[Any, ...] | None:
    """What a tool's schema (and so its tokens) is made from, when that is known without
    building it: the tool's class, name, description and argument model. None otherwise."""
    if isinstance(tool, BaseTool) and isinstance(tool.args_schema, type):
        return (type(tool), tool.name, tool.description, tool.args_schema)
    return None


def tool_tokens(tools: Sequence[Any] | None) -> int:
    """Tokens of the tool schemas, remembered per set of tools (a pure cache): by what the
    schemas are made from, so the same tools wrapped anew for each graph are counted once,
    else by the tool objects themselves."""
    if not tools:
        return 0
    keys = [_schema_key(t) for t in tools]
    by_schema = all(k is not None for k in keys)
    key = tuple(keys) if by_schema else tuple(map(id, tools))
    hit = _TOOL_TOKENS.get(key)
    if hit is not None and (by_schema or all(a is b for a, b in zip(hit[0], tools, strict=True))):
        return hit[1]
    n = count_tokens_approximately([], tools=list(tools))
    if len(_TOOL_TOKENS) >= 64:
        _TOOL_TOKENS.clear()
    _TOOL_TOKENS[key] = ((), n) if by_schema else (tuple(tools), n)
    return n


def with_marker(message: BaseMessage, **extra: Any) -> dict[str, Any]:
    return {**message.additional_kwargs, MARKER: {**marker(message), **extra}}


def pin_items(pinned: Iterable[PinnedItem] | PinnedItem) -> list[Any]:
    """The pinned items as a list (one id or message counts as one item)."""
    if type(pinned) is list:
        return list(pinned)
    if isinstance(pinned, (str, BaseMessage)):
        return [pinned]
    if not isinstance(pinned, Iterable) or isinstance(pinned, (bytes, Mapping)):
        raise InvalidInputError(
            f"expected message ids or messages, got {type(pinned).__name__}", field="pinned"
        )
    return list(pinned)


def pin_extras(items: Sequence[Any]) -> list[BaseMessage]:
    """Copies of the pinned messages, marked and given a stable id (one per id); a message
    already marked and given an id (``pin_message``'s) is its own copy."""
    extras: dict[str, BaseMessage] = {}
    for item in items:
        if isinstance(item, BaseMessage):
            if item.id and marker(item).get("role") == "pinned":
                extras[item.id] = item
                continue
            mid = item.id or f"agent_guards-pinned-{stable_hash(item.type, safe_str(item.content))}"
            extras[mid] = item.model_copy(
                update={"id": mid, "additional_kwargs": with_marker(item, role="pinned")}
            )
    return list(extras.values())


def resolve_pins(
    pinned: Iterable[PinnedItem] | PinnedItem, msgs: Sequence[BaseMessage], labels: list[str]
) -> tuple[set[str], list[BaseMessage], dict[str, list[str]]]:
    """Resolve pinned ids (message ids or tool call ids) to labels; copy pinned messages.

    Also returns how each pinned id resolved: ``id -> [label, "id" or "call"]``.
    """
    items = pin_items(pinned)
    known = set(labels)
    ids: set[str] = set()
    how: dict[str, list[str]] = {}
    by_call = (
        {}  # nothing pinned by a tool call id: no need to scan the history for them
        if all(isinstance(i, BaseMessage) or (isinstance(i, str) and i in known) for i in items)
        else call_labels(msgs, labels)
    )
    for position, item in enumerate(items):
        if isinstance(item, BaseMessage):
            continue
        if isinstance(item, str) and (item in known or item in by_call):
            how[item] = [item, "id"] if item in known else [by_call[item], "call"]
            ids.add(how[item][0])
        elif isinstance(item, str):
            raise InvalidInputError(
                "not the id of a message or tool call in the history", item=item, field="pinned"
            )
        else:
            raise InvalidInputError(
                f"pinned items are message ids or messages, got {type(item).__name__}",
                item=f"pinned[{position}]",
                field="pinned",
            )
    return ids, pin_extras(items), how


def call_labels(msgs: Sequence[BaseMessage], labels: list[str]) -> dict[str, str]:
    by_call: dict[str, str] = {}
    for m, label in zip(msgs, labels, strict=True):
        if isinstance(m, ToolMessage):
            by_call[m.tool_call_id] = label
        elif isinstance(m, AIMessage):
            by_call.update({cid: label for c in m.tool_calls if (cid := c.get("id"))})
    return by_call


_SCAN_MEMO_SIZE = 32_768  # texts per policy
_SCAN_MEMO_CHARS = 16_000_000  # characters of text the memo may keep alive per policy
_SCAN_MAX_TEXT = 200_000  # longer texts are scanned each time, never kept alive


class _ScanMemo:
    """``scan_injection`` under one policy, memoized per text (a pure function cache).

    Bounded in entries and in the characters it keeps alive; a miss only costs a rescan.
    """

    __slots__ = ("chars", "policy", "texts")

    def __init__(self, policy: InjectionPolicy) -> None:
        self.policy = policy
        self.texts: dict[str, tuple[str, ...]] = {}
        self.chars = 0

    def __call__(self, text: str) -> tuple[str, ...]:
        if len(text) > _SCAN_MAX_TEXT:
            return scan_injection(text, self.policy)
        hit = self.texts.get(text)
        if hit is None:
            if len(self.texts) >= _SCAN_MEMO_SIZE or self.chars >= _SCAN_MEMO_CHARS:
                self.texts.clear()
                self.chars = 0
            hit = self.texts[text] = scan_injection(text, self.policy)
            self.chars += len(text)
        return hit


_SCANS: weakref.WeakKeyDictionary[InjectionPolicy, _ScanMemo] = weakref.WeakKeyDictionary()


# the memo found for each policy object (equal policies share one), so a fit does not
# hash the policy's patterns; the policy is held with it, so its id is not reused
_SCANS_BY_ID: dict[int, tuple[InjectionPolicy, _ScanMemo]] = {}


def scanner(policy: InjectionPolicy) -> Callable[[str], tuple[str, ...]]:
    """``scan_injection`` under ``policy``, memoized per text (bounded)."""
    known = _SCANS_BY_ID.get(id(policy))
    if known is not None and known[0] is policy:
        return known[1]
    memo = _SCANS.get(policy)
    if memo is None:
        memo = _SCANS[policy] = _ScanMemo(policy)
    if len(_SCANS_BY_ID) >= 64:
        _SCANS_BY_ID.clear()
    _SCANS_BY_ID[id(policy)] = (policy, memo)
    return memo


def treat_tool(
    m: ToolMessage,
    label: str,
    tokens: int,
    pol: ContextPolicy,
    archive_ok: bool,
    *,
    scan: Callable[[str], tuple[str, ...]],
) -> tuple[BaseMessage, ArchiveRecord | None, tuple[str, ...]]:
    """One tool result as ``treat_tools`` leaves it (``m`` itself when nothing is done),
    its archive record and its injection flags."""
    mark = marker(m)
    if mark.get("archive_id") or mark.get("flags") is not None:
        return m, None, ()  # already handled in an earlier pass
    text = m.content if isinstance(m.content, str) else str(m.text)
    flags = scan(text) if pol.scan_tool_output else ()
    limit = pol.archive_over_tokens
    if (
        archive_ok
        and limit is not None
        and tokens > limit
        and m.name not in pol.archive_exempt_tools
    ):
        # keyed by the tool call (stable across runs) and the content, not the message uuid
        arc = "arc-" + stable_hash("tool_result", m.tool_call_id or label, text)
        record = ArchiveRecord(arc, "tool_result", (label,), text, m.name, m.tool_call_id, flags)
        content = archive_reference(
            arc,
            chars=len(text),
            tokens=tokens,
            flags=flags,
            preview=text[: pol.archive_preview_chars],
        )
        kwargs = with_marker(m, archive_id=arc, flags=list(flags))
        return m.model_copy(update={"content": content, "additional_kwargs": kwargs}), record, flags
    if flags:
        kwargs = with_marker(m, flags=list(flags))
        quoted = quote_untrusted(text, flags)
        return m.model_copy(update={"content": quoted, "additional_kwargs": kwargs}), None, flags
    return m, None, ()


def atomic_groups(msgs: Sequence[BaseMessage]) -> list[list[int]]:
    """Atomic units: an AIMessage with tool calls plus the ToolMessages answering it."""
    groups: list[list[int]] = []
    owner: dict[str, int] = {}
    for i, m in enumerate(msgs):
        if isinstance(m, ToolMessage) and m.tool_call_id in owner:
            start = owner[m.tool_call_id]
            if start < len(groups) - 1:  # interleaved: merge everything since the call
                merged = [j for g in groups[start:] for j in g]
                del groups[start:]
                groups.append(merged)
                owner = {k: min(v, start) for k, v in owner.items()}
            groups[-1].append(i)
            continue
        if isinstance(m, ToolMessage) and groups and _opens_group(msgs[groups[-1][0]]):
            groups[-1].append(i)
            continue
        groups.append([i])
        if isinstance(m, AIMessage):
            owner.update({cid: len(groups) - 1 for c in m.tool_calls if (cid := c.get("id"))})
    return groups


def _opens_group(m: BaseMessage) -> bool:
    return isinstance(m, AIMessage) and bool(m.tool_calls)


def assemble(
    msgs: Sequence[BaseMessage], labels: Sequence[str], extras: Sequence[BaseMessage]
) -> tuple[list[BaseMessage], list[BaseMessage], Labelled, list[str]]:
    """Split into leading system messages, pinned messages (reused when unchanged), the rest
    of the history, and stale pins (guard-written pins no longer pinned)."""
    extra_ids = {e.id for e in extras}
    lead: list[BaseMessage] = []
    rest: Labelled = []
    stale: list[str] = []
    existing: dict[str, BaseMessage] = {}
    in_lead = True
    for m, label in zip(msgs, labels, strict=True):
        if m.id in extra_ids:
            existing[label] = m
        elif marker(m).get("role") == "pinned":
            stale.append(label)
        elif in_lead and isinstance(m, SystemMessage):
            lead.append(m)
        else:
            in_lead = False
            rest.append((label, m))
    pins: list[BaseMessage] = []
    for e in extras:
        old = existing.get(e.id or "")
        same = old is not None and type(old) is type(e) and old.content == e.content
        pins.append(old if same and old is not None else e)
    return lead, pins, rest, stale


def treat_tools(
    rest: Labelled, tok: dict[int, int], pol: ContextPolicy, *, archive: bool
) -> tuple[Labelled, list[ArchiveRecord], dict[str, tuple[str, ...]], list[str]]:
    """Archive long tool results and quote flagged ones; returns the new body and what changed."""
    records: list[ArchiveRecord] = []
    flagged: dict[str, tuple[str, ...]] = {}
    replaced: list[str] = []
    body: Labelled = []
    scan = scanner(pol.injection)
    for label, m in rest:
        new: BaseMessage = m
        if isinstance(m, ToolMessage):
            new, record, flags = treat_tool(m, label, tok[id(m)], pol, archive, scan=scan)
            if record is not None:
                records.append(record)
            if flags:
                flagged[label] = flags
            if new is not m:
                replaced.append(label)
        body.append((label, new))
    return body, records, flagged, replaced
