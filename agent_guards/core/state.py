"""The guard channels of graph state: a bounded decision log and cumulative usage.

Plain TypedDicts and reducers, no LangGraph import: subclass :class:`GuardState` to
give a graph the channels.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Annotated, Any

from typing_extensions import TypedDict

from agent_guards.core.decision import GuardDecision

__all__ = ["DEFAULT_LOG_SIZE", "USAGE_COUNTERS", "GuardState", "Usage", "keep_last", "merge_usage"]


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
    and resumes never lose or reset a count.

    >>> merge_usage({"tool_calls": 1, "started_at": 5.0}, {"tool_calls": 2, "started_at": 9.0})
    {'tool_calls': 3, 'started_at': 5.0}
    """
    out: dict[str, Any] = dict(current or {})
    for key, value in (update or {}).items():
        if key == "started_at":
            if value is None:
                continue
            start = float(value)
            if math.isnan(start):
                raise ValueError("usage.started_at is NaN")
            prev = out.get("started_at")
            out["started_at"] = start if prev is None else min(float(prev), start)
        elif key in USAGE_COUNTERS:
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(f"usage.{key} must be an int increment, got {value!r}")
            out[key] = int(out.get(key, 0)) + value
        else:
            allowed = ", ".join((*USAGE_COUNTERS, "started_at"))
            raise ValueError(f"unknown usage counter {key!r}; allowed: {allowed}")
    return out  # type: ignore[return-value]


class GuardState(TypedDict, total=False):
    """State mixin: subclass it (TypedDict inheritance) to give a graph the guard channels.

    >>> from langgraph.graph import MessagesState
    >>> class State(MessagesState, GuardState):
    ...     pass
    """

    guard_log: Annotated[list[GuardDecision], keep_last(DEFAULT_LOG_SIZE)]
    usage: Annotated[Usage, merge_usage]
