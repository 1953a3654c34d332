"""retry_router's pure core: classification, routing, backoff and the breaker state machine."""

from __future__ import annotations

import itertools
import socket
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langgraph.prebuilt.tool_node import ToolInvocationError
from langgraph.store.memory import InMemoryStore
from pydantic import BaseModel, ValidationError

from agent_guards.core import CircuitOpen, Effect, InvalidInputError, ToolFailure, Verdict
from agent_guards.retry_router import (
    DEFAULT_ROUTES,
    AmbiguousInput,
    Backoff,
    CircuitBreaker,
    EmptyResult,
    Failure,
    FailureKind,
    InvalidArgsError,
    PermissionDenied,
    PreconditionFailed,
    QuotaExceeded,
    RetryRouterPolicy,
    SafetyViolation,
    TransientToolError,
    classify_failure,
    decide_failure,
    describe_failure,
    failure_artifact,
    failure_message,
    route_failures,
)
from agent_guards.tool_guard.wrapper import record_effect

K = FailureKind


# fakes of httpx / openai errors (classified by attributes and names, never imported) --------


class _Response:
    def __init__(self, status_code: int, headers: dict[str, str] | None = None) -> None:
        self.status_code = status_code
        self.headers = headers or {}


class HTTPStatusError(Exception):
    def __init__(self, status: int, headers: dict[str, str] | None = None) -> None:
        super().__init__(f"HTTP {status}")
        self.response = _Response(status, headers)


class RateLimitError(Exception):
    def __init__(self, message: str, code: str | None = None) -> None:
        super().__init__(message)
        self.status_code = 429
        self.code = code
        self.body = {"error": {"code": code}}


class BadRequestError(Exception):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.status_code = 400


class APITimeoutError(Exception):
    pass


class NotFoundError(Exception):
    pass


class AuthenticationError(Exception):
    pass


class Args(BaseModel):
    q: str
    limit: int


def _validation_error() -> ValidationError:
    try:
        Args.model_validate({"limit": "many"})
    except ValidationError as err:
        return err
    raise AssertionError("unreachable")


EXCEPTIONS: list[tuple[str, BaseException, FailureKind]] = [
    ("TimeoutError", TimeoutError("slow"), K.TRANSIENT),
    ("asyncio.TimeoutError", TimeoutError(), K.TRANSIENT),
    ("socket.timeout", socket.timeout("slow"), K.TRANSIENT),  # noqa: UP041 - the alias libraries raise
    ("ConnectionResetError", ConnectionResetError("reset"), K.TRANSIENT),
    ("PermissionError", PermissionError("no"), K.PERMISSION),
    ("pydantic ValidationError", _validation_error(), K.INVALID_ARGS),
    ("http 429", HTTPStatusError(429), K.TRANSIENT),
    ("http 503", HTTPStatusError(503), K.TRANSIENT),
    ("http 501", HTTPStatusError(501), K.UNKNOWN),
    ("http 404", HTTPStatusError(404), K.PRECONDITION),
    ("http 409", HTTPStatusError(409), K.PRECONDITION),
    ("http 401", HTTPStatusError(401), K.PERMISSION),
    ("http 403", HTTPStatusError(403), K.PERMISSION),
    ("http 400", HTTPStatusError(400), K.INVALID_ARGS),
    ("http 422", HTTPStatusError(422), K.INVALID_ARGS),
    ("http 402", HTTPStatusError(402), K.QUOTA),
    ("openai rate limit", RateLimitError("Rate limit reached"), K.TRANSIENT),
    (
        "openai insufficient_quota",
        RateLimitError("You exceeded your quota", "insufficient_quota"),
        K.QUOTA,
    ),
    ("openai content policy", BadRequestError("blocked by content_policy"), K.SAFETY),
    ("openai bad request", BadRequestError("unknown parameter"), K.INVALID_ARGS),
    ("APITimeoutError by name", APITimeoutError("t"), K.TRANSIENT),
    ("NotFoundError by name", NotFoundError("gone"), K.PRECONDITION),
    ("AuthenticationError by name", AuthenticationError("bad key"), K.PERMISSION),
    ("TransientToolError", TransientToolError("busy", retry_after=2), K.TRANSIENT),
    ("InvalidArgsError", InvalidArgsError("bad", field_errors={"q": "required"}), K.INVALID_ARGS),
    ("PreconditionFailed", PreconditionFailed("order shipped"), K.PRECONDITION),
    ("AmbiguousInput", AmbiguousInput("two Springfields"), K.AMBIGUOUS),
    ("EmptyResult business", EmptyResult("no flights"), K.EMPTY_BUSINESS),
    ("EmptyResult error", EmptyResult("upstream empty", business=False), K.EMPTY_ERROR),
    ("PermissionDenied", PermissionDenied("hr only"), K.PERMISSION),
    ("SafetyViolation", SafetyViolation("unsafe"), K.SAFETY),
    ("QuotaExceeded", QuotaExceeded("monthly cap"), K.QUOTA),
    ("CircuitOpen", CircuitOpen(guard="retry_router", reason="circuit_open"), K.TRANSIENT),
    ("KeyError", KeyError("boom"), K.UNKNOWN),
    ("ValueError", ValueError("bad"), K.UNKNOWN),
    ("RuntimeError", RuntimeError("?"), K.UNKNOWN),
]


@pytest.mark.parametrize(
    ("error", "kind"), [e[1:] for e in EXCEPTIONS], ids=[e[0] for e in EXCEPTIONS]
)
def test_exceptions(error: BaseException, kind: FailureKind) -> None:
    assert classify_failure(error) is kind
    assert describe_failure(error).original is error


def test_typed_errors_are_tool_failures_with_details() -> None:
    for cls in (
        TransientToolError,
        InvalidArgsError,
        PreconditionFailed,
        AmbiguousInput,
        EmptyResult,
        PermissionDenied,
        SafetyViolation,
        QuotaExceeded,
    ):
        assert issubclass(cls, ToolFailure)
    f = describe_failure(InvalidArgsError("bad", field_errors={"start": "after end"}))
    assert f.field_errors == {"start": "after end"}
    f = describe_failure(AmbiguousInput("x", question="Which Springfield?", options=["IL", "MA"]))
    assert (f.question, f.options) == ("Which Springfield?", ("IL", "MA"))
    assert (
        describe_failure(TransientToolError("x", retry_after=timedelta(seconds=3))).retry_after
        == 3.0
    )
    assert describe_failure(CircuitOpen(guard="g", reason="r")).circuit_open


def test_unknown_keeps_the_original_and_its_type() -> None:
    err = KeyError("missing column")
    f = describe_failure(err)
    assert (f.kind, f.original, f.error_type) == (K.UNKNOWN, err, "builtins.KeyError")
    assert f.to_artifact()["agent_guards_failure"]["error_type"] == "builtins.KeyError"


def test_validation_field_errors() -> None:
    f = describe_failure(_validation_error())
    assert set(f.field_errors) == {"q", "limit"}
    err = ToolInvocationError(
        "search",
        _validation_error(),
        {"limit": "many"},
        [{"loc": ("q",), "msg": "Field required", "type": "missing", "input": {}}],
    )  # type: ignore[list-item]
    f = describe_failure(err)
    assert (f.kind, f.field_errors) == (K.INVALID_ARGS, {"q": "Field required"})


@pytest.mark.parametrize(
    ("headers", "now", "expected"),
    [
        ({"retry-after": "7"}, None, 7.0),
        ({"Retry-After": "1.5"}, None, 1.5),
        ({"retry-after-ms": "250"}, None, 0.25),
        (
            {
                "retry-after": format_datetime(
                    datetime(2026, 1, 1, 0, 0, 30, tzinfo=UTC), usegmt=True
                )
            },
            datetime(2026, 1, 1, tzinfo=UTC),
            30.0,
        ),
        ({"retry-after": "Wed, 01 Jan 2026 00:00:30 GMT"}, None, None),
        ({"retry-after": "soon"}, None, None),
        ({}, None, None),
    ],
)
def test_retry_after_is_read(
    headers: dict[str, str], now: datetime | None, expected: float | None
) -> None:
    assert describe_failure(HTTPStatusError(429, headers), now=now).retry_after == expected


@pytest.mark.parametrize(
    ("code", "kind"),
    [
        (429, K.TRANSIENT),
        (408, K.TRANSIENT),
        (500, K.TRANSIENT),
        (502, K.TRANSIENT),
        (504, K.TRANSIENT),
        (501, K.UNKNOWN),
        (400, K.INVALID_ARGS),
        (422, K.INVALID_ARGS),
        (401, K.PERMISSION),
        (403, K.PERMISSION),
        (451, K.PERMISSION),
        (402, K.QUOTA),
        (404, K.PRECONDITION),
        (410, K.PRECONDITION),
        (412, K.PRECONDITION),
        (418, K.UNKNOWN),
    ],
)
def test_status_codes(code: int, kind: FailureKind) -> None:
    assert classify_failure(code) is kind


@pytest.mark.parametrize("value", [200, 302, 99, 600, True, "429", None, 4.29])
def test_not_a_failure_is_rejected(value: Any) -> None:
    with pytest.raises(InvalidInputError):
        classify_failure(value)


MESSAGES: list[tuple[str, ToolMessage, FailureKind]] = [
    (
        "artifact wins over text",
        ToolMessage("fine", tool_call_id="1", artifact=failure_artifact("empty_business", "none")),
        K.EMPTY_BUSINESS,
    ),
    (
        "artifact on an error",
        ToolMessage("x", tool_call_id="1", status="error", artifact=failure_artifact(K.QUOTA)),
        K.QUOTA,
    ),
    (
        "ToolNode template, timeout",
        ToolMessage(
            "Error: TimeoutError('slow')\n Please fix your mistakes.",
            tool_call_id="1",
            status="error",
        ),
        K.TRANSIENT,
    ),
    (
        "LangGraph invalid args template",
        ToolMessage(
            "Error invoking tool 'search' with kwargs {} with error:\n q: Field required\n Please fix the error and try again.",
            tool_call_id="1",
            status="error",
        ),
        K.INVALID_ARGS,
    ),
    (
        "unknown tool name",
        ToolMessage(
            "Error: serch is not a valid tool, try one of [search].",
            tool_call_id="1",
            status="error",
        ),
        K.INVALID_ARGS,
    ),
    (
        "403 text",
        ToolMessage("upstream said: Forbidden", tool_call_id="1", status="error"),
        K.PERMISSION,
    ),
    (
        "status code in text",
        ToolMessage("request failed, status code 503", tool_call_id="1", status="error"),
        K.TRANSIENT,
    ),
    (
        "rate limit text",
        ToolMessage("Too Many Requests", tool_call_id="1", status="error"),
        K.TRANSIENT,
    ),
    (
        "quota text",
        ToolMessage("insufficient_quota: add credits", tool_call_id="1", status="error"),
        K.QUOTA,
    ),
    (
        "content policy text",
        ToolMessage("rejected by content policy", tool_call_id="1", status="error"),
        K.SAFETY,
    ),
    (
        "not found text",
        ToolMessage("order 42 not found", tool_call_id="1", status="error"),
        K.PRECONDITION,
    ),
    (
        "ambiguous text",
        ToolMessage("ambiguous city name", tool_call_id="1", status="error"),
        K.AMBIGUOUS,
    ),
    (
        "other text",
        ToolMessage("something odd happened", tool_call_id="1", status="error"),
        K.UNKNOWN,
    ),
]


@pytest.mark.parametrize(
    ("message", "kind"), [m[1:] for m in MESSAGES], ids=[m[0] for m in MESSAGES]
)
def test_tool_messages(message: ToolMessage, kind: FailureKind) -> None:
    assert classify_failure(message) is kind


def test_invalid_args_text_gives_field_errors() -> None:
    message = MESSAGES[3][1]
    assert describe_failure(message).field_errors == {"q": "Field required"}


@pytest.mark.parametrize(
    ("message", "field"),
    [
        (ToolMessage("ok", tool_call_id="t1"), "status"),
        (
            ToolMessage("x", tool_call_id="t1", artifact={"agent_guards_failure": {"kind": "meh"}}),
            "agent_guards_failure.kind",
        ),
        (
            ToolMessage("x", tool_call_id="t1", artifact={"agent_guards_failure": "transient"}),
            "agent_guards_failure",
        ),
        (
            ToolMessage(
                "x",
                tool_call_id="t1",
                artifact={"agent_guards_failure": {"kind": "quota", "colour": 1}},
            ),
            "agent_guards_failure",
        ),
        (
            ToolMessage(
                "x",
                tool_call_id="t1",
                artifact={"agent_guards_failure": {"kind": "transient", "retry_after": "soon"}},
            ),
            "agent_guards_failure.retry_after",
        ),
    ],
)
def test_bad_tool_messages_name_item_and_field(message: ToolMessage, field: str) -> None:
    with pytest.raises(InvalidInputError) as info:
        describe_failure(message)
    assert (info.value.item, info.value.field) == ("t1", field)


def test_failure_message_is_precise() -> None:
    f = describe_failure(InvalidArgsError("bad", field_errors={"start": "must be before end"}))
    m = failure_message(f, tool="book", tool_call_id="c9", attempt=2)
    assert m.status == "error" and "start: must be before end" in str(m.content)
    assert m.response_metadata["agent_guards"]["attempt"] == 2
    assert describe_failure(m).field_errors == {"start": "must be before end"}
    empty = failure_message(describe_failure(EmptyResult("no flights")), tool="f", tool_call_id="c")
    assert empty.status == "success" and classify_failure(empty) is K.EMPTY_BUSINESS


# backoff ----------------------------------------------------------------------------


def test_backoff_schedule_and_cap() -> None:
    b = Backoff(base_delay=0.5, factor=3, max_delay=10, max_attempts=5, jitter="none")
    assert b.schedule() == [0.5, 1.5, 4.5, 10.0]
    assert b.delay(2, retry_after=4.0) == 4.0
    assert Backoff(base_delay=timedelta(seconds=2)).base_delay == 2.0


def test_backoff_jitter_is_deterministic_per_key() -> None:
    b = Backoff()
    assert b.delay(2, key="call_1") == b.delay(2, key="call_1")
    assert len({b.delay(2, key=f"call_{i}") for i in range(20)}) > 10
    equal = Backoff(jitter="equal", max_delay=100)
    assert all(2.0 <= equal.delay(3, key=str(i)) <= 4.0 for i in range(50))


@settings(max_examples=200, deadline=None)
@given(
    st.integers(1, 30),
    st.text(max_size=8),
    st.floats(0.01, 5),
    st.floats(1, 4),
    st.floats(0.01, 100),
)
def test_law_full_jitter_stays_in_bounds(
    attempt: int, key: str, base: float, factor: float, cap: float
) -> None:
    b = Backoff(base_delay=base, factor=factor, max_delay=cap)
    ceiling = min(cap, base * factor ** (attempt - 1))
    assert 0 <= b.delay(attempt, key=key) <= ceiling + 1e-9


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"base_delay": -1}, "Backoff.base_delay must be seconds >= 0"),
        ({"factor": 0.5}, "Backoff.factor must be a number >= 1, got 0.5"),
        ({"max_attempts": 0}, "Backoff.max_attempts must be an int >= 1, got 0"),
        (
            {"jitter": "random"},
            "Backoff.jitter='random' is not allowed; allowed: 'full', 'equal', 'none'",
        ),
        ({"max_delay": float("nan")}, "Backoff.max_delay must be seconds >= 0"),
    ],
)
def test_backoff_rejects_bad_values(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=None) as info:
        Backoff(**kwargs)
    assert message in str(info.value)


# circuit breaker --------------------------------------------------------------------


def _walk(cb: CircuitBreaker, events: list[tuple[float, bool]]) -> list[str]:
    value = None
    states = []
    for now, ok in events:
        value = cb.transition(value, ok=ok, now=now)
        states.append(cb.state(value, now=now))
    return states


@pytest.mark.parametrize(
    ("events", "states"),
    [
        ([(0, False), (1, False)], ["closed", "closed"]),
        ([(0, False), (1, False), (2, False)], ["closed", "closed", "open"]),
        # a success takes one failure off the count
        ([(0, False), (1, True), (2, False), (3, False)], ["closed"] * 4),
        ([(0, False), (1, True), (2, False), (3, False), (4, False)], ["closed"] * 4 + ["open"]),
        ([(0, False)] * 3 + [(40, True)], ["closed", "closed", "open", "half_open"]),
        (
            [(0, False)] * 3 + [(40, True), (41, True)],
            ["closed", "closed", "open", "half_open", "closed"],
        ),
        ([(0, False)] * 3 + [(40, False)], ["closed", "closed", "open", "open"]),
        (
            [(0, False)] * 3 + [(40, True), (41, False), (50, True)],
            ["closed", "closed", "open", "half_open", "open", "open"],
        ),
    ],
)
def test_breaker_state_machine(events: list[tuple[float, bool]], states: list[str]) -> None:
    cb = CircuitBreaker(failure_threshold=3, cooldown=30, success_threshold=2)
    assert _walk(cb, events) == states


def test_breaker_in_a_store() -> None:
    store = InMemoryStore()
    cb = CircuitBreaker(failure_threshold=2, cooldown=timedelta(seconds=10))
    assert cb.allow(store, "quote", now=0) == (True, "closed")
    cb.record(store, "quote", ok=False, now=1)
    cb.record(store, "quote", ok=False, now=2)
    assert cb.allow(store, "quote", now=5) == (False, "open")
    assert cb.allow(store, "other", now=5) == (True, "closed")
    value = cb.read(store, "quote", now=5)
    assert value is not None
    assert {k: value[k] for k in ("state", "failures", "opened_at", "tool", "policy")} == {
        "state": "open",
        "failures": 2,
        "opened_at": 2,
        "tool": "quote",
        "policy": "CircuitBreaker@1",
    }
    assert cb.allow(store, "quote", now=12) == (True, "half_open")
    assert cb.allow(store, "quote", now=12) == (False, "half_open"), "one trial at a time"
    cb.record(store, "quote", ok=True, now=12)
    cb.record(store, "quote", ok=True, now=13)
    assert cb.allow(store, "quote", now=13) == (True, "closed")


async def test_breaker_async_store_paths() -> None:
    store = InMemoryStore()
    cb = CircuitBreaker(failure_threshold=1)
    await cb.arecord(store, "t", ok=False, now=0)
    assert await cb.aallow(store, "t", now=1) == (False, "open")


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 5), st.booleans()), max_size=30))
def test_law_breaker_never_opens_below_the_threshold(steps: list[tuple[float, bool]]) -> None:
    cb = CircuitBreaker(failure_threshold=4, cooldown=60, success_threshold=2)
    value, now = None, 0.0
    failures = 0
    for dt, ok in steps:
        now += dt
        value = cb.transition(value, ok=ok, now=now)
        failures += 0 if ok else 1
        state = cb.state(value, now=now)
        assert state in ("closed", "open", "half_open")
        if failures < 4:
            assert state == "closed"


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"failure_threshold": 0}, "failure_threshold must be an int >= 1, got 0"),
        ({"cooldown": 0}, "cooldown must be seconds > 0"),
        ({"namespace": ("agent.guards",)}, "namespace labels cannot contain '.'"),
        ({"counted_kinds": {"flaky"}}, "counted_kinds='flaky' is not allowed"),
    ],
)
def test_breaker_rejects_bad_values(kwargs: dict[str, Any], error: str) -> None:
    with pytest.raises(ValueError) as info:
        CircuitBreaker(**kwargs)
    assert error in str(info.value)


# routing ----------------------------------------------------------------------------

_ids = itertools.count(1)


def failed(
    tool: str,
    args: dict[str, Any],
    failure: Failure | BaseException | str,
    *,
    attempt: int = 1,
    effect: str | None = "read",
) -> list[BaseMessage]:
    """A failed call; its effect recorded on the result as ToolCallGuard records it (the
    retry mechanics below are about a read-only tool unless a row says otherwise)."""
    cid = f"c{next(_ids)}"
    ai = AIMessage(content="", tool_calls=[{"name": tool, "args": args, "id": cid}])
    if isinstance(failure, str):
        return [ai, ToolMessage(failure, tool_call_id=cid, name=tool, status="error")]
    f = failure if isinstance(failure, Failure) else describe_failure(failure)
    message = failure_message(f, tool=tool, tool_call_id=cid, attempt=attempt)
    if effect is not None:
        message = record_effect(message, Effect(effect))
    return [ai, message]


def ok(tool: str, args: dict[str, Any], text: str = "fine") -> list[BaseMessage]:
    cid = f"c{next(_ids)}"
    return [
        AIMessage(content="", tool_calls=[{"name": tool, "args": args, "id": cid}]),
        ToolMessage(text, tool_call_id=cid, name=tool),
    ]


Q = {"symbol": "X"}
ROUTING: list[tuple[str, list[BaseMessage], str, str]] = [
    ("no failure", ok("quote", Q), "continue", "no_failure"),
    ("transient, first attempt", failed("quote", Q, TimeoutError()), "retry", "transient"),
    (
        "transient, attempt 2 of 3",
        failed("quote", Q, TimeoutError(), attempt=2),
        "retry",
        "transient",
    ),
    (
        "transient, attempts used up",
        failed("quote", Q, TimeoutError(), attempt=3),
        "fallback",
        "retries_exhausted",
    ),
    (
        "retry-after beyond the cap",
        failed("quote", Q, TransientToolError("x", retry_after=600)),
        "fallback",
        "retry_after_too_long",
    ),
    (
        "re-issued call: no fresh quota",
        [*failed("quote", Q, TimeoutError(), attempt=2), *failed("quote", Q, TimeoutError())],
        "fallback",
        "retries_exhausted",
    ),
    (
        "success resets the count",
        [
            *failed("quote", Q, TimeoutError(), attempt=2),
            *ok("quote", Q),
            *failed("quote", Q, TimeoutError()),
        ],
        "retry",
        "transient",
    ),
    (
        "empty because broken",
        failed("quote", Q, EmptyResult("", business=False)),
        "retry",
        "empty_error",
    ),
    (
        "real no data",
        failed("quote", Q, EmptyResult("no trades today")),
        "continue",
        "empty_business",
    ),
    (
        "invalid args",
        failed("book", {"d": 1}, InvalidArgsError("x", field_errors={"d": "bad"})),
        "repair",
        "invalid_args",
    ),
    (
        "same invalid args twice",
        [
            *failed("book", {"d": 1}, InvalidArgsError("x")),
            *failed("book", {"d": 1}, InvalidArgsError("x")),
        ],
        "abstain",
        "same_invalid_args",
    ),
    (
        "new invalid args: repair again",
        [
            *failed("book", {"d": 1}, InvalidArgsError("x")),
            *failed("book", {"d": 2}, InvalidArgsError("x")),
        ],
        "repair",
        "invalid_args",
    ),
    (
        "3 repairs in a row are allowed",
        [m for i in range(3) for m in failed("book", {"d": i}, InvalidArgsError("x"))],
        "repair",
        "invalid_args",
    ),
    (
        "repairs run out",
        [m for i in range(4) for m in failed("book", {"d": i}, InvalidArgsError("x"))],
        "abstain",
        "repairs_exhausted",
    ),
    (
        "precondition",
        failed("cancel", {"o": 1}, PreconditionFailed("shipped")),
        "replan",
        "precondition",
    ),
    (
        "ambiguous",
        failed(
            "weather", {"city": "Springfield"}, AmbiguousInput("2 matches", options=["IL", "MA"])
        ),
        "clarify",
        "ambiguous",
    ),
    ("permission", failed("salary", {"e": 1}, PermissionError("hr only")), "refuse", "permission"),
    (
        "permission by status text",
        failed("salary", {"e": 1}, "HTTP 403 Forbidden"),
        "refuse",
        "permission",
    ),
    ("safety", failed("gen", {}, SafetyViolation("no")), "refuse", "safety"),
    ("quota", failed("llm", {}, QuotaExceeded("cap")), "fallback", "quota"),
    (
        "circuit open",
        failed("quote", Q, Failure(K.TRANSIENT, circuit_open=True)),
        "fallback",
        "circuit_open",
    ),
    ("unknown", failed("x", {}, KeyError("k")), "replan", "unknown"),
    (
        "a user turn does not refill attempts",
        [
            *failed("quote", Q, TimeoutError(), attempt=2),
            HumanMessage("again"),
            *failed("quote", Q, TimeoutError()),
        ],
        "fallback",
        "retries_exhausted",
    ),
]


@pytest.mark.parametrize(
    ("history", "route", "reason"), [r[1:] for r in ROUTING], ids=[r[0] for r in ROUTING]
)
def test_routing_truth_table(history: list[BaseMessage], route: str, reason: str) -> None:
    decision = route_failures(history)
    assert (decision.data["route"], decision.reason) == (route, reason)
    assert decision.verdict == Verdict(route)
    assert decision.guard == "retry_router" and decision.policy == "RetryRouterPolicy@1"


class _Reset(ConnectionResetError):
    pass


# A retry could repeat a write: a call that may write and may have run despite its failure
# is never retried blindly; a call turned away before it ran is retried whatever it does.
EFFECTS: list[tuple[str, BaseException | int, str | None, str, str]] = [
    ("a read that timed out", TimeoutError(), "read", "retry", "transient"),
    ("an idempotent write that timed out", TimeoutError(), "idempotent_write", "retry",
     "transient"),
    ("a write that timed out", TimeoutError(), "write", "clarify", "outcome_unknown"),
    ("an unknown tool that timed out", TimeoutError(), None, "clarify", "outcome_unknown"),
    ("a write whose connection dropped", _Reset(), "write", "clarify", "outcome_unknown"),
    ("a write answered 500", 500, "write", "clarify", "outcome_unknown"),
    ("a write answered 504", 504, "write", "clarify", "outcome_unknown"),
    ("a write answered 429", 429, "write", "retry", "transient"),
    ("a write answered 503", 503, "write", "retry", "transient"),
    ("a write whose connection was refused", ConnectionRefusedError(), "write", "retry",
     "transient"),
    ("an unknown tool answered 429", 429, None, "retry", "transient"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("error", "effect", "route", "reason"), [r[1:] for r in EFFECTS], ids=[r[0] for r in EFFECTS]
)
def test_effects_truth_table(
    error: BaseException | int, effect: str | None, route: str, reason: str
) -> None:
    history = failed("pay", {"amount": 5}, describe_failure(error), effect=effect)
    decision = route_failures(history)
    assert (decision.data["route"], decision.reason) == (route, reason)
    declared = failed("pay", {"amount": 5}, describe_failure(error), effect=None)
    by_name = route_failures(declared, effects={"pay": effect} if effect else None)
    assert (by_name.data["route"], by_name.reason) == (route, reason)  # effects= says the same


def test_an_unknown_outcome_says_what_to_check_and_how_to_allow_retries() -> None:
    decision = route_failures(failed("pay", {"amount": 5}, TimeoutError("slow"), effect="write"))
    assert "it may have run, so it was not retried" in decision.detail
    assert "mark pay idempotent or read-only to allow retries" in decision.detail
    policy = RetryRouterPolicy(on_unknown_outcome="abstain")
    history = failed("pay", {"amount": 5}, TimeoutError(), effect="write")
    assert route_failures(history, policy=policy).data["route"] == "abstain"
    with pytest.raises(ValueError, match="on_unknown_outcome='retry' is not allowed"):
        RetryRouterPolicy(on_unknown_outcome="retry")


def _batch(*results: tuple[str, Any]) -> list[BaseMessage]:
    calls = [{"name": n, "args": {"i": i}, "id": f"p{i}"} for i, (n, _) in enumerate(results)]
    out: list[BaseMessage] = [AIMessage(content="", tool_calls=calls)]
    for i, (n, err) in enumerate(results):
        out.append(
            ToolMessage("ok", tool_call_id=f"p{i}", name=n)
            if err is None
            else record_effect(
                failure_message(describe_failure(err), tool=n, tool_call_id=f"p{i}"), Effect.READ
            )
        )
    return out


@pytest.mark.parametrize(
    ("results", "route", "selected"),
    [
        ((("a", TimeoutError()), ("b", PermissionError())), "refuse", ("p1",)),
        ((("a", TimeoutError()), ("b", InvalidArgsError("x"))), "retry", ("p0",)),
        ((("a", TimeoutError()), ("b", TimeoutError()), ("c", None)), "retry", ("p0", "p1")),
        ((("a", AmbiguousInput("x")), ("b", QuotaExceeded("x"))), "clarify", ("p0",)),
        ((("a", PreconditionFailed("x")), ("b", InvalidArgsError("x"))), "replan", ("p0",)),
        ((("a", None), ("b", None)), "continue", ()),
    ],
)
def test_one_route_per_turn(
    results: tuple[tuple[str, Any], ...], route: str, selected: tuple[str, ...]
) -> None:
    decision = route_failures(_batch(*results))
    assert decision.data["route"] == route
    assert decision.selected_ids == selected
    assert len(decision.data["failures"]) == sum(1 for _, e in results if e is not None)


def test_retry_delay_comes_from_the_backoff() -> None:
    policy = RetryRouterPolicy(backoff=Backoff(base_delay=1, max_attempts=4, jitter="none"))
    history = failed("quote", Q, TimeoutError(), attempt=2)
    decision = route_failures(history, policy=policy)
    assert (decision.data["attempt"], decision.data["delay"]) == (2, 2.0)
    assert (
        route_failures(
            failed("quote", Q, TransientToolError("x", retry_after=7)), policy=policy
        ).data["delay"]
        == 7.0
    )
    f = Failure(K.TRANSIENT)
    d = decide_failure(
        f, call_id="c", tool="t", signature="t:{}", attempt=1, policy=RetryRouterPolicy(),
        effect="read",
    )  # fmt: skip
    assert d.data["delay"] == RetryRouterPolicy().backoff.delay(1, key="c:t:{}")


def test_routes_can_be_overridden_but_not_unsafely() -> None:
    policy = RetryRouterPolicy(
        routes={"unknown": "abstain", K.QUOTA: "abstain"}, on_retry_exhausted="abstain"
    )
    assert policy.routes[K.UNKNOWN] == "abstain"
    assert route_failures(failed("x", {}, KeyError("k")), policy=policy).data["route"] == "abstain"
    assert (
        route_failures(failed("quote", Q, TimeoutError(), attempt=3), policy=policy).data["route"]
        == "abstain"
    )
    assert dict(RetryRouterPolicy().routes) == dict(DEFAULT_ROUTES)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"routes": {"permission": "retry"}},
            "permission failures are never retried or worked around; allowed: 'refuse'",
        ),
        ({"routes": {"safety": "fallback"}}, "safety failures are never retried or worked around"),
        ({"routes": {"permission": "replan"}}, "routes['permission']='replan' is not allowed"),
        ({"routes": {"invalid_args": "retry"}}, "invalid_args failures are never blindly retried"),
        ({"routes": {"flaky": "retry"}}, "routes key='flaky' is not allowed"),
        ({"routes": {"transient": "wait"}}, "routes['transient']='wait' is not allowed"),
        ({"on_retry_exhausted": "retry"}, "on_retry_exhausted='retry' is not allowed"),
        ({"on_repair_exhausted": "repair"}, "on_repair_exhausted='repair' is not allowed"),
        ({"max_repairs": 0}, "max_repairs must be an int >= 1, got 0"),
    ],
)
def test_router_policy_rejects_bad_values(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError) as info:
        RetryRouterPolicy(**kwargs)
    assert message in str(info.value)


@settings(max_examples=200, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from(list(K)),
        st.sampled_from(
            ["retry", "repair", "replan", "clarify", "abstain", "refuse", "fallback", "continue"]
        ),
    )
)
def test_law_permission_and_safety_always_refuse(routes: dict[FailureKind, str]) -> None:
    try:
        policy = RetryRouterPolicy(routes=routes)  # type: ignore[arg-type]
    except ValueError:
        return
    for kind in (K.PERMISSION, K.SAFETY):
        for attempt in (1, 2, 5):
            d = decide_failure(
                Failure(kind),
                call_id="c",
                tool="t",
                signature="t:{}",
                attempt=attempt,
                policy=policy,
            )
            assert d.data["route"] == "refuse" and d.data["delay"] is None
    assert policy.routes[K.INVALID_ARGS] != "retry"


def test_router_bad_input() -> None:
    bad = [
        AIMessage(content="", tool_calls=[{"name": "t", "args": {}, "id": "t1"}]),
        ToolMessage("x", tool_call_id="t1", artifact={"agent_guards_failure": {"kind": "weird"}}),
    ]
    # a malformed artifact is reported as invalid_input, never raised (the siblings route)
    d = route_failures(bad)
    assert (d.verdict, d.reason, d.dropped_ids) == (Verdict.CONTINUE, "invalid_input", ("t1",))
    assert (d.data["item"], d.data["field"]) == ("t1", "agent_guards_failure.kind")
    with pytest.raises(TypeError, match="RetryRouterPolicy"):
        route_failures([], policy="strict")  # type: ignore[arg-type]
    assert route_failures([]).data["route"] == "continue"
