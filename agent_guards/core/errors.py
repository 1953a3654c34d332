"""Exceptions raised by agent-guards.

The tree::

    Exception
     +-- AgentGuardError              base of everything raised at run time
          +-- InvalidInputError       malformed runtime input; names the item and field
          +-- GuardTripped            a guard stopped the run; carries guard, reason, limit, value
          |    +-- BudgetExceeded     a Budget / StopCondition tripped
          |    +-- LoopDetected       loop_check stopped a repeating run
          |    +-- CircuitOpen        a tool's circuit breaker is open
          +-- ToolFailure             typed errors for tool authors (see agent_guards.retry_router)

    ValueError / TypeError            configuration mistakes, raised when a policy or
                                      graph is built, naming the bad value and the allowed ones

Pure cores raise :class:`InvalidInputError`; node adapters turn it into a decision with
reason ``invalid_input`` and leave graph state intact. ``GraphBubbleUp`` (interrupts) is
never caught. Nothing here subclasses ``BaseException`` directly.

Example:
    >>> err = BudgetExceeded(guard="budget", reason="max_steps", limit=10, value=10)
    >>> str(err)
    'budget stopped the run: max_steps (10 used, limit 10)'
    >>> InvalidInputError("missing", item="doc-7", field="id").field
    'id'
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

__all__ = [
    "AgentGuardError",
    "BudgetExceeded",
    "CircuitOpen",
    "GuardTripped",
    "InvalidInputError",
    "LoopDetected",
    "ToolFailure",
    "check_choice",
    "trip_message",
]


class AgentGuardError(Exception):
    """Base class of every runtime error raised by agent-guards.

    Example:
        >>> from agent_guards import AgentGuardError
        >>> from agent_guards.core import BudgetExceeded
        >>> try:
        ...     raise BudgetExceeded(guard="budget", reason="max_steps")
        ... except AgentGuardError as err:
        ...     print(type(err).__name__, "-", err)
        BudgetExceeded - budget stopped the run: max_steps
    """


class InvalidInputError(AgentGuardError, ValueError):
    """Malformed runtime input. ``item`` and ``field`` say where.

    It is also a ``ValueError`` so callers that validate with ``except ValueError`` catch it.

    Example:
        >>> from agent_guards.core import InvalidInputError
        >>> err = InvalidInputError("must be a non-empty string", item="doc-7", field="id")
        >>> print(err)
        item 'doc-7' field 'id': must be a non-empty string
        >>> isinstance(err, ValueError), err.field
        (True, 'id')
    """

    def __init__(self, problem: str, *, item: str | None = None, field: str | None = None) -> None:
        self.problem = problem
        self.item = item
        self.field = field
        where = " ".join(
            part
            for part in (
                f"item {item!r}" if item is not None else "",
                f"field {field!r}" if field is not None else "",
            )
            if part
        )
        super().__init__(f"{where}: {problem}" if where else problem)


def trip_message(guard: str, reason: str, limit: Any = None, value: Any = None) -> str:
    """The one sentence used both in the exception and in the message shown to the user."""
    if limit is not None and value is not None:
        return f"{guard} stopped the run: {reason} ({value} used, limit {limit})"
    return f"{guard} stopped the run: {reason}"


class GuardTripped(AgentGuardError):
    """A guard stopped the run. Fields let callers react without parsing text.

    Example:
        >>> from agent_guards.core import GuardTripped
        >>> err = GuardTripped(guard="planner_gate", reason="needs_approval", detail="step 3")
        >>> print(err)
        planner_gate stopped the run: needs_approval; step 3
        >>> err.guard, err.reason
        ('planner_gate', 'needs_approval')
    """

    def __init__(
        self, *, guard: str, reason: str, limit: Any = None, value: Any = None, detail: str = ""
    ) -> None:
        self.guard = guard
        self.reason = reason
        self.limit = limit
        self.value = value
        self.detail = detail
        super().__init__(
            trip_message(guard, reason, limit, value) + (f"; {detail}" if detail else "")
        )


class BudgetExceeded(GuardTripped):
    """A budget (steps, replans, tool calls, model calls, tokens, seconds) ran out.

    Example:
        >>> from agent_guards import Budget
        >>> from agent_guards.core import BudgetExceeded
        >>> reason = Budget(max_tool_calls=3).check({"usage": {"tool_calls": 3}})
        >>> err = reason.to_error()
        >>> isinstance(err, BudgetExceeded), err.limit, err.value
        (True, 3, 3)
        >>> print(err)
        budget stopped the run: max_tool_calls (3 used, limit 3)
    """


class LoopDetected(GuardTripped):
    """The same action (or cycle of actions) kept repeating without progress.

    Example:
        >>> from agent_guards.core import GuardTripped, LoopDetected
        >>> err = LoopDetected(guard="loop_check", reason="repeated_call", limit=3, value=3)
        >>> print(err)
        loop_check stopped the run: repeated_call (3 used, limit 3)
        >>> isinstance(err, GuardTripped)
        True
    """


class CircuitOpen(GuardTripped):
    """A tool's circuit breaker is open; the call was not made.

    Example:
        >>> from agent_guards.core import CircuitOpen
        >>> from agent_guards.retry_router import describe_failure
        >>> err = CircuitOpen(guard="circuit_breaker", reason="circuit_open", detail="search")
        >>> print(err)
        circuit_breaker stopped the run: circuit_open; search
        >>> failure = describe_failure(err)  # how the retry router sees it
        >>> failure.kind.value, failure.circuit_open
        ('transient', True)
    """


class ToolFailure(AgentGuardError):
    """Base for the typed errors tool authors raise (see ``agent_guards.retry_router``).

    Example:
        >>> from agent_guards.core import ToolFailure
        >>> from agent_guards.retry_router import TransientToolError
        >>> try:
        ...     raise TransientToolError("search timed out", retry_after=2, status_code=503)
        ... except ToolFailure as err:
        ...     print(type(err).__name__, err, err.retry_after)
        TransientToolError search timed out 2.0
    """


def check_choice(name: str, value: Any, allowed: Iterable[Any]) -> Any:
    """Return ``value`` if it is one of ``allowed``; else raise ValueError naming both.

    >>> check_choice("mode", "fast", ["interactive", "headless"])
    Traceback (most recent call last):
    ...
    ValueError: mode='fast' is not allowed; allowed: 'interactive', 'headless'
    """
    options = list(allowed)
    if value not in options:
        raise ValueError(
            f"{name}={value!r} is not allowed; allowed: {', '.join(repr(o) for o in options)}"
        )
    return value
