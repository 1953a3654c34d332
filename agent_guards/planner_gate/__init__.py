"""planner_gate: when to accept a new plan and when to execute the current one.

Replan budget, execute gate, no-new-evidence and plan similarity, over every plan version
kept in state."""

from agent_guards.core.decision import PlannerRoute
from agent_guards.planner_gate.approval import Approval, needs_approval
from agent_guards.planner_gate.core import gate_plan
from agent_guards.planner_gate.goal import Goal, missing_constraints
from agent_guards.planner_gate.graph import (
    EXECUTED_KEY,
    OBSERVED_KEY,
    PlanState,
    add_planner_gate,
    approval_question,
    create_planner_gate,
    merge_plans,
    progress_update,
    request_approval,
)
from agent_guards.planner_gate.model import (
    PlanStatus,
    PlanStep,
    PlanTrigger,
    PlanVersion,
    RiskLevel,
    StepStatus,
)
from agent_guards.planner_gate.ops import (
    carry_over,
    current_plan,
    keep_done_writes,
    mark_step,
    next_step,
    runnable_steps,
)
from agent_guards.planner_gate.policy import PlannerPolicy, plan_similarity, same_calls

__all__ = [
    "EXECUTED_KEY",
    "OBSERVED_KEY",
    "Approval",
    "Goal",
    "PlanState",
    "PlanStatus",
    "PlanStep",
    "PlanTrigger",
    "PlanVersion",
    "PlannerPolicy",
    "PlannerRoute",
    "RiskLevel",
    "StepStatus",
    "add_planner_gate",
    "approval_question",
    "carry_over",
    "create_planner_gate",
    "current_plan",
    "gate_plan",
    "keep_done_writes",
    "mark_step",
    "merge_plans",
    "missing_constraints",
    "needs_approval",
    "next_step",
    "plan_similarity",
    "progress_update",
    "request_approval",
    "runnable_steps",
    "same_calls",
]
