"""Bounding a supervisor's handoffs: the pure core (no LangGraph import).

A supervisor (``langgraph-supervisor``, a swarm, or your own ``create_react_agent`` with
``transfer_to_<agent>`` tools) can hand the same task to the same worker forever: each
handoff "succeeds", so neither loop_check's result reuse nor retry_router ever fires.
:func:`check_handoffs` stops a handoff that repeats one which brought nothing new, and
bounds the handoffs of one user turn.

A *round* is what happened between a handoff and the next handoff to the same agent with
the same arguments. It brought something new when a tool result or an assistant text
appeared in it that was not seen earlier in the turn.

Example:
    >>> from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
    >>> def handoff(call_id):
    ...     call = {"name": "transfer_to_research", "args": {}, "id": call_id}
    ...     return [AIMessage("", tool_calls=[call]),
    ...             ToolMessage("Transferred", tool_call_id=call_id)]
    >>> names = frozenset({"transfer_to_research"})
    >>> turn = [HumanMessage("GDP of France?"), *handoff("h1"), AIMessage("GDP is 3T")]
    >>> turn += [*handoff("h2"), AIMessage("GDP is 3T")]  # the same answer again
    >>> pending = AIMessage("", tool_calls=[{"name": "transfer_to_research", "args": {},
    ...                                      "id": "h3"}])
    >>> check_handoffs([*turn[:4], pending], handoffs=names).verdict.value
    'continue'
    >>> d = check_handoffs([*turn, pending], handoffs=names)
    >>> d.verdict.value, d.reason, d.data["target"]
    ('stop', 'repeated_handoff', 'transfer_to_research')
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from agent_guards.core.decision import GuardDecision, Verdict
from agent_guards.core.signatures import canonical_args, content_text, is_guard_message

__all__ = ["HANDOFF_PREFIXES", "HandoffPolicy", "check_handoffs", "handoff_names"]

HANDOFF_PREFIXES: tuple[str, ...] = ("transfer_to_", "transfer_back_to_")
"""Tool-name prefixes langgraph-supervisor and langgraph-swarm give their handoff tools."""

GUARD = "loop_check"


@dataclass(frozen=True, kw_only=True)
class HandoffPolicy:
    """When a supervisor's handoff is stopped.

    Example:
        >>> HandoffPolicy(stop_after=2).max_handoffs
        12
        >>> HandoffPolicy(max_handoffs=0)
        Traceback (most recent call last):
        ...
        ValueError: HandoffPolicy.max_handoffs must be an int >= 1 or None, got 0
    """

    stop_after: int = 1
    """Stop a handoff to the same agent with the same arguments once this many rounds in a
    row with it brought nothing new."""
    max_handoffs: int | None = 12
    """Most handoffs in one user turn (None: no limit; an unbounded supervisor relies on
    ``recursion_limit`` alone)."""
    name: str = "HandoffPolicy@1"
    """Policy name and version recorded on decisions."""

    def __post_init__(self) -> None:
        if isinstance(self.stop_after, bool) or not isinstance(self.stop_after, int):
            raise ValueError(
                f"HandoffPolicy.stop_after must be an int >= 1, got {self.stop_after!r}"
            )
        if self.stop_after < 1:
            raise ValueError(
                f"HandoffPolicy.stop_after must be an int >= 1, got {self.stop_after!r}"
            )
        limit = self.max_handoffs
        if limit is not None and (
            isinstance(limit, bool) or not isinstance(limit, int) or limit < 1
        ):
            raise ValueError(
                f"HandoffPolicy.max_handoffs must be an int >= 1 or None, got {limit!r}"
            )


def handoff_names(tools: Iterable[Any], extra: Iterable[str] = ()) -> frozenset[str]:
    """Names of the handoff tools among ``tools``: langgraph-supervisor's metadata key
    ``__handoff_destination``, the ``transfer_to_`` / ``transfer_back_to_`` prefixes, and
    the names in ``extra``.

    Example:
        >>> from langchain_core.tools import tool
        >>> @tool
        ... def transfer_to_math() -> str:
        ...     '''Hand over to math.'''
        ...     return "ok"
        >>> sorted(handoff_names([transfer_to_math], extra=["ask_boss"]))
        ['ask_boss', 'transfer_to_math']
    """
    names = set(extra)
    for tool in tools:
        name = getattr(tool, "name", None)
        meta = getattr(tool, "metadata", None) or {}
        if isinstance(name, str) and (
            "__handoff_destination" in meta or name.startswith(HANDOFF_PREFIXES)
        ):
            names.add(name)
    return frozenset(names)


def _digest(message: BaseMessage) -> str | None:
    text = " ".join(content_text(message.content).split())
    return hashlib.sha256(text.encode()).hexdigest()[:16] if text else None


def _turn(messages: Sequence[Any]) -> list[Any]:
    """The messages since the last user message (guard notes such as a nudge are not one)."""
    for i in range(len(messages) - 1, -1, -1):
        m = messages[i]
        if isinstance(m, HumanMessage) and not is_guard_message(m):
            return list(messages[i + 1 :])
    return list(messages)


def _is_handoff_note(message: Any, handoff_ids: set[str]) -> bool:
    """A handoff's bookkeeping, not a result: its confirmation (ours, another agent's, a
    worker's way back) and langgraph-supervisor's "Transferring back" note."""
    if isinstance(message, ToolMessage):
        name = str(message.name or "")
        return message.tool_call_id in handoff_ids or name.startswith(HANDOFF_PREFIXES)
    meta = getattr(message, "response_metadata", None) or {}
    return bool(meta.get("__is_handoff_back"))


def _rounds(messages: Sequence[Any], handoffs: frozenset[str]) -> list[tuple[str, str, str, bool]]:
    """Every handoff of the turn: (call id, tool, args key, the round before it was new)."""
    seen: set[str] = set()
    last_seen: dict[tuple[str, str], int] = {}
    out: list[tuple[str, str, str, bool]] = []
    handoff_ids: set[str] = set()
    for m in messages:
        if isinstance(m, AIMessage):
            for call in m.tool_calls:
                if call["name"] not in handoffs:
                    continue
                key = (call["name"], canonical_args(call.get("args")))
                new = key not in last_seen or len(seen) > last_seen[key]
                out.append((str(call.get("id")), key[0], key[1], new))
                last_seen[key] = len(seen)
                handoff_ids.add(str(call.get("id")))
        if _is_handoff_note(m, handoff_ids):
            continue
        if isinstance(m, (AIMessage, ToolMessage)):
            digest = _digest(m)
            if digest is not None:
                seen.add(digest)
    return out


def check_handoffs(
    messages: Sequence[Any], *, handoffs: frozenset[str], policy: HandoffPolicy | None = None
) -> GuardDecision:
    """Decide whether the latest assistant turn's handoffs may run (CONTINUE) or not (STOP).

    Only the handoffs of the last ``AIMessage`` are judged; earlier ones are history.
    Reasons: ``repeated_handoff`` (the same handoff after ``stop_after`` rounds that brought
    nothing new), ``handoff_limit`` (more than ``max_handoffs`` in the turn),
    ``no_handoff`` / ``handoff_ok`` (continue).
    """
    policy = policy or HandoffPolicy()
    if not isinstance(policy, HandoffPolicy):
        raise TypeError(f"policy must be a HandoffPolicy, got {type(policy).__name__}")
    last = messages[-1] if messages else None
    pending = {
        str(c.get("id")) for c in getattr(last, "tool_calls", None) or () if c["name"] in handoffs
    }
    if not isinstance(last, AIMessage) or not pending:
        return GuardDecision(
            guard=GUARD, verdict=Verdict.CONTINUE, reason="no_handoff", policy=policy.name
        )
    rounds = _rounds(_turn(messages), handoffs)
    limit = policy.max_handoffs
    for index, (call_id, tool, args, _new) in enumerate(rounds):
        if call_id not in pending:
            continue
        same = [r for r in rounds[: index + 1] if (r[1], r[2]) == (tool, args)]
        idle = 0
        for r in reversed(same):
            if r[3]:
                break
            idle += 1
        detail = (
            f"{tool} was called {len(same)} times and the last {idle} round(s) brought nothing new"
        )
        if idle >= policy.stop_after:
            return _stop("repeated_handoff", detail, call_id, tool, count=len(same), policy=policy)
        if limit is not None and index + 1 > limit:
            detail = f"{index + 1} handoffs in one turn (limit {limit})"
            return _stop("handoff_limit", detail, call_id, tool, count=index + 1, policy=policy)
    return GuardDecision(
        guard=GUARD, verdict=Verdict.CONTINUE, reason="handoff_ok", policy=policy.name
    )


def _stop(
    reason: str, detail: str, call_id: str, tool: str, *, count: int, policy: HandoffPolicy
) -> GuardDecision:
    return GuardDecision(
        guard=GUARD,
        verdict=Verdict.STOP,
        reason=reason,
        detail=detail,
        selected_ids=(call_id,),
        policy=policy.name,
        data={"target": tool, "count": count},
    )
