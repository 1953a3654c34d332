"""PlannerPolicy and plan_similarity: the planner gate's rules and its sameness measure (pure)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from rapidfuzz import fuzz
from rapidfuzz.utils import default_process

from agent_guards.core.errors import check_choice
from agent_guards.core.policy import Policy, check_int, check_ratio
from agent_guards.core.texts import TEXTS_EN, Texts
from agent_guards.planner_gate.model import PlanStep, PlanTrigger, PlanVersion, StepStatus

__all__ = ["DEFAULT_POLICY", "GUARD", "PlannerPolicy", "plan_similarity"]

GUARD = "planner_gate"

NoEvidenceAction = Literal["clarify", "execute"]
BudgetAction = Literal["stop", "escalate", "clarify"]
BlockedAction = Literal["clarify", "escalate", "stop"]

_DEFAULT_TRIGGERS = frozenset({PlanTrigger.EXECUTION_FEEDBACK, PlanTrigger.USER_INPUT})


@dataclass(frozen=True, kw_only=True)
class PlannerPolicy(Policy):
    """When a new plan version may replace the current one.

    Four guards decide: the replan budget, no new evidence, the execute gate and plan
    similarity.

    >>> PlannerPolicy(max_replans=3).label
    'PlannerPolicy@1'
    >>> PlannerPolicy(on_no_new_evidence="ask")
    Traceback (most recent call last):
    ...
    ValueError: on_no_new_evidence='ask' is not allowed; allowed: 'clarify', 'execute'
    """

    max_replans: int = 2
    """Replan budget: how many versions after the initial one may be proposed. The next
    proposal is refused (the current plan runs on, or ``on_budget_exhausted``)."""
    similarity_threshold: float = 0.86
    """A proposal at least this similar (0..1, per step, character level) to a plan that was
    in force is the same plan rephrased: no progress, so it is refused."""
    on_no_new_evidence: NoEvidenceAction = "clarify"
    """What ``stale_rounds`` consecutive proposals without any new observation or executed
    step lead to: ``"clarify"`` (ask the user one narrow question) or ``"execute"`` (run
    the current plan's next step)."""
    stale_rounds: int = 2
    """Consecutive proposals without new evidence that trigger ``on_no_new_evidence``
    (default: two rounds). Below it, a stale proposal is refused by the execute gate.
    Set 1 to clarify on the first stale proposal."""
    replan_triggers: frozenset[PlanTrigger] = field(default=_DEFAULT_TRIGGERS)
    """Triggers that may replace a plan that can still run. Default: execution feedback and
    user input; a critique alone never replaces an executable plan."""
    on_budget_exhausted: BudgetAction = "stop"
    """Verdict when the replan budget is spent and the current plan cannot run: ``"stop"``
    (finish with the part already confirmed), ``"escalate"`` or ``"clarify"``."""
    on_blocked: BlockedAction = "clarify"
    """Verdict when the gate refuses a proposal but the current plan has no runnable step
    (or a plan has no runnable first step): ``"clarify"``, ``"escalate"`` or ``"stop"``."""
    texts: Texts = field(default=TEXTS_EN, compare=False)
    """The texts people read (the approval question; :class:`~agent_guards.core.texts.Texts`,
    ``TEXTS_ZH`` ships too). Decisions keep the guard's name and reason code either way."""
    name: str = "PlannerPolicy"
    """Policy name recorded in every decision."""
    version: int = 1
    """Policy version recorded in every decision (``name@version``)."""

    def __post_init__(self) -> None:
        check_int("PlannerPolicy.max_replans", self.max_replans, minimum=0)
        check_int("PlannerPolicy.stale_rounds", self.stale_rounds, minimum=1)
        threshold = check_ratio("PlannerPolicy.similarity_threshold", self.similarity_threshold)
        object.__setattr__(self, "similarity_threshold", threshold)
        check_choice("on_no_new_evidence", self.on_no_new_evidence, ["clarify", "execute"])
        check_choice(
            "on_budget_exhausted", self.on_budget_exhausted, ["stop", "escalate", "clarify"]
        )
        check_choice("on_blocked", self.on_blocked, ["clarify", "escalate", "stop"])
        if not isinstance(self.texts, Texts):
            raise TypeError(f"PlannerPolicy.texts must be a Texts, got {self.texts!r}")
        self.check_label()
        triggers = self.replan_triggers
        if isinstance(triggers, str) or not isinstance(triggers, Iterable):
            raise TypeError(
                f"PlannerPolicy.replan_triggers must be a set of triggers, got {triggers!r}"
            )
        allowed = [t.value for t in PlanTrigger if t is not PlanTrigger.INITIAL]
        parsed = frozenset(
            PlanTrigger(check_choice("replan_triggers item", str(t), allowed)) for t in triggers
        )
        object.__setattr__(self, "replan_triggers", parsed)


DEFAULT_POLICY = PlannerPolicy()


def _step_text(step: PlanStep | str) -> str:
    if isinstance(step, str):
        return default_process(step)
    text = step.description
    if step.tool:
        text += f" {step.tool}"
    if step.args:
        text += " " + json.dumps(step.args, sort_keys=True, ensure_ascii=False, default=str)
    return default_process(text)


def _open_steps(plan: PlanVersion | Sequence[PlanStep | str]) -> list[PlanStep | str]:
    steps: Iterable[PlanStep | str] = plan.steps if isinstance(plan, PlanVersion) else plan
    return [
        s
        for s in steps
        if isinstance(s, str) or s.status not in (StepStatus.DONE, StepStatus.SKIPPED)
    ]


def _open_texts(plan: PlanVersion | Sequence[PlanStep | str]) -> list[str]:
    return [_step_text(s) for s in _open_steps(plan)]


def same_calls(
    a: PlanVersion | Sequence[PlanStep | str], b: PlanVersion | Sequence[PlanStep | str]
) -> bool:
    """Whether two plans' open steps make the same calls: the same tools with the same
    arguments, in order (steps naming no tool and no arguments are left out).

    The text of a call is a small part of a step's text, so a plan that moves a step to
    another tool, or asks a tool something else, can stay above the similarity threshold;
    it is still a different plan, never a rephrase.

    >>> search = PlanStep("s1", "Look up the contract", tool="contracts", args={"vendor": "Acme"})
    >>> same_calls([search], [PlanStep("s9", "Find the contract", tool="contracts",
    ...                                args={"vendor": "Acme"})])
    True
    >>> same_calls([search], [PlanStep("s1", "Look up the contract", tool="contracts_backup",
    ...                                args={"vendor": "Acme"})])
    False
    """

    def calls(plan: PlanVersion | Sequence[PlanStep | str]) -> list[tuple[str | None, str]]:
        return [
            (s.tool, json.dumps(s.args, sort_keys=True, ensure_ascii=False, default=str))
            for s in _open_steps(plan)
            if not isinstance(s, str) and (s.tool or s.args)
        ]

    return calls(a) == calls(b)


def plan_similarity(
    a: PlanVersion | Sequence[PlanStep | str], b: PlanVersion | Sequence[PlanStep | str]
) -> float:
    """How alike two plans' open steps are, 0..1, at character level (works for Chinese).

    Each step's text is its description plus tool and args; steps are aligned in order
    (an alignment that maximizes the summed rapidfuzz ratios, gaps score 0) and the total
    is normalized Dice-style: ``2 * matched / (len(a) + len(b))``. Done and skipped steps
    are left out: the work still to do is what a replan changes.

    >>> a, b = ["收集资料", "分析", "输出"], ["先明确目标", "再收集资料", "再分析"]
    >>> round(plan_similarity(a, b), 2)
    0.56
    >>> plan_similarity(["search docs", "summarize"], ["Search docs!", "summarize"])
    1.0
    """
    xs, ys = _open_texts(a), _open_texts(b)
    if not xs and not ys:
        return 1.0
    if not xs or not ys:
        return 0.0
    prev = [0.0] * (len(ys) + 1)
    for x in xs:
        row = [0.0]
        for j, y in enumerate(ys, start=1):
            row.append(max(prev[j], row[j - 1], prev[j - 1] + fuzz.ratio(x, y) / 100.0))
        prev = row
    return min(1.0, 2.0 * prev[-1] / (len(xs) + len(ys)))
