"""How a run ends: the outcome of a step, and the final answer the user sees.

``respond_outcome`` is the completion check: every dimension the goal asked for must be
covered by cited evidence; otherwise the run clarifies, abstains, escalates, or (when the
budget runs out) returns the confirmed part plus what is missing. It never blends
conflicting values: that is what ``blend_outcome``, the unguarded baseline, does.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import AIMessage, AnyMessage, ToolMessage

from agent_guards import GuardDecision, PlanStep, RetryRouterPolicy, Verdict
from agent_guards.core.texts import TEXTS_EN, Texts
from agent_guards.evidence_resolve import EvidenceVerdict
from agent_guards.planner_gate import StepStatus
from agent_guards.retry_router import route_failures

from .prompts import goal_in


def step_outcome(
    messages: Sequence[AnyMessage], retry: RetryRouterPolicy
) -> tuple[StepStatus, str, str]:
    """(status, note, route) of a finished step, from how its ReAct loop ended."""
    last = messages[-1] if messages else None
    if isinstance(last, AIMessage) and last.name in (
        "loop_check",
        "retry_router",
        "budget",
        "planner_gate",
    ):
        meta = (last.response_metadata or {}).get("agent_guards", {})
        route = "refuse" if meta.get("verdict") == "refuse" else "failed"
        return StepStatus.FAILED, f"{last.name}: {meta.get('reason', 'stopped')}", route
    if isinstance(last, ToolMessage):  # the retry router routed here: replan or fallback
        decision = route_failures(messages, policy=retry)
        route = str(decision.data.get("route", "failed"))
        return StepStatus.FAILED, f"retry_router: {decision.reason}", route
    if isinstance(last, AIMessage) and not last.tool_calls:
        return StepStatus.DONE, str(last.content)[:200], "done"
    return StepStatus.FAILED, "the step ended without an answer", "failed"


def _last_decision(state: Mapping[str, Any]) -> GuardDecision | None:
    """The newest decision before evidence_resolve's: the planner gate routes STOP (and so
    a cancel or a rejected approval) through evidence_resolve, which logs after it."""
    log = [
        d
        for d in state.get("guard_log") or []
        if isinstance(d, GuardDecision)
        and d.guard != "evidence_resolve"  # a client's junk: skipped
    ]
    return log[-1] if log else None


def _claim(verdict: Any, key: str) -> Any:
    if verdict is None:
        return None
    if verdict.claims:
        return verdict.claims.get(key)
    return verdict if verdict.claim_key in (None, key) else None


def _cite(ids: Sequence[str]) -> str:
    return "[" + ", ".join(ids) + "]" if ids else "[no citation]"


def _ended_early(
    preset: Mapping[str, Any], last: GuardDecision | None, texts: Texts
) -> dict[str, Any] | None:
    """Outcomes decided before any evidence: a preset route or the planner gate's word."""
    route = preset.get("route")
    if route == "clarify" and preset.get("text"):  # a node said why (a malformed plan)
        return dict(preset)
    if route == "clarify":
        asked = ", ".join(preset["missing"])
        return {**preset, "text": texts.render("need_info", missing=asked)}
    if route == "refuse":  # the reason ("retry_router: permission") stays in the outcome
        return {**preset, "text": texts.step_refused}
    if route == "cancelled":
        return {**preset, "text": texts.render("cancelled", detail=preset.get("detail"))}
    if last is None or last.guard != "planner_gate" or route == "stopped":
        return None
    if last.verdict is Verdict.CLARIFY:
        text = texts.render("not_progressing", detail=last.detail)
        return {"route": "clarify", "reason": last.reason, "text": text}
    if last.verdict is Verdict.ESCALATE:
        return {"route": "escalate", "reason": last.reason, "text": last.detail}
    if last.verdict is Verdict.STOP and last.reason in ("cancelled", "approval_rejected"):
        text = texts.render("cancelled", detail=last.detail)
        return {"route": "cancelled", "reason": last.reason, "text": text}
    return None


@dataclass
class Coverage:
    """The completion check: which requested dimensions the evidence verdict covers."""

    answered: list[str] = field(default_factory=list)
    cited: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    unclear: list[tuple[str, Any]] = field(default_factory=list)


def _verdict(state: Mapping[str, Any]) -> EvidenceVerdict | None:
    """evidence_resolve's verdict in state; anything else there (a client's junk) is none."""
    verdict = state.get("evidence_verdict")
    return verdict if isinstance(verdict, EvidenceVerdict) else None


def coverage(state: Mapping[str, Any]) -> Coverage:
    """Check every dimension the goal asked for against the evidence verdict."""
    goal = goal_in(state)
    verdict = _verdict(state)
    keys = list(goal.dimensions) if goal is not None and goal.dimensions else []
    if not keys and verdict is not None and verdict.claim_key:
        keys = [verdict.claim_key]
    out = Coverage()
    for key in keys or ["answer"]:
        claim = _claim(verdict, key) if keys else verdict
        if claim is None or claim.verdict is Verdict.ABSTAIN:
            out.missing.append(key)
        elif claim.verdict is Verdict.ANSWER:
            value = claim.value if claim.value is not None else claim.values
            out.answered.append(f"{key}: {value} {_cite(claim.selected_ids)}")
            out.cited.extend(claim.selected_ids)
        else:
            out.unclear.append((key, claim))
    return out


def respond_outcome(state: Mapping[str, Any], *, texts: Texts | None = None) -> dict[str, Any]:
    """The final outcome: answer with citations, clarify, abstain, escalate, or partial.

    ``texts`` words what the user reads (English by default); ``reason`` keeps the code.
    """
    texts = texts or TEXTS_EN
    outcome = state.get("outcome")
    preset = dict(outcome) if isinstance(outcome, Mapping) else {}
    if (early := _ended_early(preset, _last_decision(state), texts)) is not None:
        return early
    verdict = _verdict(state)
    if verdict is not None and verdict.verdict is Verdict.ESCALATE:
        return {"route": "escalate", "reason": verdict.reason, "text": texts.review_needed}
    cover = coverage(state)
    if cover.unclear:
        key, claim = cover.unclear[0]
        options = "; ".join(f"{k}: {v}" for k, v in claim.values.items()) or "several values"
        text = texts.render("sources_disagree", key=key, options=options)
        return {"route": "clarify", "reason": claim.reason, "text": text}
    fmt = _preferred_format(state)
    conflicts = list(verdict.conflicting_ids) if verdict is not None else []
    body = _render(cover.answered, fmt)
    if conflicts:
        body += "\n" + texts.render("not_used", ids=", ".join(conflicts))
    found = {"cited": cover.cited, "missing": cover.missing, "format": fmt}
    if preset.get("route") == "stopped" or (cover.missing and cover.answered):
        why = preset.get("why") or preset.get("detail") or texts.evidence_missing
        gaps = ", ".join(cover.missing) or texts.remaining_steps
        confirmed = body or texts.nothing_yet
        text = texts.render("partial_outcome", why=why, confirmed=confirmed, missing=gaps)
        reason = preset.get("reason", "missing_evidence")
        return {"route": "partial", "reason": reason, "text": text, **found}
    if not cover.answered:
        text = texts.abstain
        reason = verdict.reason if verdict else "no_evidence"
        return {"route": "abstain", "reason": reason, "text": text, "missing": cover.missing}
    return {"route": "answer", "reason": "covered", "text": body, "conflicting": conflicts,
            "cited": cover.cited, "format": fmt}  # fmt: skip


def _preferred_format(state: Mapping[str, Any]) -> str | None:
    verdict = state.get("memory_verdict")
    for record in getattr(verdict, "inject", ()) or ():
        if record.key in ("report_format", "format", "output_format"):
            return str(record.value)
    return None


def _render(lines: Sequence[str], fmt: str | None) -> str:
    if fmt and fmt.lower() in ("markdown", "md"):
        return "## Answer\n" + "\n".join(f"- {line}" for line in lines)
    suffix = f"\n(format: {fmt})" if fmt else ""
    return "\n".join(lines) + suffix


def blend_outcome(state: Mapping[str, Any]) -> dict[str, Any]:
    """What an unguarded graph does: every value found, blended into one sentence."""
    goal = goal_in(state)
    dims = list(goal.dimensions) if goal is not None else []
    values: dict[str, list[str]] = {}
    for item in state.get("evidence") or []:
        values.setdefault(item.claim_key, [])
        if str(item.value) not in values[item.claim_key]:
            values[item.claim_key].append(str(item.value))
    lines = [f"{k}: {' or '.join(v)}" for k, v in values.items() if not dims or k in dims]
    fmt = _preferred_format(state)
    return {
        "route": "answer",
        "reason": "unguarded_blend",
        "text": _render(lines, fmt),
        "format": fmt,
    }


def ran_writes(
    messages: Sequence[AnyMessage], undo: Mapping[str, Any], seq: int = 0
) -> dict[str, dict[str, Any]]:
    """The step's tool calls that really ran and have an undo hook, by execution
    (:func:`execution_key`): what a cancel may undo. A call answered without running (an
    error, a cancel, a reuse of another call's result) did nothing to undo. ``at`` orders
    them, on the ledger's clock (wall time), ``seq`` breaks ties."""
    args = {c["id"]: c.get("args") for m in messages if isinstance(m, AIMessage)
            for c in m.tool_calls}  # fmt: skip
    ran: dict[str, dict[str, Any]] = {}
    for m in messages:
        meta = (m.response_metadata or {}).get("agent_guards") or {}
        if (
            isinstance(m, ToolMessage) and m.name in undo and m.status != "error"
            and "cancelled" not in meta
            and (not meta.get("reused_from") or meta.get("ledger"))  # its own run, recorded
        ):  # fmt: skip
            key = execution_key(m.tool_call_id, meta.get("execution"))
            ran[key] = {"call_id": m.tool_call_id, "tool": m.name,
                        "args": dict(args.get(m.tool_call_id) or {}),
                        "at": time.time(), "seq": seq + len(ran)}  # fmt: skip
    return ran


def execution_key(call_id: str, execution: object) -> str:
    """The name of one execution of a call in the thread's record of writes: its call id,
    and the execution's number from the second on (a model may repeat a call id for a
    later request, and the call then runs again: each run is a write to undo). Anything
    but an int (no number recorded) names the first.

    Example:
        >>> execution_key("c1", None), execution_key("c1", 1), execution_key("c1", 2)
        ('c1', 'c1', 'c1#2')
    """
    if not isinstance(execution, int) or execution <= 1:
        return call_id
    return f"{call_id}#{execution}"


def merge_writes(
    current: Mapping[str, Mapping[str, Any]] | None, update: Mapping[str, Mapping[str, Any]]
) -> dict[str, dict[str, Any]]:
    """The ``executed_writes`` reducer: an upsert by call id (a compensation adds its line
    to the record of the call it undid)."""
    merged = {cid: dict(r) for cid, r in (current or {}).items()}
    for cid, record in (update or {}).items():
        merged[cid] = {**merged.get(cid, {}), **record}
    return merged


def to_undo(
    state: Mapping[str, Any],
    undo: Mapping[str, Callable[[PlanStep], str]],
    ledgered: Sequence[Mapping[str, Any]] = (),
) -> list[tuple[str, PlanStep]]:
    """The thread's completed writes with an undo hook not undone yet, newest first, once
    each: (the execution's name, :func:`execution_key`; the step handed to its hook).

    A write is an execution, named by its call id (and its number when the call ran more
    than once): those ``record_step`` kept in state
    (``executed_writes``) and the run ledger's completed writes (``ledgered``), which also
    hold writes a fork or a crash left out of state. A step carried over into a new plan
    version keeps its call ids, so its write comes once; a step marked done whose write
    failed has none to undo. The hook gets the step that ran the call, or, for a write
    no plan step lists (a tool the step's model chose on its own), a step named by its
    call id. A record marked ``compensated`` is skipped: a later cancel on the thread
    never undoes it again.
    """
    record = state.get("executed_writes")
    if record is None and not ledgered:
        return _legacy(state, undo)
    runs = {cid: dict(r) for cid, r in (record or {}).items()}
    for e in ledgered:  # the ledger is what the tools did: its entry wins, its clock orders
        if e.get("tool") in undo and isinstance(e.get("args"), Mapping):
            found = {"call_id": str(e["call_id"]), "tool": str(e["tool"]),
                     "args": dict(e["args"]), "at": float(e.get("started_at", 0))}  # fmt: skip
            key = execution_key(str(e["call_id"]), e.get("executions"))
            runs[key] = {**runs.get(key, {}), **found}
    pending = [k for k, r in runs.items() if r.get("tool") in undo and not r.get("compensated")]
    pending.sort(key=lambda k: (float(runs[k].get("at", 0)), int(runs[k].get("seq", 0))),
                 reverse=True)  # fmt: skip
    return [(key, _step_of(state, runs[key])) for key in pending]


def _step_of(state: Mapping[str, Any], run: Mapping[str, Any]) -> PlanStep:
    """The plan step that ran the call (the oldest version that lists it), else a step
    named by the call id."""
    for version in state.get("plans") or []:
        step: PlanStep
        for step in version.steps:
            if run["call_id"] in step.call_ids and step.tool == run["tool"]:
                return step
    return PlanStep(str(run["call_id"]), f"{run['tool']} (call {run['call_id']}, in no plan step)",
                    tool=str(run["tool"]), args=dict(run.get("args") or {}),
                    status=StepStatus.DONE)  # fmt: skip


def _legacy(
    state: Mapping[str, Any], undo: Mapping[str, Callable[[PlanStep], str]]
) -> list[tuple[str, PlanStep]]:
    """A state with no execution record (a checkpoint written before ``executed_writes``
    existed): the done steps with an undo hook, newest first, a carried-over step once."""
    seen: set[tuple[str, str | None, str]] = set()
    done: list[tuple[str, PlanStep]] = []
    for version in reversed(state.get("plans") or []):
        for step in reversed(version.steps):
            key = (step.id, step.tool, repr(sorted(step.args.items())))
            if step.status is StepStatus.DONE and step.tool in undo and key not in seen:
                seen.add(key)
                done.append((step.id, step))
    return done


def compensate(
    state: Mapping[str, Any], undo: Mapping[str, Callable[[PlanStep], str]]
) -> list[str]:
    """Run the undo hooks of :func:`to_undo`'s steps, in its order; the lines they return."""
    return [undo[str(s.tool)](s) for _, s in to_undo(state, undo)]


def compensation(call_id: str, step: PlanStep, line: str) -> GuardDecision:
    """The record of one compensation a cancel ran (of call ``call_id``)."""
    return GuardDecision(
        guard="cancel",
        verdict=Verdict.STOP,
        reason="compensated",
        detail=f"undid {step.tool} of step {step.id}: {line}",
        selected_ids=(step.id,),
        data={"tool": step.tool, "args": dict(step.args), "call_id": call_id},
    )
