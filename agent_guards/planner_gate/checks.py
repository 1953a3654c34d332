"""Validation helpers shared by the plan records. Private.

Each raises :class:`~agent_guards.core.errors.InvalidInputError` naming the item and field.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from agent_guards.core.errors import InvalidInputError


def _enum(cls: type[Any], value: Any, *, item: str, name: str) -> Any:
    if isinstance(value, cls):
        return value
    try:
        return cls(str(value).strip().lower())
    except ValueError:
        allowed = ", ".join(m.value for m in cls)
        raise InvalidInputError(
            f"{value!r} is not a {cls.__name__}; allowed: {allowed}", item=item, field=name
        ) from None


def _strs(value: Any, *, item: str, name: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        value = (value,)
    if not isinstance(value, Iterable) or isinstance(value, Mapping):
        raise InvalidInputError(f"expected a list of ids, got {value!r}", item=item, field=name)
    out = tuple(value)
    if not all(isinstance(v, str) and v for v in out):
        raise InvalidInputError(
            f"ids must be non-empty strings, got {out!r}", item=item, field=name
        )
    return out


def _text(value: Any, *, item: str, name: str, optional: bool = False) -> Any:
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise InvalidInputError(f"expected a string, got {value!r}", item=item, field=name)
    return value


def _count(value: Any, *, item: str | None, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidInputError(f"must be an int >= 0, got {value!r}", item=item, field=name)
    return value
