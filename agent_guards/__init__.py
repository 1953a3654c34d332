"""agent-guards: runtime guards for LangGraph agents.

Prebuilt nodes and conditional edges that decide from structured data when an agent
should answer, clarify, abstain, retry, replan, reuse a result or stop, and record every
decision as a :class:`GuardDecision` in state and in the trace.
"""

from agent_guards.budget import (
    AllOf,
    AnyOf,
    Budget,
    Deadline,
    MaxModelCalls,
    MaxReplans,
    MaxSteps,
    MaxTokens,
    MaxToolCalls,
    StopCondition,
    StopReason,
    recursion_limit_for,
)
from agent_guards.errors import (
    AgentGuardError,
    BudgetExceeded,
    CircuitOpen,
    GuardTripped,
    InvalidInputError,
    LoopDetected,
    ToolFailure,
)
from agent_guards.tracing import attach_decision, decision_metadata, decision_tags
from agent_guards.types import (
    ContextRoute,
    EvidenceRoute,
    GuardDecision,
    GuardState,
    LoopRoute,
    PlannerRoute,
    RetryRoute,
    Usage,
    Verdict,
    keep_last,
    merge_usage,
    now_from_config,
    parse_verdict,
)

__all__ = [
    "AgentGuardError",
    "AllOf",
    "AnyOf",
    "Budget",
    "BudgetExceeded",
    "CircuitOpen",
    "ContextRoute",
    "Deadline",
    "EvidenceRoute",
    "GuardDecision",
    "GuardState",
    "GuardTripped",
    "InvalidInputError",
    "LoopDetected",
    "LoopRoute",
    "MaxModelCalls",
    "MaxReplans",
    "MaxSteps",
    "MaxTokens",
    "MaxToolCalls",
    "PlannerRoute",
    "RetryRoute",
    "StopCondition",
    "StopReason",
    "ToolFailure",
    "Usage",
    "Verdict",
    "attach_decision",
    "decision_metadata",
    "decision_tags",
    "keep_last",
    "merge_usage",
    "now_from_config",
    "parse_verdict",
    "recursion_limit_for",
]
