"""Values context_guard returns: the verdict, the archive record, the budget error."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar, cast

from langchain_core.messages import BaseMessage

from agent_guards.core.decision import GuardDecision, Verdict
from agent_guards.core.errors import InvalidInputError

__all__ = ["ArchiveRecord", "ContextBudgetError", "ContextVerdict"]

T = TypeVar("T")


class ContextBudgetError(InvalidInputError):
    """What must stay in context (system prompt, pinned content, tool schemas) does not fit.

    Carries the numbers: ``needed`` tokens, the ``budget`` available, and ``over_by``.

    Example:
        >>> from langchain_core.messages import HumanMessage, SystemMessage
        >>> from agent_guards.context_guard import ContextBudgetError
        >>> from agent_guards import fit_context
        >>> try:
        ...     fit_context([SystemMessage("rule " * 500), HumanMessage("hi")], max_tokens=100)
        ... except ContextBudgetError as err:
        ...     print(err.needed, err.budget, err.over_by, err.field)
        511 90 421 max_tokens
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
        >>> v = fit_context(msgs, max_tokens=22)  # 14 of 20 input tokens used
        >>> v.verdict, v.reason, v.tokens, v.budget, v.usage, v.changed, v.dropped_ids
        (<Verdict.NUDGE: 'nudge'>, 'warning', 14, 20, 0.7, False, ())
    """

    verdict: Verdict
    reason: str
    messages: tuple[BaseMessage, ...]
    """The fitted context: leading system messages, pinned content, summary, kept messages.
    When a fit from a tally changed nothing, a list history is copied into it when it is
    first read (messages appended to that list meanwhile are not part of it)."""
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
    tally: dict[str, Any] | None = field(default=None, repr=False, compare=False)
    """What the next call on this history starts from (``fit_context(..., tally=...)``):
    a small dict, None when the fitted history's last message has no id."""

    def __getstate__(self) -> dict[str, Any]:
        # a copy or a pickle holds the fields built on read as plain values
        return {**self.__dict__, **{name: getattr(self, name) for name in _BUILT_ON_READ}}

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


class _Later(Generic[T]):
    __slots__ = ("build",)

    def __init__(self, build: Callable[[], T]) -> None:
        self.build = build


def later(build: Callable[[], T]) -> T:
    """A :class:`ContextVerdict` field value that ``build()`` makes when it is first read.

    For the fields as long as the history (``messages``, ``kept_ids``): a fit that changes
    nothing does not copy them on every call. Read, the field is the built value (the same
    type, equality, repr, pickling), built once and then kept.
    """
    return cast(T, _Later(build))


class _BuiltOnRead:
    """A ContextVerdict field that may be given as ``later(build)``: built on first read."""

    def __init__(self, name: str) -> None:
        self.name = name
        # the dataclass default, if the field has one (the class reads it)
        self.default = ContextVerdict.__dict__.get(name, _NO_DEFAULT)

    def __get__(self, obj: object, owner: type | None = None) -> Any:
        if obj is None:
            if self.default is _NO_DEFAULT:
                raise AttributeError(self.name)
            return self.default
        try:
            value = obj.__dict__[self.name]
        except KeyError:
            raise AttributeError(self.name) from None
        if isinstance(value, _Later):
            value = obj.__dict__[self.name] = value.build()
        return value

    def __set__(self, obj: object, value: Any) -> None:
        obj.__dict__[self.name] = value  # only __init__ gets here: the dataclass is frozen


_NO_DEFAULT = object()
_BUILT_ON_READ = ("messages", "kept_ids")
# set on the class once the dataclass is made: its fields, __init__, eq, repr and defaults
# stay as declared, and each reads the field through the descriptor
for _name in _BUILT_ON_READ:
    setattr(ContextVerdict, _name, _BuiltOnRead(_name))
