"""Failures described in JSON, rebuilt as the real objects a tool would raise. Private.

The ``error`` of a retry case is one of::

    {"exception": "TimeoutError", "message": "read timed out"}
    {"exception": "TransientToolError", "retry_after": 3}          (agent_guards typed errors)
    {"exception": "ValidationError", "fields": {"start": "date"}, "args": {"start": "soon"}}
    {"exception": "RateLimitError", "status": 429, "headers": {"retry-after": "7"}}
    {"status": 429, "headers": {"Retry-After": "7"}, "message": "slow down"}
    {"status": 404}
    {"tool_message": {"content": "403 Forbidden", "status": "error"}}

A builtin name (``TimeoutError``, ``PermissionError``, ...) or an agent_guards typed error
(``TransientToolError``, ``InvalidArgsError``, ``EmptyResult``, ...) is raised as itself;
any other name becomes an exception class of that name, so httpx/openai-style errors are
classified by name, ``status`` and ``headers`` (set as ``status_code`` and ``response``), as
they are in production. ``ValidationError`` is a real pydantic error from validating
``args`` against ``fields`` (name -> ``int`` / ``float`` / ``str`` / ``bool`` / ``date``).

Example:
    >>> build_failure({"status": 429, "headers": {"Retry-After": "7"}}).retry_after
    7.0
    >>> build_failure({"exception": "EmptyResult", "business": False}).kind.value
    'empty_error'
    >>> build_failure({"exception": "ValidationError", "fields": {"n": "int"},
    ...                "args": {"n": "x"}}).field_errors
    {'n': 'Input should be a valid integer, unable to parse string as an integer'}
"""

from __future__ import annotations

import builtins
import re
from collections.abc import Mapping
from datetime import date
from types import SimpleNamespace
from typing import Any

from pydantic import ValidationError, create_model

from agent_guards import retry_router as failures
from agent_guards.core.errors import InvalidInputError
from agent_guards.core.fields import to_datetime
from agent_guards.evals.jsonform import messages_from_json
from agent_guards.retry_router.classify import describe_failure
from agent_guards.retry_router.model import Failure

__all__ = ["build_exception", "build_failure"]

_TYPED = {
    name: getattr(failures, name)
    for name in (
        "TransientToolError",
        "InvalidArgsError",
        "PreconditionFailed",
        "AmbiguousInput",
        "EmptyResult",
        "PermissionDenied",
        "SafetyViolation",
        "QuotaExceeded",
    )
}
_BUILTIN = (
    "TimeoutError",
    "ConnectionError",
    "ConnectionResetError",
    "ConnectionRefusedError",
    "BrokenPipeError",
    "PermissionError",
    "FileNotFoundError",
    "OSError",
    "ValueError",
    "TypeError",
    "KeyError",
    "LookupError",
    "RuntimeError",
)
_FIELD_TYPES: dict[str, type] = {"int": int, "float": float, "str": str, "bool": bool}
_FIELD_TYPES["date"] = date
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_KEYS = {"exception", "message", "status", "headers", "code", "body", "tool_message"}
_TYPED_KEYS = {"retry_after", "status_code", "field_errors", "question", "options", "business"}


def _validation_error(spec: Mapping[str, Any]) -> ValidationError:
    fields: dict[str, Any] = {}
    for name, type_name in dict(spec.get("fields") or {}).items():
        if type_name not in _FIELD_TYPES:
            raise ValueError(
                f"error.fields[{name!r}]={type_name!r}; allowed: {sorted(_FIELD_TYPES)}"
            )
        fields[name] = (_FIELD_TYPES[type_name], ...)
    model = create_model("ToolArgs", **fields)
    try:
        model.model_validate(dict(spec.get("args") or {}))
    except ValidationError as err:
        return err
    raise ValueError("error: these args are valid for these fields; nothing to fail")


def build_exception(spec: Mapping[str, Any]) -> BaseException:
    """The exception a JSON ``error`` (with an ``exception`` or a ``status``) describes."""
    name = spec.get("exception", "HTTPStatusError")
    if not isinstance(name, str) or not _NAME.match(name):
        raise ValueError(f"error.exception must be a class name, got {name!r}")
    message = str(spec.get("message", ""))
    if name == "ValidationError":
        return _validation_error(spec)
    if name in _TYPED:
        kwargs = {k: v for k, v in spec.items() if k in _TYPED_KEYS}
        exc: BaseException = _TYPED[name](message, **kwargs)
    elif name in _BUILTIN:
        exc = getattr(builtins, name)(message)
    else:
        exc = type(name, (Exception,), {})(message)
    if "status" in spec:
        status = spec["status"]
        if isinstance(status, bool) or not isinstance(status, int):
            raise ValueError(f"error.status must be an int, got {status!r}")
        exc.status_code = status  # type: ignore[attr-defined]
        headers = dict(spec.get("headers") or {})
        exc.response = SimpleNamespace(status_code=status, headers=headers)  # type: ignore[attr-defined]
    for key in ("code", "body"):
        if key in spec:
            setattr(exc, key, spec[key])
    return exc


def build_failure(spec: Any, *, now: Any = None) -> Failure:
    """Classify the failure a JSON ``error`` describes (see the module docstring)."""
    if not isinstance(spec, Mapping):
        raise ValueError(f"input.error must be an object, got {type(spec).__name__}")
    unknown = sorted(set(spec) - _KEYS - _TYPED_KEYS - {"fields", "args"})
    if unknown:
        raise ValueError(f"input.error has unknown key(s) {unknown}")
    clock = to_datetime(now, item=None, field="now")
    if "tool_message" in spec:
        body = {"type": "tool", "tool_call_id": "c1", "status": "error", **spec["tool_message"]}
        return describe_failure(messages_from_json([body])[0], now=clock)
    if set(spec) == {"status"}:
        return describe_failure(spec["status"], now=clock)
    if "exception" not in spec and "status" not in spec:
        raise InvalidInputError("needs 'exception', 'status' or 'tool_message'", field="error")
    return describe_failure(build_exception(spec), now=clock)
