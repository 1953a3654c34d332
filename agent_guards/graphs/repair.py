"""Malformed structured output from the model: one repair attempt, then a clear ending.

A plan whose steps depend on a step that does not exist, form a cycle, repeat or lack an
id, name an unknown risk, are not a list, or are not JSON at all (and a goal or a review that is
malformed the same ways) is not an exception for the caller: the model is asked once more
with the validation error, and if the second answer is no better the run ends on a
``clarify`` outcome that says why, recorded as decisions. The thread is left finished, not
stuck replaying the failure.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from langchain_core.messages import BaseMessage, HumanMessage
from langchain_core.runnables import Runnable
from pydantic import BaseModel

from agent_guards import GuardDecision, Verdict

from .prompts import ask

__all__ = ["Attempts", "malformed_outcome", "structured_call"]

T = TypeVar("T")
GUARD = "planner_gate"
_MAX_ERROR = 300


@dataclass(frozen=True)
class Attempts:
    """What came of asking for structured output: the built value (None when both answers
    were malformed), the model calls made and the validation errors, in order."""

    value: Any
    calls: int
    errors: tuple[str, ...] = field(default_factory=tuple)
    tokens: int = 0
    """The tokens the model reported for every attempt."""

    @property
    def failed(self) -> bool:
        return self.value is None


def _error_text(err: BaseException) -> str:
    try:
        text = f"{type(err).__name__}: {err}"
    except Exception:  # an exception whose __str__ raises still has a name
        text = type(err).__name__
    return text if len(text) <= _MAX_ERROR else text[: _MAX_ERROR - 1] + "…"


def structured_call(
    model: Runnable[Any, Any],
    schema: type[BaseModel],
    prompt: Sequence[BaseMessage],
    build: Callable[[Any], T],
    *,
    what: str,
) -> Attempts:
    """``build(ask(model, schema, prompt))``; on a validation error (``ValueError`` or
    ``TypeError``: pydantic, JSON, the plan's own checks) once more with the error shown
    to the model. Other errors (the model call failing) propagate."""
    errors: list[str] = []
    spent: list[int] = []
    for attempt in (1, 2):
        messages = list(prompt)
        if errors:
            messages.append(
                HumanMessage(
                    f"Your previous reply was not a valid {what}: {errors[-1]}\n"
                    f"Reply again with a valid {what}."
                )
            )
        try:
            value = build(ask(model, schema, messages, spent))
            return Attempts(value, attempt, tuple(errors), sum(spent))
        except (ValueError, TypeError) as err:
            errors.append(_error_text(err))
    return Attempts(None, 2, tuple(errors), sum(spent))


def malformed_outcome(
    what: str, attempts: Attempts
) -> tuple[dict[str, Any] | None, list[GuardDecision]]:
    """The outcome to end on (None when the repair worked) and the decisions to record."""
    reason = f"malformed_{what}"
    decisions: list[GuardDecision] = []
    if attempts.errors:
        first = attempts.errors[0]
        detail = f"The model's {what} was invalid; asked again with the error: {first}"
        repair = GuardDecision(
            guard=GUARD, verdict=Verdict.REPAIR, reason=reason, detail=detail, data={"error": first}
        )
        decisions.append(repair)
    if not attempts.failed:
        return None, decisions
    detail = f"the model's {what} was invalid twice ({attempts.errors[-1]})"
    decisions.append(
        GuardDecision(
            guard=GUARD,
            verdict=Verdict.CLARIFY,
            reason=reason,
            detail=detail,
            data={"errors": list(attempts.errors)},
        )
    )
    text = (
        f"I could not make a valid {what} for this request: {detail}. "
        "Could you rephrase it or narrow it down?"
    )
    return {"route": "clarify", "reason": reason, "detail": detail, "text": text}, decisions
