"""Budgets and stop conditions: the real stop conditions in front of ``recursion_limit``.

A :class:`StopCondition` reads the cumulative ``usage`` counters from graph state and
returns a :class:`StopReason` (or ``None`` to go on). Conditions are stateless values:
counters live in the checkpointed state, so a retry, a resume or another worker never
gets a fresh quota. Compose them like tenacity's stop functions: ``a | b`` stops when
either does, ``a & b`` when both do; chains flatten.

Example:
    >>> budget = Budget(max_steps=20, max_tool_calls=8)
    >>> stop = budget.stop_condition()
    >>> stop({"usage": {"steps": 3, "tool_calls": 7}}) is None
    True
    >>> print(stop({"usage": {"steps": 3, "tool_calls": 8}}))
    max_tool_calls: 8 used, limit 8
    >>> recursion_limit_for(budget, nodes_per_step=4)
    126
"""

from __future__ import annotations

import functools
import math
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, fields
from datetime import datetime, timedelta
from typing import Any

from agent_guards.core.errors import BudgetExceeded, InvalidInputError
from agent_guards.core.fields import shown, to_datetime
from agent_guards.core.policy import check_duration, check_int, is_number
from agent_guards.core.texts import TEXTS_EN, Texts

__all__ = [
    "AllOf",
    "AnyOf",
    "Budget",
    "Deadline",
    "MaxModelCalls",
    "MaxReplans",
    "MaxSteps",
    "MaxTokens",
    "MaxToolCalls",
    "StopCondition",
    "StopReason",
    "clock_start",
    "recursion_limit_for",
    "step_overdue",
]


@dataclass(frozen=True)
class StopReason:
    """Why a stop condition tripped: a reason code, the limit, and the value that passed it.

    Example:
        >>> from agent_guards.budget import StopReason
        >>> reason = StopReason("max_tokens", limit=1000, value=1200)
        >>> print(reason)
        max_tokens: 1200 used, limit 1000
        >>> print(reason.to_error())
        budget stopped the run: max_tokens (1200 used, limit 1000)
    """

    reason: str
    limit: float | None = None
    value: float | None = None

    def __str__(self) -> str:
        if self.limit is None:
            return self.reason
        return f"{self.reason}: {_num(self.value)} used, limit {_num(self.limit)}"

    def describe(self, texts: Texts | None = None) -> str:
        """What ran out, as a user reads it (no reason code): the ``budget_spent`` text.

        Example:
            >>> from agent_guards.core.texts import TEXTS_ZH
            >>> StopReason("max_tool_calls", limit=8, value=8).describe()
            'I used 8 of 8 allowed tool calls'
            >>> StopReason("max_seconds", limit=120, value=125.4).describe(TEXTS_ZH)
            '运行时间（秒）已用 125.4，上限为 120'
            >>> StopReason("no_sources").describe()
            'I reached a limit set for this run'
        """
        texts = texts or TEXTS_EN
        what = _WHAT.get(self.reason)
        if what is None or self.limit is None:
            return texts.render("budget_other")
        return texts.render(
            "budget_spent",
            what=getattr(texts, what),
            value=_num(self.value),
            limit=_num(self.limit),
        )

    def text(self, texts: Texts | None = None) -> str:
        """The sentence a user reads when this stops the run: the ``budget_stop`` text.

        Example:
            >>> from agent_guards.core.texts import TEXTS_ZH
            >>> StopReason("max_tool_calls", limit=8, value=8).text()
            'I had to stop before finishing: I used 8 of 8 allowed tool calls.'
            >>> StopReason("max_steps", limit=10, value=10).text(TEXTS_ZH)
            '任务还没完成，我不得不先停下来：步数已用 10，上限为 10。'
        """
        texts = texts or TEXTS_EN
        return texts.render("budget_stop", detail=self.describe(texts))

    def to_error(self, guard: str = "budget") -> BudgetExceeded:
        """The exception form, for callers that prefer raising to routing."""
        return BudgetExceeded(guard=guard, reason=self.reason, limit=self.limit, value=self.value)


_WHAT = {
    "max_steps": "budget_steps",
    "max_replans": "budget_replans",
    "max_tool_calls": "budget_tool_calls",
    "max_model_calls": "budget_model_calls",
    "max_tokens": "budget_tokens",
    "max_seconds": "budget_seconds",
}
"""Reason code -> the :class:`~agent_guards.core.texts.Texts` name of what ran out."""


def _num(x: float | None) -> str:
    if x is None:
        return "?"
    if isinstance(x, int):
        return shown(x)
    return str(int(x)) if x.is_integer() else f"{x:.1f}"


def _usage(state: Mapping[str, Any]) -> Mapping[str, Any]:
    usage = state.get("usage") if isinstance(state, Mapping) else getattr(state, "usage", None)
    if usage is None:
        return {}
    if not isinstance(usage, Mapping):
        raise InvalidInputError(
            f"must map counters to numbers, got {type(usage).__name__}", field="usage"
        )
    return usage


def _count(usage: Mapping[str, Any], counter: str) -> float:
    """``usage[counter]`` (0 when absent) as a finite number; anything else names the counter."""
    value = usage.get(counter, 0)
    if not is_number(value) or (isinstance(value, float) and not math.isfinite(value)):
        raise InvalidInputError(
            f"must be a finite number, got {shown(value)}", item="usage", field=counter
        )
    return value  # type: ignore[no-any-return]


class StopCondition(ABC):
    """Base class: ``condition(state, now=None) -> StopReason | None``.

    Example:
        >>> from agent_guards import MaxSteps
        >>> from agent_guards.budget import StopCondition, StopReason
        >>> class NoSources(StopCondition):
        ...     def __call__(self, state, now=None):
        ...         return None if state.get("sources") else StopReason("no_sources")
        >>> stop = NoSources() | MaxSteps(10)
        >>> print(stop({"sources": [], "usage": {"steps": 2}}))
        no_sources
    """

    @abstractmethod
    def __call__(self, state: Mapping[str, Any], now: datetime | None = None) -> StopReason | None:
        """Return why the run must stop, or None to continue."""

    def __or__(self, other: StopCondition) -> AnyOf:
        return AnyOf(self, other)

    def __and__(self, other: StopCondition) -> AllOf:
        return AllOf(self, other)


class _Composite(StopCondition):
    conditions: tuple[StopCondition, ...]

    def __init__(self, *conditions: StopCondition) -> None:
        flat: list[StopCondition] = []
        for cond in conditions:
            if not isinstance(cond, StopCondition):
                raise TypeError(f"expected a StopCondition, got {type(cond).__name__}: {cond!r}")
            flat.extend(cond.conditions if type(cond) is type(self) else (cond,))
        if not flat:
            raise ValueError(f"{type(self).__name__} needs at least one condition")
        self.conditions = tuple(flat)

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, _Composite)
            and type(other) is type(self)
            and other.conditions == self.conditions
        )

    def __hash__(self) -> int:
        return hash((type(self).__name__, self.conditions))

    def __repr__(self) -> str:
        return f"{type(self).__name__}{self.conditions!r}"


class AnyOf(_Composite):
    """Stops when any condition stops; the first tripped condition's reason is returned.

    Example:
        >>> from agent_guards.budget import AnyOf
        >>> from agent_guards import MaxSteps, MaxTokens
        >>> stop = AnyOf(MaxSteps(10), MaxTokens(1000))
        >>> print(stop({"usage": {"steps": 3, "tokens": 1200}}))
        max_tokens: 1200 used, limit 1000
        >>> stop == MaxSteps(10) | MaxTokens(1000)
        True
    """

    def __call__(self, state: Mapping[str, Any], now: datetime | None = None) -> StopReason | None:
        for cond in self.conditions:
            if (reason := cond(state, now)) is not None:
                return reason
        return None


class AllOf(_Composite):
    """Stops only when every condition stops; the reasons are joined with ``&``.

    Example:
        >>> from agent_guards.budget import AllOf
        >>> from agent_guards import MaxSteps, MaxTokens
        >>> stop = AllOf(MaxSteps(5), MaxTokens(800))
        >>> stop({"usage": {"steps": 5, "tokens": 100}}) is None
        True
        >>> print(stop({"usage": {"steps": 5, "tokens": 900}}))
        max_steps: 5 used, limit 5 & max_tokens: 900 used, limit 800
    """

    def __call__(self, state: Mapping[str, Any], now: datetime | None = None) -> StopReason | None:
        reasons = []
        for cond in self.conditions:
            reason = cond(state, now)
            if reason is None:
                return None
            reasons.append(reason)
        return StopReason(" & ".join(str(r) for r in reasons))


@dataclass(frozen=True)
class _Max(StopCondition):
    limit: int
    counter = ""

    def __post_init__(self) -> None:
        check_int(f"{type(self).__name__}.limit", self.limit, minimum=1)

    def __call__(self, state: Mapping[str, Any], now: datetime | None = None) -> StopReason | None:
        value = int(_count(_usage(state), self.counter))
        if value >= self.limit:
            return StopReason(f"max_{self.counter}", self.limit, value)
        return None


class MaxSteps(_Max):
    """Stop once ``limit`` steps ran (``usage["steps"] >= limit``).

    Example:
        >>> from agent_guards import MaxSteps
        >>> MaxSteps(5)({"usage": {"steps": 4}}) is None
        True
        >>> print(MaxSteps(5)({"usage": {"steps": 5}}))
        max_steps: 5 used, limit 5
    """

    counter = "steps"


class MaxReplans(_Max):
    """Stop once ``limit`` replans were accepted.

    Example:
        >>> from agent_guards import MaxReplans
        >>> MaxReplans(2)({"usage": {"replans": 1}}) is None
        True
        >>> MaxReplans(2)({"usage": {"replans": 2}}).reason
        'max_replans'
    """

    counter = "replans"


class MaxToolCalls(_Max):
    """Stop once ``limit`` tool calls were made.

    Example:
        >>> from agent_guards import MaxToolCalls
        >>> stop = MaxToolCalls(3)
        >>> stop({"usage": {"tool_calls": 2}}) is None
        True
        >>> print(stop({"usage": {"tool_calls": 3}}))
        max_tool_calls: 3 used, limit 3
    """

    counter = "tool_calls"


class MaxModelCalls(_Max):
    """Stop once ``limit`` model calls were made.

    Example:
        >>> from agent_guards import MaxModelCalls
        >>> print(MaxModelCalls(4)({"usage": {"model_calls": 4}}))
        max_model_calls: 4 used, limit 4
        >>> MaxModelCalls(4)({"usage": {}}) is None  # a missing counter counts as 0
        True
    """

    counter = "model_calls"


class MaxTokens(_Max):
    """Stop once ``limit`` tokens were spent.

    Example:
        >>> from agent_guards import MaxTokens
        >>> reason = MaxTokens(1000)({"usage": {"tokens": 1250}})
        >>> reason.reason, reason.limit, reason.value
        ('max_tokens', 1000, 1250)
    """

    counter = "tokens"


@dataclass(frozen=True)
class Deadline(StopCondition):
    """Stop once ``seconds`` passed since ``usage["started_at"]``.

    ``now`` must be passed in (from the run's clock) so replays decide the same way;
    without it the condition cannot trip.

    Example:
        >>> from datetime import datetime, timezone
        >>> from agent_guards import Deadline
        >>> state = {"usage": {"started_at": 0.0}}
        >>> print(Deadline(60)(state, now=datetime.fromtimestamp(90, tz=timezone.utc)))
        max_seconds: 90 used, limit 60
        >>> Deadline(60)(state) is None  # no clock passed: never trips
        True
    """

    seconds: float

    def __post_init__(self) -> None:
        seconds = check_duration("Deadline.seconds", self.seconds, positive=True)
        object.__setattr__(self, "seconds", seconds)

    def __call__(self, state: Mapping[str, Any], now: datetime | None = None) -> StopReason | None:
        started = _usage(state).get("started_at")
        if started is None or (when := to_datetime(now, item=None, field="now")) is None:
            return None
        elapsed = when.timestamp() - _count(_usage(state), "started_at")
        if elapsed >= self.seconds:
            return StopReason("max_seconds", self.seconds, round(elapsed, 3))
        return None


_CONDITIONS: dict[str, type[_Max]] = {
    "max_steps": MaxSteps,
    "max_replans": MaxReplans,
    "max_tool_calls": MaxToolCalls,
    "max_model_calls": MaxModelCalls,
    "max_tokens": MaxTokens,
}


@dataclass(frozen=True, kw_only=True)
class Budget:
    """Cumulative per-thread limits. ``None`` means no limit for that counter.

    A limit of N allows N of that thing: the condition trips once the counter reaches N,
    so check it *before* spending (before calling the model or the tool).

    A fully unbounded budget relies on ``recursion_limit`` alone, which LangGraph now sets
    to about 10,000 super-steps: thousands of model calls. Set at least ``max_steps``.

    Example:
        >>> from agent_guards import Budget
        >>> budget = Budget(max_steps=10, max_tokens=1000)
        >>> budget.remaining({"steps": 4, "tokens": 1200})
        {'steps': 6, 'tokens': 0}
        >>> print(budget.check({"usage": {"steps": 4, "tokens": 1200}}))
        max_tokens: 1200 used, limit 1000
    """

    max_steps: int | None = None
    """Graph steps (as counted by the nodes that increment ``usage["steps"]``)."""
    max_replans: int | None = None
    """Accepted plan revisions."""
    max_tool_calls: int | None = None
    """Tool executions (reused results do not count)."""
    max_model_calls: int | None = None
    """Chat model invocations."""
    max_tokens: int | None = None
    """Tokens spent (prompt + completion, as reported or approximated)."""
    max_seconds: float | timedelta | None = None
    """Wall time since ``usage["started_at"]``, from the run's clock. Seconds or a timedelta."""

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name != "max_seconds":
                check_int(f"Budget.{f.name}", value, minimum=1, optional=True)
            elif value is not None:
                seconds = check_duration("Budget.max_seconds", value, positive=True)
                object.__setattr__(self, f.name, seconds)

    def stop_condition(self) -> StopCondition | None:
        """The budget as one condition (``AnyOf`` of its limits), or None if unbounded."""
        conds: list[StopCondition] = [
            cls(getattr(self, name))
            for name, cls in _CONDITIONS.items()
            if getattr(self, name) is not None
        ]
        if self.max_seconds is not None:
            conds.append(Deadline(float(self.max_seconds)))  # type: ignore[arg-type]
        return AnyOf(*conds) if conds else None

    def check(self, state: Mapping[str, Any], now: datetime | None = None) -> StopReason | None:
        """Shorthand for ``self.stop_condition()(state, now)``; None when unbounded."""
        if _far_from_limits(self, state):
            return None
        cond = _condition_of(self)
        return cond(state, now) if cond is not None else None

    def start(self, state: Mapping[str, Any], now: datetime) -> dict[str, float]:
        """The ``usage`` update that starts this budget's clock: ``{"started_at": ...}``
        from the run's clock when ``max_seconds`` is set and the clock has not started,
        else ``{}``. Write it in the first node of a run, or ``max_seconds`` never trips.

        >>> from datetime import datetime, timezone
        >>> budget = Budget(max_seconds=60)
        >>> budget.start({}, datetime.fromtimestamp(30, tz=timezone.utc))
        {'started_at': 30.0}
        >>> budget.start({"usage": {"started_at": 5.0}}, datetime.now(timezone.utc))
        {}
        """
        if self.max_seconds is None:
            return {}
        return clock_start(state, now)

    def remaining(self, usage: Mapping[str, Any]) -> dict[str, int]:
        """How much of each bounded counter is left (never negative)."""
        usage = _usage({"usage": usage})
        return {
            name.removeprefix("max_"): max(0, limit - int(_count(usage, name.removeprefix("max_"))))
            for name in _CONDITIONS
            if (limit := getattr(self, name)) is not None
        }


def recursion_limit_for(
    budget: Budget, *, nodes_per_step: int, margin: float = 0.5, minimum: int = 25
) -> int:
    """A ``recursion_limit`` backstop that the budget always trips first.

    ``nodes_per_step`` is how many super-steps one budgeted step takes in your graph (for
    a model -> tools loop, 2; count conditional-edge-only guards as 0). The backstop is
    ``(max_steps + 1) * nodes_per_step``, plus ``margin`` of that for the nodes that
    finish the run after the stop, and never below ``minimum``.

    >>> recursion_limit_for(Budget(max_steps=10), nodes_per_step=2)
    33
    """
    if budget.max_steps is None:
        raise ValueError(
            "recursion_limit_for needs Budget.max_steps: an unbounded budget relies on "
            "recursion_limit alone"
        )
    check_int("nodes_per_step", nodes_per_step, minimum=1)
    if not 0 <= margin <= 10:
        raise ValueError(f"margin must be between 0 and 10, got {margin!r}")
    base = (budget.max_steps + 1) * nodes_per_step
    return max(minimum, base + math.ceil(base * margin))


def _condition_of(budget: Budget) -> StopCondition | None:
    """``budget.stop_condition()``, built once per distinct budget: a ``Budget`` and the
    conditions it builds are immutable, so every check of the same limits can share them.
    A subclass may build them from more than its fields: it builds them each time."""
    if type(budget) is not Budget:
        return budget.stop_condition()
    return _shared_condition(budget)


@functools.lru_cache(maxsize=64)
def _shared_condition(budget: Budget) -> StopCondition | None:
    return budget.stop_condition()


def _far_from_limits(budget: Budget, state: Any) -> bool:
    """True when ``budget.check(state)`` is surely None: every bounded counter of a plain
    ``dict`` usage is an int or a finite float below its limit, and there is no time limit.

    The general path (one condition per limit, each reading and validating ``usage``)
    answers None in exactly that case: ``_count`` accepts such a value and ``int(value)``
    of a finite number below the limit is below it too. Anything else (a missing or odd
    ``usage``, a bool, NaN, a counter at its limit, a deadline) is left to it."""
    limits = _counter_limits(budget) if type(budget) is Budget else None
    if not limits:
        return False
    usage = state.get("usage") if isinstance(state, Mapping) else getattr(state, "usage", None)
    if type(usage) is not dict:
        return False
    for counter, limit in limits:
        value = usage.get(counter, 0)
        if type(value) not in _PLAIN_NUMBERS or not -math.inf < value < limit:
            return False
    return True


_PLAIN_NUMBERS = (int, float)


@functools.lru_cache(maxsize=64)
def _counter_limits(budget: Budget) -> tuple[tuple[str, int], ...]:
    """The budget's counter limits, ``(counter, limit)``; () when it has a time limit (or
    none at all), which the fast path leaves to the conditions."""
    if budget.max_seconds is not None:
        return ()
    return tuple(
        (name.removeprefix("max_"), limit)
        for name in _CONDITIONS
        if (limit := getattr(budget, name)) is not None
    )


def clock_start(state: Mapping[str, Any], now: datetime) -> dict[str, float]:
    """``{"started_at": now}`` (POSIX seconds) when ``usage["started_at"]`` is not set yet,
    else ``{}``. ``merge_usage`` keeps the earliest start, so writing it twice is harmless.

    >>> from datetime import datetime, timezone
    >>> clock_start({"usage": {"steps": 2}}, datetime.fromtimestamp(7, tz=timezone.utc))
    {'started_at': 7.0}
    """
    if _usage(state).get("started_at") is not None:
        return {}
    when = to_datetime(now, item=None, field="now")
    return {} if when is None else {"started_at": when.timestamp()}


def step_overdue(timeout_s: float | None, started_at: float | None, now: datetime) -> float | None:
    """Seconds a step has run when it reached its ``timeout_s`` (run's clock), else None.

    >>> from datetime import datetime, timezone
    >>> step_overdue(30, 0.0, datetime.fromtimestamp(45, tz=timezone.utc))
    45.0
    >>> step_overdue(30, 0.0, datetime.fromtimestamp(10, tz=timezone.utc)) is None
    True
    >>> step_overdue(None, 0.0, datetime.fromtimestamp(99, tz=timezone.utc)) is None
    True
    """
    if timeout_s is None or started_at is None or not is_number(started_at):
        return None
    when = to_datetime(now, item=None, field="now")
    if when is None:
        return None
    elapsed = when.timestamp() - float(started_at)
    return round(elapsed, 3) if elapsed >= float(timeout_s) else None
