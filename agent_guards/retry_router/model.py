"""Failure kinds, the Failure record and typed tool errors (pure). Private.

Import them from ``agent_guards.retry_router``. Tool authors raise the typed errors (all
subclass :class:`agent_guards.core.errors.ToolFailure`) or return :func:`failure_artifact`, so
the router never depends on string matching.

Example:
    >>> err = InvalidArgsError("bad dates", field_errors={"start": "must be before end"})
    >>> err.kind.value, err.field_errors
    ('invalid_args', {'start': 'must be before end'})
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from enum import StrEnum
from typing import Any

from agent_guards.core.errors import InvalidInputError, ToolFailure
from agent_guards.core.policy import check_duration
from agent_guards.core.signatures import safe_str

__all__ = [
    "ARTIFACT_KEY",
    "AmbiguousInput",
    "EmptyResult",
    "Failure",
    "FailureKind",
    "InvalidArgsError",
    "PermissionDenied",
    "PreconditionFailed",
    "QuotaExceeded",
    "SafetyViolation",
    "TransientToolError",
    "failure_artifact",
]

ARTIFACT_KEY = "agent_guards_failure"
"""Key of the structured failure inside a ToolMessage ``artifact`` dict."""


class FailureKind(StrEnum):
    """Why a tool call failed; decides the recovery. Values are the lowercase names.

    Example:
        >>> from agent_guards import FailureKind, classify_failure
        >>> FailureKind("quota") is FailureKind.QUOTA, FailureKind.QUOTA == "quota"
        (True, True)
        >>> classify_failure(PermissionError("read-only")) is FailureKind.PERMISSION
        True
    """

    TRANSIENT = "transient"
    """Timeout, connection error, 429, 5xx: retry with backoff."""
    INVALID_ARGS = "invalid_args"
    """The model's arguments are wrong: repair with the precise field errors."""
    PRECONDITION = "precondition"
    """A premise no longer holds (not found, conflict): replan."""
    AMBIGUOUS = "ambiguous"
    """The request matches several things: ask the user."""
    EMPTY_BUSINESS = "empty_business"
    """A real "no data" answer: report it, do not retry."""
    EMPTY_ERROR = "empty_error"
    """Empty because something broke: retry."""
    PERMISSION = "permission"
    """Not allowed: refuse, never retry, never work around."""
    SAFETY = "safety"
    """A safety boundary: refuse, never retry, never work around."""
    QUOTA = "quota"
    """Quota or budget exhausted: fall back or degrade."""
    UNKNOWN = "unknown"
    """Anything else; never retried by default."""


def retry_after_seconds(where: str, value: Any) -> float | None:
    """A ``Retry-After`` in seconds: None stays None, 0 means "retry now", and a negative
    value (a date already past) is 0 too. Anything that is not a finite number of seconds
    or a ``timedelta`` raises ``ValueError`` naming ``where``.

    >>> retry_after_seconds("retry_after", -3), retry_after_seconds("retry_after", 0)
    (0.0, 0.0)
    """
    if value is None:
        return None
    if isinstance(value, timedelta):
        value = value.total_seconds()
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value < 0:
        value = 0.0
    return check_duration(where, value)


class _TypedFailure(ToolFailure):
    kind: FailureKind = FailureKind.UNKNOWN

    def __init__(self, message: str = "", *, retry_after: float | timedelta | None = None) -> None:
        self.message = message
        self.retry_after = retry_after_seconds("retry_after", retry_after)
        super().__init__(message or self.kind.value)


class TransientToolError(_TypedFailure):
    """A temporary failure (timeout, 429, 5xx). ``retry_after`` in seconds, if known.

    Example:
        >>> from agent_guards.retry_router import TransientToolError
        >>> from agent_guards import classify_failure
        >>> err = TransientToolError("upstream 503", retry_after=1.5, status_code=503)
        >>> classify_failure(err).value, err.retry_after, err.status_code
        ('transient', 1.5, 503)
        >>> TransientToolError(retry_after=timedelta(minutes=1)).retry_after
        60.0
    """

    kind = FailureKind.TRANSIENT

    def __init__(
        self,
        message: str = "",
        *,
        retry_after: float | timedelta | None = None,
        status_code: int | None = None,
    ) -> None:
        super().__init__(message, retry_after=retry_after)
        self.status_code = status_code


class InvalidArgsError(_TypedFailure):
    """The arguments are wrong; ``field_errors`` maps each bad field to what is wrong.

    Example:
        >>> from agent_guards.retry_router import InvalidArgsError, describe_failure
        >>> from agent_guards.retry_router import failure_message
        >>> err = InvalidArgsError("bad dates", field_errors={"start": "must be before end"})
        >>> failure_message(describe_failure(err), tool="book", tool_call_id="c1").content
        'Invalid arguments for book: start: must be before end. Fix exactly these fields ...'
    """

    kind = FailureKind.INVALID_ARGS

    def __init__(self, message: str = "", *, field_errors: Mapping[str, str] | None = None) -> None:
        super().__init__(message)
        self.field_errors = {str(k): str(v) for k, v in (field_errors or {}).items()}


class PreconditionFailed(_TypedFailure):
    """A premise of the plan no longer holds (the thing is gone, changed, or locked).

    Example:
        >>> from agent_guards.retry_router import PreconditionFailed
        >>> from agent_guards import RetryRouterPolicy, classify_failure
        >>> kind = classify_failure(PreconditionFailed("order 42 was cancelled"))
        >>> kind.value, RetryRouterPolicy().routes[kind]
        ('precondition', 'replan')
    """

    kind = FailureKind.PRECONDITION


class AmbiguousInput(_TypedFailure):
    """The input matches several things; ``question`` and ``options`` go to the user.

    Example:
        >>> from agent_guards.retry_router import AmbiguousInput
        >>> from agent_guards import RetryRouterPolicy
        >>> err = AmbiguousInput(question="Which Paris?", options=["Paris, FR", "Paris, TX"])
        >>> err.kind.value, err.options, RetryRouterPolicy().routes[err.kind]
        ('ambiguous', ('Paris, FR', 'Paris, TX'), 'clarify')
    """

    kind = FailureKind.AMBIGUOUS

    def __init__(
        self, message: str = "", *, question: str | None = None, options: Sequence[str] = ()
    ) -> None:
        super().__init__(message)
        self.question = question
        self.options = tuple(str(o) for o in options)


class EmptyResult(_TypedFailure):
    """Nothing came back: ``business=True`` is a real "no data", False means it broke.

    Example:
        >>> from agent_guards.retry_router import EmptyResult
        >>> from agent_guards import RetryRouterPolicy
        >>> routes = RetryRouterPolicy().routes
        >>> errors = [EmptyResult("no flights that day"), EmptyResult("db down", business=False)]
        >>> [(err.kind.value, routes[err.kind]) for err in errors]
        [('empty_business', 'continue'), ('empty_error', 'retry')]
    """

    def __init__(self, message: str = "", *, business: bool = True) -> None:
        self.business = bool(business)
        self.kind = FailureKind.EMPTY_BUSINESS if self.business else FailureKind.EMPTY_ERROR
        super().__init__(message)


class PermissionDenied(_TypedFailure):
    """The caller may not do this. Refused, never retried or worked around.

    Example:
        >>> from agent_guards.retry_router import PermissionDenied, describe_failure
        >>> from agent_guards.retry_router import failure_message
        >>> failure = describe_failure(PermissionDenied("refunds need a manager"))
        >>> failure_message(failure, tool="refund", tool_call_id="c1").content
        'refund refused (permission): refunds need a manager. Do not retry it or work around it.'
    """

    kind = FailureKind.PERMISSION


class SafetyViolation(_TypedFailure):
    """The request crosses a safety boundary. Refused, never retried or worked around.

    Example:
        >>> from agent_guards import RetryRouterPolicy
        >>> from agent_guards.retry_router import SafetyViolation
        >>> err = SafetyViolation("asks for malware")
        >>> err.kind.value, RetryRouterPolicy().routes[err.kind]
        ('safety', 'refuse')
        >>> RetryRouterPolicy(routes={"safety": "fallback"})
        Traceback (most recent call last):
        ...
        ValueError: RetryRouterPolicy.routes['safety']='fallback' is not allowed: ...
    """

    kind = FailureKind.SAFETY


class QuotaExceeded(_TypedFailure):
    """A quota or budget is used up: fall back or degrade.

    Example:
        >>> from agent_guards.retry_router import QuotaExceeded, describe_failure
        >>> from agent_guards import RetryRouterPolicy
        >>> failure = describe_failure(QuotaExceeded("monthly credits used up", retry_after=3600))
        >>> failure.kind.value, failure.retry_after, RetryRouterPolicy().routes[failure.kind]
        ('quota', 3600.0, 'fallback')
    """

    kind = FailureKind.QUOTA


_TURNED_AWAY = frozenset({408, 425, 429, 503})
"""Status codes of a request the server turned away before doing its work."""
_REFUSED = ("ConnectionRefused", "ConnectError", "NameResolution", "gaierror", "CircuitOpen")
"""Error type names of a call that never reached the tool's server."""


@dataclass(frozen=True)
class Failure:
    """A classified failure: the kind plus what recovery needs (all JSON-ready but ``original``).

    Example:
        >>> from agent_guards.retry_router import Failure
        >>> from agent_guards import FailureKind
        >>> f = Failure(FailureKind.INVALID_ARGS, "bad date", field_errors={"date": "use ISO 8601"})
        >>> f.to_artifact()
        {'agent_guards_failure': {'kind': 'invalid_args', 'message': 'bad date',
                                  'field_errors': {'date': 'use ISO 8601'}}}
    """

    kind: FailureKind
    message: str = ""
    error_type: str = ""
    retry_after: float | None = None
    status_code: int | None = None
    field_errors: Mapping[str, str] = field(default_factory=dict)
    question: str | None = None
    options: tuple[str, ...] = ()
    circuit_open: bool = False
    original: BaseException | None = field(default=None, compare=False, repr=False)
    """The exception that was classified, kept as is (never written to state)."""

    @property
    def may_have_run(self) -> bool:
        """Whether the failed call may have done its work anyway: a timeout, a dropped
        connection, a 5xx from a server that had the request. False when the call was
        turned away before it ran (a 429 or a Retry-After, a 503, a refused connection,
        an open circuit) or failed for a reason of its own (bad arguments, no permission).

        >>> from agent_guards import FailureKind
        >>> Failure(FailureKind.TRANSIENT, error_type="builtins.TimeoutError").may_have_run
        True
        >>> Failure(FailureKind.TRANSIENT, status_code=429).may_have_run
        False
        """
        if self.kind not in (FailureKind.TRANSIENT, FailureKind.EMPTY_ERROR, FailureKind.UNKNOWN):
            return False
        turned_away = self.circuit_open or self.retry_after is not None
        turned_away |= self.status_code in _TURNED_AWAY
        turned_away |= any(name in self.error_type for name in _REFUSED)
        return not turned_away

    def to_artifact(self) -> dict[str, Any]:
        """``{"agent_guards_failure": {...}}``: the structured form a ToolMessage carries."""
        body: dict[str, Any] = {"kind": self.kind.value, "message": self.message}
        for key in ("error_type", "question"):
            if getattr(self, key):
                body[key] = getattr(self, key)
        for key in ("retry_after", "status_code"):  # 0 is a value: "retry now"
            if getattr(self, key) is not None:
                body[key] = getattr(self, key)
        if self.field_errors:
            body["field_errors"] = dict(self.field_errors)
        if self.options:
            body["options"] = list(self.options)
        if self.circuit_open:
            body["circuit_open"] = True
        return {ARTIFACT_KEY: body}


def failure_artifact(kind: FailureKind | str, message: str = "", **fields: Any) -> dict[str, Any]:
    """The structured artifact a tool returns instead of relying on string matching.

    Use it with ``response_format="content_and_artifact"`` (return ``(content, artifact)``)
    or on a ToolMessage you build. Extra fields: ``retry_after``, ``status_code``,
    ``field_errors``, ``question``, ``options``.

    >>> failure_artifact("empty_business", "no flights on that day")
    {'agent_guards_failure': {'kind': 'empty_business', 'message': 'no flights on that day'}}
    """
    return _from_body({"kind": kind, "message": message, **fields}, item=None).to_artifact()


def _from_body(body: Mapping[str, Any], *, item: str | None) -> Failure:
    allowed = {
        "kind",
        "message",
        "error_type",
        "retry_after",
        "status_code",
        "field_errors",
        "question",
        "options",
        "circuit_open",
    }
    unknown = sorted(set(body) - allowed)
    if unknown:
        raise InvalidInputError(
            f"unknown failure fields {unknown}; allowed: {sorted(allowed)}",
            item=item,
            field=ARTIFACT_KEY,
        )
    try:
        kind = FailureKind(safe_str(body.get("kind", "")).lower())
    except ValueError:
        allowed_kinds = ", ".join(k.value for k in FailureKind)
        raise InvalidInputError(
            f"unknown kind {safe_str(body.get('kind'))[:80]!r}; allowed: {allowed_kinds}",
            item=item,
            field=f"{ARTIFACT_KEY}.kind",
        ) from None
    try:
        retry_after = retry_after_seconds("retry_after", body.get("retry_after"))
    except ValueError as err:
        raise InvalidInputError(str(err), item=item, field=f"{ARTIFACT_KEY}.retry_after") from None
    errors = body.get("field_errors") or {}
    if not isinstance(errors, Mapping):
        raise InvalidInputError(
            "must be a mapping field -> message", item=item, field=f"{ARTIFACT_KEY}.field_errors"
        )
    status = body.get("status_code")
    options = body.get("options") or ()
    if not isinstance(options, (list, tuple)):
        raise InvalidInputError(
            "must be a list of choices", item=item, field=f"{ARTIFACT_KEY}.options"
        )
    return Failure(
        kind=kind,
        message=safe_str(body.get("message") or ""),
        error_type=safe_str(body.get("error_type") or ""),
        retry_after=retry_after,
        status_code=status if isinstance(status, int) and not isinstance(status, bool) else None,
        field_errors={safe_str(k): safe_str(v) for k, v in errors.items()},
        question=body.get("question") if isinstance(body.get("question"), str) else None,
        options=tuple(safe_str(o) for o in options),
        circuit_open=bool(body.get("circuit_open")),
    )
