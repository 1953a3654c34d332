"""The LangGraph-free vocabulary every guard shares: decisions, verdicts, the error tree,
the policy base, tool effects, the guard channels, the run's clock, and the message-history scanning
guards read.
"""

from agent_guards.core.clock import now_from_config
from agent_guards.core.decision import (
    ContextRoute,
    EvidenceRoute,
    GuardDecision,
    LoopRoute,
    PlannerRoute,
    RetryRoute,
    Verdict,
    parse_verdict,
)
from agent_guards.core.effects import (
    Effect,
    ToolEffects,
    annotate_tool,
    effect_from_metadata,
    effects_of_tools,
)
from agent_guards.core.errors import (
    AgentGuardError,
    BudgetExceeded,
    CircuitOpen,
    GuardTripped,
    InvalidInputError,
    LoopDetected,
    ToolFailure,
)
from agent_guards.core.policy import Policy, check_policy
from agent_guards.core.state import (
    DEFAULT_LOG_SIZE,
    USAGE_COUNTERS,
    GuardState,
    StateKeys,
    Usage,
    keep_last,
    merge_ledger,
    merge_usage,
)

__all__ = [
    "DEFAULT_LOG_SIZE",
    "USAGE_COUNTERS",
    "AgentGuardError",
    "BudgetExceeded",
    "CircuitOpen",
    "ContextRoute",
    "Effect",
    "EvidenceRoute",
    "GuardDecision",
    "GuardState",
    "GuardTripped",
    "InvalidInputError",
    "LoopDetected",
    "LoopRoute",
    "PlannerRoute",
    "Policy",
    "RetryRoute",
    "StateKeys",
    "ToolEffects",
    "ToolFailure",
    "Usage",
    "Verdict",
    "annotate_tool",
    "check_policy",
    "effect_from_metadata",
    "effects_of_tools",
    "keep_last",
    "merge_ledger",
    "merge_usage",
    "now_from_config",
    "parse_verdict",
]
