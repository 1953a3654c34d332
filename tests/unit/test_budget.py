"""Budgets and composable stop conditions (laws first, then the truth table)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent_guards.budget import (
    AllOf,
    AnyOf,
    Budget,
    Deadline,
    MaxModelCalls,
    MaxReplans,
    MaxSteps,
    MaxTokens,
    MaxToolCalls,
    StopCondition,
    recursion_limit_for,
)
from agent_guards.core import BudgetExceeded

T0 = 1_700_000_000.0


def state(**usage: Any) -> dict[str, Any]:
    return {"usage": usage}


conditions = st.one_of(
    st.builds(MaxSteps, st.integers(1, 20)),
    st.builds(MaxToolCalls, st.integers(1, 20)),
    st.builds(MaxModelCalls, st.integers(1, 20)),
    st.builds(MaxReplans, st.integers(1, 5)),
    st.builds(MaxTokens, st.integers(1, 2000)),
    st.builds(Deadline, st.floats(1, 100)),
)
states = st.fixed_dictionaries(
    {
        "steps": st.integers(0, 25),
        "tool_calls": st.integers(0, 25),
        "model_calls": st.integers(0, 25),
        "replans": st.integers(0, 6),
        "tokens": st.integers(0, 2500),
        "started_at": st.just(T0),
    }
)
nows = st.floats(0, 120).map(lambda s: datetime.fromtimestamp(T0 + s, tz=UTC))


@given(conditions, conditions, states, nows)
def test_or_stops_iff_either_stops(
    a: StopCondition, b: StopCondition, u: dict, now: datetime
) -> None:  # type: ignore[type-arg]
    s = {"usage": u}
    assert ((a | b)(s, now) is not None) == (a(s, now) is not None or b(s, now) is not None)


@given(conditions, conditions, states, nows)
def test_and_stops_iff_both_stop(
    a: StopCondition, b: StopCondition, u: dict, now: datetime
) -> None:  # type: ignore[type-arg]
    s = {"usage": u}
    assert ((a & b)(s, now) is not None) == (a(s, now) is not None and b(s, now) is not None)


@given(st.lists(conditions, min_size=3, max_size=6))
def test_chains_flatten(conds: list[StopCondition]) -> None:
    any_chain = conds[0]
    all_chain = conds[0]
    for c in conds[1:]:
        any_chain = any_chain | c
        all_chain = all_chain & c
    assert isinstance(any_chain, AnyOf) and any_chain.conditions == tuple(conds)
    assert isinstance(all_chain, AllOf) and all_chain.conditions == tuple(conds)
    # Mixed operators nest instead of flattening across kinds.
    mixed = (conds[0] | conds[1]) & conds[2]
    assert isinstance(mixed, AllOf) and len(mixed.conditions) == 2


@given(conditions, states, nows)
def test_conditions_are_stateless(cond: StopCondition, u: dict, now: datetime) -> None:  # type: ignore[type-arg]
    s = {"usage": u}
    assert cond(s, now) == cond(s, now)


@pytest.mark.parametrize(
    ("condition", "usage", "reason"),
    [
        (MaxSteps(3), {"steps": 2}, None),
        (MaxSteps(3), {"steps": 3}, "max_steps: 3 used, limit 3"),
        (MaxToolCalls(2), {"tool_calls": 2}, "max_tool_calls: 2 used, limit 2"),
        (MaxModelCalls(5), {}, None),
        (MaxReplans(2), {"replans": 2}, "max_replans: 2 used, limit 2"),
        (MaxTokens(100), {"tokens": 99}, None),
        (MaxSteps(3) & MaxToolCalls(2), {"steps": 3, "tool_calls": 1}, None),
        (
            MaxSteps(3) & MaxToolCalls(2),
            {"steps": 3, "tool_calls": 2},
            "max_steps: 3 used, limit 3 & max_tool_calls: 2 used, limit 2",
        ),
        (
            MaxSteps(3) | MaxToolCalls(2),
            {"steps": 0, "tool_calls": 5},
            "max_tool_calls: 5 used, limit 2",
        ),
    ],
)
def test_truth_table(condition: StopCondition, usage: dict, reason: str | None) -> None:  # type: ignore[type-arg]
    result = condition({"usage": usage})
    assert (str(result) if result else None) == reason


def test_deadline_reads_the_run_clock() -> None:
    cond = Deadline(timedelta(seconds=30))
    s = state(started_at=T0)
    assert cond(s, datetime.fromtimestamp(T0 + 29, tz=UTC)) is None
    tripped = cond(s, datetime.fromtimestamp(T0 + 31, tz=UTC))
    assert tripped is not None and tripped.reason == "max_seconds"
    assert cond(s, None) is None, "without a clock value the deadline cannot decide"
    assert cond(state(), datetime.now(UTC)) is None


def test_budget_builds_one_condition() -> None:
    budget = Budget(max_steps=10, max_tool_calls=3, max_seconds=60)
    cond = budget.stop_condition()
    assert isinstance(cond, AnyOf)
    assert len(cond.conditions) == 3
    assert Budget().stop_condition() is None
    assert Budget().check(state(steps=10**6)) is None
    reason = budget.check(state(steps=1, tool_calls=3))
    assert reason is not None and reason.reason == "max_tool_calls"
    err = reason.to_error()
    assert isinstance(err, BudgetExceeded)
    assert (err.guard, err.reason, err.limit, err.value) == ("budget", "max_tool_calls", 3, 3)
    assert budget.remaining({"steps": 4, "tool_calls": 5}) == {"steps": 6, "tool_calls": 0}


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"max_steps": 0}, "max_steps"),
        ({"max_steps": -1}, "max_steps"),
        ({"max_replans": -2}, "max_replans"),
        ({"max_tool_calls": 1.5}, "max_tool_calls"),
        ({"max_model_calls": True}, "max_model_calls"),
        ({"max_tokens": "100"}, "max_tokens"),
        ({"max_seconds": 0}, "max_seconds"),
        ({"max_seconds": -5.0}, "max_seconds"),
        ({"max_seconds": float("inf")}, "max_seconds"),
        ({"max_seconds": float("nan")}, "max_seconds"),
    ],
)
def test_bad_budget_values_name_the_field(kwargs: dict[str, Any], field: str) -> None:
    with pytest.raises(ValueError, match=f"Budget.{field}"):
        Budget(**kwargs)


def test_budget_is_keyword_only_and_frozen() -> None:
    with pytest.raises(TypeError):
        Budget(5)  # type: ignore[misc]
    budget = Budget(max_steps=5)
    with pytest.raises(AttributeError):
        budget.max_steps = 6  # type: ignore[misc]


def test_composites_reject_non_conditions() -> None:
    with pytest.raises(TypeError, match="expected a StopCondition"):
        AnyOf(MaxSteps(1), 3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="at least one"):
        AllOf()


@given(st.integers(1, 500), st.integers(1, 6))
def test_stop_conditions_trip_before_the_recursion_backstop(max_steps: int, per_step: int) -> None:
    """Simulate a loop that never stops by itself: the budget must stop it first."""
    budget = Budget(max_steps=max_steps)
    limit = recursion_limit_for(budget, nodes_per_step=per_step)
    supersteps = 0
    usage = {"steps": 0}
    while budget.check({"usage": usage}) is None:
        supersteps += per_step
        usage["steps"] += 1
        assert supersteps < limit
    # room left for the nodes that finish the run after the stop
    assert limit - supersteps >= per_step


def test_recursion_limit_needs_a_step_budget() -> None:
    with pytest.raises(ValueError, match="unbounded budget relies on recursion_limit alone"):
        recursion_limit_for(Budget(max_tool_calls=3), nodes_per_step=2)
    with pytest.raises(ValueError, match="nodes_per_step"):
        recursion_limit_for(Budget(max_steps=3), nodes_per_step=0)


# Budget.check answers a usage far from every limit without building the conditions; it
# must say what the conditions say, error included, for any usage.
_limit = st.one_of(st.none(), st.integers(1, 10))
_counter_value = st.one_of(
    st.integers(-3, 12),
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
    st.text(max_size=2),
    st.none(),
)
_usages = st.one_of(
    st.dictionaries(
        st.sampled_from(["steps", "replans", "tool_calls", "model_calls", "tokens", "x"]),
        _counter_value,
        max_size=6,
    ),
    st.none(),
    st.integers(),
    st.lists(st.integers(), max_size=2),
)


def _outcome(check: Any) -> Any:
    try:
        return ("ok", check())
    except Exception as err:  # the error is part of the answer
        return ("error", type(err), str(err))


@given(
    st.builds(
        Budget,
        max_steps=_limit,
        max_replans=_limit,
        max_tool_calls=_limit,
        max_model_calls=_limit,
        max_tokens=_limit,
        max_seconds=st.one_of(st.none(), st.just(30.0)),
    ),
    _usages,
    st.booleans(),
)
def test_check_fast_path_says_what_the_conditions_say(
    budget: Budget, usage: Any, absent: bool
) -> None:
    from agent_guards.budget import _condition_of

    s = {} if absent else {"usage": usage}
    now = datetime.fromtimestamp(T0, tz=UTC)
    cond = _condition_of(budget)
    general = _outcome(lambda: cond(s, now) if cond is not None else None)
    assert _outcome(lambda: budget.check(s, now)) == general


def test_check_fast_path_is_taken_far_from_the_limits() -> None:
    from agent_guards.budget import _far_from_limits

    assert _far_from_limits(Budget(max_steps=5, max_tokens=9), state(steps=4, tokens=8.5))
    assert not _far_from_limits(Budget(max_steps=5), state(steps=5))  # at the limit
    assert not _far_from_limits(Budget(max_steps=5, max_seconds=9), state(steps=1))
