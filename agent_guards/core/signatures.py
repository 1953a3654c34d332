"""Call signatures and result normalization (pure). Private: use ``agent_guards.loop_check``.

Example:
    >>> call_signature("search", {"q": " rates ", "request_id": "r-1", "limit": 5.0})
    'search:{"limit":5,"q":"rates"}'
    >>> normalize_result("ok id=3f2b2c1e-8a7d-4c55-9d7e-0a1b2c3d4e5f at 2026-01-02T03:04:05Z")
    'ok id=<uuid> at <time>'
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import date, datetime
from typing import Any

from langchain_core.messages import BaseMessage

__all__ = [
    "DEFAULT_GUARD_NAMES",
    "DEFAULT_IGNORED_ARG_KEYS",
    "DEFAULT_SCOPE_KEYS",
    "REUSE_PREFIX",
    "WRITE_IDENTITY_KEYS",
    "Normalizer",
    "call_signature",
    "canonical_args",
    "content_text",
    "is_guard_message",
    "normalize_result",
    "safe_str",
    "signature_keys",
]

# fmt: off
DEFAULT_IGNORED_ARG_KEYS: frozenset[str] = frozenset({
    "request_id", "trace_id", "span_id", "correlation_id", "idempotency_key", "nonce",
    "timestamp", "ts", "client_ts", "client_time", "sent_at", "call_id", "tool_call_id",
    "cache_buster", "cachebuster",
})
"""Argument keys left out of a call signature: volatile ids and timestamps, not entity ids."""

WRITE_IDENTITY_KEYS: frozenset[str] = frozenset({
    "idempotency_key", "nonce", "timestamp", "ts", "client_ts", "client_time", "sent_at",
})
"""Ignored keys that still tell two declared *writes* apart: a fresh idempotency key asks the tool
for a new change, and a reminder at another time is another reminder. Trace ids do not."""

DEFAULT_SCOPE_KEYS: frozenset[str] = frozenset({
    "region", "country", "city", "locale", "language", "lang", "market", "tenant",
    "date", "dates", "date_range", "start_date", "end_date", "start", "end", "from", "to",
    "since", "until", "as_of", "period", "year", "quarter", "month", "week", "time_range",
    "version", "edition", "revision", "release",
})
# fmt: on
"""Argument keys that name a *scope*: a call in another region, period or
version is progress, not a loop, even when it returns the same result."""

DEFAULT_GUARD_NAMES: frozenset[str] = frozenset({"loop_check", "retry_router"})
"""``name`` of the messages guards add (nudges, final notes): never a user's turn."""

REUSE_PREFIX = "[loop_check] "
"""First line of a ToolMessage answered from an earlier result; stripped before comparing."""


_DECIMAL_BITS = 14_000
"""Ints this many bits long or more (about 4,200 digits) are written in hex."""


@functools.lru_cache(maxsize=1024)
def _key(name: Any) -> str:
    return str(name).strip().lower().replace("-", "_")


def _clean(value: Any, ignore: frozenset[str]) -> Any:
    kind = type(value)
    if kind is str:
        return value.strip()
    if kind is int:
        # past about 4,300 digits str() refuses an int; hex is exact and has no limit
        return value if value.bit_length() < _DECIMAL_BITS else f"<int:{value:#x}>"
    if kind is bool or value is None:
        return value
    if kind is dict or isinstance(value, Mapping):
        return {str(k): _clean(v, ignore) for k, v in value.items() if _key(k) not in ignore}
    if isinstance(value, (list, tuple)):
        return [_clean(v, ignore) for v in value]
    if isinstance(value, (set, frozenset)):
        return sorted((_clean(v, ignore) for v in value), key=repr)
    if isinstance(value, str):
        return value.strip()
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def _json_default(value: Any) -> Any:
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    try:
        return f"<{type(value).__name__}:{value}>"
    except Exception:  # an object whose __str__ raises is still named by its type
        return f"<{type(value).__name__}>"


_CANONICAL = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=_json_default
)
"""What ``json.dumps`` would build for every call signature, built once (it keeps no state)."""


def canonical_args(args: Any, *, ignore_keys: frozenset[str] = DEFAULT_IGNORED_ARG_KEYS) -> str:
    """Canonical JSON of tool-call args: sorted keys, volatile keys dropped, strings stripped.

    Args that are not a mapping still get a stable text: a JSON string is parsed first; other
    strings become ``<raw>...``; missing args become ``<missing>``.
    """
    if args is None:
        return "<missing>"
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except ValueError:
            return "<raw>" + " ".join(args.split())
    return _CANONICAL.encode(_clean(args, ignore_keys))


def call_signature(
    name: str, args: Any, *, ignore_keys: Iterable[str] = DEFAULT_IGNORED_ARG_KEYS
) -> str:
    """The identity of a tool call: tool name + canonical JSON of its args.

    Two calls with the same signature ask for the same thing; calls that differ in any
    argument (including a scope such as region, date range or version) do not.

    Example:
        >>> call_signature("search", {"q": " rates ", "region": "EU", "trace_id": "t-9"})
        'search:{"q":"rates","region":"EU"}'
        >>> call_signature("search", {"q": "rates", "region": "US"})
        'search:{"q":"rates","region":"US"}'
    """
    ignore = (
        ignore_keys if isinstance(ignore_keys, frozenset) else frozenset(map(_key, ignore_keys))
    )
    return f"{name}:{canonical_args(args, ignore_keys=ignore)}"


@functools.cache
def signature_keys(ignore_keys: frozenset[str], write: bool) -> frozenset[str]:
    """The keys a call's signature leaves out: all of ``ignore_keys``, less
    :data:`WRITE_IDENTITY_KEYS` for a tool declared to write (an unknown tool keeps them
    out, so a model stuck on it with fresh timestamps is still seen repeating).

    Example:
        >>> sorted(signature_keys(frozenset({"trace_id", "idempotency_key"}), True))
        ['trace_id']
    """
    return ignore_keys - WRITE_IDENTITY_KEYS if write else ignore_keys


REUSE_LINE = re.compile(r"\A\[loop_check\][^\n]*(?:\n|\Z)")
_TRACEBACK = re.compile(r"Traceback \(most recent call last\):\n(?:[ \t]+[^\n]*\n?)*")
_UUID = re.compile(
    r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b"
)
_TIME = re.compile(
    r"\b\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?(?:\s?Z|[+-]\d{2}:?\d{2})?"
)
_LABELLED_ID = re.compile(
    r"(?i)\b((?:x[-_])?(?:request|req|trace|span|correlation)[-_ ]?id)"
    r"([\"']?\s*[:=]\s*[\"']?)[\w.:-]+"
)
_LABELLED_EPOCH = re.compile(
    r"(?i)\b(timestamp|ts|time|(?:generated|fetched|retrieved|updated|created)_at)"
    r"([\"']?\s*[:=]\s*[\"']?)\d{10,13}\b"
)
_ELAPSED = re.compile(
    r"(?i)\b(elapsed|took|duration|latency)\b[^\n,;]{0,12}?\d+(?:\.\d+)?\s*(?:ms|s|sec|seconds)\b"
)
_REQ_TOKEN = re.compile(r"\breq_[A-Za-z0-9]{8,}\b")
_ADDRESS = re.compile(r"\b0x[0-9a-fA-F]{6,}\b")

Normalizer = Callable[[str], str]


def normalize_result(text: str, *, extra: Sequence[Normalizer] = ()) -> str:
    """Normalize a tool result for comparison: volatile parts out, whitespace collapsed.

    Strips our own reuse note, tracebacks (the final error line is kept), UUIDs, date-times,
    labelled request/trace ids and epoch stamps, elapsed times and memory addresses; then
    applies ``extra`` normalizers in order (the hook for tool-specific noise).

    Example:
        >>> normalize_result("rows=3  took 12 ms;  request_id=abc123")
        'rows=3 took <elapsed>; request_id=<id>'
        >>> normalize_result("Rows=3", extra=[str.lower])
        'rows=3'
    """
    out = REUSE_LINE.sub("", text) if text.startswith("[loop_check]") else text
    low = out.lower()
    if "traceback" in low:
        out = _TRACEBACK.sub("", out)
    if "-" in out:
        out = _UUID.sub("<uuid>", out)
        out = _TIME.sub("<time>", out)
    if "id" in low:
        out = _LABELLED_ID.sub(r"\1\2<id>", out)
    if any(w in low for w in ("time", "ts", "_at")):
        out = _LABELLED_EPOCH.sub(r"\1\2<time>", out)
    if any(w in low for w in ("elapsed", "took", "duration", "latency")):
        out = _ELAPSED.sub(r"\1 <elapsed>", out)
    if "req_" in out:
        out = _REQ_TOKEN.sub("<id>", out)
    if "0x" in out:
        out = _ADDRESS.sub("0x<addr>", out)
    for step in extra:
        out = step(out)
    return " ".join(out.split())


def content_text(content: Any) -> str:
    """The text of a message's content (a string or a list of content blocks)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for block in content:
            if isinstance(block, str):
                parts.append(block)
            elif isinstance(block, Mapping) and isinstance(block.get("text"), str):
                parts.append(block["text"])
            else:
                parts.append(_block_text(block))
        return "\n".join(parts)
    return "" if content is None else safe_str(content)


def safe_str(value: Any) -> str:
    """``str(value)``, or its JSON text when str() refuses it (an int past the digit limit,
    a container holding one, an object whose ``__str__`` raises)."""
    try:
        return str(value)
    except Exception:
        return _block_text(value)


def _block_text(block: Any) -> str:
    """JSON text of a content block; a block json cannot write is cleaned first (ints too
    long for str() in hex, unprintable objects by their type)."""
    try:
        return json.dumps(block, sort_keys=True, default=str)
    except Exception:
        pass
    try:
        cleaned = _clean(block, frozenset())
        return json.dumps(cleaned, sort_keys=True, ensure_ascii=False, default=_json_default)
    except (TypeError, ValueError, RecursionError):  # keys that do not sort, cycles
        return str(_json_default(block))


def is_guard_message(message: BaseMessage, names: frozenset[str] = DEFAULT_GUARD_NAMES) -> bool:
    """True for messages a guard added (nudges, final notes), which are never user turns."""
    if message.name in names:
        return True
    meta = message.response_metadata
    return isinstance(meta, Mapping) and "agent_guards" in meta
