"""retry_router: classify a tool failure and route the recovery.

Retry (with backoff and a circuit breaker), repair, replan, clarify, abstain, refuse or
fall back."""

from agent_guards.core.decision import RetryRoute
from agent_guards.retry_router.breaker import Backoff, BreakerState, CircuitBreaker, RetryBudget
from agent_guards.retry_router.classify import (
    classify_failure,
    describe_failure,
    failure_message,
    failure_of,
    kind_for_status,
)
from agent_guards.retry_router.core import decide_failure, retryable, route_failures
from agent_guards.retry_router.graph import (
    RetryState,
    add_retry_router,
    create_retry_finish,
    create_retry_router,
    finish_messages,
    model_retry_policy,
)
from agent_guards.retry_router.model import (
    ARTIFACT_KEY,
    AmbiguousInput,
    EmptyResult,
    Failure,
    FailureKind,
    InvalidArgsError,
    PermissionDenied,
    PreconditionFailed,
    QuotaExceeded,
    SafetyViolation,
    TransientToolError,
    failure_artifact,
)
from agent_guards.retry_router.policy import DEFAULT_ROUTES, PRECEDENCE, RetryRouterPolicy

__all__ = [
    "ARTIFACT_KEY",
    "DEFAULT_ROUTES",
    "PRECEDENCE",
    "AmbiguousInput",
    "Backoff",
    "BreakerState",
    "CircuitBreaker",
    "EmptyResult",
    "Failure",
    "FailureKind",
    "InvalidArgsError",
    "PermissionDenied",
    "PreconditionFailed",
    "QuotaExceeded",
    "RetryBudget",
    "RetryRoute",
    "RetryRouterPolicy",
    "RetryState",
    "SafetyViolation",
    "TransientToolError",
    "add_retry_router",
    "classify_failure",
    "create_retry_finish",
    "create_retry_router",
    "decide_failure",
    "describe_failure",
    "failure_artifact",
    "failure_message",
    "failure_of",
    "finish_messages",
    "kind_for_status",
    "model_retry_policy",
    "retryable",
    "route_failures",
]
