"""retry_router: failures it mis-routed and the breaker's semantics, as truth tables.

Pure cores only (classification, routing, the breaker's fold, the retry budget on an
InMemoryStore); the graph, middleware and multi-writer paths are in tests/integration.
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from typing import Any

import pytest
from langchain_core import exceptions as lc
from langchain_core.messages import AIMessage, ToolMessage
from langgraph.store.memory import InMemoryStore

from agent_guards.core import Verdict
from agent_guards.retry_router import (
    Backoff,
    CircuitBreaker,
    Failure,
    FailureKind,
    RetryBudget,
    RetryRouterPolicy,
    TransientToolError,
    classify_failure,
    decide_failure,
    describe_failure,
    failure_artifact,
    failure_message,
    failure_of,
    route_failures,
)

K = FailureKind
NOW = datetime(2026, 1, 1, tzinfo=UTC)


# 1. an untyped exception reads like the same text in an error ToolMessage -------------


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("403 Forbidden", K.PERMISSION),
        ("permission denied for relation payroll", K.PERMISSION),
        ("AccessDenied: User is not authorized to perform s3:GetObject", K.PERMISSION),
        ("An error occurred (AccessDenied) when calling the GetObject operation", K.PERMISSION),
        ("Operation not permitted", K.PERMISSION),
        ("401 Unauthorized", K.PERMISSION),
        ("content policy violation", K.SAFETY),
        ("Request timed out", K.TRANSIENT),
        ("HTTP 503 from upstream", K.TRANSIENT),
        ("order 7 not found", K.PRECONDITION),
        ("boom", K.UNKNOWN),
    ],
)
def test_untyped_exception_text_is_read_like_an_error_tool_message(
    text: str, kind: FailureKind
) -> None:
    message = ToolMessage(text, tool_call_id="c1", status="error")
    assert classify_failure(Exception(text)) is kind
    assert classify_failure(RuntimeError(text)) is kind
    assert classify_failure(message) is kind, "one vocabulary for both"


def test_typed_errors_and_attributes_still_win_over_the_text() -> None:
    assert classify_failure(TransientToolError("403 Forbidden")) is K.TRANSIENT
    assert classify_failure(TimeoutError("permission denied")) is K.TRANSIENT
    assert classify_failure(KeyError("boom")) is K.UNKNOWN


# 2. langchain-core's model error types ---------------------------------------------------


@pytest.mark.parametrize(
    ("error", "kind", "route"),
    [
        (lc.ModelRateLimitError("429 Too Many Requests"), K.TRANSIENT, "retry"),
        (lc.ModelRateLimitError("insufficient_quota: quota exceeded"), K.QUOTA, "fallback"),
        (lc.ModelAPIError("500 Internal Server Error"), K.TRANSIENT, "retry"),
        (lc.ModelAPIError("bare"), K.TRANSIENT, "retry"),  # was unknown and never retried
        (lc.ModelConnectionError("reset"), K.TRANSIENT, "retry"),
        (lc.ModelTimeoutError("slow"), K.TRANSIENT, "retry"),
        (lc.ModelAuthenticationError("bad key"), K.PERMISSION, "refuse"),
        (lc.ModelPermissionDeniedError("no"), K.PERMISSION, "refuse"),
        (lc.ModelInvalidRequestError("bad"), K.INVALID_ARGS, "repair"),
        (lc.ModelNotFoundError("gpt-9"), K.PRECONDITION, "replan"),
        (lc.ContextOverflowError("too long"), K.QUOTA, "fallback"),
        pytest.param(
            getattr(lc, "ModelRefusalError", Exception)(),
            K.SAFETY,
            "refuse",
            marks=pytest.mark.skipif(
                not hasattr(lc, "ModelRefusalError"),
                reason="ModelRefusalError is new in langchain-core 1.8 (the floor is 1.6)",
            ),
        ),
    ],
)
def test_model_errors_are_read(error: Exception, kind: FailureKind, route: str) -> None:
    failure = describe_failure(error)
    assert failure.kind is kind
    decision = decide_failure(failure, call_id="m1", tool="model", signature="m", effect="read")
    assert decision.data["route"] == route


def test_a_model_error_subclass_is_read_by_is_retryable() -> None:
    class ProviderOverloaded(lc.ModelError):
        is_retryable = True

    class ProviderPolicy(lc.ModelError):
        pass

    assert classify_failure(ProviderOverloaded("529")) is K.TRANSIENT
    assert classify_failure(ProviderPolicy("nope")) is K.UNKNOWN


# 3. one malformed artifact in a parallel turn ----------------------------------------------


def _turn(*results: tuple[str, dict[str, Any] | None, str]) -> list[Any]:
    calls = [{"name": name, "args": {}, "id": f"p{i}"} for i, (name, _, _) in enumerate(results)]
    out: list[Any] = [AIMessage("", tool_calls=calls)]
    for i, (name, artifact, status) in enumerate(results):
        out.append(ToolMessage("x", tool_call_id=f"p{i}", name=name, artifact=artifact,
                               status=status))  # fmt: skip
    return out


@pytest.mark.parametrize(
    ("sibling", "route"),
    [
        (failure_artifact("permission", "HR only"), "refuse"),
        (failure_artifact("ambiguous", "which one?"), "clarify"),
        (failure_artifact("precondition", "gone"), "replan"),
        (None, "continue"),
    ],
)
def test_a_malformed_artifact_is_reported_and_the_siblings_still_route(
    sibling: dict[str, Any] | None, route: str
) -> None:
    bad = {"agent_guards_failure": {"kind": "weird"}}
    for order in (1, -1):
        pair = [("lookup", bad, "success"), ("salary", sibling, "success")][::order]
        d = route_failures(_turn(*pair))
        assert d.data["route"] == route
        reported = [f for f in d.data["failures"] if f["reason"] == "invalid_input"]
        assert [f["tool"] for f in reported] == ["lookup"]
    only_bad = route_failures(_turn(("lookup", bad, "success")))
    assert (only_bad.verdict, only_bad.reason) == (Verdict.CONTINUE, "invalid_input")


def test_a_malformed_artifact_earlier_in_the_history_does_not_poison_later_decisions() -> None:
    history = [
        *_turn(("lookup", {"agent_guards_failure": {"kind": "weird"}}, "success")),
        *_turn(("lookup", failure_artifact("permission", "no"), "error")),
    ]
    assert route_failures(history).data["route"] == "refuse"


# 4. failures returned as ordinary strings --------------------------------------------------


TUTORIAL = "Not permitted to reschedule to a flight that departs in less than 3 hours."


@pytest.mark.parametrize(
    ("policy", "tool", "text", "kind"),
    [
        (RetryRouterPolicy(), "update_ticket", TUTORIAL, None),  # invisible without a detector
        (
            RetryRouterPolicy(failure_patterns={"update_ticket": [(r"^not permitted", "permission")]}),
            "update_ticket", TUTORIAL, K.PERMISSION,
        ),
        (   # the pattern is per tool: another tool's same text stays a result
            RetryRouterPolicy(failure_patterns={"update_ticket": [(r"^not permitted", "permission")]}),
            "search_flights", TUTORIAL, None,
        ),
        (   # tau-bench style: every tool returns "Error: ..." text
            RetryRouterPolicy(failure_patterns={"*": [(r"^Error: .*not found", "precondition"),
                                                      (r"^Error:", "unknown")]}),
            "get_user_details", "Error: user not found", K.PRECONDITION,
        ),
        (
            RetryRouterPolicy(failure_patterns={"*": [(r"^Error:", "unknown")]}),
            "update_payment", "Error: balance is not enough", K.UNKNOWN,
        ),
        (
            RetryRouterPolicy(detect=lambda tool, text: "quota" if "credits" in text else None),
            "search", "You have no credits left this month", K.QUOTA,
        ),
        (RetryRouterPolicy(detect=lambda tool, text: None), "search", "fine", None),
    ],
)  # fmt: skip
def test_per_tool_failure_detectors(
    policy: RetryRouterPolicy, tool: str, text: str, kind: FailureKind | None
) -> None:
    message = ToolMessage(text, tool_call_id="c1", name=tool)
    found = policy.failure_of(message)
    assert (found.kind if found else None) is kind
    assert failure_of(message) is None, "the policy-free reader is unchanged"


def test_a_detected_refusal_routes_refuse_in_the_history() -> None:
    policy = RetryRouterPolicy(
        failure_patterns={"update_ticket": [(r"^not permitted", "permission")]}
    )
    history = [
        AIMessage("", tool_calls=[{"name": "update_ticket", "args": {}, "id": "c1"}]),
        ToolMessage(TUTORIAL, tool_call_id="c1", name="update_ticket"),
    ]
    assert route_failures(history).data["route"] == "continue"
    assert route_failures(history, policy=policy).data["route"] == "refuse"


def test_an_artifact_wins_over_a_detector() -> None:
    policy = RetryRouterPolicy(failure_patterns={"*": [(".*", "permission")]})
    message = ToolMessage("x", tool_call_id="c1", name="t",
                          artifact=failure_artifact("transient", "busy"))  # fmt: skip
    assert policy.failure_of(message).kind is K.TRANSIENT  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"failure_patterns": {"t": [("(", "permission")]}}, "failure_patterns['t']: '(' is not a valid regex"),
        ({"failure_patterns": {"t": [("x", "nope")]}}, "failure_patterns['t']='nope' is not allowed"),
        ({"failure_patterns": {"t": "x"}}, "failure_patterns['t'] must be a list"),
        ({"failure_patterns": ["x"]}, "failure_patterns must map tool"),
        ({"detect": "x"}, "RetryRouterPolicy.detect must be a callable"),
    ],
)  # fmt: skip
def test_detector_config_errors_name_the_field(kwargs: dict[str, Any], error: str) -> None:
    with pytest.raises((TypeError, ValueError)) as info:
        RetryRouterPolicy(**kwargs)
    assert error in str(info.value)


def test_a_detector_returning_a_bad_kind_names_it() -> None:
    policy = RetryRouterPolicy(detect=lambda tool, text: "flaky")
    with pytest.raises(ValueError, match=r"RetryRouterPolicy.detect\('t', ...\)='flaky'"):
        policy.failure_of(ToolMessage("x", tool_call_id="c1", name="t"))


# 5. Retry-After 0 / negative / past dates; no overflow -------------------------------------


class _Headers(Exception):
    def __init__(self, status: int, headers: dict[str, str]) -> None:
        super().__init__(f"HTTP {status}")
        self.response = type("R", (), {"status_code": status, "headers": headers})()


PAST = format_datetime(NOW - timedelta(minutes=5), usegmt=True)
LATER = format_datetime(NOW + timedelta(seconds=7), usegmt=True)


@pytest.mark.parametrize(
    ("headers", "retry_after"),
    [
        ({"retry-after": "0"}, 0.0),
        ({"retry-after": "-3"}, 0.0),  # negative: retry now
        ({"retry-after": PAST}, 0.0),  # a date already past: retry now
        ({"retry-after": LATER}, 7.0),
        ({"retry-after-ms": "0"}, 0.0),
        ({"retry-after": "soon"}, None),  # unreadable: the backoff decides
        ({}, None),
    ],
)
def test_retry_after_meanings(headers: dict[str, str], retry_after: float | None) -> None:
    failure = describe_failure(_Headers(429, headers), now=NOW)
    assert failure.retry_after == retry_after
    d = decide_failure(failure, call_id="c1", tool="q", signature="q", effect="read")
    assert d.data["route"] == "retry"
    if retry_after is not None:
        assert d.data["delay"] == retry_after, "as given: no jittered backoff on top"


def test_retry_after_zero_survives_the_artifact_round_trip() -> None:
    failure = describe_failure(TransientToolError("busy", retry_after=0))
    message = failure_message(failure, tool="q", tool_call_id="c1")
    assert message.artifact["agent_guards_failure"]["retry_after"] == 0.0
    again = failure_of(message)
    assert again is not None and again.retry_after == 0.0
    assert TransientToolError(retry_after=-1).retry_after == 0.0
    assert failure_of(ToolMessage("x", tool_call_id="c", artifact=failure_artifact(
        "transient", retry_after=-2))).retry_after == 0.0  # type: ignore[union-attr]  # fmt: skip


@pytest.mark.parametrize("jitter", ["none", "full", "equal"])
@pytest.mark.parametrize("attempt", [1, 32, 64, 1000, 10**6])
def test_backoff_never_overflows(jitter: Any, attempt: int) -> None:
    b = Backoff(factor=1e10, base_delay=1, max_delay=60, jitter=jitter)
    delay = b.delay(attempt)
    assert 0 <= delay <= 60
    if jitter == "none":
        assert delay == (1.0 if attempt == 1 else 60.0)
    assert Backoff(factor=1e308, base_delay=0).delay(attempt) == 0.0


# 6. half-open admits one trial (or half_open_max_calls) ------------------------------------


def _opened(cb: CircuitBreaker, store: Any, tool: str = "svc", at: float = 0.0) -> None:
    for i in range(cb.failure_threshold):
        cb.record(store, tool, ok=False, now=at + i * 0.001)


@pytest.mark.parametrize("trials", [1, 3])
def test_half_open_admits_only_the_trial_calls_of_20_concurrent_callers(trials: int) -> None:
    store = InMemoryStore()
    cb = CircuitBreaker(failure_threshold=2, cooldown=30, half_open_max_calls=trials)
    _opened(cb, store)
    results: list[tuple[bool, str]] = []
    lock = threading.Lock()
    barrier = threading.Barrier(20)

    def caller() -> None:
        barrier.wait()
        got = cb.allow(store, "svc", now=40)
        with lock:
            results.append(got)

    threads = [threading.Thread(target=caller) for _ in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert (
        sorted(results) == [(False, "half_open")] * (20 - trials) + [(True, "half_open")] * trials
    )


def test_half_open_walk_trial_by_trial() -> None:
    store = InMemoryStore()
    cb = CircuitBreaker(failure_threshold=2, cooldown=30, success_threshold=2)
    _opened(cb, store)
    assert cb.allow(store, "svc", now=10) == (False, "open")
    assert cb.allow(store, "svc", now=31) == (True, "half_open")  # the trial
    assert cb.allow(store, "svc", now=32) == (False, "half_open")  # others wait
    cb.record(store, "svc", ok=True, now=33)  # 1 of 2 successes: the next trial
    assert cb.allow(store, "svc", now=34) == (True, "half_open")
    assert cb.allow(store, "svc", now=34) == (False, "half_open")
    cb.record(store, "svc", ok=True, now=35)
    assert [cb.allow(store, "svc", now=36) for _ in range(3)] == [(True, "closed")] * 3


def test_a_failed_trial_reopens_and_a_stuck_trial_frees_its_slot() -> None:
    store = InMemoryStore()
    cb = CircuitBreaker(failure_threshold=2, cooldown=30)
    _opened(cb, store)
    assert cb.allow(store, "svc", now=31) == (True, "half_open")
    cb.record(store, "svc", ok=False, now=32)  # the trial failed: open again from 32
    assert cb.allow(store, "svc", now=50) == (False, "open")
    assert cb.allow(store, "svc", now=62) == (True, "half_open")  # never reports back
    assert cb.allow(store, "svc", now=80) == (False, "half_open")
    assert cb.allow(store, "svc", now=93) == (True, "half_open"), "freed one cooldown later"


# 8. the breaker uses the real clock ------------------------------------------------------


def test_the_breaker_reads_its_own_clock_not_a_pinned_one() -> None:
    store = InMemoryStore()
    ticks = {"now": 1000.0}
    cb = CircuitBreaker(failure_threshold=1, cooldown=30, clock=lambda: ticks["now"])
    cb.record(store, "svc", ok=False)
    value = cb.read(store, "svc")
    assert value is not None and value["opened_at"] == 1000.0
    assert cb.allow(store, "svc") == (False, "open")
    ticks["now"] = 1031.0
    assert cb.allow(store, "svc") == (True, "half_open")


# 9. failure-rate windows ------------------------------------------------------------------


def _rate_walk(cb: CircuitBreaker, outcomes: str) -> list[str]:
    value: dict[str, Any] | None = None
    states = []
    for i, o in enumerate(outcomes):
        value = cb.transition(value, ok=o == "s", now=float(i))
        states.append(cb.state(value, now=float(i))[0])
    return states


@pytest.mark.parametrize(
    ("outcomes", "states"),
    [
        # minimum_calls=4: three failures alone never open it
        ("fff", "ccc"),
        ("ffff", "ccco"),  # 4 of 4 = 100% >= 50%
        ("sfsf", "ccco"),  # 2 of 4 = 50%: at the threshold opens (>=)
        ("sssf", "cccc"),  # 1 of 4 = 25%
        ("ssfsf", "cccco"),  # the window slides: s,f,s,f at call 5 = 50%
        ("fsssss", "cccccc"),  # the old failure slides out: never above 25%
        ("sssfsfs", "cccccoo"),  # open at s,f,s,f (call 6), still open (cooldown)
    ],
)
def test_failure_rate_window_truth_table(outcomes: str, states: str) -> None:
    cb = CircuitBreaker(
        failure_rate_threshold=50, sliding_window_size=4, minimum_calls=4, cooldown=30
    )
    assert "".join(_rate_walk(cb, outcomes)) == states


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"failure_rate_threshold": 0}, "failure_rate_threshold must be in (0, 100], got 0"),
        ({"failure_rate_threshold": 101}, "failure_rate_threshold must be in (0, 100], got 101"),
        ({"sliding_window_size": 0}, "sliding_window_size must be an int >= 1"),
        ({"minimum_calls": 0}, "minimum_calls must be an int >= 1"),
        ({"half_open_max_calls": 0}, "half_open_max_calls must be an int >= 1"),
        ({"cooldown": 60, "window": 30}, "window must exceed cooldown (60.0s), got 30"),
        ({"clock": 3}, "CircuitBreaker.clock must be a callable"),
    ],
)
def test_breaker_config_errors_name_the_field(kwargs: dict[str, Any], error: str) -> None:
    with pytest.raises((TypeError, ValueError)) as info:
        CircuitBreaker(**kwargs)
    assert error in str(info.value)


# 10. the retry budget ---------------------------------------------------------------------


def test_retry_budget_tokens_per_slot_and_tool() -> None:
    store = InMemoryStore()
    budget = RetryBudget(max_retries=3, per=2.0)
    assert [budget.acquire(store, "q", now=10.0) for _ in range(4)] == [True] * 3 + [False]
    assert budget.acquire(store, "other", now=10.0) is True
    assert budget.acquire(store, "q", now=11.9) is False  # same slot [10, 12)
    assert budget.acquire(store, "q", now=12.0) is True


def test_a_token_claimed_while_its_slot_ended_is_replaced_by_one_of_the_next_slot() -> None:
    """A busy store can take long enough that the slot ends during the claim: the retry
    would then start in a slot whose count it is not in. It takes a token of that slot."""
    times = iter([9.99, 10.01, 10.02, 10.03])  # the claim of slot 9 ends in slot 10
    store = InMemoryStore()
    budget = RetryBudget(max_retries=2, per=1.0, clock=lambda: next(times))
    assert budget.acquire(store, "q") is True
    slots = sorted(item.value["slot"] for item in store.search(("agent_guards", "retry_budget")))
    assert slots == [9, 10]  # the slot-9 token is spent; the retry counts in slot 10


def test_retry_budget_is_shared_by_concurrent_callers() -> None:
    store = InMemoryStore()
    budget = RetryBudget(max_retries=5, per=60.0)
    got: list[bool] = []
    barrier = threading.Barrier(30)

    def caller() -> None:
        barrier.wait()
        got.append(budget.acquire(store, "q", now=0.0))

    threads = [threading.Thread(target=caller) for _ in range(30)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert got.count(True) == 5


def test_no_retry_token_routes_fallback() -> None:
    failure = Failure(K.TRANSIENT, circuit_open=True, message="spent",
                      error_type="agent_guards.retry_router.RetryBudget")  # fmt: skip
    d = decide_failure(failure, call_id="c1", tool="q", signature="q", effect="read")
    assert (d.verdict, d.reason) == (Verdict.FALLBACK, "retry_budget_exhausted")


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"max_retries": 0}, "RetryBudget.max_retries must be an int >= 1"),
        ({"per": 0}, "RetryBudget.per must be seconds > 0"),
        ({"namespace": ("a.b",)}, "RetryBudget.namespace labels cannot contain '.'"),
    ],
)
def test_retry_budget_config_errors(kwargs: dict[str, Any], error: str) -> None:
    with pytest.raises(ValueError) as info:
        RetryBudget(**kwargs)
    assert error in str(info.value)


@pytest.mark.parametrize(
    ("effect", "route", "reason"),
    [
        ("write", "clarify", "outcome_unknown"),
        (None, "replan", "unknown"),
        ("read", "replan", "unknown"),
    ],
)
def test_a_declared_write_failing_for_no_known_reason_is_not_replanned_blindly(
    effect: str | None, route: str, reason: str
) -> None:
    """A transfer that debits, then raises RuntimeError: it may have done its work, so a
    new plan could do it twice. It is checked first, as a timed-out write is; a read, or a
    tool that declares nothing, keeps the replan."""
    from agent_guards.retry_router import decide_failure, describe_failure

    failure = describe_failure(RuntimeError("boom"))
    decision = decide_failure(failure, call_id="c1", tool="transfer", signature="transfer:{}",
                              effect=effect)  # fmt: skip
    assert (decision.data["route"], decision.reason) == (route, reason)
