"""agent-guards: runtime guards for LangGraph agents.

Prebuilt nodes and conditional edges that decide from structured data when an agent
should answer, clarify, abstain, retry, replan, reuse a result or stop, and record every
decision as a :class:`GuardDecision` in state and in the trace.

This module holds the names a user writes in the first hour; each loads on first use
(PEP 562), so ``import agent_guards`` imports nothing heavy. Everything else lives in its
guard's package: ``agent_guards.evidence_resolve``, ``memory_resolve``, ``planner_gate``,
``loop_check``, ``retry_router``, ``context_guard``, the shared ``tool_guard`` wrapper,
the LangGraph-free ``core``, and ``middleware`` for ``create_agent`` (the ``agents`` extra).

Example:
    >>> import agent_guards
    >>> agent_guards.Verdict.STOP.value, "fit_context" in agent_guards.__all__
    ('stop', True)
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_SOURCES: dict[str, str] = {
    "create_evidence_resolve": "evidence_resolve",
    "add_evidence_resolve": "evidence_resolve",
    "resolve_evidence": "evidence_resolve",
    "EvidencePolicy": "evidence_resolve",
    "EvidenceState": "evidence_resolve",
    "Evidence": "evidence_resolve",
    "create_memory_resolve": "memory_resolve",
    "resolve_memory": "memory_resolve",
    "MemoryPolicy": "memory_resolve",
    "MemoryState": "memory_resolve",
    "MemoryRecord": "memory_resolve",
    "create_planner_gate": "planner_gate",
    "add_planner_gate": "planner_gate",
    "gate_plan": "planner_gate",
    "PlannerPolicy": "planner_gate",
    "PlanState": "planner_gate",
    "PlanVersion": "planner_gate",
    "PlanStep": "planner_gate",
    "create_loop_check": "loop_check",
    "add_loop_check": "loop_check",
    "detect_loop": "loop_check",
    "LoopPolicy": "loop_check",
    "LoopState": "loop_check",
    "create_retry_router": "retry_router",
    "add_retry_router": "retry_router",
    "classify_failure": "retry_router",
    "RetryRouterPolicy": "retry_router",
    "RetryState": "retry_router",
    "FailureKind": "retry_router",
    "CircuitBreaker": "retry_router",
    "create_context_guard": "context_guard",
    "fit_context": "context_guard",
    "ContextPolicy": "context_guard",
    "ContextState": "context_guard",
    "ToolCallGuard": "tool_guard",
    "GuardState": "core",
    "GuardDecision": "core",
    "Verdict": "core",
    "AgentGuardError": "core",
    "Budget": "budget",
    "MaxSteps": "budget",
    "MaxReplans": "budget",
    "MaxToolCalls": "budget",
    "MaxModelCalls": "budget",
    "MaxTokens": "budget",
    "Deadline": "budget",
    "guard_serializer": "serde",
    "replay_config": "persistence",
    "LoopGuardMiddleware": "middleware",
    "RetryRouterMiddleware": "middleware",
}
"""Where each top-level name lives: ``agent_guards.<package>``."""

__all__ = [
    "AgentGuardError",
    "Budget",
    "CircuitBreaker",
    "ContextPolicy",
    "ContextState",
    "Deadline",
    "Evidence",
    "EvidencePolicy",
    "EvidenceState",
    "FailureKind",
    "GuardDecision",
    "GuardState",
    "LoopGuardMiddleware",
    "LoopPolicy",
    "LoopState",
    "MaxModelCalls",
    "MaxReplans",
    "MaxSteps",
    "MaxTokens",
    "MaxToolCalls",
    "MemoryPolicy",
    "MemoryRecord",
    "MemoryState",
    "PlanState",
    "PlanStep",
    "PlanVersion",
    "PlannerPolicy",
    "RetryRouterMiddleware",
    "RetryRouterPolicy",
    "RetryState",
    "ToolCallGuard",
    "Verdict",
    "add_evidence_resolve",
    "add_loop_check",
    "add_planner_gate",
    "add_retry_router",
    "classify_failure",
    "create_context_guard",
    "create_evidence_resolve",
    "create_loop_check",
    "create_memory_resolve",
    "create_planner_gate",
    "create_retry_router",
    "detect_loop",
    "fit_context",
    "gate_plan",
    "guard_serializer",
    "replay_config",
    "resolve_evidence",
    "resolve_memory",
]

if TYPE_CHECKING:
    from agent_guards.budget import (
        Budget as Budget,
    )
    from agent_guards.budget import (
        Deadline as Deadline,
    )
    from agent_guards.budget import (
        MaxModelCalls as MaxModelCalls,
    )
    from agent_guards.budget import (
        MaxReplans as MaxReplans,
    )
    from agent_guards.budget import (
        MaxSteps as MaxSteps,
    )
    from agent_guards.budget import (
        MaxTokens as MaxTokens,
    )
    from agent_guards.budget import (
        MaxToolCalls as MaxToolCalls,
    )
    from agent_guards.context_guard import (
        ContextPolicy as ContextPolicy,
    )
    from agent_guards.context_guard import (
        ContextState as ContextState,
    )
    from agent_guards.context_guard import (
        create_context_guard as create_context_guard,
    )
    from agent_guards.context_guard import (
        fit_context as fit_context,
    )
    from agent_guards.core import (
        AgentGuardError as AgentGuardError,
    )
    from agent_guards.core import (
        GuardDecision as GuardDecision,
    )
    from agent_guards.core import (
        GuardState as GuardState,
    )
    from agent_guards.core import (
        Verdict as Verdict,
    )
    from agent_guards.evidence_resolve import (
        Evidence as Evidence,
    )
    from agent_guards.evidence_resolve import (
        EvidencePolicy as EvidencePolicy,
    )
    from agent_guards.evidence_resolve import (
        EvidenceState as EvidenceState,
    )
    from agent_guards.evidence_resolve import (
        add_evidence_resolve as add_evidence_resolve,
    )
    from agent_guards.evidence_resolve import (
        create_evidence_resolve as create_evidence_resolve,
    )
    from agent_guards.evidence_resolve import (
        resolve_evidence as resolve_evidence,
    )
    from agent_guards.loop_check import (
        LoopPolicy as LoopPolicy,
    )
    from agent_guards.loop_check import (
        LoopState as LoopState,
    )
    from agent_guards.loop_check import (
        add_loop_check as add_loop_check,
    )
    from agent_guards.loop_check import (
        create_loop_check as create_loop_check,
    )
    from agent_guards.loop_check import (
        detect_loop as detect_loop,
    )
    from agent_guards.memory_resolve import (
        MemoryPolicy as MemoryPolicy,
    )
    from agent_guards.memory_resolve import (
        MemoryRecord as MemoryRecord,
    )
    from agent_guards.memory_resolve import (
        MemoryState as MemoryState,
    )
    from agent_guards.memory_resolve import (
        create_memory_resolve as create_memory_resolve,
    )
    from agent_guards.memory_resolve import (
        resolve_memory as resolve_memory,
    )
    from agent_guards.middleware import (
        LoopGuardMiddleware as LoopGuardMiddleware,
    )
    from agent_guards.middleware import (
        RetryRouterMiddleware as RetryRouterMiddleware,
    )
    from agent_guards.persistence import (
        replay_config as replay_config,
    )
    from agent_guards.planner_gate import (
        PlannerPolicy as PlannerPolicy,
    )
    from agent_guards.planner_gate import (
        PlanState as PlanState,
    )
    from agent_guards.planner_gate import (
        PlanStep as PlanStep,
    )
    from agent_guards.planner_gate import (
        PlanVersion as PlanVersion,
    )
    from agent_guards.planner_gate import (
        add_planner_gate as add_planner_gate,
    )
    from agent_guards.planner_gate import (
        create_planner_gate as create_planner_gate,
    )
    from agent_guards.planner_gate import (
        gate_plan as gate_plan,
    )
    from agent_guards.retry_router import (
        CircuitBreaker as CircuitBreaker,
    )
    from agent_guards.retry_router import (
        FailureKind as FailureKind,
    )
    from agent_guards.retry_router import (
        RetryRouterPolicy as RetryRouterPolicy,
    )
    from agent_guards.retry_router import (
        RetryState as RetryState,
    )
    from agent_guards.retry_router import (
        add_retry_router as add_retry_router,
    )
    from agent_guards.retry_router import (
        classify_failure as classify_failure,
    )
    from agent_guards.retry_router import (
        create_retry_router as create_retry_router,
    )
    from agent_guards.serde import (
        guard_serializer as guard_serializer,
    )
    from agent_guards.tool_guard import (
        ToolCallGuard as ToolCallGuard,
    )


def __getattr__(name: str) -> Any:
    package = _SOURCES.get(name)
    if package is None:
        raise AttributeError(f"module 'agent_guards' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"agent_guards.{package}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
