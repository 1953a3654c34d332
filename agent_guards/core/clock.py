"""The run's clock and step, read from the run config so a replay sees the same time."""

from __future__ import annotations

import functools
from datetime import UTC, date, datetime
from typing import Any

from langchain_core.runnables import RunnableConfig

from agent_guards.core.fields import to_datetime
from agent_guards.core.policy import is_number

__all__ = ["now_from_config"]


CONFIG_NOW_KEY = "agent_guards_now"


def now_from_config(config: RunnableConfig | None = None) -> datetime:
    """The run's clock: ``config["configurable"]["agent_guards_now"]`` if set, else UTC now.

    The value may be a ``datetime``, an ISO-8601 string, POSIX seconds, or a zero-argument
    callable returning one of those, so tests and replays can pin time.

    Example:
        >>> from agent_guards.core import now_from_config
        >>> now_from_config({"configurable": {"agent_guards_now": "2024-05-01T12:00:00Z"}})
        datetime.datetime(2024, 5, 1, 12, 0, tzinfo=datetime.timezone.utc)
        >>> now_from_config({"configurable": {"agent_guards_now": 0}}).isoformat()
        '1970-01-01T00:00:00+00:00'
        >>> now_from_config().tzinfo  # nothing pinned: the real UTC clock
        datetime.timezone.utc
    """
    value: Any = ((config or {}).get("configurable") or {}).get(CONFIG_NOW_KEY)
    if callable(value):
        value = value()
    if value is None:
        return datetime.now(UTC)
    if is_number(value):
        return datetime.fromtimestamp(float(value), tz=UTC)
    if isinstance(value, (str, date)):  # a datetime is a date too
        return _pinned(value)
    raise TypeError(
        f"configurable[{CONFIG_NOW_KEY!r}] must be a datetime, ISO string, POSIX seconds "
        f"or a callable, got {type(value).__name__}"
    )


def now_iso_from_config(config: RunnableConfig | None = None) -> str:
    """``now_from_config(config).isoformat()``: what a decision records as its time. A
    pinned clock's text is made once (the same value gives the same text)."""
    value: Any = ((config or {}).get("configurable") or {}).get(CONFIG_NOW_KEY)
    if isinstance(value, str):
        return _pinned_iso(value)
    return now_from_config(config).isoformat()


@functools.lru_cache(maxsize=256)
def _pinned_iso(value: str) -> str:
    return _pinned(value).isoformat()


@functools.lru_cache(maxsize=256)
def _pinned(value: str | date) -> datetime:
    """A pinned clock, parsed once: every node of a run reads the same one."""
    parsed = to_datetime(value, item=None, field=f"configurable.{CONFIG_NOW_KEY}")
    assert parsed is not None
    return parsed


def step_from_config(config: RunnableConfig | None) -> int | None:
    """The LangGraph super-step a node runs in (``metadata["langgraph_step"]``), if known."""
    step = ((config or {}).get("metadata") or {}).get("langgraph_step")
    return step if isinstance(step, int) else None
