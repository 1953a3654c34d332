"""The policies an eval run uses, and per-case overrides. Private; see :mod:`.kinds`.

Example:
    >>> p = EvalPolicies(evidence=EvidencePolicy(high_risk=True))
    >>> p.labels()["evidence_resolve"], p.loop.label
    ('EvidencePolicy@1', 'LoopPolicy@1')
    >>> with_options(LoopPolicy(), {"thresholds": {"cycle": [2, 4]}}).limits("cycle")
    (2, 4)
    >>> with_options(LoopPolicy(), {"stop": 3})
    Traceback (most recent call last):
    ...
    ValueError: input.policy: LoopPolicy has no field 'stop'; allowed: ...
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from agent_guards.context_guard.policy import ContextPolicy
from agent_guards.core.decision import Verdict
from agent_guards.core.errors import InvalidInputError
from agent_guards.evidence_resolve.policy import EvidencePolicy
from agent_guards.loop_check.policy import LoopPolicy
from agent_guards.memory_resolve.policy import MemoryPolicy
from agent_guards.planner_gate.policy import PlannerPolicy
from agent_guards.retry_router.policy import RetryRouterPolicy

__all__ = ["EvalPolicies", "check_input", "invalid", "with_options"]

P = TypeVar("P")

_GUARDS = {
    "evidence": "evidence_resolve",
    "memory": "memory_resolve",
    "planner": "planner_gate",
    "loop": "loop_check",
    "retry": "retry_router",
    "context": "context_guard",
}


# The option fields a case's "policy" may override, per kind
POLICY_TYPES: dict[str, type] = {
    "evidence": EvidencePolicy,
    "memory": MemoryPolicy,
    "planner": PlannerPolicy,
    "loop": LoopPolicy,
    "retry": RetryRouterPolicy,
    "context": ContextPolicy,
}


@dataclass(frozen=True, kw_only=True)
class EvalPolicies:
    """The policy each guard runs under in an eval run (defaults: each guard's defaults).

    Break one on purpose to see the regression gate fail, or pass your production policies
    to evaluate them: ``EvalPolicies(evidence=EvidencePolicy(high_risk=True))``.
    """

    evidence: EvidencePolicy = field(default_factory=EvidencePolicy)
    """Policy of the ``evidence`` kind (``resolve_evidence``)."""
    memory: MemoryPolicy = field(default_factory=MemoryPolicy)
    """Policy of the ``memory`` kind (``resolve_memory``)."""
    planner: PlannerPolicy = field(default_factory=PlannerPolicy)
    """Policy of the ``planner`` kind (``gate_plan``)."""
    loop: LoopPolicy = field(default_factory=LoopPolicy)
    """Policy of the ``loop`` kind (``detect_loop`` and result reuse)."""
    retry: RetryRouterPolicy = field(default_factory=RetryRouterPolicy)
    """Policy of the ``retry`` kind (``decide_failure`` / ``route_failures``)."""
    context: ContextPolicy = field(default_factory=ContextPolicy)
    """Policy of the ``context`` kind (``fit_context``)."""

    def __post_init__(self) -> None:
        for name, kind in POLICY_TYPES.items():
            value = getattr(self, name)
            if not isinstance(value, kind):
                raise TypeError(
                    f"EvalPolicies.{name} must be a {kind.__name__}, got {type(value).__name__}"
                )

    def labels(self) -> dict[str, str]:
        """Guard name -> policy label (``{"evidence_resolve": "EvidencePolicy@1", ...}``)."""
        return {guard: getattr(self, kind).label for kind, guard in _GUARDS.items()}


def _coerce(name: str, current: Any, value: Any) -> Any:
    if isinstance(current, frozenset) and isinstance(value, (list, tuple)):
        return frozenset(value)
    if isinstance(current, tuple) and isinstance(value, list):
        return tuple(value)
    if dataclasses.is_dataclass(current) and isinstance(value, Mapping):
        return with_options(current, value)
    if name == "thresholds" and isinstance(value, Mapping):
        return {k: tuple(v) if isinstance(v, list) else v for k, v in value.items()}
    return value


def with_options(policy: P, options: Mapping[str, Any] | None) -> P:
    """``policy`` with the fields in ``options`` replaced (JSON lists become sets/tuples).

    Raises:
        ValueError: an option is not a field of the policy, or the policy rejects the value.
    """
    if not options:
        return policy
    if not isinstance(options, Mapping):
        raise ValueError(f"input.policy must be an object, got {options!r}")
    assert dataclasses.is_dataclass(policy) and not isinstance(policy, type)
    names = [f.name for f in dataclasses.fields(policy)]
    changes: dict[str, Any] = {}
    for key, value in options.items():
        if key not in names:
            raise ValueError(
                f"input.policy: {type(policy).__name__} has no field {key!r}; allowed: {names}"
            )
        changes[key] = _coerce(key, getattr(policy, key), value)
    try:
        return dataclasses.replace(policy, **changes)
    except TypeError as err:
        raise ValueError(f"input.policy: {err}") from err


def check_input(data: Any, allowed: Iterable[str], kind: str) -> None:
    """Reject a case input that is not an object or has a key the kind does not know."""
    if not isinstance(data, Mapping):
        raise ValueError(f"input of a {kind} case must be an object, got {type(data).__name__}")
    names = sorted(allowed)
    unknown = sorted(set(data) - set(names))
    if unknown:
        raise ValueError(f"input has unknown key(s) {unknown} for kind {kind!r}; allowed: {names}")


def invalid(err: InvalidInputError, verdict: Verdict, policy: str) -> dict[str, Any]:
    """What a node records when its core rejects the input (reason ``invalid_input``)."""
    return {
        "verdict": verdict.value,
        "reason": "invalid_input",
        "item": err.item,
        "field": err.field,
        "detail": str(err),
        "selected_ids": [],
        "conflicting_ids": [],
        "dropped_ids": [err.item] if err.item else [],
        "policy": policy,
    }
