"""The texts end users read when a guard ends a run: one template table, English and Chinese.

Every sentence a guard writes *to the user* (a stop, a refusal, the partial result, a
clarifying question, an abstention, an outcome that may have happened) is rendered from
one :class:`Texts` table. Guard names and reason codes stay in the decision
(``GuardDecision.guard`` / ``.reason``) and in the message's ``response_metadata``; the
shipped tables never show them.

Pick a table per policy: ``LoopPolicy(texts=TEXTS_ZH)``, ``RetryRouterPolicy(texts=TEXTS_ZH)``
(their nodes and middleware read it), ``PlannerPolicy(texts=TEXTS_ZH)`` (the approval
question); :func:`~agent_guards.core.stopping.final_message`, the demo graph's outcome
functions, :meth:`StopReason.text <agent_guards.budget.StopReason.text>` (a budget stop) and
:func:`~agent_guards.planner_gate.request_approval` take ``texts=``. Word one text your own way with
``dataclasses.replace(TEXTS_EN, refusal="...")``. A template may leave out any of its
placeholders; naming one it does not have fails when the table is built.

What is *not* in the table: the nudge and the ToolMessages that answer pending calls are
written to the model, not the user, and keep their English wording; ``decision.detail``
(loop_check's "search was called 3 times...") is English, which is why the Chinese
stop texts leave it out.

Example:
    >>> from dataclasses import replace
    >>> print(TEXTS_EN.render("refusal", tool="pay", message="card declined"))
    I can't do that: pay refused the request (card declined). I won't retry it or try to ...
    >>> print(TEXTS_ZH.render("unavailable", tool="search"))
    search 目前无法使用。
    >>> replace(TEXTS_EN, abstain="No answer yet.").render("abstain")
    'No answer yet.'
    >>> replace(TEXTS_EN, stop="Stopped ({reason})")
    Traceback (most recent call last):
    ...
    ValueError: Texts.stop has an unknown placeholder {reason}; it may use {detail}
"""

from __future__ import annotations

import string
from dataclasses import dataclass, fields
from types import MappingProxyType
from typing import Any

__all__ = ["PLACEHOLDERS", "TEXTS_EN", "TEXTS_ZH", "Texts", "lead", "stop_leads"]

PLACEHOLDERS: MappingProxyType[str, frozenset[str]] = MappingProxyType(
    {
        "stop": frozenset({"detail"}),
        "loop_stop": frozenset({"detail"}),
        "refusal": frozenset({"tool", "message"}),
        "step_refused": frozenset(),
        "outcome_unknown": frozenset({"tool"}),
        "unavailable": frozenset({"tool"}),
        "tool_failed": frozenset({"tool"}),
        "clarification": frozenset({"tool"}),
        "options": frozenset({"options"}),
        "partial_result": frozenset(),
        "nothing_confirmed": frozenset(),
        "missing": frozenset(),
        "need_info": frozenset({"missing"}),
        "not_progressing": frozenset({"detail"}),
        "cancelled": frozenset({"detail"}),
        "sources_disagree": frozenset({"key", "options"}),
        "review_needed": frozenset(),
        "partial_outcome": frozenset({"why", "confirmed", "missing"}),
        "not_used": frozenset({"ids"}),
        "evidence_missing": frozenset(),
        "nothing_yet": frozenset(),
        "remaining_steps": frozenset(),
        "abstain": frozenset(),
        "no_message": frozenset(),
        "budget_stop": frozenset({"detail"}),
        "budget_spent": frozenset({"what", "value", "limit"}),
        "budget_other": frozenset(),
        "budget_steps": frozenset(),
        "budget_replans": frozenset(),
        "budget_tool_calls": frozenset(),
        "budget_model_calls": frozenset(),
        "budget_tokens": frozenset(),
        "budget_seconds": frozenset(),
        "approval_question": frozenset({"step", "description", "risk"}),
        "risk_low": frozenset(),
        "risk_medium": frozenset(),
        "risk_high": frozenset(),
        "stuck_question": frozenset({"detail"}),
    }
)
"""The placeholders each template may use (``str.format`` names)."""


@dataclass(frozen=True, kw_only=True)
class Texts:
    """One template per thing a user reads; placeholders are ``str.format`` names.

    Example:
        >>> TEXTS_EN.render("loop_stop", detail="search was called 3 times")
        'I stopped because I kept repeating myself: search was called 3 times.'
    """

    stop: str = "I had to stop before finishing: {detail}."
    """A run stopped by a guard (a budget, the planning gate): ``{detail}``."""
    loop_stop: str = "I stopped because I kept repeating myself: {detail}."
    """A run stopped by loop_check: ``{detail}`` (what repeated). A parent graph spots a
    worker's stop by the text before the first placeholder: keep it fixed and distinctive
    (a start as short as "Sorry" would read other tool results as a stuck worker)."""
    refusal: str = (
        "I can't do that: {tool} refused the request ({message}). "
        "I won't retry it or try to work around it."
    )
    """A tool refused (permission, policy): ``{tool}``, ``{message}`` (the tool's own words)."""
    step_refused: str = "I can't do that: the request was refused. It was not retried."
    """A plan step ended in a refusal (the demo graph's outcome)."""
    outcome_unknown: str = (
        "{tool} failed in a way that may have let it run, so it was not retried: a retry could "
        "do it twice. Please check whether it happened before asking again."
    )
    """A call failed after it may have taken effect: ``{tool}``."""
    unavailable: str = "{tool} is unavailable right now."
    """A tool is down and no fallback answered: ``{tool}``."""
    tool_failed: str = "{tool} kept failing, so I stopped trying."
    """A tool failure that could not be repaired or routed elsewhere: ``{tool}``."""
    clarification: str = "{tool} found several matches. Which one do you mean?"
    """The question asked when a tool found several matches and asked none: ``{tool}``."""
    options: str = " Options: {options}."
    """Appended to a clarifying question: ``{options}`` (comma-separated)."""
    partial_result: str = "What I have so far:"
    """Heads the confirmed partial result (one ``- tool: result`` line follows per item)."""
    nothing_confirmed: str = "Nothing was confirmed before stopping."
    """Replaces the partial result when nothing was confirmed."""
    missing: str = "Missing: the rest of the task could not be completed reliably."
    """Ends a stopped run's message."""
    need_info: str = "To answer this I need: {missing}. Could you tell me?"
    """The question when the request lacks details: ``{missing}``."""
    not_progressing: str = "I am not making progress ({detail}). What should I focus on?"
    """The question when replanning keeps failing: ``{detail}``."""
    cancelled: str = "Cancelled: {detail}"
    """A cancelled run or a rejected approval: ``{detail}``."""
    sources_disagree: str = "The sources disagree on {key} ({options}). Which one do you mean?"
    """Conflicting evidence on one point: ``{key}``, ``{options}``."""
    review_needed: str = "The evidence conflicts on a high-risk question; a reviewer must decide."
    """Conflicting evidence that a person must settle."""
    partial_outcome: str = "Partial result ({why}).\nConfirmed:\n{confirmed}\nMissing: {missing}"
    """The demo graph's partial answer: ``{why}``, ``{confirmed}`` (lines), ``{missing}``."""
    not_used: str = "Not used (outdated or conflicting): {ids}"
    """Ends an answer that left conflicting sources out: ``{ids}`` (their ids)."""
    evidence_missing: str = "evidence is missing"
    """``{why}`` of a partial answer when no other reason is known."""
    nothing_yet: str = "- nothing yet"
    """``{confirmed}`` of a partial answer with nothing confirmed."""
    remaining_steps: str = "the remaining steps"
    """``{missing}`` of a partial answer when no dimension is named."""
    abstain: str = "I don't have enough evidence to answer this reliably."
    """No answer: the evidence does not cover the question."""
    no_message: str = "no reason given"
    """``{message}`` of a refusal when the tool said nothing."""
    budget_stop: str = "I had to stop before finishing: {detail}."
    """A run stopped by its :class:`~agent_guards.Budget`: ``{detail}`` is ``budget_spent``
    or ``budget_other`` (both in this table, so unlike ``stop`` it can be translated)."""
    budget_spent: str = "I used {value} of {limit} allowed {what}"
    """What ran out: ``{what}`` (one of the ``budget_*`` names below), ``{value}`` (used),
    ``{limit}``. Also the ``{why}`` of a partial answer cut short by the budget."""
    budget_other: str = "I reached a limit set for this run"
    """What ran out, for a stop condition of your own (its reason code stays in the decision)."""
    budget_steps: str = "steps"
    """``{what}`` of ``max_steps``."""
    budget_replans: str = "replans"
    """``{what}`` of ``max_replans``."""
    budget_tool_calls: str = "tool calls"
    """``{what}`` of ``max_tool_calls``."""
    budget_model_calls: str = "model calls"
    """``{what}`` of ``max_model_calls``."""
    budget_tokens: str = "tokens"
    """``{what}`` of ``max_tokens``."""
    budget_seconds: str = "seconds"
    """``{what}`` of ``max_seconds`` (the deadline)."""
    approval_question: str = "Approve step '{step}' ({description}), risk {risk}?"
    """The question a person answers before a risky plan step runs: ``{step}`` (its id),
    ``{description}`` (or its tool), ``{risk}`` (one of the ``risk_*`` names below)."""
    risk_low: str = "low"
    """``{risk}`` of a low-risk step."""
    risk_medium: str = "medium"
    """``{risk}`` of a medium-risk step."""
    risk_high: str = "high"
    """``{risk}`` of a high-risk step."""
    stuck_question: str = "The agent seems stuck: {detail}. Stop or continue?"
    """The question a person answers when a loop escalates (``on_stop="escalate"``):
    ``{detail}`` (what repeated)."""

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if not isinstance(value, str):
                raise TypeError(f"Texts.{f.name} must be a str, got {type(value).__name__}")
            allowed = PLACEHOLDERS[f.name]
            for _, name, _, _ in string.Formatter().parse(value):
                if name is not None and name not in allowed:
                    may = ", ".join(f"{{{n}}}" for n in sorted(allowed)) or "no placeholder"
                    raise ValueError(
                        f"Texts.{f.name} has an unknown placeholder {{{name}}}; it may use {may}"
                    )

    def render(self, name: str, **values: Any) -> str:
        """The template ``name`` with its placeholders filled (missing ones render empty)."""
        if name not in PLACEHOLDERS:
            raise KeyError(f"Texts has no template {name!r}; known: {', '.join(PLACEHOLDERS)}")
        filled = {key: values.get(key, "") for key in PLACEHOLDERS[name]}
        return str(getattr(self, name)).format_map(filled)


TEXTS_EN = Texts()
"""The English texts (the default everywhere)."""

TEXTS_ZH = Texts(
    stop="任务还没完成，我不得不先停下来。",
    loop_stop="我一直在重复同样的操作而没有进展，所以先停了下来。",
    refusal="这个请求我无法完成：{tool} 拒绝了它（{message}）。我不会重试，也不会设法绕过。",
    step_refused="这个请求我无法完成：它被拒绝了，所以没有重试。",
    outcome_unknown=(
        "{tool} 的调用失败了，但它可能已经执行，所以没有重试：重试可能会让它执行两次。"
        "请先确认它是否已经生效，再重新提出请求。"
    ),
    unavailable="{tool} 目前无法使用。",
    tool_failed="{tool} 一直失败，所以我停止了尝试。",
    clarification="{tool} 找到了多个匹配项。您指的是哪一个？",
    options="可选项：{options}。",
    partial_result="目前已确认的结果：",
    nothing_confirmed="停止之前没有任何结果得到确认。",
    missing="未完成：任务的其余部分无法可靠地完成。",
    need_info="要回答这个问题，我还需要：{missing}。能告诉我吗？",
    not_progressing="我没有取得进展（{detail}）。我应该重点关注什么？",
    cancelled="已取消：{detail}",
    sources_disagree="关于 {key}，各来源说法不一（{options}）。您指的是哪一个？",
    review_needed="在一个高风险问题上证据相互矛盾，需要由审核人员决定。",
    partial_outcome="部分结果（{why}）。\n已确认：\n{confirmed}\n未完成：{missing}",
    not_used="未采用（已过时或相互矛盾）：{ids}",
    evidence_missing="缺少证据",
    nothing_yet="- 暂无",
    remaining_steps="其余步骤",
    abstain="我没有足够的证据来可靠地回答这个问题。",
    no_message="未说明原因",
    budget_stop="任务还没完成，我不得不先停下来：{detail}。",
    budget_spent="{what}已用 {value}，上限为 {limit}",
    budget_other="已达到本次运行设定的上限",
    budget_steps="步数",
    budget_replans="重新规划次数",
    budget_tool_calls="工具调用次数",
    budget_model_calls="模型调用次数",
    budget_tokens="token 数",
    budget_seconds="运行时间（秒）",
    approval_question="是否批准执行步骤“{step}”（{description}）？风险等级：{risk}。",
    risk_low="低",
    risk_medium="中",
    risk_high="高",
    stuck_question="智能体似乎卡住了，一直在重复同样的操作。要停止还是继续？",
)
"""The Chinese (simplified) texts. The stop texts leave out ``{detail}``, which is English."""


def stop_leads() -> tuple[str, ...]:
    """The fixed start of each shipped ``loop_stop`` text (how a worker's stop is spotted).

    Example:
        >>> stop_leads()[0]
        'I stopped because I kept repeating myself'
    """
    return tuple(lead(t.loop_stop) for t in (TEXTS_EN, TEXTS_ZH))


def lead(template: str) -> str:
    """The text before the first placeholder, without the trailing punctuation.

    Example:
        >>> lead("Stopped: {detail}.")
        'Stopped'
    """
    head = template.split("{", 1)[0]
    return head.rstrip(" :：，,。.（(") or template
