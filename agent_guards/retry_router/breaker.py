"""Backoff schedule, a store-backed circuit breaker and a shared retry budget. Private: use
``agent_guards.retry_router``.

All are frozen policies. The backoff's jitter is derived from a key (the tool call id),
not from a random generator, so a replay waits the same. The breaker keeps one store item
per call result (keys unique per event) in a LangGraph ``BaseStore``, and every reader folds
the recent events with the same pure transition, so two busy writers never lose an update;
half-open trial calls and retry tokens are claimed with an atomic insert-if-absent. Both use
the real clock: cross-thread state never follows a run's pinned clock.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import math
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Literal

from agent_guards.core.errors import check_choice
from agent_guards.core.policy import Policy, check_duration, check_int, check_number
from agent_guards.retry_router.model import FailureKind

if TYPE_CHECKING:
    from langgraph.store.base import BaseStore

__all__ = ["Backoff", "BreakerState", "CircuitBreaker", "RetryBudget"]

BreakerState = Literal["closed", "open", "half_open"]


def _capped(base: float, factor: float, power: int, cap: float) -> float:
    """``min(cap, base * factor ** power)`` without computing a power past the cap."""
    if base <= 0 or cap <= 0:
        return 0.0
    if base >= cap:  # also keeps cap / base away from an underflow to 0
        return cap
    if factor > 1 and power * math.log(factor) >= math.log(cap) - math.log(base):
        return cap
    return min(cap, base * factor**power)


def _unit(key: str, attempt: int) -> float:
    digest = hashlib.blake2b(f"{key}#{attempt}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64


@dataclass(frozen=True, kw_only=True)
class Backoff(Policy):
    """Exponential backoff with jitter, capped, honouring ``Retry-After``.

    ``delay(n)`` is the wait before attempt ``n + 1`` after ``n`` failed attempts:
    ``min(max_delay, base_delay * factor ** (n - 1))``, then jittered. Jitter is a
    deterministic function of ``key`` and ``n`` (replays wait the same; different calls
    spread out). A ``Retry-After`` from the server is used as given: 0 (or a negative
    value, or an HTTP date already past) means retry now, with no backoff and no jitter.
    The cap is applied before the power is computed, so no factor overflows.

    >>> b = Backoff(base_delay=1, factor=2, max_delay=5, jitter="none")
    >>> [b.delay(n) for n in (1, 2, 3, 4)]
    [1.0, 2.0, 4.0, 5.0]
    >>> b.delay(1, retry_after=3.0)
    3.0
    >>> 0 <= Backoff().delay(2, key="call_7") <= 2.0
    True
    >>> Backoff().delay(3, retry_after=0.0), Backoff().delay(1, retry_after=-5)
    (0.0, 0.0)
    >>> Backoff(factor=1e10, jitter="none").delay(32)
    60.0
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
            return max(0.0, float(retry_after))
        base = float(self.base_delay)  # type: ignore[arg-type]
        cap = float(self.max_delay)  # type: ignore[arg-type]
        raw = _capped(base, float(self.factor), attempt - 1, cap)
        if self.jitter == "none":
            return raw
        u = _unit(key, attempt)
        return raw * u if self.jitter == "full" else raw / 2 + raw / 2 * u

    def schedule(self, *, key: str = "") -> list[float]:
        """The waits before each retry, for ``max_attempts`` attempts."""
        return [self.delay(n, key=key) for n in range(1, self.max_attempts)]


def _claim(
    store: BaseStore, namespace: tuple[str, ...], key: str, value: Mapping[str, Any]
) -> bool:
    """Atomic insert-if-absent (imported here: the claims module lives with the tool wrapper)."""
    from agent_guards.tool_guard.claims import claim

    return claim(store, namespace, key, value)


def _serial(store: BaseStore) -> Any:
    """The lock an in-process store (``InMemoryStore``) needs: its search iterates a dict
    another thread may be adding to. SQLite and PostgreSQL stores need none. The same
    lock as the claims', so a claim never runs beside a search."""
    from agent_guards.tool_guard.claims import _LOCK, is_atomic

    return contextlib.nullcontext() if is_atomic(store) else _LOCK


def _claims_atomic(store: BaseStore) -> bool:
    from agent_guards.tool_guard.claims import is_atomic

    return is_atomic(store)


def _search(store: BaseStore, namespace: tuple[str, ...], **query: Any) -> list[Any]:
    with _serial(store):
        return list(store.search(namespace, **query))


def _put(store: BaseStore, namespace: tuple[str, ...], key: str, value: dict[str, Any]) -> None:
    with _serial(store):
        store.put(namespace, key, value, index=False)


def _delete(store: BaseStore, namespace: tuple[str, ...], key: str) -> None:
    with _serial(store):
        store.delete(namespace, key)


def _sorted_events(items: Iterable[Any]) -> list[dict[str, Any]]:
    """Stored events in the order every reader folds them: time, then key."""
    rows = [(float(i.value.get("at", 0.0)), str(i.key), dict(i.value)) for i in items]
    return [value for _, _, value in sorted(rows, key=lambda r: (r[0], r[1]))]


@dataclass(frozen=True, kw_only=True)
class CircuitBreaker(Policy):
    """Per-tool circuit breaker whose state lives in a LangGraph ``BaseStore``.

    closed --(``failure_threshold`` net failures, or with ``failure_rate_threshold`` that
    share of failures among the last ``sliding_window_size`` calls)--> open
    --(``cooldown`` elapsed)--> half_open: ``half_open_max_calls`` trial calls go through,
    every other caller is answered as if it were open --(``success_threshold``
    successes)--> closed; a failure while half-open reopens it. In the closed state a
    success takes one failure off the net count, so scattered failures among successes
    never open it. Only ``counted_kinds`` failures count: a wrong argument says nothing
    about the service.

    Every call result is one store item (keys unique per event) and the state is the
    fold of the events of the last ``window`` seconds, so concurrent writers never lose an
    update; trial slots are claimed with an atomic insert-if-absent. Time is the real clock
    (``clock``), never a run's pinned clock: a run pinned to 2100 cannot open the breaker
    of every other thread for 75 years.

    >>> from langgraph.store.memory import InMemoryStore
    >>> store, cb = InMemoryStore(), CircuitBreaker(failure_threshold=2, cooldown=30)
    >>> for t in (0, 1):
    ...     _ = cb.record(store, "search", ok=False, now=t)
    >>> cb.allow(store, "search", now=10)
    (False, 'open')
    >>> cb.allow(store, "search", now=31), cb.allow(store, "search", now=31)  # one trial
    ((True, 'half_open'), (False, 'half_open'))
    """

    failure_threshold: int = 5
    """Net failures that open the breaker (count mode)."""
    cooldown: float | timedelta = 30.0
    """Seconds the breaker stays open before letting a trial call through; a trial that
    never reports back frees its slot after another ``cooldown``."""
    success_threshold: int = 2
    """Successes in half-open that close it again."""
    half_open_max_calls: int = 1
    """Trial calls admitted at once while half-open (per success still needed); every
    other caller gets the open-circuit fallback (pybreaker: 1; resilience4j: configurable)."""
    failure_rate_threshold: float | None = None
    """Rate mode when set: open at >= this percentage (0-100] of failures among the last
    ``sliding_window_size`` calls, once ``minimum_calls`` calls are in (resilience4j's
    count-based sliding window). None: count mode (``failure_threshold`` net failures)."""
    sliding_window_size: int = 20
    """Rate mode: how many recent calls the failure rate is computed over."""
    minimum_calls: int = 10
    """Rate mode: calls needed in the window before the rate can open the breaker."""
    window: float | timedelta | None = None
    """Events older than this (seconds) are forgotten (and deleted); must exceed
    ``cooldown``. None: ``max(600, 10 * cooldown)``."""
    max_events: int = 1000
    """At most this many recent events are read per decision."""
    counted_kinds: frozenset[FailureKind] = frozenset(
        {FailureKind.TRANSIENT, FailureKind.EMPTY_ERROR}
    )
    """Failure kinds that count against the service."""
    namespace: tuple[str, ...] = ("agent_guards", "circuit_breaker")
    """Store namespace; events under ``(*namespace, "events")``, trial slots under
    ``(*namespace, "trials")``."""
    clock: Callable[[], float] = field(default=time.time, compare=False, repr=False)
    """The real clock (POSIX seconds) for calls without ``now=``; replace only in tests."""
    name: str = "CircuitBreaker"
    """Policy name recorded in decisions."""
    version: int = 1
    """Policy version recorded in decisions."""

    def __post_init__(self) -> None:
        for where in ("failure_threshold", "success_threshold", "half_open_max_calls"):
            check_int(f"CircuitBreaker.{where}", getattr(self, where), minimum=1)
        for where in ("sliding_window_size", "minimum_calls", "max_events"):
            check_int(f"CircuitBreaker.{where}", getattr(self, where), minimum=1)
        cooldown = check_duration("CircuitBreaker.cooldown", self.cooldown, positive=True)
        object.__setattr__(self, "cooldown", cooldown)
        window = (
            max(600.0, 10 * cooldown)
            if self.window is None
            else check_duration("CircuitBreaker.window", self.window, positive=True)
        )
        if window <= cooldown:
            raise ValueError(
                f"CircuitBreaker.window must exceed cooldown ({cooldown}s), got {window}"
            )
        object.__setattr__(self, "window", window)
        rate = self.failure_rate_threshold
        if rate is not None:
            check_number("CircuitBreaker.failure_rate_threshold", rate, minimum=0)
            if not 0 < rate <= 100:
                raise ValueError(
                    f"CircuitBreaker.failure_rate_threshold must be in (0, 100], got {rate}"
                )
        if not callable(self.clock):
            raise TypeError(f"CircuitBreaker.clock must be a callable, got {self.clock!r}")
        self._check_kinds_and_namespace()

    def _check_kinds_and_namespace(self) -> None:
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

    # the pure state machine ------------------------------------------------------------

    def state(self, value: Mapping[str, Any] | None, *, now: float) -> BreakerState:
        """The effective state of a stored value at ``now`` (open turns half-open lazily)."""
        if not value:
            return "closed"
        state = value.get("state", "closed")
        if state == "open":
            opened = float(value.get("opened_at") or 0.0)
            return "half_open" if now - opened >= float(self.cooldown) else "open"  # type: ignore[arg-type]
        return "half_open" if state == "half_open" else "closed"

    def _closed(self, old: Mapping[str, Any], ok: bool) -> tuple[bool, int, list[bool]]:
        """(opens?, failures, recent outcomes) after one result in the closed state."""
        failures = int(old.get("failures", 0))
        if self.failure_rate_threshold is None:
            failures = max(0, failures - 1) if ok else failures + 1
            return failures >= self.failure_threshold, failures, []
        recent = [*list(old.get("recent") or ()), bool(ok)][-self.sliding_window_size :]
        failed = recent.count(False)
        rate = 100.0 * failed / len(recent)
        opens = len(recent) >= self.minimum_calls and rate >= self.failure_rate_threshold
        return opens, failed, recent

    def transition(
        self, value: Mapping[str, Any] | None, *, ok: bool, now: float, tool: str = ""
    ) -> dict[str, Any]:
        """The value after one call result (pure): one step of the fold over the events."""
        old = dict(value or {})
        state = self.state(old, now=now)
        failures = int(old.get("failures", 0))
        successes = int(old.get("successes", 0))
        opened_at, recent = old.get("opened_at"), list(old.get("recent") or ())
        if state == "closed":
            opens, failures, recent = self._closed(old, ok)
            if opens:
                state, opened_at, successes, recent = "open", now, 0, []
        elif state == "half_open":
            if ok:
                successes += 1
                if successes >= self.success_threshold:
                    state, failures, successes, opened_at = "closed", 0, 0, None
            else:
                state, opened_at, successes, failures = "open", now, 0, failures + 1
        elif not ok:
            failures += 1
        out = {
            "state": state,
            "failures": failures,
            "successes": successes,
            "opened_at": opened_at,
            "updated_at": now,
            "tool": tool or old.get("tool", ""),
            "policy": self.label,
        }
        return {**out, "recent": recent} if self.failure_rate_threshold is not None else out

    def fold(self, events: Sequence[Mapping[str, Any]], *, tool: str = "") -> dict[str, Any] | None:
        """The value after ``events`` (``{"ok": bool, "at": seconds}``, oldest first)."""
        value: dict[str, Any] | None = None
        for event in events:
            value = self.transition(value, ok=bool(event["ok"]), now=float(event["at"]), tool=tool)
        return value

    # the store -----------------------------------------------------------------------

    def _now(self, now: float | None) -> float:
        return float(self.clock() if now is None else now)

    def _events_query(self, tool: str, now: float) -> dict[str, Any]:
        cutoff = now - float(self.window)  # type: ignore[arg-type]
        return {
            "filter": {"tool": tool, "at": {"$gte": cutoff}},
            "limit": self.max_events,
        }

    def _event(self, tool: str, ok: bool, now: float) -> tuple[str, dict[str, Any]]:
        key = f"{tool}|{now:.6f}|{uuid.uuid4().hex}"
        return key, {"tool": tool, "ok": bool(ok), "at": now, "policy": self.label}

    def _skip(self, value: Mapping[str, Any] | None, ok: bool, now: float) -> bool:
        """A success in count mode with nothing to take off: not worth an item."""
        if not ok or self.failure_rate_threshold is not None:
            return False
        return self.state(value, now=now) == "closed" and not (value or {}).get("failures")

    def _trial_keys(self, tool: str, value: Mapping[str, Any], now: float) -> list[str]:
        cooldown = float(self.cooldown)  # type: ignore[arg-type]
        opened = float(value.get("opened_at") or 0.0)
        bucket = int((now - opened - cooldown) // cooldown)  # a stuck trial frees its slot
        step = f"{tool}|{opened:.6f}|{int(value.get('successes', 0))}|{bucket}"
        return [f"{step}|{i}" for i in range(self.half_open_max_calls)]

    def read(
        self, store: BaseStore, tool: str, *, now: float | None = None
    ) -> dict[str, Any] | None:
        """The value for ``tool``: the fold of its recent events (None if there are none)."""
        at = self._now(now)
        items = _search(store, (*self.namespace, "events"), **self._events_query(tool, at))
        return self.fold(_sorted_events(items), tool=tool)

    def allow(
        self, store: BaseStore, tool: str, *, now: float | None = None
    ) -> tuple[bool, BreakerState]:
        """Whether a call to ``tool`` may go through now, and the effective state.

        Half-open, it claims a trial slot: True for the first ``half_open_max_calls``
        callers, False for the others (answer them as if the circuit were open)."""
        at = self._now(now)
        value = self.read(store, tool, now=at)
        state = self.state(value, now=at)
        if state != "half_open" or value is None:
            return state != "open", state
        trial = {"tool": tool, "at": at, "policy": self.label}
        ns = (*self.namespace, "trials")
        return any(_claim(store, ns, k, trial) for k in self._trial_keys(tool, value, at)), state

    def admit(
        self, store: BaseStore, tool: str, *, key: str | None = None, now: float | None = None
    ) -> tuple[bool, BreakerState]:
        """:meth:`allow`, replay-safe: a call refused before under ``key`` (thread, call id,
        attempt) is refused again from that record, whatever the breaker says now, so a
        replay or a resume of a run repeats its decisions; a refusal is recorded under
        ``(*namespace, "decisions")`` (first writer wins)."""
        ns = (*self.namespace, "decisions")
        if key is not None:
            with _serial(store):
                known = store.get(ns, key)
            if known is not None:
                return False, known.value.get("state", "open")
        allowed, state = self.allow(store, tool, now=now)
        if not allowed and key is not None:
            _claim(store, ns, key, {"tool": tool, "state": state, "at": self._now(now)})
        return allowed, state

    async def aadmit(
        self, store: BaseStore, tool: str, *, key: str | None = None, now: float | None = None
    ) -> tuple[bool, BreakerState]:
        """Async :meth:`admit` (the store calls run in a worker thread)."""
        return await asyncio.to_thread(self.admit, store, tool, key=key, now=now)

    def record(
        self, store: BaseStore, tool: str, *, ok: bool, now: float | None = None
    ) -> dict[str, Any]:
        """Record one result for ``tool`` (one new item) and return the new value."""
        at = self._now(now)
        ns = (*self.namespace, "events")
        events = _sorted_events(_search(store, ns, **self._events_query(tool, at)))
        value = self.fold(events, tool=tool)
        if self._skip(value, ok, at):
            return value or self.transition(None, ok=True, now=at, tool=tool)
        key, event = self._event(tool, ok, at)
        _put(store, ns, key, event)
        self._prune(store, tool, at)
        return self.fold([*events, event], tool=tool) or {}

    def _prune(self, store: BaseStore, tool: str, now: float) -> None:
        """Delete a few events older than ``window`` (idempotent; any writer may do it)."""
        ns = (*self.namespace, "events")
        cutoff = now - float(self.window)  # type: ignore[arg-type]
        for item in _search(store, ns, filter={"tool": tool, "at": {"$lt": cutoff}}, limit=20):
            _delete(store, ns, item.key)

    async def aread(
        self, store: BaseStore, tool: str, *, now: float | None = None
    ) -> dict[str, Any] | None:
        """Async :meth:`read` (falls back to the sync API for stores without async)."""
        at = self._now(now)
        ns, query = (*self.namespace, "events"), self._events_query(tool, at)
        if not _claims_atomic(store):  # in-process: the sync API under the lock
            items = _search(store, ns, **query)
        else:
            try:
                items = await store.asearch(ns, **query)
            except NotImplementedError:
                items = await asyncio.to_thread(_search, store, ns, **query)
        return self.fold(_sorted_events(items), tool=tool)

    async def aallow(
        self, store: BaseStore, tool: str, *, now: float | None = None
    ) -> tuple[bool, BreakerState]:
        """Async :meth:`allow` (the trial claim runs in a worker thread)."""
        at = self._now(now)
        value = await self.aread(store, tool, now=at)
        state = self.state(value, now=at)
        if state != "half_open" or value is None:
            return state != "open", state
        trial = {"tool": tool, "at": at, "policy": self.label}
        ns = (*self.namespace, "trials")
        for key in self._trial_keys(tool, value, at):
            if await asyncio.to_thread(_claim, store, ns, key, trial):
                return True, state
        return False, state

    async def arecord(
        self, store: BaseStore, tool: str, *, ok: bool, now: float | None = None
    ) -> dict[str, Any]:
        """Async :meth:`record` (the store calls run in a worker thread)."""
        at = self._now(now)
        return await asyncio.to_thread(self.record, store, tool, ok=ok, now=at)


@dataclass(frozen=True, kw_only=True)
class RetryBudget(Policy):
    """A cap on retries per tool shared through the store: at most ``max_retries`` retries
    of one tool start in any ``per``-second slot, across every thread and worker using the
    store, so a storm of callers cannot make a rate limit worse. A retry that gets no token
    is not made: its call routes ``fallback`` with reason ``retry_budget_exhausted``.

    Each token is an item claimed with an atomic insert-if-absent (SQLite, PostgreSQL:
    across processes; InMemoryStore: within one process), keyed by tool, slot and index.

    >>> from langgraph.store.memory import InMemoryStore
    >>> store, budget = InMemoryStore(), RetryBudget(max_retries=2, per=1.0)
    >>> [budget.acquire(store, "quote", now=10.5) for _ in range(3)]
    [True, True, False]
    >>> budget.acquire(store, "quote", now=11.0)  # the next slot
    True
    """

    max_retries: int = 10
    """Retries of one tool allowed to start per ``per`` seconds, for all callers together."""
    per: float | timedelta = 1.0
    """Length of a slot, in seconds (or a timedelta)."""
    namespace: tuple[str, ...] = ("agent_guards", "retry_budget")
    """Store namespace of the tokens."""
    clock: Callable[[], float] = field(default=time.time, compare=False, repr=False)
    """The real clock (POSIX seconds) for calls without ``now=``; replace only in tests."""
    name: str = "RetryBudget"
    """Policy name recorded in decisions."""
    version: int = 1
    """Policy version recorded in decisions."""

    def __post_init__(self) -> None:
        check_int("RetryBudget.max_retries", self.max_retries, minimum=1)
        per = check_duration("RetryBudget.per", self.per, positive=True)
        object.__setattr__(self, "per", per)
        ns = self.namespace
        if not isinstance(ns, tuple) or not ns or not all(isinstance(p, str) and p for p in ns):
            raise ValueError(f"RetryBudget.namespace must be a tuple of labels, got {ns!r}")
        if any("." in p for p in ns):
            raise ValueError(f"RetryBudget.namespace labels cannot contain '.', got {ns!r}")
        if not callable(self.clock):
            raise TypeError(f"RetryBudget.clock must be a callable, got {self.clock!r}")

    def acquire(self, store: BaseStore, tool: str, *, now: float | None = None) -> bool:
        """Take one retry token for ``tool`` in the current slot; False when none is left.

        On the real clock a token counts only when the slot has not ended while it was
        claimed (a busy store can take that long): the retry then starts in the slot its
        token belongs to. Else a token of the slot now running is taken instead."""
        for _ in range(3):
            at = float(self.clock() if now is None else now)
            slot = int(at // float(self.per))  # type: ignore[arg-type]
            if not self._take(store, tool, slot, at):
                return False
            if now is not None or int(self.clock() // float(self.per)) == slot:  # type: ignore[arg-type]
                return True
        return False

    def _take(self, store: BaseStore, tool: str, slot: int, at: float) -> bool:
        taken = _search(store, self.namespace, filter={"tool": tool, "slot": slot},
                        limit=self.max_retries)  # fmt: skip
        token = {"tool": tool, "slot": slot, "at": at}
        for i in range(len(taken), self.max_retries):
            if _claim(store, self.namespace, f"{tool}|{slot}|{i}", token):
                if i == 0:
                    self._prune(store, tool, slot)
                return True
        return False

    def _prune(self, store: BaseStore, tool: str, slot: int) -> None:
        old = _search(store, self.namespace, filter={"tool": tool, "slot": {"$lt": slot - 1}},
                           limit=100)  # fmt: skip
        for item in old:
            _delete(store, self.namespace, item.key)

    async def aacquire(self, store: BaseStore, tool: str, *, now: float | None = None) -> bool:
        """Async :meth:`acquire` (runs in a worker thread)."""
        return await asyncio.to_thread(self.acquire, store, tool, now=now)
