"""The decision record every guard writes, the verdicts it may carry, and ``Checkpointed``,
the base that lets the records state keeps on every step take the checkpoint encoder's
cheap path.

Example:
    >>> d = GuardDecision(guard="loop_check", verdict=Verdict.STOP, reason="repeated_call")
    >>> d.verdict == "stop", d.tag
    (True, 'guard:loop_check:stop')
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from dataclasses import fields as dataclass_fields
from enum import StrEnum
from typing import Any, Literal

__all__ = [
    "Checkpointed",
    "ContextRoute",
    "EvidenceRoute",
    "GuardDecision",
    "LoopRoute",
    "PlannerRoute",
    "RetryRoute",
    "Verdict",
    "parse_verdict",
]


class Verdict(StrEnum):
    """What a guard decided. Values are the lowercase names.

    Example:
        >>> from agent_guards import Verdict
        >>> Verdict("nudge") is Verdict.NUDGE
        True
        >>> str(Verdict.STOP), Verdict.STOP == "stop"
        ('stop', True)
    """

    ANSWER = "answer"
    CLARIFY = "clarify"
    ABSTAIN = "abstain"
    ESCALATE = "escalate"
    EXECUTE = "execute"
    REPLAN = "replan"
    CONTINUE = "continue"
    REUSE = "reuse"
    NUDGE = "nudge"
    STOP = "stop"
    RETRY = "retry"
    REPAIR = "repair"
    REFUSE = "refuse"
    FALLBACK = "fallback"


def parse_verdict(value: Verdict | str) -> Verdict:
    """Return ``value`` as a :class:`Verdict`, rejecting unknown strings.

    >>> parse_verdict("STOP")
    <Verdict.STOP: 'stop'>
    >>> parse_verdict("maybe")
    Traceback (most recent call last):
    ...
    ValueError: unknown verdict 'maybe'; allowed: answer, clarify, abstain, ...
    """
    if isinstance(value, Verdict):
        return value
    if isinstance(value, str):
        try:
            return Verdict(value.strip().lower())
        except ValueError:
            pass
    allowed = ", ".join(v.value for v in Verdict)
    raise ValueError(f"unknown verdict {value!r}; allowed: {allowed}")


# Route labels returned by the conditional edges (so ``add_conditional_edges`` can
# infer the path map, as LangGraph's ``tools_condition`` does).
EvidenceRoute = Literal["answer", "clarify", "abstain", "escalate"]


PlannerRoute = Literal["execute", "replan", "clarify", "escalate", "stop"]


LoopRoute = Literal["continue", "nudge", "stop", "escalate"]


RetryRoute = Literal[
    "retry", "repair", "replan", "clarify", "abstain", "refuse", "fallback", "continue"
]


ContextRoute = Literal["continue", "nudge", "repair"]


def _ids(values: Iterable[str] | None) -> tuple[str, ...]:
    """``values`` as a tuple of str (none for None); a tuple of str is kept as it is."""
    if type(values) is tuple and (not values or all(type(v) is str for v in values)):
        return values
    return tuple(str(v) for v in values) if values is not None else ()


class Checkpointed:
    """Base of the frozen dataclasses graph state keeps on every step (decisions, plan
    versions and their steps, evidence): ``_asdict`` gives their fields, as a
    ``namedtuple`` does.

    LangGraph's checkpoint encoder takes an object with ``_asdict`` down its named-tuple
    path, ahead of its dataclass path, which first asks a runtime ``Protocol``
    (``isinstance(obj, SendProtocol)``) and so costs several times as much per object.
    Both write the same bytes (the module, the name and the fields in field order), read
    back with ``cls(**fields)``; what is not a field (a cached property, a parsed memo) is
    left out of both.

    Example:
        >>> GuardDecision(guard="g", verdict="stop", reason="r")._asdict()["verdict"]
        <Verdict.STOP: 'stop'>
    """

    __slots__ = ()

    def _asdict(self) -> dict[str, Any]:
        values = self.__dict__
        return {name: values[name] for name in _field_names(type(self))}


_FIELD_NAMES: dict[type, tuple[str, ...]] = {}  # a record class's fields, read once


def _field_names(cls: Any) -> tuple[str, ...]:
    names = _FIELD_NAMES.get(cls)
    if names is None:
        names = _FIELD_NAMES[cls] = tuple(f.name for f in dataclass_fields(cls))
    return names


@dataclass(frozen=True, init=False)  # __init__ below: it checks and sets in one pass
class GuardDecision(Checkpointed):
    """One decision a guard made: the unit that traces, evals and diffs compare.

    Ids are tuples (lists are accepted and converted). ``step`` and ``at`` record where and
    when the decision was made; they are excluded from equality, so a replay from a
    checkpoint compares equal to the original run.

    Attributes:
        guard: The guard's name (``"evidence_resolve"``, ``"loop_check"``, ...).
        verdict: What it decided.
        reason: A stable, machine-readable reason code (``"newer_version"``).
        detail: One human sentence explaining the decision.
        selected_ids: Ids the decision is based on (evidence, memories, calls).
        conflicting_ids: Ids that disagreed with the selection and were flagged.
        dropped_ids: Ids set aside (noise, expired, duplicates).
        policy: Policy name and version, e.g. ``"EvidencePolicy@1"``.
        step: LangGraph step (super-step) the decision was made at, when known.
        at: ISO-8601 UTC timestamp from the run's clock.
        data: Small, JSON-serializable extras specific to the guard.

    Example:
        >>> from agent_guards import GuardDecision
        >>> d = GuardDecision(guard="evidence_resolve", verdict="answer", reason="newer_version",
        ...                   selected_ids=["doc-2"], conflicting_ids=["doc-1"])
        >>> d.tag, d.selected_ids
        ('guard:evidence_resolve:answer', ('doc-2',))
        >>> GuardDecision.from_dict(d.to_dict()) == d.with_context(step=4)
        True
    """

    guard: str
    verdict: Verdict
    reason: str
    detail: str = ""
    selected_ids: tuple[str, ...] = ()
    conflicting_ids: tuple[str, ...] = ()
    dropped_ids: tuple[str, ...] = ()
    policy: str = ""
    step: int | None = field(default=None, compare=False)
    at: str | None = field(default=None, compare=False)
    data: dict[str, Any] = field(default_factory=dict, hash=False)

    def __init__(
        self,
        guard: str,
        verdict: Verdict | str,
        reason: str,
        *,
        detail: str = "",
        selected_ids: Iterable[str] = (),
        conflicting_ids: Iterable[str] = (),
        dropped_ids: Iterable[str] = (),
        policy: str = "",
        step: int | None = None,
        at: str | None = None,
        data: Mapping[str, Any] | None = None,
    ) -> None:
        if not isinstance(guard, str) or not guard:
            raise ValueError(f"GuardDecision.guard must be a non-empty string, got {guard!r}")
        if not isinstance(reason, str) or not reason:
            raise ValueError(f"GuardDecision.reason must be a non-empty string, got {reason!r}")
        # set through __dict__, once: the dataclass is frozen to its callers; a tuple of
        # str is kept as it is (it is its own _ids), anything else is converted
        self.__dict__.update(
            {
                "guard": guard,
                "verdict": verdict if type(verdict) is Verdict else parse_verdict(verdict),
                "reason": reason,
                "detail": detail,
                "selected_ids": _ids(selected_ids),
                "conflicting_ids": _ids(conflicting_ids),
                "dropped_ids": _ids(dropped_ids),
                "policy": policy,
                "step": step,
                "at": at,
                "data": dict(data) if data else {},
            }
        )

    @property
    def tag(self) -> str:
        """LangSmith tag for this decision: ``guard:<name>:<verdict>``."""
        return f"guard:{self.guard}:{self.verdict.value}"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (verdict as its string value, ids as lists)."""
        out = asdict(self)
        out["verdict"] = self.verdict.value
        for name in ("selected_ids", "conflicting_ids", "dropped_ids"):
            out[name] = list(out[name])
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> GuardDecision:
        """Inverse of :meth:`to_dict`; unknown keys are rejected by name."""
        known = set(cls.__dataclass_fields__)
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"GuardDecision has no field(s) {unknown}; allowed: {sorted(known)}")
        return cls(**dict(data))

    def with_context(self, *, step: int | None = None, at: str | None = None) -> GuardDecision:
        """Return a copy stamped with the graph step and time (unset fields only)."""
        # Every field was checked and normalized when ``self`` was made, so the copy takes
        # them as they are (checking them again would change nothing) and gets its own
        # ``data`` dict, as a new decision would.
        stamped = object.__new__(type(self))
        stamped.__dict__.update(self.__dict__)
        object.__setattr__(stamped, "step", self.step if self.step is not None else step)
        object.__setattr__(stamped, "at", self.at if self.at is not None else at)
        object.__setattr__(stamped, "data", dict(self.data))
        return stamped
