"""retry_router's pure core: RetryRouterPolicy, decide_failure, route_failures.

Private: import from ``agent_guards.failures``. Nothing here imports LangGraph; attempt
counts come from the message history (``ToolMessage.response_metadata["agent_guards"]
["attempt"]``), so a replay or a resume sees the same counts and never a fresh quota.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any, cast

from ._breaker import Backoff
from ._classify import failure_of
from ._failure_types import Failure, FailureKind
from ._history import Action, ScanOptions, latest_batch, scan_actions
from ._signatures import DEFAULT_GUARD_NAMES
from .errors import check_choice
from .types import GuardDecision, RetryRoute, Verdict

__all__ = [
    "DEFAULT_ROUTES",
    "PRECEDENCE",
    "RetryRouterPolicy",
    "decide_failure",
    "route_failures",
]

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
"""The recovery for each kind (seed 000's retry/repair/replan/clarify/abstain/refuse table)."""

_FORBIDDEN: Mapping[FailureKind, frozenset[str]] = {
    FailureKind.PERMISSION: frozenset(ROUTES) - {"refuse"},
    FailureKind.SAFETY: frozenset(ROUTES) - {"refuse"},
    FailureKind.INVALID_ARGS: frozenset({"retry"}),
}
_VERDICTS = {r: Verdict(r) for r in ROUTES}


@dataclass(frozen=True, kw_only=True)
class RetryRouterPolicy:
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
        for name, minimum in (("max_repairs", 1), ("window", 2), ("version", 1)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
                raise ValueError(
                    f"RetryRouterPolicy.{name} must be an int >= {minimum}, got {value!r}"
                )
        names = self.guard_names
        if isinstance(names, str) or not isinstance(names, Iterable):
            raise TypeError(f"RetryRouterPolicy.guard_names must be a set of names, got {names!r}")
        object.__setattr__(self, "guard_names", frozenset(names))

    @property
    def label(self) -> str:
        """``"RetryRouterPolicy@1"``: what decisions record."""
        return f"{self.name}@{self.version}"

    def scan_options(self) -> ScanOptions:
        """Reads the whole run (headless): attempts never reset on a new user message."""
        return ScanOptions(window=self.window, interactive=False, guard_names=self.guard_names)


def _since_last_ok(prior: Sequence[Action], match: Any) -> list[Action]:
    out: list[Action] = []
    for a in reversed(prior):
        if a.kind != "tool" or not match(a):
            continue
        if a.status == "ok" and (a.message is None or failure_of(a.message) is None):
            break
        if a.status == "error" or a.message is not None:
            out.append(a)
    return out


def _kind(a: Action) -> FailureKind | None:
    failure = failure_of(a.message) if a.message is not None else None
    return failure.kind if failure is not None else None


def decide_failure(
    failure: Failure,
    *,
    call_id: str,
    tool: str,
    signature: str,
    attempt: int = 1,
    prior: Sequence[Action] = (),
    policy: RetryRouterPolicy | None = None,
) -> GuardDecision:
    """The recovery for one failed call, given the actions before it.

    ``attempt`` is how many times this call id was executed; failed earlier calls with the
    same signature add to it (a re-issued call gets no fresh quota).

    Example:
        >>> from agent_guards import decide_failure, describe_failure
        >>> failure = describe_failure(TimeoutError("upstream slow"))
        >>> d = decide_failure(failure, call_id="c1", tool="quote", signature="quote:{}")
        >>> d.verdict.value, d.detail
        ('retry', 'quote failed (transient): upstream slow; retry 2 of 3 in ...s')
        >>> decide_failure(failure, call_id="c1", tool="quote", signature="quote:{}", attempt=3)
        GuardDecision(guard='retry_router', verdict=<Verdict.FALLBACK: 'fallback'>,
                      reason='retries_exhausted', ...)
    """
    policy = RetryRouterPolicy() if policy is None else policy
    route: RetryRoute = policy.routes[failure.kind]
    reason = failure.kind.value
    same = _since_last_ok(prior, lambda a: a.signature == signature)
    attempts = attempt + sum(a.attempts for a in same)
    delay: float | None = None
    cap = float(policy.backoff.max_delay)  # type: ignore[arg-type]
    if failure.circuit_open:
        route, reason = "fallback", "circuit_open"
    elif route == "retry":
        if failure.retry_after is not None and failure.retry_after > cap:
            route, reason = policy.on_retry_exhausted, "retry_after_too_long"
        elif attempts >= policy.backoff.max_attempts:
            route, reason = policy.on_retry_exhausted, "retries_exhausted"
        else:
            delay = policy.backoff.delay(
                attempts, retry_after=failure.retry_after, key=f"{call_id}:{signature}"
            )
    elif route == "repair" and failure.kind is FailureKind.INVALID_ARGS:
        if any(_kind(a) is FailureKind.INVALID_ARGS for a in same):
            route, reason = policy.on_repair_exhausted, "same_invalid_args"
        else:
            streak = _since_last_ok(prior, lambda a: a.tool == tool)
            invalid = 1 + sum(1 for a in streak if _kind(a) is FailureKind.INVALID_ARGS)
            if invalid > policy.max_repairs:
                route, reason = policy.on_repair_exhausted, "repairs_exhausted"
    detail = f"{tool} failed ({failure.kind.value}): {failure.message[:160] or 'no message'}"
    if delay is not None:
        detail += f"; retry {attempts + 1} of {policy.backoff.max_attempts} in {delay:.2f}s"
    elif reason != failure.kind.value:
        detail += f"; {reason.replace('_', ' ')}"
    data: dict[str, Any] = {
        "route": route,
        "kind": failure.kind.value,
        "tool": tool,
        "call_id": call_id,
        "attempt": attempts,
        "delay": delay,
        "retry_after": failure.retry_after,
    }
    if failure.field_errors:
        data["field_errors"] = dict(failure.field_errors)
    if failure.question or failure.options:
        data["question"] = failure.question
        data["options"] = list(failure.options)
    return GuardDecision(
        guard=GUARD,
        verdict=_VERDICTS[route],
        reason=reason,
        detail=detail,
        selected_ids=(call_id,),
        policy=policy.label,
        data=data,
    )


def route_failures(
    messages: Sequence[Any], *, policy: RetryRouterPolicy | None = None
) -> GuardDecision:
    """Route the latest tool results: retry, repair, replan, clarify, abstain, refuse, fallback.

    Reads the ToolMessages answering the most recent assistant turn, classifies each
    failure (structured artifact first, else the error text) and picks one route for the
    turn (see :data:`PRECEDENCE`). No failure gives CONTINUE with reason ``no_failure``.

    Raises:
        InvalidInputError: an item is not a message, or a failure artifact is malformed.

    Example:
        >>> from agent_guards.testing import tool_call_message
        >>> from langchain_core.messages import ToolMessage
        >>> history = [tool_call_message("pay", {"amount": 5}, id="c1"),
        ...            ToolMessage("403 Forbidden", tool_call_id="c1", status="error")]
        >>> d = route_failures(history)
        >>> d.verdict.value, d.data["route"], d.data["kind"]
        ('refuse', 'refuse', 'permission')
    """
    policy = RetryRouterPolicy() if policy is None else policy
    if not isinstance(policy, RetryRouterPolicy):
        raise TypeError(f"policy must be a RetryRouterPolicy, got {type(policy).__name__}")
    actions = scan_actions(messages, policy.scan_options())
    decisions = []
    for a in latest_batch(actions):
        failure = failure_of(a.message) if a.message is not None else None
        if failure is None or a.message is None:
            continue
        prior = [p for p in actions if p.ai_position < a.ai_position]
        decisions.append(
            decide_failure(
                failure,
                call_id=a.call_id,
                tool=a.tool,
                signature=a.signature,
                attempt=a.attempts,
                prior=prior,
                policy=policy,
            )
        )
    if not decisions:
        return GuardDecision(
            guard=GUARD,
            verdict=Verdict.CONTINUE,
            reason="no_failure",
            detail="the latest tool results report no failure",
            policy=policy.label,
            data={"route": "continue", "failures": []},
        )
    chosen = min(decisions, key=lambda d: PRECEDENCE.index(cast(str, d.data["route"])))
    route = chosen.data["route"]
    return replace(
        chosen,
        selected_ids=tuple(d.data["call_id"] for d in decisions if d.data["route"] == route),
        data={
            **chosen.data,
            "failures": [
                {k: d.data[k] for k in ("call_id", "tool", "kind", "route")} | {"reason": d.reason}
                for d in decisions
            ],
        },
    )
