"""Loop recovery by cutting the history back (pure). Private: use ``agent_guards.loop_check``.

OpenHands' loop recovery truncates the agent's memory to where the loop started and lets it
go on. ``LoopPolicy(on_loop="truncate")`` does the same at the nudge level: the looping tail
(from the loop's second round on) is removed with ``RemoveMessage``, whole assistant turns
at a time, so every tool call keeps its answer, and the nudge note follows. A user's
message is never removed (the cut stops after the latest one). A loop that comes back
after a cut is stopped: the cut is recorded in ``guard_log`` (``data["truncated"]``).

Example:
    >>> from langchain_core.messages import HumanMessage, ToolMessage
    >>> from agent_guards.testing import tool_call_message
    >>> from agent_guards.loop_check import detect_loop
    >>> history = [HumanMessage("rates?", id="h")]
    >>> for i in range(2):
    ...     history += [tool_call_message("search", {"q": "rates"}, id=f"c{i}"),
    ...                 ToolMessage("4%", tool_call_id=f"c{i}", id=f"t{i}")]
    >>> history[1].id, history[3].id = "a0", "a1"
    >>> [m.id for m in cut_loop(history, detect_loop(history))]
    ['a1', 't1']
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, RemoveMessage

from agent_guards.core.decision import GuardDecision, Verdict
from agent_guards.core.signatures import is_guard_message

__all__ = ["after_cut", "cut_loop"]


def _labels(message: Any, position: int) -> set[str]:
    labels = {f"messages[{position}]"}
    if isinstance(message, BaseMessage) and message.id:
        labels.add(message.id)
    if isinstance(message, AIMessage):
        calls = [*message.tool_calls, *message.invalid_tool_calls]
        labels.update(str(c.get("id")) for c in calls if c.get("id"))
    return labels


def _start(messages: Sequence[Any], decision: GuardDecision) -> int | None:
    """Index of the assistant message where the loop's second round begins."""
    ids = list(decision.selected_ids)
    if not ids:
        return None
    target = ids[1] if len(ids) > 1 else ids[0] if decision.reason == "content_loop" else None
    if target is None:
        return None
    for position, message in enumerate(messages):
        if isinstance(message, AIMessage) and target in _labels(message, position):
            return position
    return None


def cut_loop(messages: Sequence[Any], decision: GuardDecision) -> list[RemoveMessage]:
    """``RemoveMessage``s for the looping tail of ``messages`` (empty: nothing to cut).

    Keeps the loop's first round (a content loop's reply is removed whole), never removes
    a user's message, and cuts nothing when a message to remove has no id (a graph's
    ``add_messages`` gives every message one). Earlier notes in the tail go with it.
    """
    start = _start(messages, decision)
    if start is None:
        return []
    users = [
        i
        for i, m in enumerate(messages)
        if isinstance(m, HumanMessage) and not is_guard_message(m) and i >= start
    ]
    if users:  # never across a user's message: the cut starts after the latest one
        later = [
            i for i in range(users[-1] + 1, len(messages)) if isinstance(messages[i], AIMessage)
        ]
        if not later:
            return []
        start = later[0]
    tail = [m for m in messages[start:] if isinstance(m, BaseMessage)]
    if len(tail) != len(messages) - start or any(not m.id for m in tail):
        return []
    return [RemoveMessage(id=str(m.id)) for m in tail]


def after_cut(
    decision: GuardDecision, guard_log: Iterable[Any] | None, *, escalate: bool = False
) -> GuardDecision:
    """The decision, made a stop (or an escalation) when the same loop was already cut
    back once.

    Example:
        >>> nudge = GuardDecision(guard="loop_check", verdict=Verdict.NUDGE,
        ...     reason="repeated_call", detail="search was called 2 times",
        ...     data={"signature": "search:{}"})
        >>> cut = replace(nudge, data={"signature": "search:{}", "truncated": 2})
        >>> after_cut(nudge, [cut]).verdict.value, after_cut(nudge, []).verdict.value
        ('stop', 'nudge')
    """
    if decision.verdict is not Verdict.NUDGE:
        return decision
    for earlier in guard_log or ():
        data = getattr(earlier, "data", None)
        if (
            getattr(earlier, "guard", None) == decision.guard
            and isinstance(data, Mapping)
            and data.get("truncated")
            and getattr(earlier, "reason", None) == decision.reason
            and data.get("signature") == decision.data.get("signature")
        ):
            detail = f"{decision.detail}, again after the history was cut back"
            verdict = Verdict.ESCALATE if escalate else Verdict.STOP
            return replace(decision, verdict=verdict, detail=detail)
    return decision
