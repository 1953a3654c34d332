"""RetryRouterPolicy: which recovery each failure kind gets, and how often."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from agent_guards.core.decision import RetryRoute
from agent_guards.core.errors import check_choice
from agent_guards.core.history import ScanOptions
from agent_guards.core.policy import Policy, check_int
from agent_guards.core.signatures import DEFAULT_GUARD_NAMES
from agent_guards.retry_router.breaker import Backoff
from agent_guards.retry_router.model import FailureKind

__all__ = ["DEFAULT_ROUTES", "PRECEDENCE", "RetryRouterPolicy"]


GUARD = "retry_router"


ROUTES: tuple[str, ...] = (
    "retry",
    "repair",
    "replan",
    "clarify",
    "abstain",
    "refuse",
    "fallback",
    "continue",
)


PRECEDENCE: tuple[str, ...] = (
    "refuse",
    "clarify",
    "abstain",
    "fallback",
    "retry",
    "replan",
    "repair",
    "continue",
)


"""When one turn's calls fail differently, the first route here wins."""


DEFAULT_ROUTES: Mapping[FailureKind, RetryRoute] = MappingProxyType(
    {
        FailureKind.TRANSIENT: "retry",
        FailureKind.INVALID_ARGS: "repair",
        FailureKind.PRECONDITION: "replan",
        FailureKind.AMBIGUOUS: "clarify",
        FailureKind.EMPTY_BUSINESS: "continue",
        FailureKind.EMPTY_ERROR: "retry",
        FailureKind.PERMISSION: "refuse",
        FailureKind.SAFETY: "refuse",
        FailureKind.QUOTA: "fallback",
        FailureKind.UNKNOWN: "replan",
    }
)


"""The recovery for each kind: retry what is transient, repair invalid arguments, replan
when a premise broke, ask the user when the request is ambiguous, fall back when a quota
ran out, and refuse what permission or safety forbids."""


_FORBIDDEN: Mapping[FailureKind, frozenset[str]] = {
    FailureKind.PERMISSION: frozenset(ROUTES) - {"refuse"},
    FailureKind.SAFETY: frozenset(ROUTES) - {"refuse"},
    FailureKind.INVALID_ARGS: frozenset({"retry"}),
}


@dataclass(frozen=True, kw_only=True)
class RetryRouterPolicy(Policy):
    """How retry_router maps failures to recoveries.

    Permission and safety failures always refuse and invalid arguments are never blindly
    retried: routes that would do so are rejected when the policy is built.

    >>> RetryRouterPolicy().routes[FailureKind.QUOTA]
    'fallback'
    >>> RetryRouterPolicy(routes={"permission": "retry"})  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: RetryRouterPolicy.routes['permission']='retry' is not allowed: ... 'refuse'
    """

    backoff: Backoff = field(default_factory=Backoff)
    """Delays and the attempt cap for ``retry`` routes."""
    routes: Mapping[FailureKind | str, RetryRoute] = field(default_factory=dict)
    """Overrides of :data:`DEFAULT_ROUTES`, keyed by kind (or its value)."""
    on_retry_exhausted: RetryRoute = "fallback"
    """Route once ``backoff.max_attempts`` attempts failed, or Retry-After exceeds the cap."""
    on_repair_exhausted: RetryRoute = "abstain"
    """Route when the model sends the same invalid args again, or after ``max_repairs``."""
    on_unknown_outcome: RetryRoute = "clarify"
    """Route instead of a retry when a call that may write (a write, or a tool of unknown
    effect) failed in a way that may have let it run (a timeout, a dropped connection):
    a retry could do it twice. Idempotent writes and reads are retried as usual."""
    max_repairs: int = 3
    """Invalid-args failures of one tool in a row before repairing stops."""
    window: int = 50
    """How many recent actions are read to count attempts."""
    guard_names: frozenset[str] = DEFAULT_GUARD_NAMES
    """``name`` of guard-added messages (skipped when reading the history)."""
    name: str = "RetryRouterPolicy"
    """Policy name recorded in decisions."""
    version: int = 1
    """Policy version recorded in decisions (``RetryRouterPolicy@1``)."""

    def __post_init__(self) -> None:
        if not isinstance(self.backoff, Backoff):
            raise TypeError(f"RetryRouterPolicy.backoff must be a Backoff, got {self.backoff!r}")
        kinds = [k.value for k in FailureKind]
        routes: dict[FailureKind, RetryRoute] = dict(DEFAULT_ROUTES)
        for key, route in dict(self.routes).items():
            kind = FailureKind(check_choice("RetryRouterPolicy.routes key", str(key), kinds))
            check_choice(f"RetryRouterPolicy.routes[{kind.value!r}]", route, ROUTES)
            if route in _FORBIDDEN.get(kind, ()):
                allowed = ", ".join(repr(r) for r in ROUTES if r not in _FORBIDDEN[kind])
                why = (
                    "are never blindly retried"
                    if kind is FailureKind.INVALID_ARGS
                    else "are never retried or worked around"
                )
                raise ValueError(
                    f"RetryRouterPolicy.routes[{kind.value!r}]={route!r} is not "
                    f"allowed: {kind.value} failures {why}; allowed: {allowed}"
                )
            routes[kind] = route
        object.__setattr__(self, "routes", MappingProxyType(routes))
        check_choice(
            "RetryRouterPolicy.on_retry_exhausted",
            self.on_retry_exhausted,
            [r for r in ROUTES if r != "retry"],
        )
        check_choice(
            "RetryRouterPolicy.on_repair_exhausted",
            self.on_repair_exhausted,
            [r for r in ROUTES if r not in ("retry", "repair")],
        )
        check_choice(
            "RetryRouterPolicy.on_unknown_outcome",
            self.on_unknown_outcome,
            [r for r in ROUTES if r != "retry"],
        )
        check_int("RetryRouterPolicy.max_repairs", self.max_repairs, minimum=1)
        check_int("RetryRouterPolicy.window", self.window, minimum=2)
        check_int("RetryRouterPolicy.version", self.version, minimum=1)
        names = self.guard_names
        if isinstance(names, str) or not isinstance(names, Iterable):
            raise TypeError(f"RetryRouterPolicy.guard_names must be a set of names, got {names!r}")
        object.__setattr__(self, "guard_names", frozenset(names))

    def scan_options(self) -> ScanOptions:
        """Reads the whole run (headless): attempts never reset on a new user message."""
        return ScanOptions(window=self.window, interactive=False, guard_names=self.guard_names)
