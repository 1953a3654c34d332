"""The message-reading pure cores never raise unhandled on malformed input.

Hypothesis feeds each core at least 1,000 malformed inputs (derandomized: the same examples
on every run and machine): histories a client could write (dicts with junk fields, messages
with odd content, tool calls, artifacts and metadata, non-messages, non-lists), junk
exceptions and status codes, junk usage counters and plan writes. A core either returns its
verdict or raises ``InvalidInputError`` naming the field, and the item (its id, or its
position such as ``messages[3]`` when it has none) when the error is about one item.
``test_malformed_input.py`` covers the evidence, memory and planner cores the same way.
"""

from __future__ import annotations

import contextlib
import logging
import math
from collections.abc import Iterator, Mapping
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from langchain_core.messages import BaseMessage

from agent_guards import Budget, GuardDecision, classify_failure, detect_loop, fit_context
from agent_guards.context_guard import ContextVerdict
from agent_guards.core import InvalidInputError, merge_usage
from agent_guards.core.state import add_count
from agent_guards.evidence_resolve import evidence_from_messages, merge_evidence
from agent_guards.planner_gate import PlanVersion, merge_plans
from agent_guards.retry_router import FailureKind, describe_failure, route_failures
from tests._malformed import (
    MALFORMED,
    VALID,
    artifacts,
    histories,
    python_values,
    tool_results,
)

NASTY = python_values
HISTORY = histories(python_values)
ARTIFACT = artifacts(python_values)
TOOL = tool_results(python_values)

WHOLE_CALL = {"messages", "max_tokens", "reserve_tokens", "pinned", "error", "status_code",
              "status", "usage", "plans"}  # fmt: skip


def _check(err: InvalidInputError) -> None:
    """The error names the field, and the item unless it is about the whole argument."""
    assert err.field, f"the error does not name the field: {err!r}"
    if err.field not in WHOLE_CALL:
        assert err.item, f"the error does not name the item: {err}"
    str(err)  # printable


@contextlib.contextmanager
def _quiet(logger: str) -> Iterator[None]:
    """The reducers log each dropped write; thousands of them are noise here."""
    log = logging.getLogger(logger)
    log.disabled = True
    try:
        yield
    finally:
        log.disabled = False


def _decision(d: Any) -> None:
    assert isinstance(d, GuardDecision), d
    assert d.verdict is not None


@MALFORMED
@given(messages=HISTORY)
def test_detect_loop_never_raises_unhandled(messages: Any) -> None:
    try:
        decision = detect_loop(messages)
    except InvalidInputError as err:
        _check(err)
    else:
        _decision(decision)


@MALFORMED
@given(messages=HISTORY)
def test_route_failures_never_raises_unhandled(messages: Any) -> None:
    try:
        decision = route_failures(messages)
    except InvalidInputError as err:
        _check(err)
    else:
        _decision(decision)
        if decision.reason == "invalid_input":
            assert decision.data["field"], decision


class Flaky(Exception):
    """An exception with client-shaped attributes (status, response, headers, body)."""

    def __init__(self, text: Any, attrs: Mapping[str, Any]) -> None:
        super().__init__(text)
        for name, value in attrs.items():
            setattr(self, name, value)


class Response:
    def __init__(self, status_code: Any, headers: Any) -> None:
        self.status_code = status_code
        self.headers = headers


HEADERS = st.one_of(
    NASTY,
    st.dictionaries(
        st.sampled_from(["retry-after", "Retry-After", "retry-after-ms", "x"]), NASTY, max_size=2
    ),
    st.fixed_dictionaries(
        {
            "retry-after": st.sampled_from(
                ["Wed, 21 Oct 2015 07:28:00 GMT", "nan", "inf", "-5", "1e400", "soon", ""]
            )
        }
    ),
)
ERROR = st.one_of(
    NASTY,
    st.integers(-1000, 1000),
    st.sampled_from([429, 403, 503, 404, 422, 200, 399, 600]),
    TOOL,
    st.builds(
        Flaky,
        st.one_of(st.text(max_size=30), NASTY),
        st.dictionaries(
            st.sampled_from(
                [
                    "status_code",
                    "status",
                    "code",
                    "body",
                    "headers",
                    "response",
                    "filtered_errors",
                    "tool_kwargs",
                    "is_retryable",
                ]
            ),
            st.one_of(NASTY, st.builds(Response, NASTY, HEADERS), HEADERS),
            max_size=3,
        ),
    ),
)


@MALFORMED
@given(error=ERROR)
def test_classify_failure_never_raises_unhandled(error: Any) -> None:
    try:
        kind = classify_failure(error)
        failure = describe_failure(error)
    except InvalidInputError as err:
        _check(err)
    else:
        assert isinstance(kind, FailureKind)
        assert failure.kind is kind
        assert isinstance(failure.message, str)
        assert failure.retry_after is None or failure.retry_after >= 0


PINNED = st.one_of(
    st.just(()),
    st.lists(st.sampled_from(["h", "a", "c1", "t", "nope"]) | NASTY | VALID, max_size=3),
    NASTY,
    VALID,
)


@MALFORMED
@given(
    messages=HISTORY,
    max_tokens=st.one_of(st.integers(1, 4000), st.sampled_from([20, 300, 8000]), NASTY),
    pinned=PINNED,
)
def test_fit_context_never_raises_unhandled(messages: Any, max_tokens: Any, pinned: Any) -> None:
    try:
        verdict = fit_context(messages, max_tokens=max_tokens, pinned=pinned)
    except InvalidInputError as err:
        _check(err)
    else:
        assert isinstance(verdict, ContextVerdict)
        _decision(verdict.decision)
        assert all(isinstance(m, BaseMessage) for m in verdict.messages)


USAGE = st.one_of(
    NASTY,
    st.dictionaries(
        st.sampled_from(["steps", "replans", "tool_calls", "model_calls", "tokens", "started_at"]),
        NASTY,
        max_size=3,
    ),
)
BUDGET = Budget(max_steps=10, max_replans=2, max_tool_calls=5, max_model_calls=5, max_tokens=999)


@MALFORMED
@given(usage=USAGE, state=st.one_of(st.just("dict"), NASTY))
def test_budget_check_never_raises_unhandled(usage: Any, state: Any) -> None:
    whole = {"usage": usage} if state == "dict" else state
    try:
        reason = BUDGET.check(whole)
        left = BUDGET.remaining(usage)
    except InvalidInputError as err:
        _check(err)
    else:
        assert reason is None or str(reason)
        assert all(isinstance(v, int) and v >= 0 for v in left.values())


@MALFORMED
@given(messages=HISTORY)
def test_evidence_from_messages_never_raises_unhandled(messages: Any) -> None:
    try:
        found = evidence_from_messages(messages)
    except InvalidInputError as err:
        _check(err)
    else:
        assert all(e.id for e in found)


@MALFORMED
@given(current=st.one_of(st.none(), ARTIFACT), update=ARTIFACT)
def test_merge_evidence_drops_junk_and_never_raises(current: Any, update: Any) -> None:
    with _quiet("agent_guards.evidence_resolve"):
        merged = merge_evidence(current, update)
    assert isinstance(merged, list)
    ids = [e["id"] if isinstance(e, Mapping) else e.id for e in merged]
    assert all(i is not None and i != "" for i in ids), "an item without an id was kept"


PLAN = st.one_of(
    st.just({"version": 1, "steps": [{"id": "s1", "description": "d"}]}),
    st.dictionaries(st.sampled_from(["version", "steps", "trigger", "reason", "parent", "x"]),
                    NASTY, max_size=4),
    st.builds(
        lambda v, steps: {"version": v, "steps": steps},
        st.integers(1, 3) | NASTY,
        st.lists(st.dictionaries(st.sampled_from(["id", "description", "depends_on", "status",
                                                  "tool", "args", "risk"]), NASTY), max_size=3),
    ),
    NASTY,
)  # fmt: skip


@MALFORMED
@given(
    current=st.one_of(st.none(), st.lists(PLAN, max_size=2), NASTY), update=PLAN | st.lists(PLAN)
)
def test_merge_plans_drops_junk_and_never_raises(current: Any, update: Any) -> None:
    with _quiet("agent_guards.planner_gate"):
        plans = merge_plans(current, update)
    assert all(isinstance(p, PlanVersion) for p in plans)
    versions = [p.version for p in plans]
    assert versions == sorted(set(versions))


COUNTERS = st.one_of(
    NASTY,
    st.dictionaries(
        st.sampled_from(["steps", "replans", "tool_calls", "model_calls", "tokens", "started_at",
                         "x"]),
        st.one_of(st.integers(-5, 5), NASTY),
        max_size=3,
    ),
)  # fmt: skip


@MALFORMED
@given(current=st.one_of(st.none(), st.just({"steps": 2, "started_at": 5.0})), update=COUNTERS,
       count=st.one_of(st.none(), st.integers(-3, 3)), increment=NASTY | st.integers(-3, 3))  # fmt: skip
def test_counter_reducers_drop_junk_and_never_raise(
    current: Any, update: Any, count: Any, increment: Any
) -> None:
    with _quiet("agent_guards.state"):
        usage = merge_usage(current, update)
        total = add_count(count, increment)
    for key, value in usage.items():
        if key == "started_at":
            assert isinstance(value, float) and math.isfinite(value)
        else:
            assert type(value) is int and abs(value) < 2**64, (key, value)
    assert type(total) is int and abs(total) < 2**64
