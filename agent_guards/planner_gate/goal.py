"""The goal layer: intent plus structured constraints, and what is missing (pure).

Example:
    >>> goal = Goal("compare", {"region": "杭州"}, required=("region", "period"))
    >>> goal.missing(), goal.with_constraints({"period": "2025"}).missing()
    (('period',), ())
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

from agent_guards.core.errors import InvalidInputError
from agent_guards.core.fields import from_mapping, named, shown
from agent_guards.planner_gate.checks import check_strs, check_text

__all__ = ["Goal", "missing_constraints"]


def _missing(value: Any) -> bool:
    if value is None:
        return True
    if isinstance(value, str):
        return not value.strip()
    if isinstance(value, float):
        return math.isnan(value)
    if isinstance(value, (Mapping, list, tuple, set, frozenset)):
        return len(value) == 0
    return False


@dataclass(frozen=True)
class Goal:
    """The goal layer, above the plan: the intent plus structured constraints.

    A constraint the user did not give stays missing: nothing fills it in silently.

    Attributes:
        intent: What the user wants, normalized (``"competitive_analysis"``).
        constraints: Constraint name -> value (region, time range, budget...).
        required: Names that must have a value before any plan runs.
        dimensions: Output dimensions the answer must cover (the completion check).

    Example:
        >>> goal = Goal("competitive_analysis", {"region": "杭州", "budget": None},
        ...             required=("region", "budget"), dimensions=("price", "share"))
        >>> goal.missing()
        ('budget',)
        >>> goal.with_constraints({"budget": 5000}).missing(), goal.constraints["budget"]
        ((), None)
    """

    intent: str
    constraints: dict[str, Any] = field(default_factory=dict, hash=False)
    required: tuple[str, ...] = ()
    dimensions: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        check_text(self.intent, item="goal", name="intent")
        if not isinstance(self.constraints, Mapping) or not all(
            isinstance(k, str) and k for k in self.constraints
        ):
            raise InvalidInputError(
                f"must map non-empty names to values, got {shown(self.constraints)}",
                item="goal",
                field="constraints",
            )
        object.__setattr__(self, "constraints", dict(self.constraints))
        for name in ("required", "dimensions"):
            object.__setattr__(self, name, check_strs(getattr(self, name), item="goal", name=name))

    @classmethod
    def coerce(cls, goal: Any) -> Goal:
        """A :class:`Goal` from a goal or its JSON form (a mapping, as LangGraph Studio or an
        SDK client writes it); anything else is rejected naming the field.

        >>> Goal.coerce({"intent": "compare", "required": ["region"]}).missing()
        ('region',)
        """
        if isinstance(goal, cls):
            return goal
        if isinstance(goal, Mapping):
            parse = partial(from_mapping, cls, key="intent")
            return named(parse, goal, "goal")  # type: ignore[no-any-return]
        raise InvalidInputError(
            f"must be a Goal or a mapping, got {type(goal).__name__}", item="goal", field="goal"
        )

    def missing(self) -> tuple[str, ...]:
        """Required constraints without a usable value, in ``required`` order."""
        return tuple(n for n in self.required if _missing(self.constraints.get(n)))

    def with_constraints(self, values: Mapping[str, Any]) -> Goal:
        """A copy with these constraint values set (the user answered or changed them)."""
        return replace(self, constraints={**self.constraints, **dict(values)})


def missing_constraints(goal: Goal, required: Iterable[str] | None = None) -> tuple[str, ...]:
    """Required constraints of ``goal`` that are absent, None, blank, empty or NaN.

    >>> goal = Goal("compare", {"region": "杭州", "period": ""}, required=("region", "period"))
    >>> missing_constraints(goal)
    ('period',)
    """
    if required is None:
        return goal.missing()
    names = check_strs(tuple(required), item="goal", name="required")
    return tuple(n for n in names if _missing(goal.constraints.get(n)))
