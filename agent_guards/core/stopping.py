"""Stopping well: what loop_check and retry_router leave behind when they end a run.

A guard that ends a run answers every pending tool call with a ToolMessage (written to the
model), then tells the user why it stopped and what was confirmed so far, in texts rendered
from a :class:`~agent_guards.core.texts.Texts` table (``texts=``, English by default). The
guard's name and reason code go into the decision and the message's ``response_metadata``,
never into its text; :func:`agent_guards.core.errors.trip_message` words the exception.

Example:
    >>> from agent_guards.testing import tool_call_message
    >>> from langchain_core.messages import ToolMessage
    >>> msgs = [tool_call_message("a", {}, id="c1"),
    ...         ToolMessage("A is 1", tool_call_id="c1", name="a"),
    ...         tool_call_message("b", {}, id="c2")]
    >>> [m.tool_call_id for m in answer_pending(msgs, "not executed")]
    ['c2']
    >>> partial_results(msgs)
    ['a: A is 1']
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from agent_guards.core.decision import GuardDecision, Verdict
from agent_guards.core.signatures import REUSE_LINE, content_text, is_guard_message
from agent_guards.core.texts import TEXTS_EN, Texts

__all__ = [
    "answer_pending",
    "budget_refused_again",
    "final_message",
    "is_budget_refusal",
    "partial_results",
]


def answer_pending(
    messages: Sequence[Any], content: str, *, name: str = "loop_check"
) -> list[ToolMessage]:
    """ToolMessages for the latest assistant turn's calls that have no answer yet.

    Example:
        >>> from langchain_core.messages import AIMessage
        >>> turn = AIMessage("", tool_calls=[{"name": "search", "args": {}, "id": "c1"},
        ...                                  {"name": "fetch", "args": {}, "id": "c2"}])
        >>> done = ToolMessage("4%", tool_call_id="c1", name="search")
        >>> [(m.tool_call_id, m.status, m.content) for m in answer_pending([turn, done], "skipped")]
        [('c2', 'error', 'skipped')]
    """
    for i in range(len(messages) - 1, -1, -1):
        message = messages[i]
        if isinstance(message, AIMessage):
            answered = {m.tool_call_id for m in messages[i + 1 :] if isinstance(m, ToolMessage)}
            return [
                ToolMessage(
                    content=content,
                    tool_call_id=call["id"],
                    name=call["name"],
                    status="error",
                    response_metadata={"agent_guards": {"guard": name}},
                )
                for call in message.tool_calls
                if call.get("id") and call["id"] not in answered
            ]
    return []


def partial_results(messages: Sequence[Any], *, limit: int = 5, chars: int = 300) -> list[str]:
    """The last few distinct successful tool results, oldest first (``tool: text``).

    Example:
        >>> msgs = [ToolMessage("rate is 4%", tool_call_id="c1", name="search"),
        ...         ToolMessage("timeout", tool_call_id="c2", name="fetch", status="error"),
        ...         ToolMessage("rate is 4%", tool_call_id="c3", name="search"),
        ...         ToolMessage("x" * 50, tool_call_id="c4", name="read")]
        >>> partial_results(msgs, chars=10)
        ['search: rate is 4%', 'read: xxxxxxxxx…']
    """
    out: list[str] = []
    seen: set[str] = set()
    for message in reversed(messages[-200:]):
        if not isinstance(message, ToolMessage) or message.status == "error":
            continue
        text = " ".join(REUSE_LINE.sub("", content_text(message.content)).split())
        if not text or text in seen:
            continue
        seen.add(text)
        clipped = text if len(text) <= chars else text[: chars - 1] + "…"
        out.append(f"{message.name or 'tool'}: {clipped}")
        if len(out) >= limit:
            break
    return out[::-1]


def final_message(
    decision: GuardDecision,
    messages: Sequence[BaseMessage],
    *,
    lead: str | None = None,
    texts: Texts | None = None,
) -> AIMessage:
    """The run's last message: why it stopped, plus the confirmed partial result.

    ``lead`` is the first sentence as the caller rendered it; without one it is the
    ``loop_stop`` text for loop_check and the ``stop`` text for any other guard.

    Example:
        >>> from agent_guards.core.decision import GuardDecision, Verdict
        >>> from agent_guards.core.texts import TEXTS_ZH
        >>> d = GuardDecision(guard="budget", verdict=Verdict.STOP, reason="max_steps",
        ...                   detail="10 steps used")
        >>> print(final_message(d, []).content)
        I had to stop before finishing: 10 steps used.
        Nothing was confirmed before stopping.
        Missing: the rest of the task could not be completed reliably.
        >>> print(final_message(d, [], texts=TEXTS_ZH).content.splitlines()[0])
        任务还没完成，我不得不先停下来。
    """
    texts = texts or TEXTS_EN
    if lead is None:
        template = "loop_stop" if decision.guard == "loop_check" else "stop"
        lead = texts.render(template, detail=decision.detail or texts.no_message)
    lines = [lead]
    found = partial_results(messages)
    if found:
        lines.append(texts.partial_result)
        lines.extend(f"- {item}" for item in found)
    else:
        lines.append(texts.nothing_confirmed)
    lines.append(texts.missing)
    return AIMessage(
        content="\n".join(lines),
        name=decision.guard,
        response_metadata={
            "agent_guards": {
                "guard": decision.guard,
                "verdict": decision.verdict.value,
                "reason": decision.reason,
            }
        },
    )


def budget_refused_again(messages: Sequence[Any]) -> GuardDecision | None:
    """A stop when the model asked for tools again after the tool budget refused a whole
    turn, and that turn was refused too; None otherwise.

    A call past ``max_tool_calls`` is answered "not executed: answer with what you have"
    (:class:`~agent_guards.ToolCallGuard` with a ``Budget``). A model that asks for more
    anyway would be refused forever: two refused turns in a row end the run.

    Example:
        >>> def turn(i):
        ...     ask = AIMessage("", tool_calls=[{"name": "search", "args": {"q": i}, "id": i}])
        ...     no = ToolMessage("[budget] Not executed", tool_call_id=i, name="search",
        ...                      response_metadata={"agent_guards": {"budget": "max_tool_calls"}})
        ...     return [ask, no]
        >>> budget_refused_again(turn("a")) is None
        True
        >>> budget_refused_again([*turn("a"), *turn("b")]).reason
        'max_tool_calls'
    """
    refused: list[str] = []  # the refused calls' ids, newest first
    results: list[ToolMessage] = []  # the answers of the turn being read
    turns = 0
    for m in reversed(messages):
        if isinstance(m, ToolMessage):
            results.append(m)
        elif (
            isinstance(m, AIMessage)
            and m.tool_calls
            and results
            and all(map(is_budget_refusal, results))
        ):
            turns += 1
            refused += [str(r.tool_call_id) for r in results]
            results = []
            if turns == 2:
                return GuardDecision(
                    guard="budget",
                    verdict=Verdict.STOP,
                    reason="max_tool_calls",
                    detail="the tool budget is spent, and the model kept asking for tools",
                    selected_ids=tuple(reversed(refused)),
                    data={"refused_turns": turns},
                )
        elif not (isinstance(m, BaseMessage) and is_guard_message(m)):
            return None  # a turn with a call that ran, a reply, or the user's message
    return None


def is_budget_refusal(message: ToolMessage) -> bool:
    """Whether ``message`` answers a call the tool budget did not let run."""
    meta = message.response_metadata
    ours = meta.get("agent_guards") if isinstance(meta, Mapping) else None
    return isinstance(ours, Mapping) and ours.get("budget") == "max_tool_calls"
