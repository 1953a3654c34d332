"""Field parsing shared by the evidence and memory records. Private: not part of the API.

Every parser names the item and the field it rejects, through :class:`InvalidInputError`,
so a bad document or memory record is reported as ``item 'doc-7' field 'updated_at': ...``.

Example:
    >>> to_datetime("2026-01-01", item="d1", field="updated_at").isoformat()
    '2026-01-01T00:00:00+00:00'
    >>> to_confidence(float("nan"), item="d1", field="confidence")
    Traceback (most recent call last):
    ...
    agent_guards.core.errors.InvalidInputError: item 'd1' field 'confidence': must be ... got nan
    >>> normalize_value(" 1,000,000 ") == normalize_value(1000000.0)
    True
    >>> version_key("v1.10") > version_key("v1.9")
    True
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import MISSING, fields
from datetime import UTC, date, datetime, time
from decimal import Decimal, InvalidOperation
from typing import Any

from agent_guards.core.errors import InvalidInputError
from agent_guards.core.policy import is_number

__all__ = [
    "MAX_INT_BITS",
    "at_position",
    "checked_items",
    "from_mapping",
    "link_cycles",
    "namespace_label",
    "normalize_text",
    "normalize_value",
    "shown",
    "to_confidence",
    "to_datetime",
    "to_finite",
    "to_identities",
    "to_ids",
    "to_key",
    "version_key",
]

DateLike = datetime | date | str

MAX_INT_BITS = 13_000
"""Integers past this (about 3,900 digits) are rejected: Python will not even print them."""


def namespace_label(value: str) -> str:
    """A store namespace label for ``value``: ``%``, ``.`` and NUL are percent-escaped, so
    any non-empty string is a label LangGraph's stores accept, and two strings never share
    one (a user id like ``alice@example.com``, a thread id like ``user.42``).

    >>> namespace_label("a.b%c"), namespace_label("a" + chr(0) + "b")
    ('a%2Eb%25c', 'a%00b')
    """
    if not isinstance(value, str) or not value:
        raise ValueError(f"a namespace label needs a non-empty string, got {value!r}")
    return value.replace("%", "%25").replace(".", "%2E").replace("\x00", "%00")


def shown(value: Any, limit: int = 80) -> str:
    """``repr(value)`` for an error message: short, and never raising.

    An integer too large to print, or an object whose ``__repr__`` raises, is described by
    its type instead.

    >>> len(shown("x" * 100)), shown(10**5000), shown(3)
    (80, '<int of 16610 bits>', '3')
    """
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 4000:
        return f"<int of {value.bit_length()} bits>"
    try:
        text = repr(value)
    except Exception:
        return f"<unprintable {type(value).__name__}>"
    return text if len(text) <= limit else text[: limit - 1] + "…"


def to_datetime(
    value: Any, *, item: str | None, field: str, day_end: bool = False
) -> datetime | None:
    """A timezone-aware datetime from a ``datetime``, ``date`` or ISO-8601 string (None passes).

    Values without an offset are read as UTC; a ``date`` (or a date-only string) is midnight
    UTC, or with ``day_end`` the last instant of that day: "valid until 2026-06-30" covers
    the 30th.

    >>> to_datetime("2026-06-30", item=None, field="valid_until", day_end=True).isoformat()
    '2026-06-30T23:59:59.999999+00:00'
    """
    if value is None:
        return None
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    if isinstance(value, date):
        return datetime.combine(value, time.max if day_end else time.min, tzinfo=UTC)
    if isinstance(value, str):
        text = value.strip()
        if text.endswith(("Z", "z")):
            text = text[:-1] + "+00:00"
        try:
            parsed = datetime.fromisoformat(text)
        except ValueError:
            raise InvalidInputError(
                f"not an ISO-8601 date/time: {shown(value)}", item=item, field=field
            ) from None
        if day_end and _DATE_ONLY.fullmatch(text):
            parsed = datetime.combine(parsed.date(), time.max)
        return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
    raise InvalidInputError(
        f"must be a datetime, date or ISO-8601 string, got {type(value).__name__}",
        item=item,
        field=field,
    )


def to_key(value: Any, *, item: str | None, field: str) -> str:
    """A string that is not blank: a record's id or the key its claim is about."""
    if not isinstance(value, str) or not value.strip():
        raise InvalidInputError(
            f"must be a non-empty string, got {shown(value)}", item=item, field=field
        )
    return value


def to_finite(value: Any, *, item: str | None, field: str) -> float | None:
    """A finite float (None passes); bools, NaN and infinities are rejected."""
    if value is None:
        return None
    if not is_number(value):
        raise InvalidInputError(f"must be a number, got {shown(value)}", item=item, field=field)
    try:
        number = float(value)
    except OverflowError:
        number = math.inf
    if not math.isfinite(number):
        raise InvalidInputError(
            f"must be a finite number, got {shown(value)}", item=item, field=field
        )
    return number


def to_confidence(value: Any, *, item: str | None, field: str) -> float | None:
    """A probability in 0..1 (None passes); NaN, bools and out-of-range values are rejected."""
    if value is None:
        return None
    try:
        number = float(value) if is_number(value) else math.nan
    except OverflowError:  # an int too large for a float is out of range
        number = math.inf
    if not (0.0 <= number <= 1.0):  # NaN fails the comparison
        raise InvalidInputError(
            f"must be a number in 0..1, got {shown(value)}", item=item, field=field
        )
    return number


def to_ids(value: Any, *, item: str | None, field: str) -> tuple[str, ...]:
    """A tuple of non-empty strings from a string or an iterable of strings (None -> ())."""
    if value is None:
        return ()
    values = (value,) if isinstance(value, str) else value
    if isinstance(values, Mapping) or not isinstance(values, Iterable):
        raise InvalidInputError(
            f"must be a string or a list of strings, got {shown(value)}", item=item, field=field
        )
    out = tuple(values)
    if any(not isinstance(v, str) or not v for v in out):
        raise InvalidInputError(
            f"must contain non-empty strings only, got {shown(list(out))}", item=item, field=field
        )
    return out


def to_identities(principal: Any, *, field: str = "principal") -> frozenset[str]:
    """The caller's identities: a string or an iterable of strings; None is nobody."""
    return frozenset(to_ids(principal, item=None, field=field))


_SPACE = re.compile(r"\s+")
_DATE_ONLY = re.compile(r"\d{4}-\d{2}-\d{2}")
_THOUSANDS = re.compile(r"(?<=\d)[,_'\u2019\u00a0\u202f](?=\d{3}(?!\d))")
_SPACED_NUMBER = re.compile(r"[+-]?\d{1,3}( \d{3})+(\.\d+)?")
_NUMBER = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?")


def normalize_text(value: Any) -> str:
    """Casefolded text with whitespace collapsed (entity, basis and key spellings)."""
    return _SPACE.sub(" ", str(value)).strip().casefold()


def _number(text: str) -> str:
    try:
        parsed = Decimal(text)
    except InvalidOperation:  # pragma: no cover - guarded by the regex
        return text
    if parsed == 0:
        return "0"
    return format(parsed.normalize(), "f")


def normalize_value(value: Any) -> str:
    """The default value normalizer: one spelling per value.

    Whitespace and case do not matter, thousands separators are dropped and numbers are
    written canonically (``"1,000.50"``, ``"1000.5"`` and ``1000.5`` are one value).

    >>> normalize_value("  Fifty   Thousand ") == normalize_value("fifty thousand")
    True
    >>> normalize_value("50w"), normalize_value(True)
    ('50w', 'true')
    """
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float, Decimal)):
        return _number(repr(value) if isinstance(value, float) else str(value))
    text = normalize_text(value)
    if _SPACED_NUMBER.fullmatch(text):
        text = text.replace(" ", "")
    text = _THOUSANDS.sub("", text)
    if _NUMBER.fullmatch(text):
        return _number(text)
    return text


_VERSION_PART = re.compile(r"\d+|\D+")


def version_key(version: Any) -> tuple[tuple[int, Any], ...]:
    """A natural sort key for a version (``"v1.10"`` after ``"v1.9"``; ints as numbers)."""
    if version is None:
        return ()
    if isinstance(version, int) and not isinstance(version, bool):
        return ((0, version),)
    parts = _VERSION_PART.findall(normalize_text(version))
    return tuple((0, int(p)) if p.isdigit() else (1, p) for p in parts)


def from_mapping(cls: type[Any], data: Any, *, key: str = "id", prefix: str = "") -> Any:
    """``cls(**data)`` for a dataclass ``cls``, naming the item (``data[key]``) in every error.

    Unknown keys and missing required fields are rejected by name; an instance of ``cls``
    is returned as it is.
    """
    if isinstance(data, cls):
        return data
    if not isinstance(data, Mapping):
        raise InvalidInputError(
            f"expected a {cls.__name__} or a mapping, got {type(data).__name__}"
        )
    raw_id = data.get(key)
    item = (
        None
        if raw_id is None
        else f"{prefix}{raw_id if isinstance(raw_id, str) else shown(raw_id)}"
    )
    known = [f.name for f in fields(cls)]
    unknown = sorted(shown(k) if not isinstance(k, str) else k for k in data if k not in known)
    if unknown:
        raise InvalidInputError(
            f"unknown key(s) {unknown}; allowed: {', '.join(known)}",
            item=item,
            field=unknown[0] or repr(unknown[0]),  # an empty key is named ''
        )
    for f in fields(cls):
        if f.name not in data and f.default is MISSING and f.default_factory is MISSING:
            raise InvalidInputError(
                f"missing required key {shown(f.name)}", item=item, field=f.name
            )
    return cls(**dict(data))


def link_cycles(links: Mapping[str, str]) -> list[list[str]]:
    """The cycles of ``old -> new`` supersede links, each as its sorted ids, sorted.

    >>> link_cycles({"a": "b", "b": "a", "c": "a"})
    [['a', 'b']]
    """
    found: set[tuple[str, ...]] = set()
    for start in links:
        path: list[str] = []
        node: str | None = start
        while node is not None and node not in path:
            path.append(node)
            node = links.get(node)
        if node is not None:
            found.add(tuple(sorted(path[path.index(node) :])))
    return [list(c) for c in sorted(found)]


def checked_items(items: Any, *, field: str) -> Iterable[Any]:
    """``items`` when it is a collection of items (not None, a string, a mapping or a scalar).

    >>> checked_items(None, field="items")
    Traceback (most recent call last):
    ...
    agent_guards.core.errors.InvalidInputError: field 'items': must be a list of items, got None
    """
    if items is None or isinstance(items, (str, bytes, Mapping)) or not isinstance(items, Iterable):
        raise InvalidInputError(f"must be a list of items, got {shown(items)}", field=field)
    return items


def named(build: Any, raw: Any, item: str, *, field: str | None = None) -> Any:
    """``build(raw)``; an ``InvalidInputError`` that names no item is raised again naming
    ``item`` (a position such as ``memory_facts[2]`` when the item has no readable id), and
    ``field`` when it names no field either.

    Example:
        >>> def parse(raw):
        ...     raise InvalidInputError("must be a string", field="id")
        >>> named(parse, 7, "steps[3]")
        Traceback (most recent call last):
        ...
        agent_guards.core.errors.InvalidInputError: item 'steps[3]' field 'id': must be a string
    """
    try:
        return build(raw)
    except InvalidInputError as err:
        if err.item is not None:
            raise
        raise InvalidInputError(err.problem, item=item, field=err.field or field) from None


def at_position(build: Any, raw: Any, position: int, *, field: str = "items") -> Any:
    """``build(raw)``; an error about an item with no readable id names its position (``#3``).

    An ``InvalidInputError`` keeps its field; any other exception a malformed item raises
    while it is read (an object whose ``__str__`` raises, say) becomes one.
    """
    try:
        return named(build, raw, f"#{position}", field=field)
    except InvalidInputError:
        raise
    except (TypeError, ValueError, OverflowError, RecursionError, AttributeError) as err:
        problem = f"cannot be read: {type(err).__name__}"
        raise InvalidInputError(problem, item=f"#{position}", field=field) from None
