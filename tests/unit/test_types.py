"""Verdicts, decision records and the state reducers."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent_guards.core import (
    GuardDecision,
    Verdict,
    keep_last,
    merge_usage,
    now_from_config,
    parse_verdict,
)

EXPECTED_VERDICTS = [
    "answer",
    "clarify",
    "abstain",
    "escalate",
    "execute",
    "replan",
    "continue",
    "reuse",
    "nudge",
    "stop",
    "retry",
    "repair",
    "refuse",
    "fallback",
]


def test_verdict_values_are_exactly_the_contract() -> None:
    assert [v.value for v in Verdict] == EXPECTED_VERDICTS
    assert all(v.value == v.name.lower() for v in Verdict)
    assert Verdict.STOP == "stop"
    assert str(Verdict.STOP) == "stop"


@pytest.mark.parametrize("spelling", ["stop", "STOP", " Stop ", Verdict.STOP])
def test_parse_verdict_accepts_spellings(spelling: str) -> None:
    assert parse_verdict(spelling) is Verdict.STOP


@pytest.mark.parametrize("bad", ["halt", "", "stopp", 3, None])
def test_unknown_verdicts_are_rejected_with_the_allowed_list(bad: object) -> None:
    with pytest.raises(ValueError, match=r"unknown verdict.*allowed: answer, clarify"):
        parse_verdict(bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unknown verdict"):
        GuardDecision(guard="g", verdict=bad, reason="r")  # type: ignore[arg-type]


def test_decision_round_trips_through_json() -> None:
    d = GuardDecision(
        guard="evidence_resolve",
        verdict="answer",
        reason="newer_version",
        selected_ids=["d_new"],
        conflicting_ids=("d_old",),
        policy="EvidencePolicy@1",
        step=4,
        at="2026-01-01T00:00:00+00:00",
        data={"value": "50w"},
    )
    assert d.verdict is Verdict.ANSWER
    assert d.selected_ids == ("d_new",)
    again = GuardDecision.from_dict(json.loads(json.dumps(d.to_dict())))
    assert again == d
    assert again.at == d.at


def test_decision_equality_ignores_where_and_when_only() -> None:
    a = GuardDecision(guard="g", verdict="stop", reason="r", at="2026-01-01T00:00:00", step=3)
    assert a == GuardDecision(
        guard="g", verdict="stop", reason="r", at="2027-01-01T00:00:00", step=4
    )
    assert a != GuardDecision(guard="g", verdict="stop", reason="other")
    assert a != GuardDecision(guard="g", verdict="nudge", reason="r")
    assert a != GuardDecision(guard="g", verdict="stop", reason="r", selected_ids=["x"])
    assert a != GuardDecision(guard="g", verdict="stop", reason="r", data={"n": 1})


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"guard": "", "verdict": "stop", "reason": "r"}, "guard must be a non-empty string"),
        ({"guard": "g", "verdict": "stop", "reason": ""}, "reason must be a non-empty string"),
    ],
)
def test_decision_rejects_empty_names(kwargs: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        GuardDecision(**kwargs)  # type: ignore[arg-type]


def test_from_dict_names_unknown_fields() -> None:
    with pytest.raises(ValueError, match=r"no field\(s\) \['colour'\]"):
        GuardDecision.from_dict({"guard": "g", "verdict": "stop", "reason": "r", "colour": 1})


@given(st.lists(st.lists(st.integers(), max_size=5), max_size=30), st.integers(1, 10))
def test_keep_last_is_bounded_and_keeps_the_newest(updates: list[list[int]], n: int) -> None:
    reduce = keep_last(n)
    log: list[int] = []
    everything: list[int] = []
    for update in updates:
        log = reduce(log, update)
        everything.extend(update)
        assert len(log) <= n
    assert log == everything[-n:]


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "3"])
def test_keep_last_rejects_bad_sizes(bad: object) -> None:
    with pytest.raises(ValueError, match="keep_last"):
        keep_last(bad)  # type: ignore[arg-type]


counters = st.fixed_dictionaries(
    {},
    optional={
        "steps": st.integers(0, 50),
        "tool_calls": st.integers(0, 50),
        "tokens": st.integers(0, 5000),
        "started_at": st.floats(0, 1e9),
    },
)


@given(counters, counters, counters)
def test_merge_usage_is_associative_and_commutative(a: dict, b: dict, c: dict) -> None:  # type: ignore[type-arg]
    assert merge_usage(merge_usage(a, b), c) == merge_usage(a, merge_usage(b, c))
    assert merge_usage(a, b) == merge_usage(b, a)


def test_merge_usage_adds_and_keeps_the_earliest_start() -> None:
    merged = merge_usage({"steps": 2, "started_at": 100.0}, {"steps": 3, "started_at": 50.0})
    assert merged == {"steps": 5, "started_at": 50.0}
    assert merge_usage(None, {"replans": 1}) == {"replans": 1}


@pytest.mark.parametrize(
    ("update", "field", "message"),
    [
        ({"stepz": 1}, "usage.stepz", "unknown usage counter"),
        ({"steps": 1.5}, "usage.steps", "must be an int"),
        ({"steps": True}, "usage.steps", "must be an int"),
        ({"steps": 10**30}, "usage.steps", "must be an int"),
        ({"started_at": float("nan")}, "usage.started_at", "finite number"),
        ([1, 2], "usage", "must map counters"),
    ],
)
def test_merge_usage_drops_bad_updates_and_logs_them(
    update: Any, field: str, message: str, caplog: pytest.LogCaptureFixture
) -> None:
    # a raising reducer would leave the write pending and the thread unreadable
    with caplog.at_level("WARNING", logger="agent_guards.state"):
        assert merge_usage({"steps": 2}, update) == {"steps": 2}
    assert f"field {field!r}" in caplog.text and message in caplog.text


def test_clock_comes_from_config() -> None:
    pinned = now_from_config({"configurable": {"agent_guards_now": "2026-03-01T12:00:00"}})
    assert pinned.isoformat() == "2026-03-01T12:00:00+00:00"
    assert now_from_config({"configurable": {"agent_guards_now": 0}}).year == 1970
    assert now_from_config({"configurable": {"agent_guards_now": lambda: 86400}}).day == 2
    assert now_from_config(None).tzinfo is not None
    with pytest.raises(TypeError, match="agent_guards_now"):
        now_from_config({"configurable": {"agent_guards_now": object()}})
