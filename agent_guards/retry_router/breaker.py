"""Backoff schedule and a store-backed circuit breaker. Private: use ``agent_guards.retry_router``.

Both are frozen policies. The backoff's jitter is derived from a key (the tool call id),
not from a random generator, so a replay waits the same. The breaker keeps its state in a
LangGraph ``BaseStore`` under ``namespace``/``<tool name>``, so every thread and every worker
using that store shares it; the transition itself is a pure function of (value, event, now).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Literal

from agent_guards.core.errors import check_choice
from agent_guards.core.policy import Policy, check_duration, check_int, check_number
from agent_guards.retry_router.model import FailureKind

if TYPE_CHECKING:
    from langgraph.store.base import BaseStore

__all__ = ["Backoff", "BreakerState", "CircuitBreaker"]

BreakerState = Literal["closed", "open", "half_open"]


def _unit(key: str, attempt: int) -> float:
    digest = hashlib.blake2b(f"{key}#{attempt}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64


@dataclass(frozen=True, kw_only=True)
class Backoff(Policy):
    """Exponential backoff with jitter, capped, honouring ``Retry-After``.

    ``delay(n)`` is the wait before attempt ``n + 1`` after ``n`` failed attempts:
    ``min(max_delay, base_delay * factor ** (n - 1))``, then jittered. Jitter is a
    deterministic function of ``key`` and ``n`` (replays wait the same; different calls
    spread out). A ``Retry-After`` from the server is used as given.

    >>> b = Backoff(base_delay=1, factor=2, max_delay=5, jitter="none")
    >>> [b.delay(n) for n in (1, 2, 3, 4)]
    [1.0, 2.0, 4.0, 5.0]
    >>> b.delay(1, retry_after=3.0)
    3.0
    >>> 0 <= Backoff().delay(2, key="call_7") <= 2.0
    True
    """

    base_delay: float | timedelta = 1.0
    """Delay before the first retry, in seconds (or a timedelta)."""
    factor: float = 2.0
    """Growth per attempt (>= 1)."""
    max_delay: float | timedelta = 60.0
    """Cap on any single wait; a ``Retry-After`` longer than this gives up instead."""
    max_attempts: int = 3
    """Total attempts of one call, the first included (so 2 retries by default)."""
    jitter: Literal["full", "equal", "none"] = "full"
    """``full``: uniform in [0, d]; ``equal``: d/2 + uniform in [0, d/2]; ``none``: d."""
    name: str = "Backoff"
    """Policy name recorded in decisions."""
    version: int = 1
    """Policy version recorded in decisions."""

    def __post_init__(self) -> None:
        for name in ("base_delay", "max_delay"):
            object.__setattr__(self, name, check_duration(f"Backoff.{name}", getattr(self, name)))
        check_number("Backoff.factor", self.factor, minimum=1)
        check_int("Backoff.max_attempts", self.max_attempts, minimum=1)
        check_choice("Backoff.jitter", self.jitter, ("full", "equal", "none"))

    def delay(self, attempt: int, *, retry_after: float | None = None, key: str = "") -> float:
        """Seconds to wait after ``attempt`` failed attempts (``attempt >= 1``)."""
        check_int("Backoff.delay.attempt", attempt, minimum=1)
        if retry_after is not None:
            return float(retry_after)
        base = float(self.base_delay)  # type: ignore[arg-type]
        cap = float(self.max_delay)  # type: ignore[arg-type]
        raw = min(cap, base * float(self.factor) ** min(attempt - 1, 64))
        if self.jitter == "none":
            return raw
        u = _unit(key, attempt)
        return raw * u if self.jitter == "full" else raw / 2 + raw / 2 * u

    def schedule(self, *, key: str = "") -> list[float]:
        """The waits before each retry, for ``max_attempts`` attempts."""
        return [self.delay(n, key=key) for n in range(1, self.max_attempts)]


@dataclass(frozen=True, kw_only=True)
class CircuitBreaker(Policy):
    """Per-tool circuit breaker whose state lives in a LangGraph ``BaseStore``.

    closed --(``failure_threshold`` net failures)--> open --(``cooldown`` elapsed)-->
    half_open --(``success_threshold`` successes)--> closed; a failure while half-open
    reopens it. In the closed state a success takes one failure off the count, so scattered
    failures among successes never open it.
    Only ``counted_kinds`` failures count: a wrong argument says nothing about the service.

    Updates are read-modify-write on the store: concurrent workers may lose an update,
    which can delay opening by a failure; they never corrupt the value.

    >>> from langgraph.store.memory import InMemoryStore
    >>> store, cb = InMemoryStore(), CircuitBreaker(failure_threshold=2, cooldown=30)
    >>> for t in (0, 1):
    ...     _ = cb.record(store, "search", ok=False, now=t)
    >>> cb.allow(store, "search", now=10)
    (False, 'open')
    >>> cb.allow(store, "search", now=31)
    (True, 'half_open')
    """

    failure_threshold: int = 5
    """Net failures that open the breaker."""
    cooldown: float | timedelta = 30.0
    """Seconds the breaker stays open before letting a trial call through."""
    success_threshold: int = 2
    """Successes in half-open that close it again."""
    counted_kinds: frozenset[FailureKind] = frozenset(
        {FailureKind.TRANSIENT, FailureKind.EMPTY_ERROR}
    )
    """Failure kinds that count against the service."""
    namespace: tuple[str, ...] = ("agent_guards", "circuit_breaker")
    """Store namespace; the key is the tool name."""
    name: str = "CircuitBreaker"
    """Policy name recorded in decisions."""
    version: int = 1
    """Policy version recorded in decisions."""

    def __post_init__(self) -> None:
        check_int("CircuitBreaker.failure_threshold", self.failure_threshold, minimum=1)
        check_int("CircuitBreaker.success_threshold", self.success_threshold, minimum=1)
        cooldown = check_duration("CircuitBreaker.cooldown", self.cooldown, positive=True)
        object.__setattr__(self, "cooldown", cooldown)
        kinds = self.counted_kinds
        if isinstance(kinds, str) or not isinstance(kinds, Iterable):
            raise TypeError(f"CircuitBreaker.counted_kinds must be a set of kinds, got {kinds!r}")
        allowed = [k.value for k in FailureKind]
        object.__setattr__(
            self,
            "counted_kinds",
            frozenset(
                FailureKind(check_choice("CircuitBreaker.counted_kinds", str(k), allowed))
                for k in kinds
            ),
        )
        ns = self.namespace
        if not isinstance(ns, tuple) or not ns or not all(isinstance(p, str) and p for p in ns):
            raise ValueError(f"CircuitBreaker.namespace must be a tuple of labels, got {ns!r}")
        bad = [p for p in ns if "." in p]
        if bad:
            raise ValueError(f"CircuitBreaker.namespace labels cannot contain '.', got {bad!r}")

    def state(self, value: Mapping[str, Any] | None, *, now: float) -> BreakerState:
        """The effective state of a stored value at ``now`` (open turns half-open lazily)."""
        if not value:
            return "closed"
        state = value.get("state", "closed")
        if state == "open":
            opened = float(value.get("opened_at") or 0.0)
            return "half_open" if now - opened >= float(self.cooldown) else "open"  # type: ignore[arg-type]
        return "half_open" if state == "half_open" else "closed"

    def transition(
        self, value: Mapping[str, Any] | None, *, ok: bool, now: float, tool: str = ""
    ) -> dict[str, Any]:
        """The stored value after one call result (pure)."""
        old = dict(value or {})
        state = self.state(old, now=now)
        failures = int(old.get("failures", 0))
        successes = int(old.get("successes", 0))
        opened_at = old.get("opened_at")
        if state == "closed":
            failures = max(0, failures - 1) if ok else failures + 1
            if failures >= self.failure_threshold:
                state, opened_at, successes = "open", now, 0
        elif state == "half_open":
            if ok:
                successes += 1
                if successes >= self.success_threshold:
                    state, failures, successes, opened_at = "closed", 0, 0, None
            else:
                state, opened_at, successes, failures = "open", now, 0, failures + 1
        elif not ok:
            failures += 1
        return {
            "state": state,
            "failures": failures,
            "successes": successes,
            "opened_at": opened_at,
            "updated_at": now,
            "tool": tool or old.get("tool", ""),
            "policy": self.label,
        }

    def read(self, store: BaseStore, tool: str) -> dict[str, Any] | None:
        """The stored value for ``tool`` (None if the breaker never saw it)."""
        item = store.get(self.namespace, tool)
        return dict(item.value) if item is not None else None

    def allow(self, store: BaseStore, tool: str, *, now: float) -> tuple[bool, BreakerState]:
        """Whether a call to ``tool`` may go through at ``now``, and the effective state."""
        state = self.state(self.read(store, tool), now=now)
        return state != "open", state

    def record(self, store: BaseStore, tool: str, *, ok: bool, now: float) -> dict[str, Any]:
        """Record one result for ``tool`` and return the new value."""
        value = self.transition(self.read(store, tool), ok=ok, now=now, tool=tool)
        store.put(self.namespace, tool, value)
        return value

    async def aread(self, store: BaseStore, tool: str) -> dict[str, Any] | None:
        """Async :meth:`read` (falls back to the sync API for stores without async)."""
        try:
            item = await store.aget(self.namespace, tool)
        except NotImplementedError:
            item = store.get(self.namespace, tool)
        return dict(item.value) if item is not None else None

    async def aallow(self, store: BaseStore, tool: str, *, now: float) -> tuple[bool, BreakerState]:
        """Async :meth:`allow`."""
        state = self.state(await self.aread(store, tool), now=now)
        return state != "open", state

    async def arecord(self, store: BaseStore, tool: str, *, ok: bool, now: float) -> dict[str, Any]:
        """Async :meth:`record`."""
        value = self.transition(await self.aread(store, tool), ok=ok, now=now, tool=tool)
        try:
            await store.aput(self.namespace, tool, value)
        except NotImplementedError:
            store.put(self.namespace, tool, value)
        return value
