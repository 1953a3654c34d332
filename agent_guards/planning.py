"""planner_gate: stop a planner that keeps re-planning instead of executing (seed 000).

A planner that answers every doubt with a new plan never acts: each round looks
reasonable, none adds evidence, and the run ends on ``recursion_limit``. The gate applies
seed 000's four planner guards to every new plan version, in this order:

1. **Replan budget**: after ``max_replans`` revisions, the current plan runs on (or the
   run stops with what is confirmed).
2. **No new evidence**: ``stale_rounds`` consecutive revisions with no executed step and
   no observation -> CLARIFY (or EXECUTE the current plan).
3. **Execute gate**: only execution feedback or user input may replace a plan whose first
   runnable step is valid; a critique alone, or nothing new at all, means EXECUTE it.
4. **Plan similarity**: a revision whose open steps are a rephrasing (rapidfuzz, per step,
   character level, so Chinese works) of a plan in force is the same plan: EXECUTE.

Otherwise the revision is accepted (REPLAN). The pure core is :func:`gate_plan`;
:func:`create_planner_gate` is the node, which keeps every version in state with its
status, the counters that feed the rules, and human approval of risky steps.

Example (the seed's loop: caught at round 2, then at round 3 although the plans'
similarity stays under 0.86):
    >>> v1 = PlanVersion.linear(1, ["收集资料", "分析", "输出"])
    >>> v2 = PlanVersion.linear(2, ["先明确目标", "再收集资料", "再分析"], trigger="critique")
    >>> v3 = PlanVersion.linear(3, ["确认需求", "收集资料", "分析"], trigger="critique")
    >>> gate_plan([v1, v2]).reason
    'critique_only'
    >>> d = gate_plan([v1, v2, v3])
    >>> d.verdict.value, d.reason, d.data["similarity"] < 0.86
    ('clarify', 'no_new_evidence', True)
"""

from __future__ import annotations

from ._plan_core import gate_plan
from ._plan_goal import Goal, missing_constraints
from ._plan_model import PlanStatus, PlanStep, PlanTrigger, PlanVersion, RiskLevel, StepStatus
from ._plan_node import (
    EXECUTED_KEY,
    OBSERVED_KEY,
    Approval,
    PlanState,
    add_planner_gate,
    create_planner_gate,
    merge_plans,
    needs_approval,
    progress_update,
    request_approval,
)
from ._plan_ops import carry_over, current_plan, mark_step, next_step, runnable_steps
from ._plan_policy import PlannerPolicy, plan_similarity

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
    "RiskLevel",
    "StepStatus",
    "add_planner_gate",
    "carry_over",
    "create_planner_gate",
    "current_plan",
    "gate_plan",
    "mark_step",
    "merge_plans",
    "missing_constraints",
    "needs_approval",
    "next_step",
    "plan_similarity",
    "progress_update",
    "request_approval",
    "runnable_steps",
]
