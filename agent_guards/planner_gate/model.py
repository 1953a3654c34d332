"""Plan records: steps and versions as immutable, serializable values (pure).

A plan is kept as a structured record, not prose: versions with a trigger and a parent,
steps with a status, a completion condition and the evidence ids they produced.
Every value here is a frozen dataclass or an enum reachable from ``PlanState``, so it
round-trips through any checkpointer with ``LANGGRAPH_STRICT_MSGPACK=true``. Changing a
step returns a new :class:`PlanVersion` (see ``_plan_ops``); nothing is mutated in place.

Malformed input (a step without an id, a dependency on an unknown step, a cycle) raises
:class:`~agent_guards.core.errors.InvalidInputError` naming the step (or version) and field.

Example:
    >>> plan = PlanVersion.linear(1, ["收集资料", "分析", "输出"])
    >>> plan.id, plan.steps[2].depends_on, plan.trigger.value, plan.status.value
    ('v1', ('s2',), 'initial', 'proposed')
    >>> PlanVersion(2, [PlanStep("a", depends_on=["zz"])])
    Traceback (most recent call last):
    ...
    agent_guards.core.errors.InvalidInputError: item 'a' field 'depends_on': depends on ... 'zz'
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from enum import StrEnum
from functools import cached_property
from typing import Any

from agent_guards.core.decision import Checkpointed
from agent_guards.core.errors import InvalidInputError
from agent_guards.core.fields import from_mapping, named, shown
from agent_guards.core.signatures import canonical_args
from agent_guards.planner_gate.checks import (
    check_count,
    check_enum,
    check_step_duration,
    check_strs,
    check_text,
)

__all__ = [
    "FINISHED",
    "PlanStatus",
    "PlanStep",
    "PlanTrigger",
    "PlanVersion",
    "RiskLevel",
    "StepStatus",
]


class StepStatus(StrEnum):
    """Where a step is. ``done`` and ``skipped`` satisfy dependents; ``cancelled`` blocks them.

    Example:
        >>> from agent_guards.planner_gate import mark_step, runnable_steps
        >>> plan = PlanVersion.linear(1, ["search", "write"])
        >>> [s.id for s in runnable_steps(mark_step(plan, "s1", StepStatus.SKIPPED))]
        ['s2']
        >>> runnable_steps(mark_step(plan, "s1", "cancelled")), StepStatus("done") in FINISHED
        ((), True)
    """

    PENDING = "pending"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
    SKIPPED = "skipped"
    CANCELLED = "cancelled"


FINISHED = frozenset({StepStatus.DONE, StepStatus.SKIPPED})


class RiskLevel(StrEnum):
    """How much harm a step can do; ``high`` steps may need human approval.

    Example:
        >>> PlanStep("pay", tool="transfer", risk="high").risk
        <RiskLevel.HIGH: 'high'>
        >>> RiskLevel("medium").rank, RiskLevel.HIGH.rank >= RiskLevel("medium").rank
        (1, True)
    """

    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"

    @property
    def rank(self) -> int:
        """0, 1, 2 for low, medium, high (for ``>=`` comparisons)."""
        return ("low", "medium", "high").index(self.value)


class PlanTrigger(StrEnum):
    """What made the planner write a version. Only the first version is ``initial``.

    Example:
        >>> [t.value for t in PlanTrigger]
        ['initial', 'critique', 'execution_feedback', 'user_input']
        >>> PlanVersion.linear(2, ["retry search"], trigger="execution_feedback", parent=1).trigger
        <PlanTrigger.EXECUTION_FEEDBACK: 'execution_feedback'>
    """

    INITIAL = "initial"
    CRITIQUE = "critique"
    EXECUTION_FEEDBACK = "execution_feedback"
    USER_INPUT = "user_input"


class PlanStatus(StrEnum):
    """The gate's verdict on a version: ``proposed`` until the planner gate decides.

    Example:
        >>> PlanVersion.linear(1, ["search"]).status
        <PlanStatus.PROPOSED: 'proposed'>
        >>> PlanVersion.linear(1, ["search"], status="accepted").status is PlanStatus.ACCEPTED
        True
    """

    PROPOSED = "proposed"
    ACCEPTED = "accepted"
    REJECTED = "rejected"


@dataclass(frozen=True)
class PlanStep(Checkpointed):
    """One step of a plan, with what the executor needs to run it safely.

    Besides the tool and its arguments: dependencies, risk, a time limit, a fallback, a
    completion condition and the evidence the step produced.

    Attributes:
        id: Unique within its version; dependencies refer to it.
        description: What the step does (compared, character by character, by the gate).
        tool: The tool it calls, if any (a step may be pure reasoning).
        args: Arguments for the tool.
        depends_on: Ids of steps that must be done (or skipped) first.
        status: Where the step is (see :class:`StepStatus`).
        risk: ``low`` / ``medium`` / ``high``; high-risk steps can require approval.
        timeout_s: Time limit in seconds (a ``timedelta`` is accepted).
        fallback: What to do when the step fails (``use_cache``, ``skip``, ``ask_user``...).
        done_when: The completion condition, in words (a tool's success is not completion).
        evidence_ids: Evidence the step produced (cited by the answer).
        call_ids: Tool call ids that ran for this step (the execution record).
        note: Short outcome or error summary.
        approved: Human approval of a risky step: None (not asked), True or False.

    Example:
        >>> from datetime import timedelta
        >>> step = PlanStep("s1", "search rates", tool="search", args={"q": "rates"},
        ...                 risk="medium", timeout_s=timedelta(seconds=30))
        >>> step.status.value, step.risk.value, step.timeout_s, step.to_dict()["args"]
        ('pending', 'medium', 30.0, {'q': 'rates'})
        >>> PlanStep.from_dict({"id": "s2", "depends_on": ["s1"]}).depends_on
        ('s1',)
    """

    id: str
    description: str = ""
    tool: str | None = None
    args: dict[str, Any] = field(default_factory=dict, hash=False)
    depends_on: tuple[str, ...] = ()
    status: StepStatus = StepStatus.PENDING
    risk: RiskLevel = RiskLevel.LOW
    timeout_s: float | None = None
    fallback: str | None = None
    done_when: str = ""
    evidence_ids: tuple[str, ...] = ()
    call_ids: tuple[str, ...] = ()
    note: str = ""
    approved: bool | None = None

    @cached_property
    def args_key(self) -> str:
        """The step's args as a call signature compares them (:func:`canonical_args`): made
        once per step, however many later steps are compared with it."""
        return canonical_args(self.args)

    def __post_init__(self) -> None:
        if not isinstance(self.id, str) or not self.id.strip():
            raise InvalidInputError(
                f"a step needs a non-empty string id, got {shown(self.id)}", field="id"
            )
        item, put = self.id, object.__setattr__
        check_text(self.description, item=item, name="description")
        check_text(self.tool, item=item, name="tool", optional=True)
        check_text(self.fallback, item=item, name="fallback", optional=True)
        check_text(self.done_when, item=item, name="done_when")
        check_text(self.note, item=item, name="note")
        if not isinstance(self.args, Mapping):
            raise InvalidInputError(
                f"args must be a mapping, got {shown(self.args)}", item=item, field="args"
            )
        put(self, "args", dict(self.args))
        for name in ("depends_on", "evidence_ids", "call_ids"):
            put(self, name, check_strs(getattr(self, name), item=item, name=name))
        if self.id in self.depends_on:
            raise InvalidInputError("a step cannot depend on itself", item=item, field="depends_on")
        put(self, "status", check_enum(StepStatus, self.status, item=item, name="status"))
        put(self, "risk", check_enum(RiskLevel, self.risk, item=item, name="risk"))
        put(self, "timeout_s", check_step_duration(self.timeout_s, item=item, name="timeout_s"))
        if self.approved is not None and not isinstance(self.approved, bool):
            raise InvalidInputError(
                f"must be True, False or None, got {shown(self.approved)}",
                item=item,
                field="approved",
            )

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | PlanStep) -> PlanStep:
        """Build from a mapping (e.g. a model's structured output); unknown keys are rejected."""
        return from_mapping(cls, data, key="id")  # type: ignore[no-any-return]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (enums as strings, tuples as lists)."""
        out = asdict(self)
        out.update(status=self.status.value, risk=self.risk.value)
        for name in ("depends_on", "evidence_ids", "call_ids"):
            out[name] = list(out[name])
        return out


def _step_at(data: Any, position: int, version: str) -> PlanStep:
    """One step of a version; an error about a step with no readable id names its position."""
    return named(PlanStep.from_dict, data, f"{version} step #{position}", field="steps")  # type: ignore[no-any-return]


@dataclass(frozen=True)
class PlanVersion(Checkpointed):
    """One version of the plan. All versions stay in state: the history is the audit trail.

    Attributes:
        version: 1, 2, ... strictly increasing over a run.
        steps: The steps, in plan order.
        trigger: Why this version was written (see :class:`PlanTrigger`).
        reason: The planner's one-line reason for the change.
        parent: The version this one revises (None for the initial plan).
        status: ``proposed`` until the planner gate accepts or rejects it.
        executed_steps: Steps executed between the previous version and this one
            (recorded by the gate when it decides).
        observations: Observations (tool results, evidence, user messages) that arrived
            between the previous version and this one (recorded by the gate).

    Example:
        >>> plan = PlanVersion(1, [{"id": "a", "tool": "search"}, {"id": "b", "depends_on": ["a"]}])
        >>> plan.id, plan.step("b").depends_on, plan.is_complete
        ('v1', ('a',), False)
        >>> PlanVersion.from_dict(plan.to_dict()) == plan
        True
    """

    version: int
    steps: tuple[PlanStep, ...] = ()
    trigger: PlanTrigger = PlanTrigger.INITIAL
    reason: str = ""
    parent: int | None = None
    status: PlanStatus = PlanStatus.PROPOSED
    executed_steps: int = 0
    observations: int = 0

    def __post_init__(self) -> None:
        check_count(self.version, item=None, name="version", minimum=1)
        item, put = self.id, object.__setattr__
        if isinstance(self.steps, (str, Mapping)) or not isinstance(self.steps, Iterable):
            raise InvalidInputError(
                f"must be a list of steps, got {shown(self.steps)}", item=item, field="steps"
            )
        steps = tuple(_step_at(s, i, item) for i, s in enumerate(self.steps))
        put(self, "steps", steps)
        put(self, "trigger", check_enum(PlanTrigger, self.trigger, item=item, name="trigger"))
        put(self, "status", check_enum(PlanStatus, self.status, item=item, name="status"))
        check_text(self.reason, item=item, name="reason")
        if self.parent is not None and (
            isinstance(self.parent, bool)
            or not isinstance(self.parent, int)
            or not 1 <= self.parent < self.version
        ):
            raise InvalidInputError(
                f"must be an earlier version number or None, got {shown(self.parent)}",
                item=item,
                field="parent",
            )
        check_count(self.executed_steps, item=item, name="executed_steps")
        check_count(self.observations, item=item, name="observations")
        _check_graph(steps)

    @property
    def id(self) -> str:
        """``"v<version>"``: how decisions refer to this version."""
        return f"v{self.version}"

    @property
    def is_complete(self) -> bool:
        """True when the plan has steps and every one is done or skipped."""
        return bool(self.steps) and all(s.status in FINISHED for s in self.steps)

    def step(self, step_id: str) -> PlanStep:
        """The step with this id; InvalidInputError if there is none."""
        for s in self.steps:
            if s.id == step_id:
                return s
        raise InvalidInputError(f"no such step in {self.id}", item=str(step_id), field="id")

    @classmethod
    def linear(cls, version: int, descriptions: Sequence[str], **fields_: Any) -> PlanVersion:
        """A plan of steps ``s1..sN`` that each depend on the previous one.

        >>> PlanVersion.linear(2, ["a", "b"], trigger="critique", parent=1).steps[1].depends_on
        ('s1',)
        """
        steps = [
            PlanStep(f"s{i}", text, depends_on=(f"s{i - 1}",) if i > 1 else ())
            for i, text in enumerate(descriptions, start=1)
        ]
        return cls(version, tuple(steps), **fields_)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | PlanVersion) -> PlanVersion:
        """Build from a mapping; steps may be mappings too. Unknown keys are rejected."""
        return from_mapping(cls, data, key="version", prefix="v")  # type: ignore[no-any-return]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out.update(
            steps=[s.to_dict() for s in self.steps],
            trigger=self.trigger.value,
            status=self.status.value,
        )
        return out


def _check_graph(steps: tuple[PlanStep, ...]) -> None:
    """Unique ids, known dependencies, no cycles (Kahn's algorithm)."""
    ids: dict[str, PlanStep] = {}
    for s in steps:
        if s.id in ids:
            raise InvalidInputError("duplicate step id", item=s.id, field="id")
        ids[s.id] = s
    for s in steps:
        for dep in s.depends_on:
            if dep not in ids:
                raise InvalidInputError(
                    f"depends on unknown step {shown(dep)}", item=s.id, field="depends_on"
                )
    indegree = {s.id: len(set(s.depends_on)) for s in steps}
    dependents: dict[str, list[str]] = {s.id: [] for s in steps}
    for s in steps:
        for dep in set(s.depends_on):
            dependents[dep].append(s.id)
    ready = [sid for sid, n in indegree.items() if n == 0]
    seen = 0
    while ready:
        sid = ready.pop()
        seen += 1
        for nxt in dependents[sid]:
            indegree[nxt] -= 1
            if indegree[nxt] == 0:
                ready.append(nxt)
    if seen != len(steps):
        cyclic = sorted(sid for sid, n in indegree.items() if n > 0)
        raise InvalidInputError(
            f"dependency cycle among {cyclic}", item=cyclic[0], field="depends_on"
        )
