"""Values of the context guard: policy, verdict, archive record, budget error.

Public names are re-exported from :mod:`agent_guards.context`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import BaseMessage

from ._injection import InjectionPolicy
from .errors import InvalidInputError
from .types import GuardDecision, Verdict

__all__ = ["ArchiveRecord", "ContextBudgetError", "ContextPolicy", "ContextVerdict"]

GUARD = "context_guard"
MARKER = "agent_guards"
"""Key in ``additional_kwargs`` where the guard marks the messages it wrote or rewrote."""


def _ratio(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1:
        raise ValueError(f"ContextPolicy.{name} must be a number in (0, 1], got {value!r}")
    return float(value)


def _count(name: str, value: Any, *, minimum: int, optional: bool = False) -> None:
    if optional and value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        allowed = f"an int >= {minimum}" + (" or None" if optional else "")
        raise ValueError(f"ContextPolicy.{name} must be {allowed}, got {value!r}")


@dataclass(frozen=True, kw_only=True)
class ContextPolicy:
    """How the context guard budgets the window (seed 001 thresholds by default).

    Ratios are of the *input budget*: ``max_tokens`` minus the room reserved for the answer.
    The usage counts every message plus the tool schemas bound to the model.

    Example:
        >>> ContextPolicy().label
        'ContextPolicy@1'
        >>> ContextPolicy(warn_ratio=0.9, critical_ratio=0.8)
        Traceback (most recent call last):
        ...
        ValueError: ContextPolicy needs warn_ratio <= critical_ratio <= compress_ratio, got ...
    """

    warn_ratio: float = 0.70
    """At or above this usage the verdict is NUDGE (reason ``warning``)."""
    critical_ratio: float = 0.85
    """At or above this usage the verdict is NUDGE (reason ``critical``)."""
    compress_ratio: float = 0.90
    """At or above this usage (or over the budget) the middle of the history is summarized."""
    target_ratio: float = 0.50
    """Compression keeps recent messages until the context is back at this usage."""
    reserve_tokens: int | None = None
    """Tokens kept free for the model's answer; ``None`` reserves 10% of ``max_tokens``."""
    archive_over_tokens: int | None = 2000
    """Tool results longer than this move to the store, replaced by a reference; None: never."""
    archive_dropped: bool = True
    """Also archive the text of messages that compression removes, so it stays readable by id."""
    archive_preview_chars: int = 200
    """Characters of an archived tool result left in its reference (0: none; never if flagged)."""
    archive_exempt_tools: tuple[str, ...] = ("read_archived",)
    """Tool names whose results are never archived (the archive reader's own pages)."""
    summary_max_tokens: int = 600
    """Upper bound on the summary message that replaces the middle of the history."""
    pin_last_human: bool = True
    """Always keep the latest human message (the current question) verbatim."""
    scan_tool_output: bool = True
    """Scan tool results for injected instructions and quote the flagged ones."""
    injection: InjectionPolicy = field(default_factory=InjectionPolicy)
    """Patterns used to flag injected instructions."""
    name: str = "ContextPolicy"
    """Policy name, recorded in decisions as ``name@version``."""
    version: int = 1
    """Bump when you change the policy, so decisions say which rules made them."""

    def __post_init__(self) -> None:
        warn = _ratio("warn_ratio", self.warn_ratio)
        critical = _ratio("critical_ratio", self.critical_ratio)
        compress = _ratio("compress_ratio", self.compress_ratio)
        target = _ratio("target_ratio", self.target_ratio)
        if not warn <= critical <= compress:
            raise ValueError(
                "ContextPolicy needs warn_ratio <= critical_ratio <= compress_ratio, "
                f"got {warn}, {critical}, {compress}"
            )
        if target > compress:
            raise ValueError(
                f"ContextPolicy.target_ratio must be <= compress_ratio ({compress}), got {target}"
            )
        _count("reserve_tokens", self.reserve_tokens, minimum=0, optional=True)
        _count("archive_over_tokens", self.archive_over_tokens, minimum=1, optional=True)
        _count("archive_preview_chars", self.archive_preview_chars, minimum=0)
        _count("summary_max_tokens", self.summary_max_tokens, minimum=40)
        _count("version", self.version, minimum=1)
        for flag in ("archive_dropped", "pin_last_human", "scan_tool_output"):
            if not isinstance(getattr(self, flag), bool):
                raise TypeError(f"ContextPolicy.{flag} must be a bool, got {getattr(self, flag)!r}")
        exempt = self.archive_exempt_tools
        if isinstance(exempt, str) or not all(isinstance(t, str) for t in exempt):
            raise TypeError(
                f"ContextPolicy.archive_exempt_tools must be tool names, got {exempt!r}"
            )
        object.__setattr__(self, "archive_exempt_tools", tuple(exempt))
        if not isinstance(self.injection, InjectionPolicy):
            raise TypeError(
                f"ContextPolicy.injection must be an InjectionPolicy, got {self.injection!r}"
            )
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"ContextPolicy.name must be a non-empty string, got {self.name!r}")

    @property
    def label(self) -> str:
        """``"ContextPolicy@1"``: what decisions record."""
        return f"{self.name}@{self.version}"

    def reserve_for(self, max_tokens: int) -> int:
        """Tokens reserved for the answer out of ``max_tokens``."""
        return max_tokens // 10 if self.reserve_tokens is None else self.reserve_tokens


class ContextBudgetError(InvalidInputError):
    """What must stay in context (system prompt, pinned content, tool schemas) does not fit.

    Carries the numbers: ``needed`` tokens, the ``budget`` available, and ``over_by``.

    Example:
        >>> from langchain_core.messages import HumanMessage, SystemMessage
        >>> from agent_guards import ContextBudgetError, fit_context
        >>> try:
        ...     fit_context([SystemMessage("rule " * 500), HumanMessage("hi")], max_tokens=100)
        ... except ContextBudgetError as err:
        ...     print(err.needed, err.budget, err.over_by, err.field)
        635 90 545 max_tokens
    """

    def __init__(
        self, *, needed: int, budget: int, max_tokens: int, reserve: int, parts: str
    ) -> None:
        self.needed = needed
        self.budget = budget
        self.max_tokens = max_tokens
        self.reserve = reserve
        self.over_by = needed - budget
        super().__init__(
            f"content that must stay in context needs {needed} tokens ({parts}) but the budget "
            f"is {budget} (max_tokens {max_tokens} - answer reserve {reserve}): over by "
            f"{self.over_by} tokens; raise max_tokens, lower reserve_tokens or pin less",
            field="max_tokens",
        )


@dataclass(frozen=True)
class ArchiveRecord:
    """Content moved out of the context into a ``BaseStore``, readable back by ``archive_id``.

    Example:
        >>> from langchain_core.messages import AIMessage, ToolMessage
        >>> from agent_guards import fit_context
        >>> call = {"name": "read_doc", "args": {}, "id": "c1"}
        >>> msgs = [AIMessage("", id="a1", tool_calls=[call]),
        ...         ToolMessage("detail " * 3000, tool_call_id="c1", name="read_doc", id="t1")]
        >>> rec = fit_context(msgs, max_tokens=8000).archives[0]
        >>> rec.archive_id, rec.kind, rec.message_ids, rec.tool_name, rec.to_value()["chars"]
        ('arc-...', 'tool_result', ('t1',), 'read_doc', 21000)
    """

    archive_id: str
    """Deterministic key (a hash of the message ids and content): replays write the same key."""
    kind: str
    """``"tool_result"`` (one long tool result) or ``"history"`` (messages compression removed)."""
    message_ids: tuple[str, ...]
    """The messages whose content this record holds."""
    content: str
    """The original text."""
    tool_name: str | None = None
    """The tool that produced it (``tool_result`` only)."""
    tool_call_id: str | None = None
    """The tool call it answered (``tool_result`` only)."""
    flags: tuple[str, ...] = ()
    """Injection flags found in the content (the reader quotes flagged content)."""

    def to_value(self) -> dict[str, Any]:
        """The ``BaseStore`` value: a plain, JSON-ready dict."""
        return {
            "kind": self.kind,
            "message_ids": list(self.message_ids),
            "content": self.content,
            "chars": len(self.content),
            "tool_name": self.tool_name,
            "tool_call_id": self.tool_call_id,
            "flags": list(self.flags),
        }


@dataclass(frozen=True)
class ContextVerdict:
    """What :func:`~agent_guards.context.fit_context` decided, and the messages to send.

    ``verdict`` is CONTINUE (within budget), NUDGE (``warning`` at 70%, ``critical`` at 85%)
    or REPAIR (content was archived, quoted, summarized or truncated). Every input message id
    is in exactly one of ``kept_ids``, ``summarized_ids``, ``truncated_ids`` or ``stale_ids``.
    Messages without an id are named ``#<index>``.

    Example:
        >>> from langchain_core.messages import HumanMessage, SystemMessage
        >>> from agent_guards import fit_context
        >>> msgs = [SystemMessage("Be brief.", id="s"), HumanMessage("hi", id="h")]
        >>> v = fit_context(msgs, max_tokens=16)  # 12 of 15 input tokens used
        >>> v.verdict, v.reason, v.tokens, v.budget, v.usage, v.changed, v.dropped_ids
        (<Verdict.NUDGE: 'nudge'>, 'warning', 12, 15, 0.8, False, ())
    """

    verdict: Verdict
    reason: str
    messages: tuple[BaseMessage, ...]
    """The fitted context: leading system messages, pinned content, summary, kept messages."""
    usage: float
    """Tokens after fitting / input budget."""
    usage_before: float
    tokens: int
    tokens_before: int
    budget: int
    """Input budget: ``max_tokens`` minus the answer reserve."""
    kept_ids: tuple[str, ...] = ()
    summarized_ids: tuple[str, ...] = ()
    truncated_ids: tuple[str, ...] = ()
    stale_ids: tuple[str, ...] = ()
    """Earlier pinned messages the guard wrote that are no longer pinned."""
    replaced_ids: tuple[str, ...] = ()
    """Kept messages whose content changed (archived reference, quoted data)."""
    archived: dict[str, str] = field(default_factory=dict, hash=False)
    """Message id -> archive id, for every message whose content moved to the store."""
    flagged: dict[str, tuple[str, ...]] = field(default_factory=dict, hash=False)
    """Message id -> injection flags found in this pass."""
    archives: tuple[ArchiveRecord, ...] = field(default=(), repr=False)
    """Records the node writes to the store."""
    changed: bool = False
    """True when ``messages`` differs from the input (then a node writes it back)."""
    summary_id: str | None = None
    summary_room: int = 0
    """Tokens available to the summary message (a model summary is cut to fit)."""
    summarized_messages: tuple[BaseMessage, ...] = field(default=(), repr=False, compare=False)
    decision: GuardDecision | None = field(default=None, compare=False)

    @property
    def archived_ids(self) -> tuple[str, ...]:
        """Ids of messages whose content moved to the store."""
        return tuple(self.archived)

    @property
    def dropped_ids(self) -> tuple[str, ...]:
        """Ids no longer in the context (summarized, truncated, stale pinned)."""
        return (*self.summarized_ids, *self.truncated_ids, *self.stale_ids)

    @property
    def tokens_saved(self) -> int:
        """Tokens the fit removed from the context."""
        return max(0, self.tokens_before - self.tokens)
