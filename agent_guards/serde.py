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
    >>> ("agent_guards.types", "GuardDecision") in serde_allowlist()
    True
"""

from __future__ import annotations

from typing import Any

from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from ._evidence_model import ClaimVerdict, Evidence, EvidenceVerdict
from ._memory_model import MemoryRecord, MemoryVerdict
from ._plan_goal import Goal
from ._plan_model import PlanStatus, PlanStep, PlanTrigger, PlanVersion, RiskLevel, StepStatus
from .types import GuardDecision, Verdict

__all__ = ["GUARD_STATE_TYPES", "guard_serializer", "serde_allowlist"]

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
        >>> from agent_guards import serde_allowlist
        >>> pairs = serde_allowlist(Decimal)
        >>> pairs[0], pairs[-1]
        (('agent_guards.types', 'GuardDecision'), ('decimal', 'Decimal'))
    """
    return [(t.__module__, t.__name__) for t in (*GUARD_STATE_TYPES, *extra)]


def guard_serializer(*extra: type, **kwargs: Any) -> JsonPlusSerializer:
    """A ``JsonPlusSerializer`` that loads the guard types (and ``extra``) without warnings.

    Pass it as ``serde=`` to any checkpointer (``SqliteSaver(conn, serde=...)``,
    ``PostgresSaver(conn, serde=...)``). When a graph is compiled, LangGraph adds the
    types reachable from its state schema (messages included) to this allowlist; a type
    reachable from neither is blocked, as in strict mode.

    Example:
        >>> from agent_guards import GuardDecision, guard_serializer
        >>> serde = guard_serializer()
        >>> d = GuardDecision(guard="loop_check", verdict="stop", reason="repeated_call")
        >>> blob = serde.dumps_typed(d)
        >>> blob[0], serde.loads_typed(blob) == d
        ('msgpack', True)
    """
    return JsonPlusSerializer(allowed_msgpack_modules=serde_allowlist(*extra), **kwargs)
