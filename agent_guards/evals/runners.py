"""The planner, loop and retry-history kinds: replays of a run, round by round. Private.

``planner``: each round proposes one plan version; the gate decides as its node would
(marking the version accepted or rejected with the counts it saw) until it ends planning.
A round's ``executed`` count first marks that many next steps of the plan in force done,
as the executor would have, so similarity compares the steps still to do.
``loop``: a recorded transcript is replayed message by message; at each tool call the
guard decides whether it would run or be answered from an earlier result (``ToolCallGuard``'s
rule), and after each tool turn ``detect_loop`` runs, as the edge after the tools node does.
The transcript is what the unguarded agent did: its calls are ``unguarded_tool_calls``.

Example:
    >>> out = run_planner({"rounds": [
    ...     {"steps": ["收集资料", "分析", "输出"]},
    ...     {"steps": ["先明确目标", "再收集资料", "再分析"], "trigger": "critique"},
    ...     {"steps": ["确认需求", "收集资料", "分析"], "trigger": "critique"}]})
    >>> out["verdicts"], out["reason"], out["aborted"], out["replans"]
    (['execute', 'execute', 'clarify'], 'no_new_evidence', True, 0)
    >>> calls = [{"call": "search", "args": {"q": "rates"}, "result": "4%"}] * 5
    >>> transcript = [{"type": "human", "content": "rates?"}, *calls]
    >>> out = run_loop({"messages": transcript, "effects": {"read_only": ["search"]}})
    >>> out["verdicts"], out["executions"], out["unguarded_tool_calls"]
    (['nudge', 'stop'], 1, 5)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from langchain_core.messages import AIMessage, ToolMessage

from agent_guards.core.decision import GuardDecision, Verdict
from agent_guards.core.effects import Effect, ToolEffects
from agent_guards.core.errors import InvalidInputError
from agent_guards.core.history import scan_actions, with_declared
from agent_guards.evals.jsonform import messages_from_json, to_jsonable
from agent_guards.evals.policies import EvalPolicies, check_input, invalid, with_options
from agent_guards.loop_check.core import detect_loop
from agent_guards.planner_gate.core import gate_plan
from agent_guards.planner_gate.goal import Goal
from agent_guards.planner_gate.model import PlanStatus, PlanStep, PlanVersion
from agent_guards.planner_gate.ops import current_plan, mark_step, next_step
from agent_guards.retry_router.classify import failure_of
from agent_guards.retry_router.core import decide_failure, route_failures
from agent_guards.retry_router.policy import RetryRouterPolicy
from agent_guards.tool_guard.plan import plan_call

__all__ = ["decision_fields", "retry_fields", "run_loop", "run_planner", "run_retry_history"]

_ENDS_PLANNING = (Verdict.CLARIFY, Verdict.STOP, Verdict.ESCALATE)
NO_PROGRESS_REASONS = frozenset({"no_new_evidence", "replan_budget"})
"""Planner reasons that end planning for lack of progress (``aborted``)."""
_ROUND_KEYS = ("steps", "trigger", "executed", "observations", "reason", "parent")


def decision_fields(decision: GuardDecision) -> dict[str, Any]:
    """The observed keys every decision-based kind shares."""
    return {
        "verdict": decision.verdict.value,
        "reason": decision.reason,
        "selected_ids": list(decision.selected_ids),
        "conflicting_ids": list(decision.conflicting_ids),
        "dropped_ids": list(decision.dropped_ids),
        "policy": decision.policy,
        "decision": decision.to_dict(),
    }


def retry_fields(decision: GuardDecision) -> dict[str, Any]:
    """The retry-specific observed keys, from a retry_router decision."""
    d = decision.data
    out = {k: to_jsonable(d.get(k)) for k in ("route", "kind", "attempt", "delay", "retry_after")}
    for key in ("field_errors", "question", "options", "failures"):
        if key in d:
            out[key] = to_jsonable(d[key])
    return out


def _steps(raw: Any, where: str) -> tuple[PlanStep, ...]:
    if isinstance(raw, (str, Mapping)) or not isinstance(raw, list):
        raise ValueError(f"{where}.steps must be a list of strings or step objects")
    if all(isinstance(s, str) for s in raw):
        return PlanVersion.linear(1, raw).steps
    if all(isinstance(s, Mapping) for s in raw):
        return tuple(PlanStep.from_dict(s) for s in raw)
    raise ValueError(f"{where}.steps mixes strings and step objects")


def _version(i: int, rnd: Any) -> tuple[PlanVersion, int, int]:
    where = f"input.rounds[{i}]"
    check_input(rnd, _ROUND_KEYS, f"planner round ({where})")
    default = "initial" if i == 0 else None
    if rnd.get("trigger", default) is None:
        raise ValueError(f"{where}.trigger is required after the first round")
    plan = PlanVersion(
        i + 1,
        _steps(rnd.get("steps"), where),
        trigger=rnd.get("trigger", default),
        reason=rnd.get("reason", ""),
        parent=rnd.get("parent", i if i else None),
    )
    return plan, int(rnd.get("executed", 0)), int(rnd.get("observations", 0))


def _execute(versions: list[PlanVersion], steps: int) -> list[PlanVersion]:
    """Mark the next ``steps`` runnable steps of the plan in force done (the executor ran)."""
    plan = current_plan(versions)
    if plan is None or not steps:
        return versions
    for _ in range(steps):
        step = next_step(plan)
        if step is None:
            break
        plan = mark_step(plan, step.id, "done")
    return [plan if v.version == plan.version else v for v in versions]


def run_planner(data: Mapping[str, Any], *, policies: EvalPolicies | None = None) -> dict[str, Any]:
    """``gate_plan`` over plan rounds (or one call over ``versions``), as the node runs it."""
    keys = ("rounds", "versions", "executed_steps", "observations", "goal", "tools", "policy")
    check_input(data, keys, "planner")
    policy = with_options((policies or EvalPolicies()).planner, data.get("policy"))
    if ("rounds" in data) == ("versions" in data):
        raise ValueError("a planner case needs exactly one of input.rounds or input.versions")
    tools = data.get("tools")
    decisions: list[GuardDecision] = []
    versions: list[PlanVersion] = []
    try:
        goal = Goal(**data["goal"]) if data.get("goal") is not None else None
        if "versions" in data:
            versions = [PlanVersion.from_dict(v) for v in data["versions"]]
            decisions.append(
                gate_plan(
                    versions,
                    policy=policy,
                    executed_steps=data.get("executed_steps", 0),
                    observations=data.get("observations", 0),
                    goal=goal,
                    tools=tools,
                )
            )
        for i, rnd in enumerate(data.get("rounds") or ()):
            new, executed, observed = _version(i, rnd)
            versions = _execute(versions, executed)
            d = gate_plan(
                [*versions, new],
                policy=policy,
                executed_steps=executed,
                observations=observed,
                goal=goal,
                tools=tools,
            )
            accepted = d.selected_ids[:1] == (new.id,)
            status = PlanStatus.ACCEPTED if accepted else PlanStatus.REJECTED
            versions.append(
                replace(new, status=status, executed_steps=executed, observations=observed)
            )
            decisions.append(d)
            if d.verdict in _ENDS_PLANNING:
                break
    except InvalidInputError as err:
        return invalid(err, Verdict.ESCALATE, policy.label)
    last = decisions[-1]
    aborted = last.verdict in _ENDS_PLANNING and last.reason in NO_PROGRESS_REASONS
    return decision_fields(last) | {
        "verdicts": [d.verdict.value for d in decisions],
        "reasons": [d.reason for d in decisions],
        "rounds": len(decisions),
        "unguarded_rounds": len(data.get("rounds") or ()) or 1,
        "replans": sum(d.verdict is Verdict.REPLAN for d in decisions),
        "aborted": aborted,
        "statuses": {v.id: v.status.value for v in versions},
        "similarity": last.data.get("similarity"),
    }


@dataclass(frozen=True)
class _Request:
    """The two attributes of a ``ToolCallRequest`` that ``plan_call`` reads."""

    state: dict[str, Any]
    tool_call: Any


def _turn_ends(messages: list[Any], i: int) -> bool:
    m = messages[i]
    after = messages[i + 1] if i + 1 < len(messages) else None
    if isinstance(m, ToolMessage):
        return not isinstance(after, ToolMessage)
    return isinstance(m, AIMessage) and not m.tool_calls


def _effects(value: Any) -> ToolEffects:
    """``input.effects``: ``{"read_only": [...], "idempotent": [...], "writes": [...]}``."""
    if not isinstance(value, Mapping):
        raise InvalidInputError("must be an object of tool-name lists", field="input.effects")
    unknown = sorted(set(value) - {"read_only", "idempotent", "writes"})
    if unknown:
        raise InvalidInputError(
            f"unknown keys {unknown}; allowed: read_only, idempotent, writes",
            field="input.effects",
        )
    try:
        return ToolEffects(
            read_only=frozenset(value.get("read_only", ())),
            idempotent=frozenset(value.get("idempotent", ())),
            writes=frozenset(value.get("writes", ())),
        )
    except (TypeError, ValueError) as err:
        raise InvalidInputError(str(err), field="input.effects") from None


def _declared(value: Any) -> dict[str, Effect]:
    """``input.effects`` as effect classes by tool name."""
    effects = _effects(value)
    return {
        **dict.fromkeys(effects.writes, Effect.WRITE),
        **dict.fromkeys(effects.idempotent, Effect.IDEMPOTENT),
        **dict.fromkeys(effects.read_only, Effect.READ),
    }


def _as_guarded(messages: list[Any], answers: Mapping[str, ToolMessage]) -> list[Any]:
    """The transcript as the guarded run would hold it: answered calls carry the guard's answer."""
    return [answers.get(m.tool_call_id, m) if isinstance(m, ToolMessage) else m for m in messages]


def run_loop(data: Mapping[str, Any], *, policies: EvalPolicies | None = None) -> dict[str, Any]:
    """Replay a transcript under loop_check: reuse, nudge, stop (see the module docstring)."""
    check_input(data, ("messages", "policy", "effects"), "loop")
    policy = with_options((policies or EvalPolicies()).loop, data.get("policy"))
    if data.get("effects") is not None:
        policy = replace(policy, effects=_effects(data["effects"]))
    messages = messages_from_json(data.get("messages") or [])
    ais = [m for m in messages if isinstance(m, AIMessage)]
    total = sum(len(m.tool_calls) for m in ais)
    verdicts: list[str] = []
    reused: list[str] = []
    executions = model_calls = 0
    last: GuardDecision | None = None
    answers: dict[str, ToolMessage] = {}  # what the guard answered instead of running the tool
    try:
        for i, m in enumerate(messages):
            if isinstance(m, AIMessage):
                model_calls += 1
                for call in m.tool_calls:
                    seen = _as_guarded(messages[: i + 1], answers)
                    request = _Request({"messages": seen}, call)
                    plan = plan_call(request, loop=policy, retry=None)  # type: ignore[arg-type]
                    if plan.kind == "reuse":
                        reused.append(str(call["id"]))
                        if plan.message is not None:
                            answers[str(call["id"])] = plan.message
                    else:
                        executions += 1
            if not _turn_ends(messages, i):
                continue
            last = detect_loop(_as_guarded(messages[: i + 1], answers), policy=policy)
            if last.verdict is not Verdict.CONTINUE:
                verdicts.append(last.verdict.value)
            if last.verdict in (Verdict.STOP, Verdict.ESCALATE):
                break
        if last is None:
            last = detect_loop(_as_guarded(messages, answers), policy=policy)
    except InvalidInputError as err:
        return invalid(err, Verdict.CONTINUE, policy.label)
    return decision_fields(last) | {
        "pattern": last.data.get("pattern"),
        "count": last.data.get("count", 0),
        "verdicts": verdicts,
        "aborted": last.verdict in (Verdict.STOP, Verdict.ESCALATE),
        "executions": executions,
        "tool_calls": executions,
        "reused_ids": reused,
        "model_calls": model_calls,
        "unguarded_tool_calls": total,
        "unguarded_model_calls": len(ais),
    }


def run_retry_history(data: Mapping[str, Any], policy: RetryRouterPolicy) -> dict[str, Any]:
    """Route a history's latest failures, or decide for one ``call_id`` in it."""
    messages = messages_from_json(data["messages"])
    call_id = data.get("call_id")
    declared = _declared(data["effects"]) if data.get("effects") is not None else None
    try:
        if call_id is None:
            decision = route_failures(messages, policy=policy, effects=declared)
        else:
            actions = scan_actions(messages, with_declared(policy.scan_options(), declared))
            target = next((a for a in reversed(actions) if a.call_id == call_id), None)
            failure = failure_of(target.message) if target and target.message else None
            if target is None or failure is None:
                raise ValueError(f"input.call_id {call_id!r} names no failed call in the history")
            decision = decide_failure(
                failure,
                call_id=target.call_id,
                tool=target.tool,
                signature=target.signature,
                attempt=target.attempts,
                prior=[a for a in actions if a.ai_position < target.ai_position],
                policy=policy,
                effect=target.effect,
            )
    except InvalidInputError as err:
        return invalid(err, Verdict.CONTINUE, policy.label)
    return decision_fields(decision) | retry_fields(decision)
