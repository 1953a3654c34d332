"""The planner gate's pure core: gate_plan.

No LangGraph import here: ``gate_plan`` is a function of the plan versions, two counters
and a policy, so a replay from any checkpoint decides the same way. The decision is an
ordered table of small rules, :data:`RULES`, one per row of the table in
docs/planner_gate.md: each reads a :class:`GateContext` and returns a decision or None,
and the first decision wins.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from agent_guards.core.decision import GuardDecision, Verdict
from agent_guards.core.errors import InvalidInputError
from agent_guards.planner_gate.checks import check_count
from agent_guards.planner_gate.goal import Goal
from agent_guards.planner_gate.goal import missing_constraints as goal_missing
from agent_guards.planner_gate.model import PlanStatus, PlanStep, PlanTrigger, PlanVersion
from agent_guards.planner_gate.ops import next_step
from agent_guards.planner_gate.policy import (
    DEFAULT_POLICY,
    GUARD,
    PlannerPolicy,
    plan_similarity,
    same_calls,
)

__all__ = ["RULES", "GateContext", "coerce_versions", "gate_checked", "gate_plan"]


def coerce_versions(versions: Any) -> list[PlanVersion]:
    """Plan versions (or mappings) as a checked list: increasing versions, earlier parents."""
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
class GateContext:
    """What the rules read: the policy, the newest version ``N``, the plan in force ``P``,
    the counters and the facts derived from the history. ``data`` goes on every decision."""

    policy: PlannerPolicy
    tools: frozenset[str] | None
    new: PlanVersion
    current: PlanVersion | None
    executed: int
    observed: int
    replans: int
    missing: tuple[str, ...]
    stale: int
    similarity: float
    similar_to: PlanVersion | None
    data: dict[str, Any]


Rule = Callable[[GateContext], GuardDecision | None]


def _first_valid(plan: PlanVersion, tools: frozenset[str] | None) -> PlanStep | None:
    step = next_step(plan)
    if step is None or (tools is not None and step.tool is not None and step.tool not in tools):
        return None
    return step


def _decide(
    ctx: GateContext,
    verdict: Verdict | str,
    reason: str,
    detail: str,
    *,
    chosen: PlanVersion | None = None,
    dropped: PlanVersion | None = None,
    step: PlanStep | None = None,
) -> GuardDecision:
    """The decision; ``step``: ``chosen``'s first valid step when the caller has it."""
    data = dict(ctx.data)
    if step is None and chosen is not None:
        step = _first_valid(chosen, ctx.tools)
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
    ctx: GateContext,
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


def _shape_problem(
    ctx: GateContext, new: PlanVersion, *, fallback: PlanVersion | None
) -> GuardDecision | None:
    """The decision when ``new`` has no steps, is already done or cannot start; else None."""
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
    return None


def _fall_back(ctx: GateContext, reason: str, detail: str) -> GuardDecision:
    """Drop ``N`` and fall back to ``P`` (``on_blocked`` if ``P`` cannot run)."""
    return _run_plan(
        ctx, ctx.current, reason, detail, dropped=ctx.new, blocked=ctx.policy.on_blocked
    )


def _go_on(ctx: GateContext, plan: PlanVersion | None) -> GuardDecision:
    """Nothing new to judge: go on with ``plan``, the plan in force."""
    if plan is None:
        return _decide(ctx, ctx.policy.on_blocked, "no_plan", "No plan version is in force.")
    if not plan.steps:
        return _decide(ctx, Verdict.CLARIFY, "empty_plan", f"{plan.id} has no steps.")
    if plan.is_complete:
        return _decide(
            ctx, Verdict.STOP, "plan_complete", f"Every step of {plan.id} is done.", chosen=plan
        )
    step = _first_valid(plan, ctx.tools)
    if step is None:
        return _decide(
            ctx, ctx.policy.on_blocked, "plan_blocked", f"{plan.id} has no runnable step."
        )
    detail = f"Run the next step of {plan.id}."
    return _decide(ctx, Verdict.EXECUTE, "next_step", detail, chosen=plan, step=step)


# The rules, one per row of the table in docs/planner_gate.md. Each returns a decision
# when its condition holds and None otherwise; gate_plan returns the first decision.


def missing_constraints(ctx: GateContext) -> GuardDecision | None:
    """Row 0: a goal is given and a required constraint is missing -> CLARIFY."""
    if not ctx.missing:
        return None
    new = ctx.new
    return _decide(
        ctx,
        Verdict.CLARIFY,
        "missing_constraints",
        f"The goal lacks required constraint(s): {', '.join(ctx.missing)}.",
        dropped=new if new.status is PlanStatus.PROPOSED else None,
    )


def already_decided(ctx: GateContext) -> GuardDecision | None:
    """The newest version was already decided: go on with the plan in force."""
    new = ctx.new
    if new.status is PlanStatus.PROPOSED:
        return None
    return _go_on(ctx, new if new.status is PlanStatus.ACCEPTED else ctx.current)


def initial_plan(ctx: GateContext) -> GuardDecision | None:
    """Row 1: ``N`` is the initial plan -> EXECUTE if its first runnable step is valid."""
    new = ctx.new
    if new.trigger is not PlanTrigger.INITIAL:
        return None
    problem = _shape_problem(ctx, new, fallback=None)
    if problem is not None:
        return problem
    detail = f"{new.id} has a valid first step: execute it."
    return _decide(ctx, Verdict.EXECUTE, "initial_plan", detail, chosen=new)


def replan_budget(ctx: GateContext) -> GuardDecision | None:
    """Row 2: more replans than ``max_replans`` -> fall back to ``P``, else the budget verdict."""
    limit = ctx.policy.max_replans
    if ctx.replans <= limit:
        return None
    return _run_plan(
        ctx,
        ctx.current,
        "replan_budget",
        f"Replan budget spent: {ctx.new.id} is replan {ctx.replans}, limit {limit}.",
        dropped=ctx.new,
        blocked=ctx.policy.on_budget_exhausted,
    )


def no_new_evidence(ctx: GateContext) -> GuardDecision | None:
    """Row 3: ``stale_rounds`` replans in a row with nothing new -> ``on_no_new_evidence``."""
    if ctx.stale < ctx.policy.stale_rounds:
        return None
    detail = f"{ctx.stale} consecutive replans without a new observation or executed step."
    if ctx.policy.on_no_new_evidence == "clarify":
        return _decide(ctx, Verdict.CLARIFY, "no_new_evidence", detail, dropped=ctx.new)
    return _fall_back(ctx, "no_new_evidence", detail)


def critique_only(ctx: GateContext) -> GuardDecision | None:
    """Row 4: ``N``'s trigger is not in ``replan_triggers`` -> fall back to ``P``."""
    new = ctx.new
    if ctx.current is None or new.trigger in ctx.policy.replan_triggers:
        return None
    reason = "critique_only" if new.trigger is PlanTrigger.CRITIQUE else "trigger_not_allowed"
    detail = (
        f"{new.id} was triggered by {new.trigger.value}, not by execution feedback or user input."
    )
    return _fall_back(ctx, reason, detail)


def execute_gate(ctx: GateContext) -> GuardDecision | None:
    """Row 5: nothing executed or observed since the previous version -> fall back to ``P``."""
    current = ctx.current
    if current is None or not ctx.stale:
        return None
    runnable = _first_valid(current, ctx.tools) is not None
    detail = f"Nothing was executed or observed since {current.id} was made."
    return _fall_back(ctx, "execute_gate" if runnable else "no_new_evidence", detail)


def same_plan(ctx: GateContext) -> GuardDecision | None:
    """Row 6: ``N`` rephrases a plan that was in force -> fall back to ``P``.

    New user input is authoritative: "Hangzhou instead of Shanghai" changes two characters
    of a plan and everything about it, so similarity cannot judge it. Nor is a plan whose
    steps call another tool, or a tool with other arguments, a rephrase: moving a failed
    step to a backup tool is a recovery, however alike the descriptions.
    """
    similar_to, threshold = ctx.similar_to, ctx.policy.similarity_threshold
    user_changed = ctx.new.trigger is PlanTrigger.USER_INPUT
    if ctx.current is None or similar_to is None:
        return None
    if not (ctx.similarity >= threshold and not user_changed):
        return None
    if not same_calls(similar_to, ctx.new):
        return None
    detail = (
        f"{ctx.new.id} rephrases {similar_to.id} "
        f"(similarity {ctx.similarity:.2f} >= {threshold:.2f})."
    )
    return _fall_back(ctx, "same_plan", detail)


def invalid_plan(ctx: GateContext) -> GuardDecision | None:
    """Row 7: ``N`` has no steps, is already done, or its first runnable step is invalid."""
    return _shape_problem(ctx, ctx.new, fallback=ctx.current)


def replan(ctx: GateContext) -> GuardDecision | None:
    """Row 8: otherwise -> REPLAN, with the trigger as the reason."""
    new = ctx.new
    detail = (
        f"{new.id} accepted: triggered by {new.trigger.value} after {ctx.executed} "
        f"executed step(s) and {ctx.observed} observation(s)."
    )
    return _decide(ctx, Verdict.REPLAN, new.trigger.value, detail, chosen=new)


# The decision table of docs/planner_gate.md, in its order: the first decision wins.
RULES: tuple[Rule, ...] = (
    missing_constraints,
    already_decided,
    initial_plan,
    replan_budget,
    no_new_evidence,
    critique_only,
    execute_gate,
    same_plan,
    invalid_plan,
    replan,
)


def _replans(plans: Sequence[PlanVersion]) -> int:
    """Revisions since the initial plan or the latest user input, the newest included.

    The replan budget is per goal: new user input starts it again (the thread's Budget,
    which never resets, bounds the total).
    """
    fresh = (PlanTrigger.INITIAL, PlanTrigger.USER_INPUT)
    anchor = max((i for i, v in enumerate(plans) if v.trigger in fresh), default=0)
    return sum(1 for v in plans[anchor:] if v.trigger is not PlanTrigger.INITIAL)


def _stale_rounds(plans: Sequence[PlanVersion], executed: int, observed: int) -> int:
    """Consecutive replans, newest first, with nothing executed or observed."""
    stale = 0
    for i in range(len(plans) - 1, -1, -1):
        v = plans[i]
        counts = (executed, observed) if i == len(plans) - 1 else (v.executed_steps, v.observations)
        if v.trigger is PlanTrigger.INITIAL or any(counts):
            break
        stale += 1
    return stale


def _closest(in_force: Sequence[PlanVersion], new: PlanVersion) -> tuple[float, PlanVersion | None]:
    """The plan in force most similar to ``new`` and its similarity (the first on ties)."""
    best, similar_to = 0.0, None
    for old in in_force:
        score = plan_similarity(old, new)
        if similar_to is None or score > best:
            best, similar_to = score, old
    return best, similar_to


def _context(
    plans: list[PlanVersion],
    pol: PlannerPolicy,
    *,
    executed: int,
    observed: int,
    goal: Any,
    tools: Collection[str] | None,
) -> GateContext:
    new = plans[-1]
    replans = _replans(plans)
    data: dict[str, Any] = {
        "proposed": new.version,
        "replans": replans,
        "max_replans": pol.max_replans,
        "executed_steps": executed,
        "observations": observed,
    }
    missing = tuple(goal_missing(Goal.coerce(goal))) if goal is not None else ()
    in_force = [v for v in plans[:-1] if v.status is not PlanStatus.REJECTED]
    stale, best, similar_to = 0, 0.0, None
    if missing:
        data["missing"] = list(missing)
    elif new.status is PlanStatus.PROPOSED and new.trigger is not PlanTrigger.INITIAL:
        # recorded on every decision about a replan, so evals can see near misses
        stale = data["stale_rounds"] = _stale_rounds(plans, executed, observed)
        best, similar_to = _closest(in_force, new)
        if similar_to is not None:
            data.update(similarity=round(best, 4), similar_to=similar_to.id)
    return GateContext(
        policy=pol,
        tools=frozenset(tools) if tools is not None else None,
        new=new,
        current=in_force[-1] if in_force else None,
        executed=executed,
        observed=observed,
        replans=replans,
        missing=missing,
        stale=stale,
        similarity=best,
        similar_to=similar_to,
        data=data,
    )


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

    The decision is the first one a rule of :data:`RULES` returns, in the table's order.

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
    pol = PlannerPolicy.coerce(policy, default=DEFAULT_POLICY)
    return gate_checked(
        coerce_versions(versions),
        pol,
        executed_steps=executed_steps,
        observations=observations,
        goal=goal,
        tools=tools,
    )


def gate_checked(
    plans: list[PlanVersion],
    pol: PlannerPolicy,
    *,
    executed_steps: Any,
    observations: Any,
    goal: Any,
    tools: Collection[str] | None,
) -> GuardDecision:
    """:func:`gate_plan` on versions :func:`coerce_versions` returned and a checked policy
    (the planner_gate node has both: checking them again would change nothing)."""
    executed = check_count(executed_steps, item=None, name="executed_steps")
    observed = check_count(observations, item=None, name="observations")
    ctx = _context(plans, pol, executed=executed, observed=observed, goal=goal, tools=tools)
    for rule in RULES:
        decision = rule(ctx)
        if decision is not None:
            return decision
    raise AssertionError("the last rule of RULES always decides")  # pragma: no cover
