"""Operations on plan versions: what can run, marking steps, reusing finished work (pure).

Every function returns new values; a :class:`PlanVersion` is never changed in place, so a
node writes the returned version back to state (the ``plans`` reducer replaces it by
version number).

Example:
    >>> plan = PlanVersion.linear(1, ["收集资料", "分析", "输出"])
    >>> [s.id for s in runnable_steps(plan)]
    ['s1']
    >>> plan = mark_step(plan, "s1", "done", evidence_ids=["doc-3"])
    >>> [s.id for s in runnable_steps(plan)], plan.step("s1").evidence_ids
    (['s2'], ('doc-3',))
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import replace
from typing import Any

from agent_guards.core.errors import InvalidInputError
from agent_guards.planner_gate.checks import check_enum, check_strs
from agent_guards.planner_gate.model import FINISHED, PlanStatus, PlanStep, PlanVersion, StepStatus

__all__ = [
    "carry_over",
    "current_plan",
    "keep_done_writes",
    "mark_step",
    "next_step",
    "runnable_steps",
]

_TERMINAL = frozenset({StepStatus.DONE, StepStatus.SKIPPED, StepStatus.CANCELLED})


def runnable_steps(version: PlanVersion) -> tuple[PlanStep, ...]:
    """Steps that can run now: pending, and every dependency done or skipped. Plan order.

    Example:
        >>> steps = [PlanStep("a"), PlanStep("b"), PlanStep("c", depends_on=["a", "b"])]
        >>> plan = PlanVersion(1, steps)
        >>> [s.id for s in runnable_steps(plan)]
        ['a', 'b']
        >>> [s.id for s in runnable_steps(mark_step(mark_step(plan, "a", "done"), "b", "skipped"))]
        ['c']
    """
    return tuple(_runnable(version))


def _runnable(version: PlanVersion) -> Iterator[PlanStep]:
    """The runnable steps in plan order, found one at a time (the first needs no others)."""
    status: dict[str, StepStatus] | None = None
    for s in version.steps:
        if s.status is not StepStatus.PENDING:
            continue
        if s.depends_on and status is None:
            status = {step.id: step.status for step in version.steps}
        if status is None or all(status[d] in FINISHED for d in s.depends_on):
            yield s


def next_step(version: PlanVersion) -> PlanStep | None:
    """The first runnable step, or None.

    Example:
        >>> plan = PlanVersion.linear(1, ["search", "write"])
        >>> next_step(plan).id, next_step(mark_step(plan, "s1", "done")).description
        ('s1', 'write')
        >>> next_step(mark_step(plan, "s1", "failed")) is None
        True
    """
    return next(_runnable(version), None)


def mark_step(
    version: PlanVersion,
    step_id: str,
    status: StepStatus | str,
    *,
    evidence_ids: Iterable[str] = (),
    call_ids: Iterable[str] = (),
    note: str | None = None,
    approved: bool | None = None,
    args: Mapping[str, Any] | None = None,
) -> PlanVersion:
    """A copy of ``version`` with one step's status changed (ids appended, no duplicates).

    A step that is done, skipped or cancelled stays so (setting the same status again is a
    no-op, so a replayed node is harmless); anything else raises InvalidInputError.

    >>> plan = mark_step(PlanVersion.linear(1, ["search"]), "s1", "failed", note="timeout")
    >>> plan.step("s1").status, plan.step("s1").note
    (<StepStatus.FAILED: 'failed'>, 'timeout')
    """
    old = version.step(step_id)
    new_status = check_enum(StepStatus, status, item=step_id, name="status")
    if old.status in _TERMINAL and new_status is not old.status:
        raise InvalidInputError(
            f"step is already {old.status.value}; cannot become {new_status.value}",
            item=step_id,
            field="status",
        )
    changes: dict[str, Any] = {
        "status": new_status,
        "evidence_ids": tuple(
            dict.fromkeys(
                (
                    *old.evidence_ids,
                    *check_strs(tuple(evidence_ids), item=step_id, name="evidence_ids"),
                )
            )
        ),
        "call_ids": tuple(
            dict.fromkeys(
                (*old.call_ids, *check_strs(tuple(call_ids), item=step_id, name="call_ids"))
            )
        ),
    }
    if note is not None:
        changes["note"] = note
    if approved is not None:
        changes["approved"] = approved
    if args is not None:
        changes["args"] = dict(args)
    new = replace(old, **changes)
    return replace(version, steps=tuple(new if s.id == step_id else s for s in version.steps))


def carry_over(previous: PlanVersion, new: PlanVersion) -> PlanVersion:
    """Reuse finished work: steps of ``new`` that match a done/skipped step of ``previous``
    (same id, tool and args) take its status, evidence, call ids and note.

    >>> old = PlanVersion.linear(1, ["search", "read"])
    >>> old = mark_step(old, "s1", "done", evidence_ids=["e1"])
    >>> new = PlanVersion.linear(2, ["search", "summarize"], trigger="execution_feedback", parent=1)
    >>> carry_over(old, new).step("s1").evidence_ids
    ('e1',)
    """
    done = {s.id: s for s in previous.steps if s.status in FINISHED}
    steps = []
    for step in new.steps:
        old = done.get(step.id)
        same = old is not None and (old.tool, old.args) == (step.tool, step.args)
        if old is not None and same and step.status is StepStatus.PENDING:
            kept: dict[str, Any] = {"evidence_ids": old.evidence_ids, "call_ids": old.call_ids}
            step = replace(step, status=old.status, note=old.note, **kept)  # noqa: PLW2901
        steps.append(step)
    return replace(new, steps=tuple(steps))


def keep_done_writes(
    versions: Sequence[PlanVersion], new: PlanVersion, *, reads: Collection[str] = ()
) -> PlanVersion:
    """A replan never runs a completed write again: a pending step of ``new`` with the tool
    and args of a step that is done in any earlier version takes that step's status,
    evidence, call ids and note, whatever its id. Tools in ``reads`` only read, so their
    steps may run again (the world may have changed); any other tool may write.

    >>> from agent_guards.planner_gate.model import PlanStep
    >>> v1 = PlanVersion(1, [PlanStep("s1", "create the invoice", tool="invoice", args={"n": 7})])
    >>> v1 = mark_step(v1, "s1", "done")
    >>> v2 = PlanVersion(2, [PlanStep("a", "invoice again", tool="invoice", args={"n": 7}),
    ...                      PlanStep("b", "mail it", tool="mail")],
    ...                  trigger="execution_feedback", parent=1)
    >>> [s.status.value for s in keep_done_writes([v1], v2).steps]
    ['done', 'pending']
    >>> [s.status.value for s in keep_done_writes([v1], v2, reads={"invoice"}).steps]
    ['pending', 'pending']
    """
    done: dict[tuple[str, str], PlanStep] = {}
    for version in versions:
        for step in version.steps:
            if step.status is StepStatus.DONE and step.tool and step.tool not in reads:
                done[(step.tool, step.args_key)] = step
    steps = []
    for step in new.steps:
        old = done.get((step.tool or "", step.args_key))
        if old is not None and step.status is StepStatus.PENDING:
            kept: dict[str, Any] = {"evidence_ids": old.evidence_ids, "call_ids": old.call_ids}
            note = old.note or f"done before, as {old.id}: not run again"
            step = replace(step, status=StepStatus.DONE, note=note, **kept)  # noqa: PLW2901
        steps.append(step)
    return replace(new, steps=tuple(steps))


def current_plan(versions: Sequence[PlanVersion]) -> PlanVersion | None:
    """The plan in force: the newest version the gate accepted, or None.

    Example:
        >>> v1 = PlanVersion.linear(1, ["search"], status="accepted")
        >>> v2 = PlanVersion.linear(2, ["search again"], trigger="critique", parent=1)
        >>> current_plan([v1, v2]).id, current_plan([v2])
        ('v1', None)
    """
    for v in reversed(versions):
        if v.status is PlanStatus.ACCEPTED:
            return v
    return None
