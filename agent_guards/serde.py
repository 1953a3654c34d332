"""Checkpoint serialization for the guard types, without LangGraph's warnings.

Guards keep frozen dataclasses and enums in state (``GuardDecision``, ``PlanVersion``,
``EvidenceVerdict``...). With ``LANGGRAPH_STRICT_MSGPACK=true`` LangGraph allows the types
reachable from your state schema and nothing else; without it, it loads every type but
logs "Deserializing unregistered type ... will be blocked in a future version" for each.
:func:`guard_serializer` gives your checkpointer an explicit allowlist with the guard
types, so reads are quiet today and keep working when strict mode becomes the default.

Example:
    >>> from langgraph.checkpoint.memory import InMemorySaver
    >>> saver = InMemorySaver(serde=guard_serializer())
    >>> ("agent_guards.core.decision", "GuardDecision") in serde_allowlist()
    True
"""

import hashlib
from collections.abc import Callable, Iterable
from typing import Any

from langchain_core.messages import BaseMessage, convert_to_messages
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.graph.message import add_messages

from agent_guards.core.decision import GuardDecision, Verdict
from agent_guards.core.signatures import safe_str
from agent_guards.core.state import DEFAULT_LOG_SIZE, keep_last
from agent_guards.evidence_resolve.model import ClaimVerdict, Evidence, EvidenceVerdict
from agent_guards.memory_resolve.model import MemoryRecord, MemoryVerdict
from agent_guards.planner_gate.goal import Goal
from agent_guards.planner_gate.model import (
    PlanStatus,
    PlanStep,
    PlanTrigger,
    PlanVersion,
    RiskLevel,
    StepStatus,
)

__all__ = [
    "GUARD_STATE_TYPES",
    "RENAMED_MODULES",
    "GuardSerializer",
    "add_messages_stable",
    "delta_channel",
    "delta_log",
    "delta_messages",
    "guard_serializer",
    "serde_allowlist",
]

GUARD_STATE_TYPES: tuple[type, ...] = (
    GuardDecision,
    Verdict,
    Evidence,
    EvidenceVerdict,
    ClaimVerdict,
    MemoryRecord,
    MemoryVerdict,
    Goal,
    PlanVersion,
    PlanStep,
    PlanStatus,
    PlanTrigger,
    RiskLevel,
    StepStatus,
)
"""Every type a guard may write to graph state."""


def serde_allowlist(*extra: type) -> list[tuple[str, str]]:
    """``(module, name)`` pairs of the guard state types, plus ``extra`` types of yours.

    Example:
        >>> from decimal import Decimal
        >>> from agent_guards.serde import serde_allowlist
        >>> pairs = serde_allowlist(Decimal)
        >>> pairs[0], pairs[-1]
        (('agent_guards.core.decision', 'GuardDecision'), ('decimal', 'Decimal'))
    """
    return [(t.__module__, t.__name__) for t in (*GUARD_STATE_TYPES, *extra)]


RENAMED_MODULES: dict[str, str] = {
    "agent_guards.types": "agent_guards.core.decision",
    "agent_guards._evidence_model": "agent_guards.evidence_resolve.model",
    "agent_guards._memory_model": "agent_guards.memory_resolve.model",
    "agent_guards._plan_goal": "agent_guards.planner_gate.goal",
    "agent_guards._plan_model": "agent_guards.planner_gate.model",
}
"""Module paths that checkpoints written by agent-guards 0.1.0 name, and where those types
live now. Only the guard state types are renamed; the allowlist itself names public
paths only."""

# msgpack ext codes LangGraph uses for objects rebuilt from (module, name, args).
_CONSTRUCTOR_CODES = frozenset({0, 1, 2})
_LEGACY_MARKS = tuple(m.encode() for m in RENAMED_MODULES)
_RENAMED = {
    (old, t.__name__): new
    for old, new in RENAMED_MODULES.items()
    for t in GUARD_STATE_TYPES
    if t.__module__ == new
}


class GuardSerializer(JsonPlusSerializer):
    """``JsonPlusSerializer`` with the guard allowlist that also reads 0.1.0 checkpoints.

    A checkpoint names each object's type by module path. Those written by 0.1.0 name
    private modules that no longer exist; this serializer maps exactly those
    ``(module, name)`` pairs to the types' public homes (:data:`RENAMED_MODULES`) and
    then loads them through LangGraph's own allowlist check. Anything else is read by
    LangGraph unchanged.

    Example:
        >>> serde = guard_serializer()
        >>> isinstance(serde, GuardSerializer), serde.with_msgpack_allowlist([]) is serde
        (True, True)
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._wrap_ext_hook()

    def with_msgpack_allowlist(self, extra_allowlist: Iterable[Any]) -> JsonPlusSerializer:
        """LangGraph's merge of the allowlist (at compile time), keeping the renaming."""
        clone = super().with_msgpack_allowlist(extra_allowlist)
        if clone is not self and isinstance(clone, GuardSerializer):
            clone._wrap_ext_hook()
        return clone

    def _wrap_ext_hook(self) -> None:
        base: Callable[[int, bytes], Any] = self._unpack_ext_hook

        def hook(code: int, data: bytes) -> Any:
            if any(mark in data for mark in _LEGACY_MARKS):
                data = self._renamed(code, data)
            return base(code, data)

        self._unpack_ext_hook = hook

    def _renamed(self, code: int, data: bytes) -> bytes:
        # Decode with this hook (nested objects come back as the new types), fix
        # this object's own path, and encode again for LangGraph's hook to load.
        value = self.loads_typed(("msgpack", data))
        if code in _CONSTRUCTOR_CODES and isinstance(value, list) and len(value) >= 2:
            new = _RENAMED.get((value[0], value[1]))
            if new is not None:
                value[0] = new
        kind, blob = self.dumps_typed(value)
        return blob if kind == "msgpack" else data


def guard_serializer(*extra: type, **kwargs: Any) -> GuardSerializer:
    """A serializer that loads the guard types (and ``extra``) without warnings.

    Pass it as ``serde=`` to any checkpointer (``SqliteSaver(conn, serde=...)``,
    ``PostgresSaver(conn, serde=...)``). When a graph is compiled, LangGraph adds the
    types reachable from its state schema (messages included) to this allowlist; a type
    reachable from neither is blocked, as in strict mode. Checkpoints written by
    agent-guards 0.1.0 load too (see :class:`GuardSerializer`).

    Example:
        >>> from agent_guards import GuardDecision, guard_serializer
        >>> serde = guard_serializer()
        >>> d = GuardDecision(guard="loop_check", verdict="stop", reason="repeated_call")
        >>> blob = serde.dumps_typed(d)
        >>> blob[0], serde.loads_typed(blob) == d
        ('msgpack', True)
    """
    return GuardSerializer(allowed_msgpack_modules=serde_allowlist(*extra), **kwargs)


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
        >>> from agent_guards.serde import delta_channel
        >>> from agent_guards.core import merge_usage
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
        >>> from agent_guards.serde import delta_log
        >>> class State(TypedDict):
        ...     guard_log: Annotated[list, delta_log(2)]
        >>> g = StateGraph(State).add_node("log", lambda s: {"guard_log": ["a", "b", "c"]})
        >>> g.set_entry_point("log").compile().invoke({"guard_log": []})
        {'guard_log': ['b', 'c']}
    """
    return delta_channel(keep_last(n), snapshot_frequency=snapshot_frequency)


def _stable_ids(left: Any, right: Any) -> Any:
    """``right`` as messages, each without an id given one derived from where it lands.

    ``add_messages`` gives an id-less message a random uuid when it is added. A delta
    channel adds it again each time a past state is rebuilt from the stored writes, so a
    random id would differ between the run and its replay (and a later replacement by id
    would miss). The id here is a digest of the previous message's id, the position and
    the message itself: the same writes rebuild the same ids.
    """
    items = right if isinstance(right, list) else [right]
    if all(isinstance(m, BaseMessage) and m.id for m in items):
        return right
    msgs = convert_to_messages(items)
    prev = [m.id for m in convert_to_messages(left if isinstance(left, list) else [left])[-1:]]
    base = f"{len(left) if isinstance(left, list) else 1}\x1f{prev[0] if prev else ''}"
    out: list[BaseMessage] = []
    for i, m in enumerate(msgs):
        if m.id:
            out.append(m)
            continue
        text = f"{base}\x1f{i}\x1f{m.type}\x1f{_shown_content(m.content)}"
        digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:24]
        out.append(m.model_copy(update={"id": f"msg-{digest}"}))
    return out


def _shown_content(content: Any) -> str:
    """``repr(content)``; content repr() refuses (an int past the digit limit) as JSON text."""
    try:
        return repr(content)
    except ValueError:
        return safe_str(content)


def add_messages_stable(left: Any, right: Any) -> Any:
    """``add_messages`` that gives an id-less message an id derived from where it lands
    (the reducer of :func:`delta_messages`; replaying the same writes gives the same ids)."""
    return add_messages(left, _stable_ids(left or [], right))


def delta_messages(*, snapshot_frequency: int = 100) -> Any:
    """A messages channel (``add_messages``) that checkpoints only what each step adds.

    With the plain ``add_messages`` channel SqliteSaver copies the whole list into every
    checkpoint, so one 10 MB tool result is stored again at each super-step until it
    leaves the list. As a delta channel (:func:`delta_channel`) the result is stored once,
    in the write of the step that produced it, plus in a full snapshot every
    ``snapshot_frequency`` updates. Messages written without an id get one derived from
    their position (not a random uuid), so rebuilding a past state gives the same ids.

    Use it as ``step_messages: Annotated[list[AnyMessage], delta_messages()]``.

    Example:
        >>> from typing import Annotated, TypedDict
        >>> from langchain_core.messages import AnyMessage
        >>> from langgraph.graph import StateGraph
        >>> class State(TypedDict):
        ...     notes: Annotated[list[AnyMessage], delta_messages()]
        >>> g = StateGraph(State).add_node("say", lambda s: {"notes": [("ai", "done")]})
        >>> out = g.set_entry_point("say").compile().invoke({"notes": [("user", "go")]})
        >>> [m.type for m in out["notes"]], out["notes"][1].id.startswith("msg-")
        (['human', 'ai'], True)
    """
    return delta_channel(add_messages_stable, snapshot_frequency=snapshot_frequency)
