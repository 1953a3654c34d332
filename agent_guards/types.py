"""Shared vocabulary: verdicts, decision records, usage counters and state mixins.

Everything here is a plain, serializable value. Guards never keep state on Python
objects: what they remember lives in graph state (these channels) or in a
LangGraph ``BaseStore``.

Example:
    >>> d = GuardDecision(guard="loop_check", verdict=Verdict.STOP, reason="repeated_call")
    >>> d.verdict == "stop", d.tag
    (True, 'guard:loop_check:stop')
    >>> merge_usage({"steps": 2, "tokens": 10}, {"steps": 1})["steps"]
    3
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from typing import Annotated, Any, Literal

from langchain_core.runnables import RunnableConfig
from typing_extensions import TypedDict

if sys.version_info >= (3, 11):
    from enum import StrEnum
else:  # pragma: no cover - exercised on Python 3.10 only
    from enum import Enum

    class StrEnum(str, Enum):
        """Backport of :class:`enum.StrEnum` (values are their own ``str``)."""

        def __str__(self) -> str:
            return str(self.value)


__all__ = [
    "DEFAULT_LOG_SIZE",
    "USAGE_COUNTERS",
    "ContextRoute",
    "EvidenceRoute",
    "GuardDecision",
    "GuardState",
    "LoopRoute",
    "PlannerRoute",
    "RetryRoute",
    "Usage",
    "Verdict",
    "delta_channel",
    "delta_log",
    "keep_last",
    "merge_usage",
    "now_from_config",
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
    return tuple(str(v) for v in values) if values is not None else ()


@dataclass(frozen=True)
class GuardDecision:
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

    def __post_init__(self) -> None:
        if not isinstance(self.guard, str) or not self.guard:
            raise ValueError(f"GuardDecision.guard must be a non-empty string, got {self.guard!r}")
        if not isinstance(self.reason, str) or not self.reason:
            raise ValueError(
                f"GuardDecision.reason must be a non-empty string, got {self.reason!r}"
            )
        object.__setattr__(self, "verdict", parse_verdict(self.verdict))
        for name in ("selected_ids", "conflicting_ids", "dropped_ids"):
            object.__setattr__(self, name, _ids(getattr(self, name)))
        object.__setattr__(self, "data", dict(self.data or {}))

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
        from dataclasses import replace

        return replace(
            self,
            step=self.step if self.step is not None else step,
            at=self.at if self.at is not None else at,
        )


DEFAULT_LOG_SIZE = 200


def keep_last(n: int = DEFAULT_LOG_SIZE) -> Callable[[list[Any] | None, Any], list[Any]]:
    """Reducer factory: append updates and keep the last ``n`` items.

    Use it to size your own log channel:
    ``guard_log: Annotated[list[GuardDecision], keep_last(50)]``.

    >>> r = keep_last(2)
    >>> r(["a", "b"], ["c"])
    ['b', 'c']
    >>> r(None, "x")
    ['x']
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"keep_last(n) needs an int n >= 1, got {n!r}")

    def reduce(current: list[Any] | None, update: Any) -> list[Any]:
        items = list(current or ())
        if update is None:
            return items[-n:]
        if isinstance(update, (list, tuple)):
            items.extend(update)
        else:
            items.append(update)
        return items[-n:]

    reduce.__name__ = f"keep_last_{n}"
    return reduce


def delta_channel(reducer: Callable[[Any, Any], Any], *, snapshot_frequency: int = 100) -> Any:
    """Make any reducer ``(current, update) -> new`` a channel that checkpoints only what
    each step writes (LangGraph's beta ``DeltaChannel``), not the whole value again.

    With a plain reducer channel SqliteSaver copies the whole value into every checkpoint,
    so a value that grows with the run makes the run's storage quadratic. A delta channel
    stores each step's writes plus a full snapshot every ``snapshot_frequency`` updates;
    reading a past state replays at most that many writes onto the last snapshot (LangGraph
    does it in ``get_state`` / ``get_state_history``; raw ``channel_values`` lack the value).

    The reducer must be deterministic and batching-invariant: folding two batches of
    updates one after the other must equal folding them in one go (upserts such as
    :func:`~agent_guards.merge_evidence` or ``merge_plans`` and bounded appends such as
    :func:`keep_last` are). Falls back to the plain ``reducer`` on LangGraph versions
    without ``DeltaChannel``.

    Use it as ``plans: Annotated[list[PlanVersion], delta_channel(merge_plans)]``.

    Example:
        >>> from typing import Annotated, TypedDict
        >>> from langgraph.graph import StateGraph
        >>> from agent_guards import delta_channel, merge_usage
        >>> class State(TypedDict):
        ...     usage: Annotated[dict, delta_channel(merge_usage)]
        >>> g = StateGraph(State).add_node("count", lambda s: {"usage": {"steps": 1}})
        >>> g.set_entry_point("count").compile().invoke({"usage": {"steps": 2}})
        {'usage': {'steps': 3}}
    """
    if not callable(reducer):
        raise TypeError(f"delta_channel(reducer) needs a callable, got {reducer!r}")
    try:
        from langgraph.channels.delta import DeltaChannel
    except ImportError:  # pragma: no cover - LangGraph < 1.2
        return reducer

    def reduce_batch(current: Any, writes: Any) -> Any:
        value = current
        for update in writes:
            value = reducer(value, update)
        return value

    reduce_batch.__name__ = f"delta_{getattr(reducer, '__name__', 'reducer')}"
    return DeltaChannel(reduce_batch, list, snapshot_frequency=snapshot_frequency)


def delta_log(n: int = DEFAULT_LOG_SIZE, *, snapshot_frequency: int = 100) -> Any:
    """A ``guard_log`` channel that checkpoints only what each step adds (LangGraph's beta
    ``DeltaChannel``, via :func:`delta_channel`), keeping the last ``n`` decisions.

    ``keep_last`` makes SqliteSaver copy the whole log (up to ``n`` decisions, ~0.5 KB
    each) into every checkpoint; with ``delta_log`` a step writes its new decisions only,
    plus a full snapshot every ``snapshot_frequency`` updates, so bytes per step stay flat
    however long the run. Reading a past state replays at most ``snapshot_frequency``
    writes. Falls back to :func:`keep_last` on LangGraph versions without ``DeltaChannel``.

    Use it as ``guard_log: Annotated[list[GuardDecision], delta_log()]``.

    Example:
        >>> from typing import Annotated, TypedDict
        >>> from langgraph.graph import StateGraph
        >>> class State(TypedDict):
        ...     guard_log: Annotated[list, delta_log(2)]
        >>> g = StateGraph(State).add_node("log", lambda s: {"guard_log": ["a", "b", "c"]})
        >>> g.set_entry_point("log").compile().invoke({"guard_log": []})
        {'guard_log': ['b', 'c']}
    """
    return delta_channel(keep_last(n), snapshot_frequency=snapshot_frequency)


USAGE_COUNTERS: tuple[str, ...] = ("steps", "replans", "tool_calls", "model_calls", "tokens")


class Usage(TypedDict, total=False):
    """Cumulative per-thread counters. Nodes write *increments*; the reducer adds them.

    ``started_at`` is POSIX seconds from the run's clock; the earliest value wins, so a
    resume or a retry never restarts the clock.

    Example:
        >>> from agent_guards import Budget, Usage, merge_usage
        >>> usage = merge_usage(Usage(steps=3, started_at=50.0), Usage(steps=1, started_at=80.0))
        >>> usage
        {'steps': 4, 'started_at': 50.0}
        >>> Budget(max_steps=10).remaining(usage)
        {'steps': 6}
    """

    steps: int
    replans: int
    tool_calls: int
    model_calls: int
    tokens: int
    started_at: float


def merge_usage(current: Mapping[str, Any] | None, update: Mapping[str, Any] | None) -> Usage:
    """Reducer for :class:`Usage`: counters add, ``started_at`` keeps the earliest.

    Adding is associative and commutative, so parallel branches (``Send`` fan-out)
    and resumes never lose or reset a count.

    >>> merge_usage({"tool_calls": 1, "started_at": 5.0}, {"tool_calls": 2, "started_at": 9.0})
    {'tool_calls': 3, 'started_at': 5.0}
    """
    out: dict[str, Any] = dict(current or {})
    for key, value in (update or {}).items():
        if key == "started_at":
            if value is None:
                continue
            start = float(value)
            if math.isnan(start):
                raise ValueError("usage.started_at is NaN")
            prev = out.get("started_at")
            out["started_at"] = start if prev is None else min(float(prev), start)
        elif key in USAGE_COUNTERS:
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(f"usage.{key} must be an int increment, got {value!r}")
            out[key] = int(out.get(key, 0)) + value
        else:
            allowed = ", ".join((*USAGE_COUNTERS, "started_at"))
            raise ValueError(f"unknown usage counter {key!r}; allowed: {allowed}")
    return out  # type: ignore[return-value]


class GuardState(TypedDict, total=False):
    """State mixin: subclass it (TypedDict inheritance) to give a graph the guard channels.

    >>> from langgraph.graph import MessagesState
    >>> class State(MessagesState, GuardState):
    ...     pass
    """

    guard_log: Annotated[list[GuardDecision], keep_last(DEFAULT_LOG_SIZE)]
    usage: Annotated[Usage, merge_usage]


CONFIG_NOW_KEY = "agent_guards_now"


def now_from_config(config: RunnableConfig | None = None) -> datetime:
    """The run's clock: ``config["configurable"]["agent_guards_now"]`` if set, else UTC now.

    The value may be a ``datetime``, an ISO-8601 string, POSIX seconds, or a zero-argument
    callable returning one of those, so tests and replays can pin time.

    Example:
        >>> from agent_guards import now_from_config
        >>> now_from_config({"configurable": {"agent_guards_now": "2024-05-01T12:00:00Z"}})
        datetime.datetime(2024, 5, 1, 12, 0, tzinfo=datetime.timezone.utc)
        >>> now_from_config({"configurable": {"agent_guards_now": 0}}).isoformat()
        '1970-01-01T00:00:00+00:00'
        >>> now_from_config().tzinfo  # nothing pinned: the real UTC clock
        datetime.timezone.utc
    """
    value: Any = ((config or {}).get("configurable") or {}).get(CONFIG_NOW_KEY)
    if callable(value):
        value = value()
    if value is None:
        return datetime.now(timezone.utc)
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=timezone.utc)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return datetime.fromtimestamp(float(value), tz=timezone.utc)
    if isinstance(value, str):
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
        return parsed if parsed.tzinfo else parsed.replace(tzinfo=timezone.utc)
    raise TypeError(
        f"configurable[{CONFIG_NOW_KEY!r}] must be a datetime, ISO string, POSIX seconds "
        f"or a callable, got {type(value).__name__}"
    )


def step_from_config(config: RunnableConfig | None) -> int | None:
    """The LangGraph super-step a node runs in (``metadata["langgraph_step"]``), if known."""
    step = ((config or {}).get("metadata") or {}).get("langgraph_step")
    return step if isinstance(step, int) else None
