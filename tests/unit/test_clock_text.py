"""A decision's time text is the run's clock's ``isoformat()``, made once for a pinned clock."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent_guards.core.clock import now_from_config, now_iso_from_config

pinned = st.one_of(
    st.sampled_from(["2026-06-01", "2024-05-01T12:00:00Z", "2024-05-01T12:00:00+02:00", "junk"]),
    st.integers(0, 2_000_000_000),
    st.datetimes(timezones=st.just(UTC)),
    st.dates(),
    st.just(datetime(2024, 5, 1, 12, 0, tzinfo=UTC).isoformat),
    st.just([1]),
)


def _outcome(config: Any, read: Any) -> Any:
    try:
        return ("ok", read(config))
    except Exception as err:  # the error is part of the answer
        return ("error", type(err), str(err))


@given(pinned)
def test_the_time_text_is_the_clocks_isoformat(value: Any) -> None:
    config = {"configurable": {"agent_guards_now": value}}
    want = _outcome(config, lambda c: now_from_config(c).isoformat())
    assert _outcome(config, now_iso_from_config) == want


@pytest.mark.parametrize("config", [None, {}, {"configurable": None}])
def test_an_unpinned_clock_reads_the_real_time(config: Any) -> None:
    before = datetime.now(UTC)
    read = datetime.fromisoformat(now_iso_from_config(config))
    assert read.utcoffset() is not None and read.utcoffset().total_seconds() == 0
    assert before <= read <= datetime.now(UTC)
