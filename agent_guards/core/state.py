"""The guard channels of graph state: a bounded decision log and cumulative usage.

Plain TypedDicts and reducers, no LangGraph import: subclass :class:`GuardState` to
give a graph the channels.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, cast

from typing_extensions import TypedDict

from agent_guards.core.decision import GuardDecision
from agent_guards.core.fields import shown

__all__ = [
    "DEFAULT_KEYS",
    "DEFAULT_LOG_SIZE",
    "USAGE_COUNTERS",
    "GuardState",
    "StateKeys",
    "Usage",
    "add_count",
    "keep_last",
    "merge_ledger",
    "merge_usage",
]


DEFAULT_LOG_SIZE = 200


def keep_last(n: int = DEFAULT_LOG_SIZE) -> Callable[[list[Any] | None, Any], list[Any]]:
    """Reducer factory: append updates and keep the last ``n`` items.

    Use it to size your own log channel:
    ``guard_log: Annotated[list[GuardDecision], keep_last(50)]``.

    >>> r = keep_last(2)
    >>> r(["a", "b"], ["c"])
    ['b', 'c']
    >>> r(None, "x")
    ['x']
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"keep_last(n) needs an int n >= 1, got {n!r}")

    def reduce(current: list[Any] | None, update: Any) -> list[Any]:
        items = list(current or ())
        if update is None:
            return items[-n:]
        if isinstance(update, (list, tuple)):
            items.extend(update)
        else:
            items.append(update)
        return items[-n:]

    reduce.__name__ = f"keep_last_{n}"
    return reduce


USAGE_COUNTERS: tuple[str, ...] = ("steps", "replans", "tool_calls", "model_calls", "tokens")


class Usage(TypedDict, total=False):
    """Cumulative per-thread counters. Nodes write *increments*; the reducer adds them.

    ``started_at`` is POSIX seconds from the run's clock; the earliest value wins, so a
    resume or a retry never restarts the clock.

    Example:
        >>> from agent_guards import Budget
        >>> from agent_guards.core import Usage, merge_usage
        >>> usage = merge_usage(Usage(steps=3, started_at=50.0), Usage(steps=1, started_at=80.0))
        >>> usage
        {'steps': 4, 'started_at': 50.0}
        >>> Budget(max_steps=10).remaining(usage)
        {'steps': 6}
    """

    steps: int
    replans: int
    tool_calls: int
    model_calls: int
    tokens: int
    started_at: float


def merge_usage(current: Mapping[str, Any] | None, update: Mapping[str, Any] | None) -> Usage:
    """Reducer for :class:`Usage`: counters add, ``started_at`` keeps the earliest.

    Adding is associative and commutative, so parallel branches (``Send`` fan-out)
    and resumes never lose or reset a count. A reducer that raises leaves its write pending
    on the checkpoint, so every later read of the thread fails: a malformed write (an
    unknown counter, an increment that is not an int of at most 64 bits, a ``started_at``
    that is not a finite number, a value that is not a mapping) is dropped instead, and
    logged to the ``agent_guards.state`` logger naming the field.

    >>> merge_usage({"tool_calls": 1, "started_at": 5.0}, {"tool_calls": 2, "started_at": 9.0})
    {'tool_calls': 3, 'started_at': 5.0}
    >>> merge_usage({"steps": 2}, {"steps": "3", "stepz": 1})  # both dropped, and logged
    {'steps': 2}
    """
    out: dict[str, Any] = dict(current) if isinstance(current, Mapping) else {}
    if update is None:
        return out  # type: ignore[return-value]
    if not isinstance(update, Mapping):
        _dropped("usage", f"must map counters to increments, got {type(update).__name__}")
        return cast("Usage", out)
    for key, value in update.items():
        if key == "started_at":
            if value is None:
                continue
            start = _finite(value)
            if start is None:
                _dropped("usage.started_at", f"must be a finite number, got {shown(value)}")
                continue
            prev = out.get("started_at")
            out["started_at"] = start if prev is None else min(float(prev), start)
        elif key in USAGE_COUNTERS:
            if isinstance(value, bool) or not isinstance(value, int) or abs(value) >= _MAX_COUNT:
                _dropped(f"usage.{key}", f"must be an int increment, got {shown(value)}")
                continue
            out[key] = int(out.get(key, 0)) + value
        else:
            allowed = ", ".join((*USAGE_COUNTERS, "started_at"))
            name = key if isinstance(key, str) else shown(key)
            _dropped(f"usage.{name}", f"unknown usage counter; allowed: {allowed}")
    return out  # type: ignore[return-value]


_MAX_COUNT = 2**63
"""Increments this large or larger are junk (and no checkpointer could store the sum)."""
_LOG = logging.getLogger("agent_guards.state")


def add_count(current: int | None, update: Any) -> int:
    """Reducer for an int counter channel: increments add (negative ones reset).

    Like :func:`merge_usage`, a malformed write (not an int of at most 64 bits) is dropped
    and logged instead of raising, so a junk value from ``update_state`` cannot leave the
    thread unreadable.

    >>> add_count(2, 3), add_count(None, -1), add_count(2, "3")
    (5, -1, 2)
    """
    base = current if isinstance(current, int) and not isinstance(current, bool) else 0
    if isinstance(update, bool) or not isinstance(update, int) or abs(update) >= _MAX_COUNT:
        _LOG.warning("counter write dropped: must be an int increment, got %s", shown(update))
        return base
    return base + update


def merge_ledger(
    current: Mapping[str, Any] | None, update: Mapping[str, Any] | None
) -> dict[str, dict[str, Any]]:
    """Reducer for the run ledger kept in state: entries by key, the later write wins.

    A tool call's execution is one entry (``<call id>#<n>``); its intent and its outcome
    are two writes of that entry, and parallel calls write different keys, so merging
    never loses an execution. As with :func:`merge_usage`, a malformed write (not a
    mapping of names to mappings) is dropped and logged instead of raising.

    >>> merge_ledger({"c1#1": {"status": "started"}}, {"c1#1": {"status": "done"}})
    {'c1#1': {'status': 'done'}}
    >>> merge_ledger({"c1#1": {"status": "done"}}, {"c2#1": "junk"})  # dropped, and logged
    {'c1#1': {'status': 'done'}}
    """
    out: dict[str, dict[str, Any]] = dict(current) if isinstance(current, Mapping) else {}
    if update is None:
        return out
    if not isinstance(update, Mapping):
        _LOG.warning("ledger write dropped: must map keys to entries, got %s", shown(update))
        return out
    for key, entry in update.items():
        if isinstance(key, str) and isinstance(entry, Mapping):
            out[key] = dict(entry)
        else:
            _LOG.warning("ledger write dropped: entry %s must be a mapping", shown(key))
    return out


def _finite(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        start = float(value)
    except OverflowError:
        return None
    return start if math.isfinite(start) else None


def _dropped(field: str, problem: str) -> None:
    _LOG.warning("usage write dropped: field %r: %s", field, problem)


class GuardState(TypedDict, total=False):
    """State mixin: subclass it (TypedDict inheritance) to give a graph the guard channels.

    >>> from langgraph.graph import MessagesState
    >>> class State(MessagesState, GuardState):
    ...     pass
    """

    guard_log: Annotated[list[GuardDecision], keep_last(DEFAULT_LOG_SIZE)]
    usage: Annotated[Usage, merge_usage]
    run_ledger: Annotated[dict[str, dict[str, Any]], merge_ledger]
    """The run ledger, when a ``ToolCallGuard(ledger=...)`` runs without a store."""


_IDENTIFIER = "a Python identifier"
_NAMES = ("log", "usage", "ledger")


@dataclass(frozen=True)
class StateKeys:
    """Where the guards keep their channels in your state: ``log``, ``usage``, ``ledger``.

    The guards write their decisions to ``guard_log`` and their counters to ``usage``. When
    your state already has a field of that name for something else (a ``usage`` of your
    own token accounting, say), give the guards other names, and pass the same
    ``keys=`` to every guard of the graph: each factory reads and writes the renamed
    channels, and the build-time checks look for them. :meth:`schema` is the state mixin
    with the renamed channels (``GuardState`` under other names).

    Example:
        >>> from typing import Annotated
        >>> from langgraph.graph import MessagesState
        >>> keys = StateKeys(log="guard_decisions", usage="guard_usage")
        >>> class State(MessagesState, keys.schema()):
        ...     usage: Annotated[dict, lambda a, b: b]  # yours, untouched by the guards
        >>> sorted(k for k in State.__annotations__ if k.startswith("guard"))
        ['guard_decisions', 'guard_usage']
        >>> keys.inbound({"guard_usage": {"steps": 2}, "usage": {"tokens": 9}})["usage"]
        {'steps': 2}
        >>> keys.outbound({"usage": {"steps": 1}, "messages": []})
        {'guard_usage': {'steps': 1}, 'messages': []}
    """

    log: str = "guard_log"
    usage: str = "usage"
    ledger: str = "run_ledger"
    """The run ledger of a ``ToolCallGuard`` used without a store (else unused)."""

    def __post_init__(self) -> None:
        for name in _NAMES:
            value = getattr(self, name)
            if not isinstance(value, str) or not value.isidentifier():
                raise ValueError(f"StateKeys.{name} must be {_IDENTIFIER}, got {value!r}")
        if len({yours for _, yours in self.pairs}) < len(_NAMES):
            given = ", ".join(f"{name}={getattr(self, name)!r}" for name in _NAMES)
            raise ValueError(f"StateKeys names must differ, got {given}")

    @property
    def pairs(self) -> tuple[tuple[str, str], ...]:
        """``(the guards' name, yours)`` for each channel."""
        return (("guard_log", self.log), ("usage", self.usage), ("run_ledger", self.ledger))

    @property
    def renamed(self) -> tuple[tuple[str, str], ...]:
        """``(the guards' name, yours)`` for each channel with a name of its own."""
        return tuple((ours, yours) for ours, yours in self.pairs if ours != yours)

    def inbound(self, state: Any) -> Any:
        """``state`` as the guards read it: your channels under the guards' names."""
        pairs = self.renamed
        if not pairs:
            return state
        if isinstance(state, Mapping):
            view = dict(state)
            for ours, yours in pairs:
                if yours in state:
                    view[ours] = state[yours]
                else:
                    view.pop(ours, None)  # your own field of that name is not the guards'
            return view
        return _Renamed(state, dict(pairs))

    def outbound(self, update: Any) -> Any:
        """A guard's write (a dict) with the channels under your names."""
        pairs = self.renamed
        if not pairs or not isinstance(update, Mapping):
            return update
        names = dict(pairs)
        return {names.get(k, k): v for k, v in update.items()}

    def clash(self, state: Any) -> str | None:
        """Why the state's guard channels look like fields of someone else's, or None.

        The guards' reducers only ever hold a mapping in ``usage`` (``merge_usage`` drops
        a junk write) and a list in the log (``keep_last``): anything else there is a
        field of the user's own under that name, and the guards' writes would replace it.
        What is inside the log is not judged: a client may write junk into it, and that
        must not stop the thread.
        """
        usage, log = _field(state, self.usage), _field(state, self.log)
        ledger = _field(state, self.ledger)
        if usage is not None and not isinstance(usage, Mapping):
            return f"{self.usage!r} holds a {type(usage).__name__} value, not the guards' counters"
        if log is not None and not isinstance(log, (list, tuple)):
            return f"{self.log!r} holds a {type(log).__name__} value, not the guards' decisions"
        if ledger is not None and not isinstance(ledger, Mapping):
            return f"{self.ledger!r} holds a {type(ledger).__name__} value, not the run ledger"
        return None

    def schema(self) -> type:
        """The state mixin with the guard channels under these names (``GuardState``)."""
        if not self.renamed:
            return GuardState
        fields = {yours: GuardState.__annotations__[ours] for ours, yours in self.pairs}
        return TypedDict("GuardStateKeys", fields, total=False)  # type: ignore[operator, no-any-return]


def _field(state: Any, key: str) -> Any:
    if isinstance(state, Mapping):
        return state.get(key)
    return getattr(state, key, None)


class _Renamed:
    """An object state (a dataclass or pydantic model) read with the guards' names."""

    __slots__ = ("_names", "_state")

    def __init__(self, state: Any, names: dict[str, str]) -> None:
        self._state, self._names = state, names

    def __getattr__(self, name: str) -> Any:
        return getattr(self._state, self._names.get(name, name))


DEFAULT_KEYS = StateKeys()
