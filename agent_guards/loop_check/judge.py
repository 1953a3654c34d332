"""An optional LLM-judged loop check (gemini-cli's LLM loop check). Off by default.

The rule-based patterns catch repetition; a model can notice a *cognitive* loop (the same
plan re-stated in other words, no progress for many turns). :func:`judge_loop` asks any
chat model, with :data:`JUDGE_PROMPT`, for ``{"is_loop", "confidence", "reasoning"}``
about the recent history. Policy stays code: the model's answer only ever nudges (never
stops), only at ``judge_confidence`` or more, and only every ``judge_every`` assistant
messages once ``judge_after`` of them are in the history (``LoopPolicy``). An unreadable
answer is no loop. Pass ``force=True`` to judge whatever the schedule.

Example:
    >>> from langchain_core.messages import AIMessage, HumanMessage
    >>> from agent_guards.testing import ScriptedChatModel
    >>> model = ScriptedChatModel(script=['{"is_loop": true, "confidence": 0.95,'
    ...                                   ' "reasoning": "re-plans the same step"}'])
    >>> history = [HumanMessage("plan the trip"), AIMessage("Let me plan it again.")]
    >>> decision = judge_loop(history, model, force=True)
    >>> decision.verdict.value, decision.reason, decision.detail
    ('nudge', 'llm_judged_loop', 'a model judged the run stuck: re-plans the same step')
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    convert_to_messages,
)

from agent_guards.core.decision import GuardDecision, Verdict
from agent_guards.core.signatures import content_text, is_guard_message
from agent_guards.loop_check.policy import LoopPolicy

__all__ = ["JUDGE_PROMPT", "judge_due", "judge_loop"]

JUDGE_PROMPT = """You review the recent history of an AI assistant working on a task and
decide whether it is stuck in an unproductive loop: repeating the same actions or the same
statements, re-stating a plan without acting on it, or going back and forth without
getting closer to the goal. Steady progress through different steps is not a loop, even
when the steps look alike. Answer with JSON only:
{"is_loop": true or false, "confidence": a number from 0 to 1, "reasoning": "one sentence"}"""
"""The system prompt of the judging model."""

_HISTORY = 20  # messages shown to the judge
_JSON = re.compile(r"\{.*\}", re.DOTALL)


def _messages(history: Sequence[Any]) -> list[BaseMessage]:
    items = [m if isinstance(m, BaseMessage) else dict(m) for m in history]
    return [m if isinstance(m, BaseMessage) else convert_to_messages([m])[0] for m in items]


def judge_due(messages: Sequence[Any], policy: LoopPolicy) -> bool:
    """Whether the schedule asks for a judgement now (counted in assistant messages)."""
    n = sum(
        isinstance(m, AIMessage) and not is_guard_message(m, policy.guard_names)
        for m in _messages(messages)
    )
    return n >= policy.judge_after and (n - policy.judge_after) % policy.judge_every == 0


def _transcript(messages: Sequence[Any]) -> str:
    lines = []
    for m in _messages(messages)[-_HISTORY:]:
        text = " ".join(content_text(m.content).split())[:500]
        calls = getattr(m, "tool_calls", None) or []
        called = "; ".join(f"{c['name']}({json.dumps(c.get('args'), default=str)})" for c in calls)
        lines.append(f"{m.type}: {text}" + (f" [calls: {called}]" if called else ""))
    return "\n".join(lines)


def _read(reply: Any) -> tuple[bool, float, str] | None:
    text = content_text(getattr(reply, "content", reply))
    match = _JSON.search(text)
    try:
        body = json.loads(match.group(0)) if match else None
    except ValueError:
        return None
    if not isinstance(body, Mapping) or not isinstance(body.get("is_loop"), bool):
        return None
    confidence = body.get("confidence")
    if isinstance(confidence, bool) or not isinstance(confidence, (int, float)):
        return None
    return body["is_loop"], float(confidence), str(body.get("reasoning", ""))[:300]


def _judged(
    policy: LoopPolicy, verdict: Verdict, reason: str, detail: str, **data: Any
) -> GuardDecision:
    """A decision of the judge step (``judged``: whether a model was asked)."""
    return GuardDecision(
        guard="loop_check",
        verdict=verdict,
        reason=reason,
        detail=detail,
        policy=policy.label,
        data={"pattern": "llm_judge", "count": 0, **data},
    )


def _decision(reply: Any, policy: LoopPolicy) -> GuardDecision:
    read = _read(reply)
    if read is None:
        detail = "the judging model's answer was not the JSON asked for"
        return _judged(policy, Verdict.CONTINUE, "judge_unreadable", detail, judged=True)
    is_loop, confidence, why = read
    stuck = is_loop and confidence >= policy.judge_confidence
    return _judged(
        policy,
        Verdict.NUDGE if stuck else Verdict.CONTINUE,
        "llm_judged_loop" if stuck else "no_loop",
        f"a model judged the run stuck: {why}" if stuck else why,
        judged=True,
        confidence=confidence,
    )


def _not_due(policy: LoopPolicy) -> GuardDecision:
    return _judged(policy, Verdict.CONTINUE, "no_loop", "no judgement due", judged=False)


def _prompt(messages: Sequence[Any]) -> list[BaseMessage]:
    return [SystemMessage(JUDGE_PROMPT), HumanMessage(_transcript(messages))]


def judge_loop(
    messages: Sequence[Any],
    model: BaseChatModel,
    *,
    policy: LoopPolicy | None = None,
    force: bool = False,
) -> GuardDecision:
    """Ask ``model`` whether the run is looping: NUDGE (``llm_judged_loop``) or CONTINUE.

    Args:
        messages: The history (LangChain messages or dicts).
        model: Any chat model; it gets :data:`JUDGE_PROMPT` and the last 20 messages.
        policy: The schedule and the confidence needed (``judge_after``, ``judge_every``,
            ``judge_confidence``).
        force: Judge now, whatever the schedule.
    """
    policy = LoopPolicy.coerce(policy)
    if not force and not judge_due(messages, policy):
        return _not_due(policy)
    return _decision(model.invoke(_prompt(messages)), policy)


async def ajudge_loop(
    messages: Sequence[Any],
    model: BaseChatModel,
    *,
    policy: LoopPolicy | None = None,
    force: bool = False,
) -> GuardDecision:
    """Async :func:`judge_loop`."""
    policy = LoopPolicy.coerce(policy)
    if not force and not judge_due(messages, policy):
        return _not_due(policy)
    return _decision(await model.ainvoke(_prompt(messages)), policy)
