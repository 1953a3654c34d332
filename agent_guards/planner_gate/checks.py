"""Validation helpers shared by the plan records.

Each raises :class:`~agent_guards.core.errors.InvalidInputError` naming the item and field.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

from agent_guards.core.errors import InvalidInputError
from agent_guards.core.fields import shown
from agent_guards.core.policy import duration_of, is_int


def check_enum(cls: type[Any], value: Any, *, item: str, name: str) -> Any:
    if isinstance(value, cls):
        return value
    try:
        return cls(str(value).strip().lower())
    except ValueError:
        allowed = ", ".join(m.value for m in cls)
        raise InvalidInputError(
            f"{shown(value)} is not a {cls.__name__}; allowed: {allowed}", item=item, field=name
        ) from None


def check_strs(value: Any, *, item: str, name: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        value = (value,)
    if not isinstance(value, Iterable) or isinstance(value, Mapping):
        raise InvalidInputError(
            f"expected a list of ids, got {shown(value)}", item=item, field=name
        )
    out = tuple(value)
    if not all(isinstance(v, str) and v for v in out):
        raise InvalidInputError(
            f"ids must be non-empty strings, got {shown(out)}", item=item, field=name
        )
    return out


def check_text(value: Any, *, item: str, name: str, optional: bool = False) -> Any:
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise InvalidInputError(f"expected a string, got {shown(value)}", item=item, field=name)
    return value


def check_count(value: Any, *, item: str | None, name: str, minimum: int = 0) -> int:
    if not is_int(value, minimum) or value.bit_length() > 63:
        raise InvalidInputError(
            f"must be an int >= {minimum} (and < 2**63), got {shown(value)}", item=item, field=name
        )
    checked: int = value
    return checked


def check_step_duration(value: Any, *, item: str, name: str) -> float | None:
    """Seconds > 0 from a number or a timedelta; None passes."""
    if value is None:
        return None
    seconds = duration_of(value)
    if seconds is None or not math.isfinite(seconds) or seconds <= 0:
        raise InvalidInputError(
            f"must be seconds > 0 or None, got {shown(value)}", item=item, field=name
        )
    return seconds
