"""Classifying failures (pure): exceptions, ToolMessages and status codes. Private.

Import from ``agent_guards.retry_router``. Nothing here imports LangGraph: httpx/openai-style
errors are recognised by their attributes (``status_code``, ``response.headers``) and
class names, without importing those libraries.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any

from langchain_core import exceptions as lc_errors
from langchain_core.messages import ToolMessage
from pydantic import ValidationError

from agent_guards.core.errors import CircuitOpen, InvalidInputError
from agent_guards.core.fields import shown
from agent_guards.core.signatures import content_text, safe_str
from agent_guards.retry_router.model import (
    ARTIFACT_KEY,
    Failure,
    FailureKind,
    _from_body,
    _TypedFailure,
)

__all__ = [
    "classify_failure",
    "describe_failure",
    "failure_message",
    "failure_of",
    "kind_for_status",
]


def kind_for_status(code: int, text: str = "") -> FailureKind:
    """The kind of an HTTP status code (``text`` refines 429/400: quota, content policy).

    Example:
        >>> from agent_guards.retry_router import kind_for_status
        >>> [kind_for_status(code).value for code in (503, 403, 404, 422)]
        ['transient', 'permission', 'precondition', 'invalid_args']
        >>> kind_for_status(429).value, kind_for_status(429, "insufficient_quota").value
        ('transient', 'quota')
    """
    low = text.lower()
    if code == 429:
        return (
            FailureKind.QUOTA
            if "insufficient_quota" in low or "quota" in low
            else FailureKind.TRANSIENT
        )
    if code in (408, 425) or (code >= 500 and code not in (501, 505)):
        return FailureKind.TRANSIENT
    if code in (401, 403, 407, 451):
        return FailureKind.PERMISSION
    if code == 402:
        return FailureKind.QUOTA
    if code in (404, 409, 410, 412, 428):
        return FailureKind.PRECONDITION
    if code in (400, 413, 414, 415, 422):
        if any(w in low for w in ("content_policy", "content policy", "content_filter", "safety")):
            return FailureKind.SAFETY
        return FailureKind.INVALID_ARGS
    return FailureKind.UNKNOWN


_NAME_RULES: tuple[tuple[str, FailureKind], ...] = (
    ("contentpolicy contentfilter safety", FailureKind.SAFETY),
    ("permissiondenied forbidden unauthorized authentication accessdenied", FailureKind.PERMISSION),
    ("insufficientquota quotaexceeded quota", FailureKind.QUOTA),
    (
        "timeout connecterror connectionerror networkerror remoteprotocolerror ratelimit "
        "serviceunavailable internalservererror apiconnectionerror",
        FailureKind.TRANSIENT,
    ),
    ("notfound", FailureKind.PRECONDITION),
)
"""Lowercased class-name fragments (any class in the MRO), first match wins."""

_TEXT_RULES: tuple[tuple[str, FailureKind], ...] = (
    ("content policy|content_policy|content filter|safety violation|unsafe content",
     FailureKind.SAFETY),
    ("permission denied|permissiondenied|forbidden|unauthorized|not authorized|access denied|"
     "accessdenied|access_denied|not permitted|operation not permitted", FailureKind.PERMISSION),
    ("insufficient_quota|quota exceeded|quota exhausted|out of credits", FailureKind.QUOTA),
    ("with error:\n|is not a valid tool|validation error|field required|invalid argument|"
     "missing required|unexpected keyword", FailureKind.INVALID_ARGS),
    ("timed out|timeout|rate limit|too many requests|temporarily unavailable|service "
     "unavailable|connection reset|connection refused|connection error|bad gateway|"
     "try again later", FailureKind.TRANSIENT),
    ("ambiguous|multiple matches|did you mean", FailureKind.AMBIGUOUS),
    ("not found|does not exist|precondition|no longer available", FailureKind.PRECONDITION),
)  # fmt: skip
"""Lowercased phrases of an error ToolMessage without an artifact, first match wins."""

_STATUS_IN_TEXT = re.compile(
    r"(?i)\b(?:status(?:[ _]code)?|http|error|code)\s*[:=]?\s*([1-5]\d\d)\b"
)
_FIELD_LINE = re.compile(r"^\s*([\w.\[\]-]+): (.+)$", re.MULTILINE)


def _status_code(error: BaseException) -> int | None:
    for owner in (error, getattr(error, "response", None)):
        for attr in ("status_code", "status", "code"):
            value = getattr(owner, attr, None)
            if isinstance(value, int) and not isinstance(value, bool) and 100 <= value < 600:
                return value
    return None


def _retry_after(error: BaseException, now: datetime | None) -> float | None:
    headers = getattr(getattr(error, "response", None), "headers", None) or getattr(
        error, "headers", None
    )
    if headers is None or not hasattr(headers, "get"):
        return None
    ms = headers.get("retry-after-ms") or headers.get("Retry-After-Ms")
    raw = headers.get("retry-after") or headers.get("Retry-After")
    try:
        if ms is not None:
            return max(0.0, float(ms) / 1000)
        if raw is None:
            return None
        return max(0.0, float(raw))
    except OverflowError:  # an int past float's range: now if negative, else never soon
        return 0.0 if (ms if ms is not None else raw) < 0 else float("inf")
    except (TypeError, ValueError):
        pass
    try:
        when = parsedate_to_datetime(safe_str(raw))
    except (TypeError, ValueError):
        return None
    if now is None:
        return None
    when = when if when.tzinfo else when.replace(tzinfo=UTC)
    return max(0.0, (when - now).total_seconds())


def _by_name(error: BaseException) -> FailureKind | None:
    names = [cls.__name__.lower().replace("_", "") for cls in type(error).__mro__]
    for needles, kind in _NAME_RULES:
        if any(n in name for name in names for n in needles.split()):
            return kind
    return None


def _by_text(text: str) -> FailureKind:
    low = text.lower()
    for needles, kind in _TEXT_RULES:
        if any(n in low for n in needles.split("|")):
            return kind
    match = _STATUS_IN_TEXT.search(text)
    return kind_for_status(int(match.group(1)), text) if match else FailureKind.UNKNOWN


_MODEL_ERRORS: tuple[tuple[str, FailureKind], ...] = (
    ("ModelRefusalError", FailureKind.SAFETY),
    ("ModelAuthenticationError", FailureKind.PERMISSION),
    ("ModelPermissionDeniedError", FailureKind.PERMISSION),
    ("ModelInvalidRequestError", FailureKind.INVALID_ARGS),
    ("ModelNotFoundError", FailureKind.PRECONDITION),
    ("ContextOverflowError", FailureKind.QUOTA),
)
"""langchain-core's model error types (``langchain_core.exceptions``), most specific first;
a type missing from the installed version is skipped. Any other ``ModelError`` is
TRANSIENT when its ``is_retryable`` says a retry may succeed."""


def _model_error_kind(error: BaseException, body: str) -> FailureKind | None:
    """The kind of a langchain-core ``ModelError`` (None for any other exception)."""
    base = getattr(lc_errors, "ModelError", None)
    if base is None or not isinstance(error, base):
        return None
    for name, kind in _MODEL_ERRORS:
        cls = getattr(lc_errors, name, None)
        if cls is not None and isinstance(error, cls):
            return kind
    if getattr(error, "is_retryable", False) is True:
        quota = "quota" in body.lower() and "RateLimit" in type(error).__name__
        return FailureKind.QUOTA if quota else FailureKind.TRANSIENT
    return None


def _field_errors_from_text(text: str) -> dict[str, str]:
    if "with error:" not in text:
        return {}
    body = text.split("with error:", 1)[1].split("Please fix", 1)[0]
    return {m.group(1): m.group(2).strip() for m in _FIELD_LINE.finditer(body)}


def _loc(detail: Mapping[str, Any]) -> tuple[Any, ...]:
    """Where a validation error points (pydantic's ``loc``), as a tuple."""
    loc = detail.get("loc", ())
    return tuple(loc) if isinstance(loc, (list, tuple)) else (loc,)


def _describe_exception(error: BaseException, now: datetime | None) -> Failure:
    name = f"{type(error).__module__}.{type(error).__qualname__}"
    text = safe_str(error)[:500]
    common: dict[str, Any] = {"message": text, "error_type": name, "original": error}
    if isinstance(error, CircuitOpen):
        return Failure(FailureKind.TRANSIENT, circuit_open=True, **common)
    if isinstance(error, _TypedFailure):
        return Failure(
            error.kind,
            retry_after=error.retry_after,
            status_code=getattr(error, "status_code", None),
            field_errors=getattr(error, "field_errors", {}),
            question=getattr(error, "question", None),
            options=getattr(error, "options", ()),
            **common,
        )
    filtered = getattr(error, "filtered_errors", None)
    if isinstance(error, ValidationError) or (
        hasattr(error, "tool_kwargs") and filtered is not None
    ):
        details = error.errors() if isinstance(error, ValidationError) else filtered
        errors = {
            ".".join(safe_str(p) for p in _loc(d)) or "args": safe_str(d.get("msg", ""))
            for d in (details if isinstance(details, (list, tuple)) else ())
            if isinstance(d, Mapping)
        }
        return Failure(FailureKind.INVALID_ARGS, field_errors=errors, **common)
    if isinstance(error, PermissionError):
        return Failure(FailureKind.PERMISSION, **common)
    if isinstance(error, (TimeoutError, ConnectionError)):
        return Failure(FailureKind.TRANSIENT, **common)
    status = _status_code(error)
    retry_after = _retry_after(error, now)
    body = f"{text} {safe_str(getattr(error, 'code', ''))} {safe_str(getattr(error, 'body', ''))}"
    extra: dict[str, Any] = {"retry_after": retry_after, "status_code": status, **common}
    kind = _model_error_kind(error, body)
    if kind is not None:
        return Failure(kind, **extra)
    if status is not None:
        return Failure(kind_for_status(status, body), **extra)
    kind = _by_name(error)
    if kind is not None:
        if kind is FailureKind.TRANSIENT and "quota" in body.lower():
            kind = FailureKind.QUOTA
        return Failure(kind, **extra)
    # an untyped exception: its text is read like an error ToolMessage's (one vocabulary)
    return Failure(_by_text(body), **extra)


def _label(message: ToolMessage) -> str:
    """How an error names a ToolMessage: its call id, else its id, else its type."""
    return message.tool_call_id or message.id or "ToolMessage"


def failure_of(message: ToolMessage) -> Failure | None:
    """The failure a ToolMessage reports, or None when it is a normal result.

    A structured artifact (``{"agent_guards_failure": {...}}``) wins; otherwise a
    ``status="error"`` message is classified from its text.

    Example:
        >>> from agent_guards.retry_router import failure_artifact, failure_of
        >>> failure_of(ToolMessage("42.0", tool_call_id="c1")) is None
        True
        >>> failure_of(ToolMessage("Request timed out", tool_call_id="c2", status="error")).kind
        <FailureKind.TRANSIENT: 'transient'>
        >>> artifact = failure_artifact("empty_business", "no flights that day")
        >>> failure_of(ToolMessage("none", tool_call_id="c3", artifact=artifact)).kind.value
        'empty_business'
    """
    artifact = message.artifact
    if isinstance(artifact, Mapping) and ARTIFACT_KEY in artifact:
        body = artifact[ARTIFACT_KEY]
        if not isinstance(body, Mapping):
            raise InvalidInputError("must be a mapping", item=_label(message), field=ARTIFACT_KEY)
        return _from_body(body, item=_label(message))
    if message.status != "error":
        return None
    text = content_text(message.content)
    return Failure(_by_text(text), message=text[:500], field_errors=_field_errors_from_text(text))


def describe_failure(error: Any, *, now: datetime | None = None) -> Failure:
    """Classify an exception, a ToolMessage or an HTTP status code, with the details.

    Args:
        error: An exception (ours, stdlib, pydantic, httpx/openai-style), a ``ToolMessage``
            (structured artifact first, else ``status="error"`` text), or an ``int`` status.
        now: The run's clock, to read an HTTP-date ``Retry-After``.

    Raises:
        InvalidInputError: a ToolMessage that reports no failure, a status code below 400,
            a malformed failure artifact, or an unsupported type.

    Example:
        >>> from agent_guards.retry_router import TransientToolError, describe_failure
        >>> f = describe_failure(TransientToolError("rate limited", retry_after=2, status_code=429))
        >>> f.kind.value, f.retry_after, f.status_code, f.error_type
        ('transient', 2.0, 429, '...TransientToolError')
        >>> describe_failure(404)
        Failure(kind=<FailureKind.PRECONDITION: 'precondition'>, message='HTTP 404', ...)
    """
    if isinstance(error, BaseException):
        return _describe_exception(error, now)
    if isinstance(error, ToolMessage):
        failure = failure_of(error)
        if failure is None:
            raise InvalidInputError(
                "not a failure: status is not 'error' and there is no failure artifact",
                item=_label(error),
                field="status",
            )
        return failure
    if isinstance(error, int) and not isinstance(error, bool):
        if not 400 <= error < 600:
            raise InvalidInputError(
                f"status {shown(error)} is not an error (expected 400..599)", field="status_code"
            )
        return Failure(kind_for_status(error), status_code=error, message=f"HTTP {error}")
    raise InvalidInputError(
        f"expected an exception, a ToolMessage or a status code, got {type(error).__name__}",
        field="error",
    )


def classify_failure(error: Any) -> FailureKind:
    """The :class:`FailureKind` of an exception, a ToolMessage or an HTTP status code.

    >>> classify_failure(TimeoutError("upstream slow"))
    <FailureKind.TRANSIENT: 'transient'>
    >>> [classify_failure(code).value for code in (429, 403, 422, 404, 503)]
    ['transient', 'permission', 'invalid_args', 'precondition', 'transient']
    >>> from agent_guards.retry_router import EmptyResult
    >>> classify_failure(EmptyResult("no flights", business=True)).value
    'empty_business'
    >>> classify_failure(KeyError("boom")).value
    'unknown'
    """
    return describe_failure(error).kind


def _content(tool: str, f: Failure) -> str:
    msg = f.message or f.error_type or "no details"
    if f.kind is FailureKind.INVALID_ARGS:
        fields = "; ".join(f"{k}: {v}" for k, v in f.field_errors.items()) or msg
        return (
            f"Invalid arguments for {tool}: {fields}. Fix exactly these fields and call "
            "again; sending the same arguments again will not work."
        )
    if f.kind in (FailureKind.PERMISSION, FailureKind.SAFETY):
        return f"{tool} refused ({f.kind.value}): {msg}. Do not retry it or work around it."
    if f.circuit_open:
        return f"{tool} was not called: {msg}. Use a fallback or report it as unavailable."
    if f.kind is FailureKind.AMBIGUOUS:
        options = f" Options: {', '.join(f.options)}." if f.options else ""
        return f"{tool} needs a clarification: {f.question or msg}.{options}"
    if f.kind is FailureKind.EMPTY_BUSINESS:
        return f"No data: {msg}. This is a real empty result; report it, do not retry."
    prefix = {
        FailureKind.TRANSIENT: "failed temporarily",
        FailureKind.PRECONDITION: "failed because a premise no longer holds",
        FailureKind.EMPTY_ERROR: "returned nothing because of an error",
        FailureKind.QUOTA: "is out of quota",
    }.get(f.kind, f"failed ({f.error_type or 'unknown error'})")
    return f"{tool} {prefix}: {msg}"


def failure_message(
    failure: Failure,
    *,
    tool: str,
    tool_call_id: str,
    id: str | None = None,
    attempt: int = 1,
) -> ToolMessage:
    """The ToolMessage that reports ``failure`` to the model, with the structured artifact.

    ``status`` is ``"error"`` except for EMPTY_BUSINESS (a real, reportable "no data").

    >>> m = failure_message(describe_failure(403), tool="pay", tool_call_id="c1")
    >>> m.status, m.content
    ('error', 'pay refused (permission): HTTP 403. Do not retry it or work around it.')
    """
    return ToolMessage(
        content=_content(tool, failure),
        tool_call_id=tool_call_id,
        name=tool,
        id=id,
        status="success" if failure.kind is FailureKind.EMPTY_BUSINESS else "error",
        artifact=failure.to_artifact(),
        response_metadata={"agent_guards": {"attempt": attempt}},
    )
