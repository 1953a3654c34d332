"""Human approval of risky plan steps: which steps need it, and what an answer means (pure).

The pause itself is :func:`agent_guards.planner_gate.request_approval` (LangGraph
``interrupt()``, in the adapter); the planner gate calls it for you with ``approval_risk=``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from agent_guards.core.cancel import is_stop_request
from agent_guards.core.decision import GuardDecision, Verdict
from agent_guards.core.errors import InvalidInputError
from agent_guards.planner_gate.model import PlanStep, PlanVersion, RiskLevel, StepStatus
from agent_guards.planner_gate.ops import mark_step

__all__ = ["Approval", "needs_approval"]

_YES = {"approve", "approved", "yes", "y", "ok", "true"}
_NO = {"reject", "rejected", "deny", "denied", "no", "n", "false"}


@dataclass(frozen=True)
class Approval:
    """A human's answer to :func:`request_approval`.

    Attributes:
        approved: True to run the step.
        by: Who answered, if given.
        note: Their reason or comment.
        args: Corrected tool arguments to run the step with, if given.
        cancelled: The user cancelled the whole run (resume ``{"cancel": ...}``).

    Example:
        >>> answer = Approval.from_resume({"approved": False, "by": "ops", "note": "too big"})
        >>> answer.approved, answer.by, answer.note, answer.cancelled
        (False, 'ops', 'too big', False)
        >>> Approval.from_resume({"cancel": "user left"}).cancelled
        True
    """

    approved: bool
    by: str | None = None
    note: str = ""
    args: dict[str, Any] | None = field(default=None, hash=False)
    cancelled: bool = False

    @classmethod
    def from_resume(cls, value: Any, *, step_id: str | None = None) -> Approval:
        """Read a resume value: a bool, ``"approve"``/``"reject"``, a request to stop the
        run (``"stop"``, ``"cancel it"``: see :func:`~agent_guards.core.cancel.is_stop_request`),
        or a mapping with ``approved`` (and optional ``by``, ``note``, ``args``) or ``cancel``.

        >>> Approval.from_resume({"approved": True, "by": "ops"}).by
        'ops'
        >>> Approval.from_resume("reject").approved
        False
        >>> Approval.from_resume("Stop, cancel it").cancelled
        True
        """
        if isinstance(value, bool):
            return cls(approved=value)
        if isinstance(value, str) and value.strip().lower() in _YES | _NO:
            return cls(approved=value.strip().lower() in _YES)
        if isinstance(value, str) and is_stop_request(value):  # "stop", "cancel it", "算了"
            return cls(approved=False, note=value.strip(), cancelled=True)
        if isinstance(value, Mapping):
            if "cancel" in value:
                return cls(approved=False, note=str(value["cancel"] or ""), cancelled=True)
            ok, args = value.get("approved"), value.get("args")
            if isinstance(ok, bool) and (args is None or isinstance(args, Mapping)):
                by = value.get("by")
                return cls(
                    approved=ok,
                    by=str(by) if by is not None else None,
                    note=str(value.get("note") or value.get("reason") or ""),
                    args=dict(args) if args is not None else None,
                )
        raise InvalidInputError(
            f"cannot read approval from {value!r}; resume with True/False, 'approve'/'reject', "
            "{'approved': bool, 'by': str, 'note': str, 'args': {...}} or {'cancel': reason}",
            item=step_id,
            field="resume",
        )


def needs_approval(step: PlanStep, risk: RiskLevel | str = RiskLevel.HIGH) -> bool:
    """True if ``step`` is at least ``risk`` and no human has answered for it yet.

    Example:
        >>> step = PlanStep("pay", tool="transfer", risk="medium")
        >>> needs_approval(step), needs_approval(step, "medium")
        (False, True)
        >>> needs_approval(PlanStep("pay", risk="high", approved=True))
        False
    """
    level = RiskLevel(risk)
    return step.risk.rank >= level.rank and step.approved is None


def _after_approval(
    plan: PlanVersion,
    step: PlanStep,
    answer: Approval,
    *,
    then: Verdict,
    policy: str,
    guard: str,
    on_rejected: str,
) -> tuple[PlanVersion, GuardDecision]:
    """The plan with the answer recorded on the step, and the decision to log and route by."""
    note = ("approved" if answer.approved else "rejected") + (
        f" by {answer.by}" if answer.by else ""
    )
    note += f": {answer.note}" if answer.note else ""
    if answer.approved:
        marked = mark_step(plan, step.id, step.status, approved=True, note=note, args=answer.args)
        verdict, reason = then, "approved"
    else:
        marked = mark_step(plan, step.id, StepStatus.CANCELLED, approved=False, note=note)
        verdict = Verdict.STOP if answer.cancelled else Verdict(on_rejected)
        reason = "cancelled" if answer.cancelled else "approval_rejected"
    return marked, GuardDecision(
        guard=guard,
        verdict=verdict,
        reason=reason,
        detail=f"Step {step.id} of {plan.id} ({step.risk.value} risk) was {note}.",
        selected_ids=(plan.id,),
        dropped_ids=() if answer.approved else (step.id,),
        policy=policy,
        data={"version": plan.version, "step": step.id, "by": answer.by, "risk": step.risk.value},
    )
