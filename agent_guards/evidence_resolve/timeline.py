"""Dates with a precision, and the timeline they put values on. Pure: no LangGraph import.

A date is known to the precision the data has: ``"2019"`` is some time in 2019, ``"2019-04"``
some time in April 2019, ``"2019-04-07"`` (a ``date``, or a ``datetime`` at midnight) that
day, a ``datetime`` with a time that instant. :class:`Span` is such a date as an interval,
and two spans order two values only when one ends before the other starts: ``"2019"`` and
``"2019-04-07"`` cannot be ordered, ``"2018"`` and ``"2019-04-07"`` can.

Asked *as of* an instant, a date is in force, not yet in force, or (a year or a month that
contains the instant) perhaps in force: a day counts from its start, so "effective
2019-04-07" is in force all of that day.

Public names are re-exported from :mod:`agent_guards.evidence_resolve`.

Example:
    >>> year, day = Span.parse("2019"), Span.parse("2019-04-07")
    >>> year.precision, day.precision, year.end.isoformat()
    ('year', 'day', '2020-01-01T00:00:00+00:00')
    >>> year.before(day), day.before(year), Span.parse("2018").before(day)
    (False, False, True)
    >>> q = to_datetime("2019-06-01", item=None, field="as_of")
    >>> year.status(q), day.status(q), Span.parse("2019-07").status(q)
    ('maybe', 'in_force', 'not_yet')
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any, Literal

from agent_guards.core.errors import InvalidInputError
from agent_guards.core.fields import shown, to_datetime

__all__ = ["Span", "canonical_date"]

_YEAR = re.compile(r"[0-9]{4}")
_MONTH = re.compile(r"([0-9]{4})-([0-9]{2})")
_TICK = timedelta(microseconds=1)
AsOf = Literal["in_force", "maybe", "not_yet"]


def canonical_date(value: Any, *, item: str | None, field: str) -> datetime | str | None:
    """How a date field is stored: ``"YYYY"`` / ``"YYYY-MM"`` strings, else an aware datetime.

    Raises :class:`InvalidInputError` naming ``item`` and ``field`` for anything that is not
    a ``datetime``, a ``date``, or an ISO-8601 string (``"2019"`` and ``"2019-04"`` included).

    >>> canonical_date(" 2019-04 ", item="d1", field="effective_at")
    '2019-04'
    >>> canonical_date("2019-04-07", item="d1", field="effective_at").isoformat()
    '2019-04-07T00:00:00+00:00'
    >>> canonical_date("2019-13", item="d1", field="effective_at")
    Traceback (most recent call last):
    ...
    agent_guards.core.errors.InvalidInputError: item 'd1' field 'effective_at': ...
    """
    if isinstance(value, str):
        text = value.strip()
        month = _MONTH.fullmatch(text)
        if _YEAR.fullmatch(text) and int(text) >= 1:
            return text
        if month and int(month.group(1)) >= 1 and 1 <= int(month.group(2)) <= 12:
            return text
        if month or _YEAR.fullmatch(text):
            raise InvalidInputError(
                f"not a valid year or month: {shown(value)}", item=item, field=field
            )
    return to_datetime(value, item=item, field=field)


@dataclass(frozen=True)
class Span:
    """A date as the interval ``[start, end)`` its precision allows (an instant: ``end == start``).

    Example:
        >>> s = Span.parse("2019-12")
        >>> s.start.isoformat(), s.end.isoformat(), s.precision
        ('2019-12-01T00:00:00+00:00', '2020-01-01T00:00:00+00:00', 'month')
    """

    start: datetime
    end: datetime
    precision: str

    @classmethod
    def parse(cls, value: datetime | date | str) -> Span:
        """The span of a stored (or any valid) date value."""
        stored = canonical_date(value, item=None, field="date")
        if isinstance(stored, str):
            year = int(stored[:4])
            if len(stored) == 4:
                start = datetime(year, 1, 1, tzinfo=UTC)
                return cls(start, start.replace(year=year + 1), "year")
            month = int(stored[5:7])
            start = datetime(year, month, 1, tzinfo=UTC)
            nxt = datetime(year + month // 12, month % 12 + 1, 1, tzinfo=UTC)
            return cls(start, nxt, "month")
        assert stored is not None  # a date value was given
        if stored.time() == datetime.min.time():
            return cls(stored, stored + timedelta(days=1), "day")
        return cls(stored, stored, "time")

    @property
    def last(self) -> datetime:
        """The latest instant the date can be."""
        return self.start if self.end == self.start else self.end - _TICK

    def before(self, other: Span) -> bool:
        """True when this date is known to come before ``other`` (at both precisions)."""
        return self.last < other.start

    def within(self, other: Span) -> bool:
        """True when this date is a finer date inside ``other`` (``"2019-04-07"`` in ``"2019"``)."""
        inside = other.start <= self.start and self.end <= other.end
        return inside and self.end - self.start < other.end - other.start

    def status(self, as_of: datetime) -> AsOf:
        """In force at ``as_of``, not yet, or perhaps (a year or month containing it)."""
        if self.start > as_of:
            return "not_yet"
        if self.precision in ("day", "time") or self.end <= as_of:
            return "in_force"
        return "maybe"

    def until(self, as_of: datetime) -> Span:
        """This span cut at ``as_of`` (what "in force at ``as_of``" leaves of it)."""
        end = min(self.end, as_of + _TICK)
        return Span(self.start, max(end, self.start), self.precision)

    def text(self) -> str:
        """The date as written at its precision (``"2019"``, ``"2019-04-07"``, ISO-8601)."""
        if self.precision == "year":
            return f"{self.start.year:04d}"
        if self.precision == "month":
            return f"{self.start.year:04d}-{self.start.month:02d}"
        if self.precision == "day":
            return self.start.date().isoformat()
        return self.start.isoformat()
