"""Reading a message history as a list of actions (pure). Private: not part of the API.

loop_check and retry_router both look at the recent *actions* of a run: each tool call an
AIMessage asked for (with the ToolMessage that answered it, if any) and each assistant
reply without tool calls. This module turns LangChain messages into those actions in a
bounded backward scan, so the cost does not grow with the length of the history.

Example:
    >>> from agent_guards.testing import tool_call_message
    >>> from langchain_core.messages import ToolMessage
    >>> acts = scan_actions([tool_call_message("a", {"x": 1}, id="c1"),
    ...                      ToolMessage("done", tool_call_id="c1")], ScanOptions())
    >>> [(a.tool, a.status, a.signature) for a in acts]
    [('a', 'ok', 'a:{"x":1}')]
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal, TypeGuard

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    ToolMessage,
    convert_to_messages,
)

from agent_guards.core.effects import EFFECT_KEY, Effect, ToolEffects
from agent_guards.core.errors import InvalidInputError
from agent_guards.core.signatures import (
    DEFAULT_GUARD_NAMES,
    DEFAULT_IGNORED_ARG_KEYS,
    DEFAULT_SCOPE_KEYS,
    Normalizer,
    _clean,
    _json_default,
    _key,
    call_signature,
    content_text,
    is_guard_message,
    normalize_result,
    safe_str,
    signature_keys,
)

__all__ = [
    "Action",
    "ScanOptions",
    "answer_failure",
    "failure_shape",
    "latest_batch",
    "lone_call",
    "recorded_effect",
    "scan_actions",
    "with_declared",
]


def _evidence_ids(artifact: Any) -> frozenset[str] | None:
    if isinstance(artifact, Mapping):
        for key in ("evidence_ids", "ids"):
            ids = artifact.get(key)
            if isinstance(ids, (list, tuple, set, frozenset)):
                return frozenset(safe_str(i) for i in ids)  # an id may be an int too long for str()
        return None
    if isinstance(artifact, (list, tuple)) and artifact:
        out = set()
        for item in artifact:
            ident = getattr(item, "id", None)
            if ident is None and isinstance(getattr(item, "metadata", None), Mapping):
                ident = item.metadata.get("id")
            if ident is None and isinstance(item, Mapping):
                ident = item.get("id")
            if ident is None:
                return None
            out.add(safe_str(ident))
        return frozenset(out)
    return None


def _digest(text: str) -> str:
    return hashlib.blake2b(text.encode("utf-8", "replace"), digest_size=10).hexdigest()


@functools.lru_cache(maxsize=4096)
def _result_digest(text: str, normalizers: tuple[Normalizer, ...]) -> tuple[str, int]:
    """Digest and length of a normalized result.

    A memo of a pure function (same text in, same digest out), not guard state: it only
    saves re-normalizing the results every later step reads again.
    """
    normalized = normalize_result(text, extra=normalizers)
    return _digest(normalized), len(normalized)


@dataclass(frozen=True)
class Action:
    """One thing the assistant did: a tool call (with its answer, if any) or a text reply."""

    kind: Literal["tool", "text", "condense", "worker_stop"]
    """``condense`` (a context summary) and ``worker_stop`` (a sub-agent's loop stop) are
    markers, read only with ``ScanOptions(markers=True)``."""
    tool: str
    call_id: str
    signature: str
    scope: tuple[tuple[str, str], ...]
    status: Literal["pending", "ok", "error"]
    result_key: str | None
    """Digest of the normalized result (``"error"`` for any failure); None = unknown."""
    evidence: frozenset[str] | None
    result_len: int
    reused: bool
    message: ToolMessage | None
    ai_position: int
    text: str = ""
    attempts: int = 1
    effect: Effect = Effect.READ
    """What the call may do to the world (a text reply changes nothing)."""
    turns_ago: int = 0
    """User messages between this action and the end of the history (0: the current turn)."""
    failure: str | None = None
    """The failure's shape (kind and message, values masked) when the call failed."""
    entities: tuple[tuple[str, str], ...] = ()
    """The entities the call names (its ``id``, ``*_id``, ``*_ids`` arguments): a call
    about another order brings back news even when its text is the same."""


_NO_EFFECTS = ToolEffects()  # immutable: every ScanOptions without effects can share it


@dataclass(frozen=True)
class ScanOptions:
    """How to read a history (taken from a LoopPolicy or a RetryRouterPolicy)."""

    window: int = 50
    interactive: bool = True
    guard_names: frozenset[str] = DEFAULT_GUARD_NAMES
    ignore_keys: frozenset[str] = DEFAULT_IGNORED_ARG_KEYS
    scope_keys: frozenset[str] = DEFAULT_SCOPE_KEYS
    normalizers: tuple[Normalizer, ...] = ()
    effects: ToolEffects = field(default_factory=lambda: _NO_EFFECTS)
    """Effect classes the policy declares (they win over what the history records)."""
    declared: Mapping[str, Effect] = field(default_factory=dict)
    """Effects declared by the tools themselves, by name (e.g. from their annotations)."""
    across_turns: bool = False
    """Read past user messages (numbering the turns) instead of stopping at the latest."""
    markers: bool = False
    """Also return context summaries and sub-agent stops as marker actions."""
    failure_prefixes: tuple[str, ...] = ()
    """Text results starting with one of these (case-insensitive) are failures too."""

    @functools.cached_property
    def _folded_prefixes(self) -> tuple[str, ...]:
        """``failure_prefixes`` casefolded, made once (every answered call is checked)."""
        return tuple(prefix.casefold() for prefix in self.failure_prefixes)


def with_declared(opts: ScanOptions, effects: Mapping[str, Effect | str] | None) -> ScanOptions:
    """``opts`` with the effects the tools declare, by name (``effects_of_tools(tools)``)."""
    if not effects:
        return opts
    if not isinstance(effects, Mapping):
        raise TypeError(f"effects must map tool names to effects, got {type(effects).__name__}")
    return replace(opts, declared={name: Effect(e) for name, e in effects.items()})


def _as_message(item: Any, index: int) -> BaseMessage:
    if isinstance(item, BaseMessage):
        return item
    if isinstance(item, Mapping):
        try:
            return convert_to_messages([dict(item)])[0]
        except Exception as err:
            raise InvalidInputError(
                f"not a message: {err}", item=f"messages[{index}]", field="type"
            ) from err
    raise InvalidInputError(
        f"expected a LangChain message or a dict, got {type(item).__name__}",
        item=f"messages[{index}]",
        field="type",
    )


def _scope(args: Any, scope_keys: frozenset[str]) -> tuple[tuple[str, str], ...]:
    """The call's ``scope_keys`` arguments (region, period, version)."""
    return _arguments(args, lambda key: key in scope_keys)


def _entities(args: Any, ignored: frozenset[str]) -> tuple[tuple[str, str], ...]:
    """The call's arguments naming an entity (``id``, ``*_id``, ``*_ids``: another order,
    another user), unless ``ignored`` (request ids)."""
    return _arguments(
        args, lambda key: key not in ignored and (key == "id" or key.endswith(("_id", "_ids")))
    )


def _arguments(args: Any, wanted: Callable[[str], bool]) -> tuple[tuple[str, str], ...]:
    """The ``wanted`` arguments as sorted (key, canonical JSON value) pairs."""
    if type(args) is not dict and not isinstance(args, Mapping):
        return ()
    pairs = [
        (key, json.dumps(_clean(v, frozenset()), sort_keys=True, default=_json_default))
        for k, v in args.items()
        if wanted(key := _key(k))
    ]
    return tuple(sorted(pairs))


def _attempts(message: ToolMessage) -> int:
    meta = message.response_metadata.get("agent_guards") if message.response_metadata else None
    value = meta.get("attempt") if isinstance(meta, Mapping) else None
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 1


def _tool_action(
    call: Mapping[str, Any],
    answer: ToolMessage | None,
    position: int,
    j: int,
    opts: ScanOptions,
    *,
    turns_ago: int = 0,
) -> Action:
    name = call.get("name")
    call_id = call.get("id") or f"messages[{position}].tool_calls[{j}]"
    if not isinstance(name, str) or not name:
        raise InvalidInputError("tool call has no name", item=str(call_id), field="name")
    args = call.get("args")
    status, key, evidence, length, reused = (
        ("pending", None, None, 0, False) if answer is None else _outcome(answer, opts)
    )
    effect = opts.effects.of(name, recorded_effect(answer) or opts.declared.get(name))
    keys = signature_keys(opts.ignore_keys, effect.declared_write)
    return Action(
        "tool",
        name,
        str(call_id),
        call_signature(name, args, ignore_keys=keys),
        _scope(args, opts.scope_keys),
        status,
        key,
        evidence,
        length,
        reused,
        answer,
        position,
        attempts=_attempts(answer) if answer is not None else 1,
        effect=effect,
        turns_ago=turns_ago,
        failure=None if answer is None else answer_failure(answer, opts),
        entities=_entities(args, opts.ignore_keys),
    )


_MASK = re.compile(r"\b\w*\d\w*\b")
_FAILURE_KEY = "agent_guards_failure"  # retry_router's failure artifact


def failure_shape(text: str) -> str:
    """A failure message's shape: normalized, lowercased, every value with a digit masked.

    Two failures with the same shape are the same failure, whatever ids they name.

    Example:
        >>> failure_shape("Error: flight HAT030 not available on date 2024-05-13")
        'error: flight <v> not available on date <v>-<v>-<v>'
    """
    return _MASK.sub("<v>", normalize_result(text).casefold())[:240]


def answer_failure(answer: ToolMessage, opts: ScanOptions) -> str | None:
    """``kind|shape`` of a failed call: a failure artifact, ``status="error"``, or a text
    result starting with one of ``opts.failure_prefixes``; None when the call succeeded."""
    artifact = answer.artifact
    body = artifact.get(_FAILURE_KEY) if isinstance(artifact, Mapping) else None
    if isinstance(body, Mapping):
        kind, message = safe_str(body.get("kind", "unknown")), body.get("message", "")
        return f"{kind}|{failure_shape(safe_str(message))}"
    text = content_text(answer.content)
    if answer.status == "error":
        return "error|" + failure_shape(text)
    if text.lstrip()[:64].casefold().startswith(opts._folded_prefixes):
        return "text|" + failure_shape(text)
    return None


def recorded_effect(answer: ToolMessage | None) -> str | None:
    """The effect the tool wrapper recorded on the result of the call it executed."""
    meta = answer.response_metadata.get("agent_guards") if answer is not None else None
    value = meta.get(EFFECT_KEY) if isinstance(meta, Mapping) else None
    return value if isinstance(value, str) else None


_Outcome = tuple[Literal["pending", "ok", "error"], str | None, frozenset[str] | None, int, bool]


def _outcome(answer: ToolMessage, opts: ScanOptions) -> _Outcome:
    """Status, result key, evidence ids, result length and reuse flag of an answered call."""
    meta = answer.response_metadata.get("agent_guards") if answer.response_metadata else None
    # answered from another call's result; an answer from the call's own recorded run (the
    # run ledger, after a crash or on a fork) is this history's execution of it. Not told
    # apart by ids: some models repeat a call id from turn to turn
    reused = isinstance(meta, Mapping) and bool(meta.get("reused_from")) and not meta.get("ledger")
    if answer.status == "error":
        return "error", "error", None, 0, reused
    evidence = _evidence_ids(answer.artifact)
    digest, length = _result_digest(content_text(answer.content), opts.normalizers)
    key: str | None = (
        "ids:" + _digest("\x1f".join(sorted(evidence))) if evidence is not None else digest
    )
    if reused and isinstance(meta, Mapping) and meta.get("duplicate"):
        key = None
    return "ok", key, evidence, length, reused


def _pair(
    calls: Sequence[Mapping[str, Any]], answers: list[ToolMessage]
) -> list[ToolMessage | None]:
    by_id = {m.tool_call_id: m for m in answers if m.tool_call_id}
    out: list[ToolMessage | None] = []
    used: set[int] = set()
    for call in calls:
        match = by_id.get(call.get("id") or "")
        if match is not None:
            used.add(id(match))
        out.append(match)
    spare = iter(m for m in answers if id(m) not in used)
    return [m if m is not None else next(spare, None) for m in out]


def _calls(message: AIMessage) -> list[Mapping[str, Any]]:
    calls: list[Mapping[str, Any]] = list(message.tool_calls or ())
    calls.extend(message.invalid_tool_calls or ())
    return calls


def _plain(
    kind: Any, label: str, signature: str, position: int, *, turns: int, text: str
) -> Action:
    """A text reply or a marker: no tool, nothing written."""
    return Action(
        kind,
        "",
        label,
        signature,
        (),
        "ok",
        None,
        None,
        len(text),
        False,
        None,
        position,
        text=text,
        turns_ago=turns,
    )


def _is_summary(message: BaseMessage) -> bool:
    """A context summary (written by context_guard): background, never a user's turn."""
    mark = message.additional_kwargs.get("agent_guards") if message.additional_kwargs else None
    return isinstance(mark, Mapping) and mark.get("role") == "summary"


def _marker(message: BaseMessage, position: int, turns: int) -> Action | None:
    label = message.id or f"messages[{position}]"
    if _is_summary(message):
        return _plain("condense", label, "condense", position, turns=turns, text="")
    meta = message.response_metadata.get("agent_guards") if message.response_metadata else None
    if (
        isinstance(message, AIMessage)
        and isinstance(meta, Mapping)
        and meta.get("guard") == "loop_check"
        and meta.get("verdict") in ("stop", "escalate")
    ):
        text = content_text(message.content)
        sig = f"worker_stop:{meta.get('reason')}"
        return _plain("worker_stop", label, sig, position, turns=turns, text=text)
    return None


def _ai_actions(
    message: AIMessage, answers: list[ToolMessage], position: int, opts: ScanOptions, turns: int
) -> list[Action]:
    """The actions of one assistant message, last first (the scan runs backwards)."""
    calls = _calls(message)
    if calls:
        paired = _pair(calls, answers[::-1])
        return [
            _tool_action(calls[j], paired[j], position, j, opts, turns_ago=turns)
            for j in range(len(calls) - 1, -1, -1)
        ]
    text = " ".join(content_text(message.content).split())
    if not text:
        return []
    label = message.id or f"messages[{position}]"
    sig = "say:" + _digest(text.casefold())
    return [_plain("text", label, sig, position, turns=turns, text=text)]


def scan_actions(messages: Sequence[Any], opts: ScanOptions) -> list[Action]:
    """The most recent actions, oldest first, at most about ``opts.window`` of them.

    Scans backwards and stops at the window, at a user's message in interactive mode
    (unless ``opts.across_turns``, which numbers the turns instead), or after
    ``4 * window + 20`` messages, so the cost is bounded whatever the history length.
    A context summary is never a user's turn.
    """
    if not isinstance(messages, Sequence) or isinstance(messages, (str, bytes)):
        raise InvalidInputError(
            f"expected a list of messages, got {type(messages).__name__}", field="messages"
        )
    actions: list[Action] = []
    answers: list[ToolMessage] = []
    turns, budget = 0, _reach(opts)
    read: list[tuple[int, AIMessage, list[ToolMessage], int, int]] = []
    recorded: dict[str, str] = {}  # tool name -> the effect recorded on its latest result
    for position in range(len(messages) - 1, max(-1, len(messages) - 1 - budget), -1):
        message = _as_message(messages[position], position)
        if isinstance(message, ToolMessage):
            answers.append(message)
            effect = recorded_effect(message)
            if effect is not None and message.name:
                recorded.setdefault(message.name, effect)
            continue
        marker = _marker(message, position, turns) if opts.markers else None
        if marker is not None:
            actions.append(marker)
        elif is_guard_message(message, opts.guard_names) or _is_summary(message):
            continue
        elif isinstance(message, AIMessage):
            read.append((len(actions), message, answers, position, turns))
            actions.extend(_ai_actions(message, answers, position, opts, turns))
            answers = []
            if len(actions) >= opts.window:
                break
        elif isinstance(message, HumanMessage):
            if opts.interactive and not opts.across_turns:
                break
            turns += 1
    _learn_effects(actions, read, recorded, opts)
    actions.reverse()
    return actions


def _reach(opts: ScanOptions) -> int:
    """How many messages a scan reads at most, from the end."""
    return 4 * opts.window + 20


def _named(message: AIMessage) -> bool:
    """Every tool call ``message`` asks for has a name (the scan rejects one without)."""
    return all(
        isinstance(c, Mapping) and isinstance(c.get("name"), str) and c["name"]
        for c in _calls(message)
    )


def lone_call(messages: Sequence[Any], opts: ScanOptions) -> tuple[AIMessage, ToolMessage] | None:
    """The last assistant message and its result, when :func:`scan_actions` would read that
    one answered tool call as the only action of the current turn (of the whole window when
    ``opts.interactive`` is off) and would accept every message it reads before it.

    Read from the end, building no action: the history ends with an assistant message
    asking for one named tool call, then one ToolMessage; before them, as far as the scan
    reads, every item is a message (a dict is left to the scan, which converts it), no
    assistant message of the same turn counts (guard notes and summaries are skipped, as
    the scan skips them) and every earlier one names its tool calls. None otherwise: the
    scan then says what the history holds, or what is wrong with it.

    Example:
        >>> from agent_guards.testing import tool_call_message
        >>> call = tool_call_message("a", {"x": 1}, id="c1")
        >>> [m.type for m in lone_call([call, ToolMessage("done", tool_call_id="c1")],
        ...                            ScanOptions())]
        ['ai', 'tool']
        >>> lone_call([call, ToolMessage("done", tool_call_id="c1")] * 2, ScanOptions()) is None
        True
    """
    if not isinstance(messages, Sequence) or isinstance(messages, (str, bytes)):
        return None
    if len(messages) < 2 or not isinstance(answer := messages[-1], ToolMessage):
        return None
    message = messages[-2]
    if not _acts(message, opts) or len(_calls(message)) != 1 or not _named(message):
        return None
    in_turn = True
    for position in range(len(messages) - 3, max(-1, len(messages) - 1 - _reach(opts)), -1):
        item = messages[position]
        if not isinstance(item, BaseMessage):
            return None
        if _acts(item, opts) and (in_turn or not _named(item)):
            return None  # another action of the turn, or one the scan rejects
        if isinstance(item, HumanMessage) and opts.interactive and not _skipped(item, opts):
            if not opts.across_turns:
                break  # the scan stops here
            in_turn = False
    return message, answer


def _skipped(message: BaseMessage, opts: ScanOptions) -> bool:
    """A message the scan never reads as a turn or an action: a guard's note, a summary
    (markers, when it reads them, are both)."""
    return is_guard_message(message, opts.guard_names) or _is_summary(message)


def _acts(message: Any, opts: ScanOptions) -> TypeGuard[AIMessage]:
    """An assistant message the scan reads actions from (perhaps none: no call, no text)."""
    return isinstance(message, AIMessage) and not _skipped(message, opts)


def _learn_effects(
    actions: list[Action],
    read: Sequence[tuple[int, AIMessage, list[ToolMessage], int, int]],
    recorded: Mapping[str, str],
    opts: ScanOptions,
) -> None:
    """Give a call with no effect of its own (not answered yet, or answered without one)
    the effect recorded on its tool's other results, as the wrapper will record it: a
    call is then counted the same before it runs and after. Rebuilds those turns in place
    (``actions`` is still newest first)."""
    learned = {
        name: Effect(e)
        for name, e in recorded.items()
        if name not in opts.declared and e in _EFFECT_VALUES
    }
    if not learned:
        return
    known: ScanOptions | None = None
    for start, message, answers, position, turns in read:
        end = start + len(_calls(message))
        if any(
            a.kind == "tool" and a.tool in learned and recorded_effect(a.message) is None
            for a in actions[start:end]
        ):
            known = known or replace(opts, declared={**learned, **opts.declared})
            actions[start:end] = _ai_actions(message, answers, position, known, turns)


_EFFECT_VALUES = frozenset(e.value for e in Effect)  # any other value reads as none recorded


def latest_batch(actions: Sequence[Action]) -> list[Action]:
    """The tool calls of the most recent assistant turn (empty if it was a text reply)."""
    if not actions or actions[-1].kind != "tool":
        return []
    position = actions[-1].ai_position
    return [a for a in actions if a.ai_position == position]
