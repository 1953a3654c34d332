"""RetryRouterPolicy: which recovery each failure kind gets, and how often."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from types import MappingProxyType
from typing import Any

from langchain_core.messages import ToolMessage

from agent_guards.core.decision import RetryRoute
from agent_guards.core.errors import check_choice
from agent_guards.core.history import ScanOptions
from agent_guards.core.policy import Policy, check_int
from agent_guards.core.signatures import DEFAULT_GUARD_NAMES, content_text
from agent_guards.core.texts import TEXTS_EN, Texts
from agent_guards.retry_router.breaker import Backoff
from agent_guards.retry_router.classify import failure_of
from agent_guards.retry_router.model import ARTIFACT_KEY, Failure, FailureKind

Detector = Callable[[str, str], "FailureKind | str | None"]
"""``detect(tool, text) -> kind or None``: a failure a tool reported as ordinary text."""

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
    failure_patterns: Mapping[str, Sequence[tuple[str, FailureKind | str]]] = field(
        default_factory=dict
    )
    """Failures tools return as ordinary strings, per tool name (``"*"``: every tool):
    ``{"update_flight": [(r"^Not permitted", "permission"), (r"^Error:", "unknown")]}``.
    A regex (``re.search``, case-insensitive) matched on the content of a result without
    a failure artifact, first match wins; the tool's own patterns before ``"*"``."""
    detect: Detector | None = field(default=None, compare=False)
    """``detect(tool, text) -> FailureKind | str | None``, asked after the patterns, for
    results without a failure artifact: classify what a tool reports as text without
    editing the tool."""
    max_repairs: int = 3
    """Invalid-args failures of one tool in a row before repairing stops."""
    window: int = 50
    """How many recent actions are read to count attempts."""
    guard_names: frozenset[str] = DEFAULT_GUARD_NAMES
    """``name`` of guard-added messages (skipped when reading the history)."""
    texts: Texts = field(default=TEXTS_EN, compare=False)
    """The texts users read when this guard ends a run (:class:`~agent_guards.core.texts.Texts`;
    ``TEXTS_ZH`` ships too). Decisions keep the guard's name and reason code either way."""
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
        if not isinstance(self.texts, Texts):
            raise TypeError(f"RetryRouterPolicy.texts must be a Texts, got {self.texts!r}")
        check_int("RetryRouterPolicy.window", self.window, minimum=2)
        check_int("RetryRouterPolicy.version", self.version, minimum=1)
        names = self.guard_names
        if isinstance(names, str) or not isinstance(names, Iterable):
            raise TypeError(f"RetryRouterPolicy.guard_names must be a set of names, got {names!r}")
        object.__setattr__(self, "guard_names", frozenset(names))
        object.__setattr__(self, "failure_patterns", _patterns(self.failure_patterns))
        if self.detect is not None and not callable(self.detect):
            raise TypeError(f"RetryRouterPolicy.detect must be a callable, got {self.detect!r}")

    def failure_of(self, message: ToolMessage) -> Failure | None:
        """The failure ``message`` reports: its artifact, else ``failure_patterns`` and
        ``detect`` for its tool, else the ``status="error"`` text (see :func:`failure_of`).

        >>> from langchain_core.messages import ToolMessage
        >>> policy = RetryRouterPolicy(
        ...     failure_patterns={"reschedule": [(r"^not permitted", "permission")]})
        >>> text = "Not permitted to reschedule to a date that is more than 3 months away"
        >>> msg = ToolMessage(text, tool_call_id="c1", name="reschedule")
        >>> policy.failure_of(msg).kind.value, failure_of(msg) is None
        ('permission', True)
        """
        artifact = message.artifact
        if (isinstance(artifact, Mapping) and ARTIFACT_KEY in artifact) or not self._detects:
            return failure_of(message)
        kind = self._detected(str(message.name or ""), content_text(message.content))
        if kind is None:
            return failure_of(message)
        text = content_text(message.content)
        return Failure(kind, message=text[:500], error_type="detected")

    def _detected(self, tool: str, text: str) -> FailureKind | None:
        patterns = self.failure_patterns
        for pattern, kind in (*patterns.get(tool, ()), *patterns.get("*", ())):
            if re.search(pattern, text, flags=re.IGNORECASE):
                return FailureKind(kind)
        if self.detect is None:
            return None
        found = self.detect(tool, text)
        if found is None:
            return None
        allowed = [k.value for k in FailureKind]
        where = f"RetryRouterPolicy.detect({tool!r}, ...)"
        return FailureKind(check_choice(where, str(found), allowed))

    @cached_property
    def _detects(self) -> bool:
        """Whether the policy reads failures from result texts (``failure_patterns`` or
        ``detect``); without, a result's failure is its artifact's or its status's."""
        return bool(self.failure_patterns) or self.detect is not None

    def scan_options(self) -> ScanOptions:
        """Reads the whole run (headless): attempts never reset on a new user message."""
        return self._scan

    @cached_property  # made once per policy (both are frozen; every tool turn reads it)
    def _scan(self) -> ScanOptions:
        return ScanOptions(window=self.window, interactive=False, guard_names=self.guard_names)


def _patterns(raw: Any) -> Mapping[str, tuple[tuple[str, FailureKind], ...]]:
    """Validated ``failure_patterns``: every regex compiles, every kind exists."""
    if not isinstance(raw, Mapping):
        raise TypeError(
            f"RetryRouterPolicy.failure_patterns must map tool -> [(regex, kind)], got {raw!r}"
        )
    allowed = [k.value for k in FailureKind]
    out: dict[str, tuple[tuple[str, FailureKind], ...]] = {}
    for tool, rows in raw.items():
        where = f"RetryRouterPolicy.failure_patterns[{tool!r}]"
        if isinstance(rows, (str, bytes)) or not isinstance(rows, Iterable):
            raise TypeError(f"{where} must be a list of (regex, kind), got {rows!r}")
        checked = []
        for row in rows:
            if not isinstance(row, tuple | list) or len(row) != 2:
                raise TypeError(f"{where} entries must be (regex, kind) pairs, got {row!r}")
            pattern, kind = row
            try:
                re.compile(str(pattern))
            except re.error as err:
                raise ValueError(f"{where}: {pattern!r} is not a valid regex: {err}") from None
            checked.append((str(pattern), FailureKind(check_choice(where, str(kind), allowed))))
        out[str(tool)] = tuple(checked)
    return MappingProxyType(out)
