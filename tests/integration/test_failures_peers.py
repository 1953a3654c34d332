"""Peers' own test scenarios, translated into retry_router's API.

Each test names the peer file and test it came from, and whether agent-guards agrees or
differs (and why). The table with the counts is in docs/retry_router.md. Scenarios only:
no peer code is copied.

Peers: pybreaker (danielfm/pybreaker, tests/pybreaker_test.py), resilience4j
(resilience4j-circuitbreaker/src/test/java/io/github/resilience4j/circuitbreaker/internal/
CircuitBreakerStateMachineTest.java, "R4J" below), tenacity (jd/tenacity, tests/test_tenacity.py),
LangChain v1 (libs/langchain_v1/tests/unit_tests/agents/middleware/implementations/
test_tool_retry.py and test_model_retry.py).
"""

from __future__ import annotations

import threading
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.exceptions import ModelAPIError
from langchain_core.messages import HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.store.memory import InMemoryStore

from agent_guards.core import Verdict
from agent_guards.middleware import RetryRouterMiddleware, model_retry_middleware
from agent_guards.retry_router import (
    Backoff,
    CircuitBreaker,
    FailureKind,
    RetryRouterPolicy,
    TransientToolError,
    decide_failure,
    describe_failure,
)
from agent_guards.testing import ScriptedChatModel, tool_call_message
from agent_guards.tool_guard import annotate_tool
from tests.integration.test_failures_model import FAST, FlakyModel


def _cb(**kwargs: Any) -> tuple[CircuitBreaker, InMemoryStore]:
    return CircuitBreaker(**{"cooldown": 30, **kwargs}), InMemoryStore()


def _state(cb: CircuitBreaker, store: Any, now: float) -> str:
    return cb.state(cb.read(store, "svc", now=now), now=now)


# pybreaker ---------------------------------------------------------------------------------


def test_pybreaker_successful_call() -> None:
    """pybreaker tests/pybreaker_test.py::test_successful_call - agree."""
    cb, store = _cb(failure_threshold=5)
    cb.record(store, "svc", ok=True, now=0)
    assert _state(cb, store, 0) == "closed"


def test_pybreaker_one_failed_call() -> None:
    """pybreaker ::test_one_failed_call - agree (one failure, still closed)."""
    cb, store = _cb(failure_threshold=5)
    cb.record(store, "svc", ok=False, now=0)
    value = cb.read(store, "svc", now=0)
    assert value is not None and (value["failures"], value["state"]) == (1, "closed")


def test_pybreaker_one_successful_call_after_failed_call() -> None:
    """pybreaker ::test_one_successful_call_after_failed_call - agree on this scenario
    (counter back to 0). pybreaker zeroes the counter on any success; agent-guards takes
    one failure off, so scattered failures among successes never open it either."""
    cb, store = _cb(failure_threshold=5)
    cb.record(store, "svc", ok=False, now=0)
    value = cb.record(store, "svc", ok=True, now=1)
    assert (value["failures"], value["state"]) == (0, "closed")


def test_pybreaker_several_failed_calls() -> None:
    """pybreaker ::test_several_failed_calls_setting_absent - agree (fail_max=3 opens at
    the third failure; the next call is not made)."""
    cb, store = _cb(failure_threshold=3)
    for t in (0, 1, 2):
        cb.record(store, "svc", ok=False, now=t)
    assert cb.allow(store, "svc", now=3) == (False, "open")


def test_pybreaker_failed_call_after_timeout() -> None:
    """pybreaker ::test_failed_call_after_timeout - agree (the trial fails: open again)."""
    cb, store = _cb(failure_threshold=3)
    for t in (0, 1, 2):
        cb.record(store, "svc", ok=False, now=t)
    assert cb.allow(store, "svc", now=40) == (True, "half_open")
    cb.record(store, "svc", ok=False, now=40)
    assert cb.allow(store, "svc", now=41) == (False, "open")


def test_pybreaker_successful_after_timeout() -> None:
    """pybreaker ::test_successful_after_timeout - agree with success_threshold=1
    (pybreaker's default; agent-guards defaults to 2)."""
    cb, store = _cb(failure_threshold=3, success_threshold=1)
    for t in (0, 1, 2):
        cb.record(store, "svc", ok=False, now=t)
    assert cb.allow(store, "svc", now=40)[0]
    cb.record(store, "svc", ok=True, now=40)
    assert cb.allow(store, "svc", now=41) == (True, "closed")


def test_pybreaker_failed_and_successful_call_when_halfopen() -> None:
    """pybreaker ::test_failed_call_when_halfopen and ::test_successful_call_when_halfopen
    - agree (two scenarios)."""
    for ok, after in ((False, "open"), (True, "closed")):
        cb, store = _cb(failure_threshold=1, success_threshold=1)
        cb.record(store, "svc", ok=False, now=0)
        assert cb.allow(store, "svc", now=31) == (True, "half_open")
        cb.record(store, "svc", ok=ok, now=31)
        assert _state(cb, store, 32) == after


def test_pybreaker_success_threshold_multiple_successes_required() -> None:
    """pybreaker ::test_success_threshold_multiple_successes_required - agree."""
    cb, store = _cb(failure_threshold=1, success_threshold=3)
    cb.record(store, "svc", ok=False, now=0)
    states = []
    for t in (31, 32, 33):
        assert cb.allow(store, "svc", now=t)[0]
        states.append(cb.record(store, "svc", ok=True, now=t)["state"])
    assert states == ["half_open", "half_open", "closed"]


def test_pybreaker_success_threshold_failure_resets_counter() -> None:
    """pybreaker ::test_success_threshold_failure_resets_counter - agree."""
    cb, store = _cb(failure_threshold=3, success_threshold=3)
    for t in (0, 1, 2):
        cb.record(store, "svc", ok=False, now=t)
    for t in (33, 34):  # opened at 2: half-open from 32
        assert cb.allow(store, "svc", now=t)[0]
        cb.record(store, "svc", ok=True, now=t)
    assert cb.allow(store, "svc", now=35)[0]
    value = cb.record(store, "svc", ok=False, now=35)
    assert (value["state"], value["successes"]) == ("open", 0)


def test_pybreaker_half_open_thread_safety() -> None:
    """pybreaker ::test_half_open_thread_safety - agree (one trial call of 5 threads)."""
    cb, store = _cb(failure_threshold=1)
    cb.record(store, "svc", ok=False, now=0)
    admitted: list[bool] = []
    barrier = threading.Barrier(5)

    def call() -> None:
        barrier.wait()
        admitted.append(cb.allow(store, "svc", now=31)[0])

    threads = [threading.Thread(target=call) for _ in range(5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert admitted.count(True) == 1


def test_pybreaker_fail_thread_safety() -> None:
    """pybreaker ::test_fail_thread_safety - agree (3 threads' failures all counted; see
    tests/integration/test_failures_breaker.py for SQLite/PostgreSQL and processes)."""
    cb, store = _cb(failure_threshold=100_000, max_events=5000)

    def fail() -> None:
        for i in range(200):
            cb.record(store, "svc", ok=False, now=float(i))

    threads = [threading.Thread(target=fail) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    value = cb.read(store, "svc", now=200)
    assert value is not None and value["failures"] == 600


def test_pybreaker_excluded_exceptions() -> None:
    """pybreaker ::test_excluded_exceptions - agree: only counted kinds count (a business
    or permission error says nothing about the service; ToolCallGuard records only
    ``counted_kinds``)."""
    cb = CircuitBreaker()
    counted = {k for k in FailureKind if k in cb.counted_kinds}
    assert counted == {FailureKind.TRANSIENT, FailureKind.EMPTY_ERROR}


# resilience4j ---------------------------------------------------------------------------------


def test_r4j_should_only_permit_four_calls_in_half_open_state() -> None:
    """R4J ::shouldOnlyPermitFourCallsInHalfOpenState - agree with half_open_max_calls=4
    (also after a second open/half-open cycle)."""
    cb, store = _cb(failure_threshold=1, half_open_max_calls=4)
    for opened in (0.0, 100.0):
        cb.record(store, "svc", ok=False, now=opened)
        got = [cb.allow(store, "svc", now=opened + 31)[0] for _ in range(6)]
        assert got == [True] * 4 + [False] * 2
        cb.record(store, "svc", ok=False, now=opened + 32)  # a trial fails: reopen


def test_r4j_should_not_permit_calls_when_open() -> None:
    """R4J ::shouldThrowCallNotPermittedExceptionWhenStateIsOpen - agree."""
    cb, store = _cb(failure_threshold=1)
    cb.record(store, "svc", ok=False, now=0)
    assert cb.allow(store, "svc", now=1) == (False, "open")


def test_r4j_should_open_after_failure_rate_threshold_exceeded() -> None:
    """R4J ::shouldOpenAfterFailureRateThresholdExceeded - agree (window 5, minimum 5,
    50%: F F F S S opens at the fifth call, rate 60%)."""
    cb, store = _cb(failure_rate_threshold=50, sliding_window_size=5, minimum_calls=5)
    states = [cb.record(store, "svc", ok=o, now=float(i))["state"]
              for i, o in enumerate([False, False, False, True, True])]  # fmt: skip
    assert states == ["closed"] * 4 + ["open"]
    assert cb.allow(store, "svc", now=5) == (False, "open")


def test_r4j_should_transition_to_half_open_after_wait_duration() -> None:
    """R4J ::shouldTransitionToHalfOpenAfterWaitDuration - agree (lazily, on read)."""
    cb, store = _cb(failure_threshold=1, cooldown=5)
    cb.record(store, "svc", ok=False, now=0)
    assert [_state(cb, store, t) for t in (4.9, 5.0)] == ["open", "half_open"]


def test_r4j_should_not_allow_transition_from_closed_to_half_open() -> None:
    """R4J ::shouldNotAllowTransitionFromClosedToHalfOpen - agree (no event path)."""
    cb = CircuitBreaker(failure_threshold=3)
    value = None
    for i, ok in enumerate([True, False, True, True]):
        value = cb.transition(value, ok=ok, now=float(i))
        assert cb.state(value, now=float(i) + 10_000) == "closed"


def test_r4j_back_to_open_when_the_half_open_failure_rate_is_above_threshold() -> None:
    """R4J ::shouldTransitionBackToOpenStateWhenFailureRateIsAboveThreshold - differs in
    when: resilience4j evaluates the rate after its 4 permitted calls (F F S F -> open);
    agent-guards reopens at the first failed trial (pybreaker's rule), so the same calls
    end open after one trial."""
    cb, store = _cb(failure_threshold=1, half_open_max_calls=4)
    cb.record(store, "svc", ok=False, now=0)
    assert cb.allow(store, "svc", now=31)[0]
    assert cb.record(store, "svc", ok=False, now=31)["state"] == "open"
    assert cb.allow(store, "svc", now=31.5) == (False, "open")


def test_r4j_back_to_closed_when_the_half_open_failure_rate_is_below_threshold() -> None:
    """R4J ::shouldTransitionBackToClosedStateWhenFailureIsBelowThreshold - differs:
    resilience4j closes after F S S S (25% < 50%); agent-guards reopens at the failed trial
    and closes only after ``success_threshold`` successes in a row."""
    cb, store = _cb(failure_threshold=1, half_open_max_calls=4, success_threshold=3)
    cb.record(store, "svc", ok=False, now=0)
    assert cb.allow(store, "svc", now=31)[0]
    assert cb.record(store, "svc", ok=False, now=31)["state"] == "open"


# tenacity ---------------------------------------------------------------------------------


def test_tenacity_exponential() -> None:
    """tenacity tests/test_tenacity.py::test_exponential - agree (1, 2, 4 ... 128)."""
    b = Backoff(base_delay=1, factor=2, max_delay=1000, jitter="none")
    assert [b.delay(n) for n in range(1, 9)] == [1, 2, 4, 8, 16, 32, 64, 128]


def test_tenacity_exponential_with_max_wait() -> None:
    """tenacity ::test_exponential_with_max_wait - agree (capped at 40)."""
    b = Backoff(base_delay=1, factor=2, max_delay=40, jitter="none")
    assert [b.delay(n) for n in (1, 6, 7, 8, 50)] == [1, 32, 40, 40, 40]


def test_tenacity_exponential_skips_power_after_reaching_max() -> None:
    """tenacity ::test_exponential_skips_power_after_reaching_max - agree (the cap is
    applied before the power: no OverflowError however large the factor or attempt)."""
    b = Backoff(factor=1e10, max_delay=40, jitter="none")
    assert [b.delay(n) for n in (32, 50, 10**6)] == [40, 40, 40]


def test_tenacity_exponential_caps_when_max_multiplier_ratio_underflows() -> None:
    """tenacity ::test_exponential_caps_when_max_multiplier_ratio_underflows - agree."""
    assert Backoff(base_delay=1e300, max_delay=1e-100, jitter="none").delay(1) == 1e-100


def test_tenacity_wait_random_exponential() -> None:
    """tenacity ::test_wait_random_exponential - agree on the bounds (full jitter within
    [0, min(max, base * factor ** (n - 1))]); differs in the source: the jitter is a hash
    of the call id, so a replay waits the same."""
    b = Backoff(base_delay=1, factor=2, max_delay=10)
    for n, top in ((1, 1), (2, 2), (3, 4), (4, 8), (5, 10), (9, 10)):
        waits = {b.delay(n, key=f"call-{i}") for i in range(20)}
        assert all(0 <= w <= top for w in waits) and len(waits) > 1
        assert b.delay(n, key="call-1") == b.delay(n, key="call-1")


def test_tenacity_stop_after_attempt() -> None:
    """tenacity ::test_stop_after_attempt - agree (stop at attempt 3 of 3)."""
    failure = describe_failure(TimeoutError("slow"))
    call = {"call_id": "c1", "tool": "q", "signature": "q", "effect": "read"}
    routes = [decide_failure(failure, attempt=n, **call).data["route"] for n in (2, 3, 4)]
    assert routes == ["retry", "fallback", "fallback"]


# LangChain v1 ToolRetryMiddleware / ModelRetryMiddleware ---------------------------------------


def _agent_with(tool_: Any, policy: RetryRouterPolicy) -> Any:
    model = ScriptedChatModel(script=[tool_call_message(tool_.name, {"value": "test"}), "done"])
    waits: list[float] = []
    return create_agent(model, tools=[tool_],
                        middleware=[RetryRouterMiddleware(policy=policy, sleep=waits.append)])  # fmt: skip


def test_langchain_tool_retry_succeeds_after_retries() -> None:
    """LangChain test_tool_retry.py::test_tool_retry_succeeds_after_retries - agree for a
    transient failure (2 failures, success on the 3rd attempt, one ToolMessage)."""
    attempts: list[int] = []

    @tool
    def temp_failing_tool(value: str) -> str:
        """Fails twice."""
        attempts.append(1)
        if len(attempts) <= 2:
            raise TransientToolError(f"Temporary failure {len(attempts)}")
        return f"Success after {len(attempts)} attempts: {value}"

    agent = _agent_with(annotate_tool(temp_failing_tool, read_only=True),
                        RetryRouterPolicy(backoff=Backoff(max_attempts=4)))  # fmt: skip
    out = agent.invoke({"messages": [HumanMessage("go")]}, {"recursion_limit": 30})
    results = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    assert len(results) == 1 and "Success after 3 attempts" in results[0].content


def test_langchain_tool_retry_failing_tool_returns_message() -> None:
    """LangChain ::test_tool_retry_failing_tool_returns_message - differs by design: a
    bare ``ValueError`` is UNKNOWN and is not retried (LangGraph's own default excludes it;
    stamina refuses to guess); the run goes on with one classified error message."""
    calls: list[int] = []

    @tool
    def failing_tool(value: str) -> str:
        """Always fails."""
        calls.append(1)
        raise ValueError(f"Failed: {value}")

    agent = _agent_with(annotate_tool(failing_tool, read_only=True), RetryRouterPolicy())
    out = agent.invoke({"messages": [HumanMessage("go")]}, {"recursion_limit": 30})
    results = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    assert len(calls) == 1 and results[0].status == "error"
    assert results[0].artifact["agent_guards_failure"]["kind"] == "unknown"


def test_langchain_tool_retry_non_retryable_exception_reraises() -> None:
    """LangChain ::test_tool_retry_non_retryable_exception_reraises - differs by design:
    agent-guards never crashes the run on a tool error; a permission error is refused and
    the run ends with the reason."""

    @tool
    def runtime_error_tool(value: str) -> str:
        """Always denied."""
        raise PermissionError(f"RuntimeError: {value}")

    agent = _agent_with(annotate_tool(runtime_error_tool, read_only=True), RetryRouterPolicy())
    out = agent.invoke({"messages": [HumanMessage("go")]}, {"recursion_limit": 30})
    assert out["guard_log"][-1].verdict is Verdict.REFUSE


def test_langchain_model_retry_succeeds_after_retries() -> None:
    """LangChain test_model_retry.py::test_model_retry_succeeds_after_retries - agree for
    retryable model errors (success on the 3rd attempt)."""
    model = FlakyModel(script=["Success"], seen={},
                       fault=lambda r, n: ModelAPIError("503") if n <= 2 else None)  # fmt: skip
    agent = create_agent(model, tools=[], middleware=[model_retry_middleware(FAST)])
    out = agent.invoke({"messages": [HumanMessage("Hello")]}, {"recursion_limit": 20})
    assert model.seen["agent"] == 3 and out["messages"][-1].content == "Success"


def test_langchain_model_retry_failing_model_returns_message() -> None:
    """LangChain ::test_model_retry_failing_model_returns_message - agree: after the
    attempts the run ends with one message naming the failure (here its kind too)."""
    model = FlakyModel(script=["x"], seen={}, fault=lambda r, n: ModelAPIError("Model error"))
    agent = create_agent(model, tools=[], middleware=[model_retry_middleware(FAST)])
    out = agent.invoke({"messages": [HumanMessage("Hello")]}, {"recursion_limit": 20})
    assert model.seen["agent"] == 3
    assert "unavailable (transient): Model error" in out["messages"][-1].content


@pytest.mark.parametrize(("attempt", "expected"), [(1, 1.0), (2, 2.0), (3, 2.0)])
def test_langchain_model_retry_max_delay_cap(attempt: int, expected: float) -> None:
    """LangChain ::test_model_retry_max_delay_cap - agree (factor 10, cap 2: 1, 2, 2)."""
    b = Backoff(base_delay=1, factor=10, max_delay=2, jitter="none")
    assert b.delay(attempt) == expected
