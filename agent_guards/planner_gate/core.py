"""The planner gate's pure core: gate_plan.

No LangGraph import here: ``gate_plan`` is a function of the plan versions, two counters
and a policy, so a replay from any checkpoint decides the same way.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from agent_guards.core.decision import GuardDecision, Verdict
from agent_guards.core.errors import InvalidInputError
from agent_guards.planner_gate.checks import _count
from agent_guards.planner_gate.goal import missing_constraints
from agent_guards.planner_gate.model import PlanStatus, PlanStep, PlanTrigger, PlanVersion
from agent_guards.planner_gate.ops import next_step
from agent_guards.planner_gate.policy import DEFAULT_POLICY, GUARD, PlannerPolicy, plan_similarity

__all__ = ["gate_plan"]


def _coerce(versions: Any) -> list[PlanVersion]:
    if isinstance(versions, (str, bytes, PlanVersion)) or not isinstance(versions, Iterable):
        raise InvalidInputError(
            f"expected a list of plan versions, got {type(versions).__name__}", field="versions"
        )
    plans = [PlanVersion.from_dict(v) for v in versions]
    if not plans:
        raise InvalidInputError("no plan versions to gate", field="versions")
    seen: set[int] = set()
    for i, v in enumerate(plans):
        if i > 0 and v.version <= plans[i - 1].version:
            raise InvalidInputError(
                "versions must be in increasing order", item=v.id, field="version"
            )
        if v.parent is not None and v.parent not in seen:
            raise InvalidInputError(
                f"parent v{v.parent} is not an earlier version", item=v.id, field="parent"
            )
        if i > 0 and v.trigger is PlanTrigger.INITIAL:
            raise InvalidInputError(
                "only the first version may be 'initial'", item=v.id, field="trigger"
            )
        seen.add(v.version)
    return plans


@dataclass(frozen=True)
class _Ctx:
    policy: PlannerPolicy
    tools: frozenset[str] | None
    data: dict[str, Any]


def _first_valid(plan: PlanVersion, tools: frozenset[str] | None) -> PlanStep | None:
    step = next_step(plan)
    if step is None or (tools is not None and step.tool is not None and step.tool not in tools):
        return None
    return step


def _decide(
    ctx: _Ctx,
    verdict: Verdict | str,
    reason: str,
    detail: str,
    *,
    chosen: PlanVersion | None = None,
    dropped: PlanVersion | None = None,
) -> GuardDecision:
    data = dict(ctx.data)
    step = _first_valid(chosen, ctx.tools) if chosen is not None else None
    data.update(version=chosen.version if chosen else None, next_step=step.id if step else None)
    return GuardDecision(
        guard=GUARD,
        verdict=Verdict(verdict),
        reason=reason,
        detail=detail,
        selected_ids=(chosen.id,) if chosen is not None else (),
        dropped_ids=(dropped.id,) if dropped is not None else (),
        policy=ctx.policy.label,
        data=data,
    )


def _run_plan(
    ctx: _Ctx,
    plan: PlanVersion | None,
    reason: str,
    detail: str,
    *,
    dropped: PlanVersion | None,
    blocked: str,
) -> GuardDecision:
    """Fall back to ``plan``: run its next step, finish if it is done, else ``blocked``."""
    if plan is not None and _first_valid(plan, ctx.tools) is not None:
        return _decide(
            ctx,
            Verdict.EXECUTE,
            reason,
            detail + f" Run the next step of {plan.id}.",
            chosen=plan,
            dropped=dropped,
        )
    if plan is not None and plan.is_complete:
        return _decide(
            ctx,
            Verdict.STOP,
            reason,
            detail + f" {plan.id} is complete.",
            chosen=plan,
            dropped=dropped,
        )
    where = f"{plan.id} has no runnable step" if plan is not None else "there is no plan in force"
    return _decide(ctx, blocked, reason, f"{detail} And {where}.", dropped=dropped)


def _shape(
    ctx: _Ctx,
    new: PlanVersion,
    *,
    accept: Verdict,
    reason: str,
    detail: str,
    fallback: PlanVersion | None,
) -> GuardDecision:
    """Accept ``new`` if it has a valid runnable first step."""
    if not new.steps:
        return _decide(ctx, Verdict.CLARIFY, "empty_plan", f"{new.id} has no steps.", dropped=new)
    if new.is_complete:
        return _decide(
            ctx, Verdict.STOP, "plan_complete", f"{new.id} has nothing left to do.", chosen=new
        )
    if _first_valid(new, ctx.tools) is None:
        why = "invalid_step" if next_step(new) is not None else "no_runnable_step"
        text = (
            f"{new.id}'s first runnable step is not valid"
            if why == "invalid_step"
            else f"{new.id} has no runnable step"
        )
        return _run_plan(ctx, fallback, why, text + ".", dropped=new, blocked=ctx.policy.on_blocked)
    return _decide(ctx, accept, reason, detail, chosen=new)


def gate_plan(
    versions: Sequence[PlanVersion],
    *,
    policy: PlannerPolicy | None = None,
    executed_steps: int = 0,
    observations: int = 0,
    goal: Any = None,
    tools: Collection[str] | None = None,
) -> GuardDecision:
    """Decide what happens to the newest plan version. See docs/planner_gate.md for the table.

    Args:
        versions: Every plan version, oldest first (``PlanVersion`` or mappings).
        policy: The rules; ``PlannerPolicy()`` by default.
        executed_steps: Steps executed since the previous version was made.
        observations: Observations (tool results, evidence, user messages) since then.
        goal: Optional :class:`Goal`; a missing required constraint means CLARIFY.
        tools: Optional tool names; a step naming another tool is not a valid step.

    Returns:
        A GuardDecision: REPLAN (accept the newest version), EXECUTE (run the next step of
        ``selected_ids[0]``), CLARIFY, ESCALATE or STOP. ``data`` carries the counts,
        the similarity and the next step id.

    Raises:
        InvalidInputError: malformed versions or counters (names the version/step and field).

    >>> v1 = PlanVersion.linear(1, ["收集资料", "分析", "输出"])
    >>> v2 = PlanVersion.linear(
    ...     2, ["先明确目标", "再收集资料", "再分析"], trigger="critique", parent=1
    ... )
    >>> d = gate_plan([v1, v2])
    >>> d.verdict, d.reason, d.selected_ids
    (<Verdict.EXECUTE: 'execute'>, 'critique_only', ('v1',))
    """
    pol = policy if policy is not None else DEFAULT_POLICY
    if not isinstance(pol, PlannerPolicy):
        raise TypeError(f"policy must be a PlannerPolicy, got {type(pol).__name__}")
    plans = _coerce(versions)
    executed = _count(executed_steps, item=None, name="executed_steps")
    observed = _count(observations, item=None, name="observations")
    new = plans[-1]
    # The replan budget is per goal: new user input starts it again (the thread's Budget,
    # which never resets, bounds the total).
    fresh = (PlanTrigger.INITIAL, PlanTrigger.USER_INPUT)
    anchor = max((i for i, v in enumerate(plans) if v.trigger in fresh), default=0)
    replans = sum(1 for v in plans[anchor:] if v.trigger is not PlanTrigger.INITIAL)
    data: dict[str, Any] = {
        "proposed": new.version,
        "replans": replans,
        "max_replans": pol.max_replans,
        "executed_steps": executed,
        "observations": observed,
    }
    ctx = _Ctx(pol, frozenset(tools) if tools is not None else None, data)
    if goal is not None and (missing := missing_constraints(goal)):
        data["missing"] = list(missing)
        return _decide(
            ctx,
            Verdict.CLARIFY,
            "missing_constraints",
            f"The goal lacks required constraint(s): {', '.join(missing)}.",
            dropped=new if new.status is PlanStatus.PROPOSED else None,
        )
    in_force = [v for v in plans[:-1] if v.status is not PlanStatus.REJECTED]
    current = in_force[-1] if in_force else None
    if new.status is not PlanStatus.PROPOSED:  # nothing new to judge: go on with the plan in force
        plan = new if new.status is PlanStatus.ACCEPTED else current
        if plan is None:
            return _decide(ctx, pol.on_blocked, "no_plan", "No plan version is in force.")
        if not plan.steps:
            return _decide(ctx, Verdict.CLARIFY, "empty_plan", f"{plan.id} has no steps.")
        if plan.is_complete:
            return _decide(
                ctx, Verdict.STOP, "plan_complete", f"Every step of {plan.id} is done.", chosen=plan
            )
        if _first_valid(plan, ctx.tools) is None:
            return _decide(ctx, pol.on_blocked, "plan_blocked", f"{plan.id} has no runnable step.")
        return _decide(
            ctx, Verdict.EXECUTE, "next_step", f"Run the next step of {plan.id}.", chosen=plan
        )
    if new.trigger is not PlanTrigger.INITIAL:
        stale = 0
        for i in range(len(plans) - 1, -1, -1):
            v = plans[i]
            counts = (
                (executed, observed) if i == len(plans) - 1 else (v.executed_steps, v.observations)
            )
            if v.trigger is PlanTrigger.INITIAL or any(counts):
                break
            stale += 1
        data["stale_rounds"] = stale
        best, similar_to = 0.0, None
        for old in in_force:  # recorded on every decision, so evals can see near misses
            score = plan_similarity(old, new)
            if similar_to is None or score > best:
                best, similar_to = score, old
        if similar_to is not None:
            data.update(similarity=round(best, 4), similar_to=similar_to.id)
        if replans > pol.max_replans:
            return _run_plan(
                ctx,
                current,
                "replan_budget",
                f"Replan budget spent: {new.id} is replan {replans}, limit {pol.max_replans}.",
                dropped=new,
                blocked=pol.on_budget_exhausted,
            )
        if stale >= pol.stale_rounds:
            detail = f"{stale} consecutive replans without a new observation or executed step."
            if pol.on_no_new_evidence == "clarify":
                return _decide(ctx, Verdict.CLARIFY, "no_new_evidence", detail, dropped=new)
            return _run_plan(
                ctx, current, "no_new_evidence", detail, dropped=new, blocked=pol.on_blocked
            )
        if current is not None:
            if new.trigger not in pol.replan_triggers:
                reason = (
                    "critique_only"
                    if new.trigger is PlanTrigger.CRITIQUE
                    else "trigger_not_allowed"
                )
                return _run_plan(
                    ctx,
                    current,
                    reason,
                    f"{new.id} was triggered by {new.trigger.value}, "
                    "not by execution feedback or user input.",
                    dropped=new,
                    blocked=pol.on_blocked,
                )
            if stale:
                runnable = _first_valid(current, ctx.tools) is not None
                return _run_plan(
                    ctx,
                    current,
                    "execute_gate" if runnable else "no_new_evidence",
                    f"Nothing was executed or observed since {current.id} was made.",
                    dropped=new,
                    blocked=pol.on_blocked,
                )
            # New user input is authoritative: "Hangzhou instead of Shanghai" changes two
            # characters of a plan and everything about it, so similarity cannot judge it.
            user_changed = new.trigger is PlanTrigger.USER_INPUT
            if similar_to is not None and best >= pol.similarity_threshold and not user_changed:
                return _run_plan(
                    ctx,
                    current,
                    "same_plan",
                    f"{new.id} rephrases {similar_to.id} "
                    f"(similarity {best:.2f} >= {pol.similarity_threshold:.2f}).",
                    dropped=new,
                    blocked=pol.on_blocked,
                )
        return _shape(
            ctx,
            new,
            accept=Verdict.REPLAN,
            reason=new.trigger.value,
            detail=f"{new.id} accepted: triggered by {new.trigger.value} after {executed} "
            f"executed step(s) and {observed} observation(s).",
            fallback=current,
        )
    return _shape(
        ctx,
        new,
        accept=Verdict.EXECUTE,
        reason="initial_plan",
        detail=f"{new.id} has a valid first step: execute it.",
        fallback=None,
    )
