"""Budget stops and the planner gate's approval question come from the Texts table.

English by default, Chinese with ``TEXTS_ZH``, one text replaced with ``dataclasses.replace``;
the reason codes and guard names stay in the decisions and stop reasons.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, StateGraph
from langgraph.types import Command

from agent_guards import Budget, PlanStep, PlanVersion
from agent_guards.budget import StopReason
from agent_guards.core.texts import TEXTS_EN, TEXTS_ZH, Texts
from agent_guards.planner_gate import (
    PlannerPolicy,
    PlanState,
    approval_question,
    create_planner_gate,
    request_approval,
)

CJK = re.compile(r"[\u4e00-\u9fff]")
CODES = re.compile(r"\b(max_[a-z_]+|budget|planner_gate|high_risk)\b")


def _budget_reason(**usage: Any) -> StopReason:
    reason = Budget(max_steps=10, max_tool_calls=8, max_tokens=1000).stop_condition()(
        {"usage": usage}
    )
    assert reason is not None
    return reason


@pytest.mark.parametrize(
    ("usage", "code", "english"),
    [
        ({"tool_calls": 8}, "max_tool_calls", "I used 8 of 8 allowed tool calls."),
        ({"steps": 12}, "max_steps", "I used 12 of 10 allowed steps."),
        ({"tokens": 1200}, "max_tokens", "I used 1200 of 1000 allowed tokens."),
    ],
)
def test_a_budget_stop_reads_without_its_reason_code(
    usage: dict[str, int], code: str, english: str
) -> None:
    reason = _budget_reason(**usage)
    assert reason.reason == code  # the code stays on the reason (and so in the decision)
    text = reason.text()
    assert text == f"I had to stop before finishing: {english}"
    assert not CODES.search(text)


def test_a_budget_stop_in_chinese() -> None:
    text = _budget_reason(tool_calls=8).text(TEXTS_ZH)
    assert text == "任务还没完成，我不得不先停下来：工具调用次数已用 8，上限为 8。"
    assert not CODES.search(text)


def test_a_deadline_and_a_condition_of_your_own() -> None:
    late = StopReason("max_seconds", limit=60, value=61.25)
    assert late.text() == "I had to stop before finishing: I used 61.2 of 60 allowed seconds."
    assert late.describe() == "I used 61.2 of 60 allowed seconds"  # a partial answer's why
    assert CJK.search(late.text(TEXTS_ZH))
    own = StopReason("no_sources")
    assert own.describe() == TEXTS_EN.budget_other
    assert own.text(TEXTS_ZH) == f"任务还没完成，我不得不先停下来：{TEXTS_ZH.budget_other}。"
    assert not CODES.search(own.text())


def test_a_replaced_budget_template() -> None:
    ours = replace(
        TEXTS_EN,
        budget_stop="Stopped: {detail}.",
        budget_spent="out of {what} ({value}/{limit})",
        budget_tool_calls="calls",
    )
    assert _budget_reason(tool_calls=9).text(ours) == "Stopped: out of calls (9/8)."
    with pytest.raises(ValueError, match=r"Texts\.budget_spent has an unknown placeholder"):
        replace(TEXTS_EN, budget_spent="{reason}")


STEP = PlanStep("s1", "wire money", tool="pay", risk="high")


@pytest.mark.parametrize(
    ("texts", "question"),
    [
        (TEXTS_EN, "Approve step 's1' (wire money), risk high?"),
        (TEXTS_ZH, "是否批准执行步骤“s1”（wire money）？风险等级：高。"),
        (
            replace(
                TEXTS_EN, approval_question="OK to run {description} ({risk})?", risk_high="HIGH"
            ),
            "OK to run wire money (HIGH)?",
        ),
    ],
)
def test_the_approval_question_comes_from_the_table(texts: Texts, question: str) -> None:
    assert approval_question(STEP, texts) == question


def test_an_explicit_question_wins() -> None:
    app = (
        StateGraph(dict)
        .add_node("ask", lambda s: {"ok": request_approval(STEP, question="Sure?").approved})
        .add_edge(START, "ask")
        .compile(checkpointer=InMemorySaver())
    )
    first = app.invoke({}, {"configurable": {"thread_id": "q"}})
    assert first["__interrupt__"][0].value["question"] == "Sure?"


class _State(PlanState, total=False):
    pass


def _gate_app(policy: PlannerPolicy) -> Any:
    builder = StateGraph(_State)
    builder.add_node(
        "gate",
        create_planner_gate(
            policy=policy, approval_risk="high", destinations={"execute": "run", "stop": "run"}
        ),
        destinations=("run",),
    )
    builder.add_node("run", lambda s: {})
    builder.add_edge(START, "gate")
    return builder.compile(checkpointer=InMemorySaver())


@pytest.mark.parametrize(("texts", "start"), [(TEXTS_EN, "Approve step"), (TEXTS_ZH, "是否批准")])
def test_the_gate_asks_in_its_policys_language(texts: Texts, start: str) -> None:
    plan = PlanVersion(version=1, steps=(STEP,))
    app = _gate_app(PlannerPolicy(texts=texts))
    cfg = {"configurable": {"thread_id": "g"}}
    paused = app.invoke({"plans": [plan]}, cfg)["__interrupt__"][0].value
    assert paused["question"].startswith(start)
    assert paused["risk"] == "high"  # the code stays in the payload
    out = app.invoke(Command(resume=True), cfg)
    assert [d.guard for d in out["guard_log"]] == ["planner_gate", "planner_gate"]


def test_texts_do_not_change_what_the_gate_decides() -> None:
    assert PlannerPolicy(texts=TEXTS_ZH) == PlannerPolicy()
    with pytest.raises(TypeError, match=r"PlannerPolicy\.texts must be a Texts"):
        PlannerPolicy(texts="zh")  # type: ignore[arg-type]
