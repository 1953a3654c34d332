"""The texts users read: one table, English by default, Chinese per policy, no guard names."""

from __future__ import annotations

import re
from dataclasses import fields, replace
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from agent_guards import GuardDecision, LoopPolicy, RetryRouterPolicy, Verdict
from agent_guards.core.texts import PLACEHOLDERS, TEXTS_EN, TEXTS_ZH, Texts
from agent_guards.graphs.outcomes import respond_outcome
from agent_guards.loop_check import PATTERNS, create_loop_stop, detect_loop
from agent_guards.middleware import LoopGuardMiddleware, RetryRouterMiddleware
from agent_guards.retry_router import (
    AmbiguousInput,
    FailureKind,
    create_retry_finish,
    describe_failure,
    failure_message,
    finish_messages,
)
from agent_guards.testing import tool_call_message

GUARDS = (
    "loop_check",
    "retry_router",
    "evidence_resolve",
    "memory_resolve",
    "context_guard",
    "planner_gate",
    "tool_guard",
    "budget",
    "circuit_breaker",
)
CODES = (
    *PATTERNS,
    *(k.value for k in FailureKind),
    "repeated_call",
    "subagent_stuck",
    "outcome_unknown",
    "retries_exhausted",
    "same_invalid_args",
    "max_steps",
)
SAMPLE = {
    "detail": "search was called 3 times with the same arguments",
    "tool": "pay",
    "message": "card declined",
    "options": "FR, US",
    "missing": "eur_usd",
    "key": "rate",
    "why": "the time ran out",
    "confirmed": "- rate: 4%",
}
CJK = re.compile(r"[\u4e00-\u9fff]")


def leaks(text: str) -> list[str]:
    """Guard names and reason codes (as whole words) found in a user-facing text."""
    words = set(re.findall(r"[a-z_]+", text.lower()))
    return [w for w in (*GUARDS, *CODES) if w in words]


def repeated(n: int = 3) -> list[Any]:
    out: list[Any] = []
    for i in range(n - 1):
        out += [
            tool_call_message("search", {"q": "rates"}, id=f"c{i}"),
            ToolMessage("rate is 4%", tool_call_id=f"c{i}", name="search"),
        ]
    return [*out, tool_call_message("search", {"q": "rates"}, id="last")]


def failed(error: Any, tool: str = "pay") -> list[Any]:
    call = AIMessage("", tool_calls=[{"name": tool, "args": {}, "id": "c1"}])
    return [call, failure_message(describe_failure(error), tool=tool, tool_call_id="c1")]


def retry_final(error: Any, texts: Texts = TEXTS_EN) -> tuple[Any, str]:
    """The decision and the final text; a GuardDecision stands for a decision already made."""
    if isinstance(error, GuardDecision):
        return error, finish_messages(error, failed(503), texts=texts)[-1].content
    node = create_retry_finish(policy=RetryRouterPolicy(texts=texts))
    out = node.invoke({"messages": failed(error)})
    return out["guard_log"][-1], out["messages"][-1].content


UNKNOWN = GuardDecision(  # a write that timed out: it may have run
    guard="retry_router",
    verdict=Verdict.CLARIFY,
    reason="outcome_unknown",
    detail="pay failed (transient): timed out; it may have run",
    data={"route": "clarify", "kind": "transient", "tool": "pay"},
)


ERRORS = {
    "refusal": 403,
    "unavailable": RuntimeError("quota exceeded"),  # quota: the fallback route
    "clarification": AmbiguousInput(question="Which Paris?", options=["FR", "US"]),
    "outcome_unknown": UNKNOWN,
}


STARTS = {
    "refusal": "I can't do that: pay refused the request (",
    "unavailable": "pay is unavailable right now.",
    "clarification": "Which Paris? Options: FR, US.",
    "outcome_unknown": "pay failed in a way that may have let it run, so it was not retried",
}


@pytest.mark.parametrize("name", list(PLACEHOLDERS))
def test_english_templates_name_no_guard_and_no_reason_code(name: str) -> None:
    assert leaks(TEXTS_EN.render(name, **SAMPLE)) == []


@pytest.mark.parametrize("name", list(PLACEHOLDERS))
def test_chinese_templates_render_in_chinese(name: str) -> None:
    text = TEXTS_ZH.render(name, **SAMPLE)
    assert CJK.search(text) and "{" not in text and leaks(text) == []


def test_the_table_lists_every_template_and_its_placeholders() -> None:
    assert [f.name for f in fields(Texts)] == list(PLACEHOLDERS)


def test_a_loop_stop_names_no_guard_but_the_decision_does() -> None:
    out = create_loop_stop().invoke({"messages": repeated()})
    final, decision = out["messages"][-1], out["guard_log"][-1]
    assert final.content.startswith("I stopped because I kept repeating myself: search")
    assert leaks(final.content) == []
    assert (decision.guard, decision.reason) == ("loop_check", "repeated_call")
    assert final.response_metadata["agent_guards"]["reason"] == "repeated_call"


@pytest.mark.parametrize("route", list(ERRORS))
def test_retry_router_endings_name_no_guard_and_no_kind(route: str) -> None:
    decision, text = retry_final(ERRORS[route])
    assert decision.guard == "retry_router" and leaks(text) == []
    assert text.startswith(STARTS[route])


def test_a_refusal_quotes_the_tool_not_the_failure_kind() -> None:
    decision, text = retry_final(403)
    assert text.splitlines()[0] == (
        "I can't do that: pay refused the request (HTTP 403). "
        "I won't retry it or try to work around it."
    )
    assert decision.data["kind"] == "permission" and decision.verdict is Verdict.REFUSE


@pytest.mark.parametrize("route", list(ERRORS))
def test_chinese_texts_chosen_on_the_retry_policy(route: str) -> None:
    _, text = retry_final(ERRORS[route], TEXTS_ZH)
    assert CJK.search(text) and leaks(text) == []


def test_chinese_texts_chosen_on_the_loop_policy() -> None:
    out = create_loop_stop(policy=LoopPolicy(texts=TEXTS_ZH)).invoke({"messages": repeated()})
    assert out["messages"][-1].content.splitlines() == [
        TEXTS_ZH.loop_stop,
        TEXTS_ZH.partial_result,
        "- search: rate is 4%",
        TEXTS_ZH.missing,
    ]


def test_the_middleware_read_the_policy_texts() -> None:
    loop = LoopGuardMiddleware(policy=LoopPolicy(texts=TEXTS_ZH))
    update = loop.after_model({"messages": repeated()}, runtime=None)
    assert update is not None and update["messages"][-1].content.startswith(TEXTS_ZH.loop_stop)
    retry = RetryRouterMiddleware(policy=RetryRouterPolicy(texts=TEXTS_ZH))
    update = retry.before_model({"messages": failed(403)}, runtime=None)
    assert update is not None and update["messages"][-1].content.startswith("这个请求我无法完成")


def test_a_custom_template_replaces_one_text() -> None:
    ours = replace(TEXTS_EN, refusal="Sorry, {tool} said no ({message}).")
    _, text = retry_final(403, ours)
    assert text.splitlines() == [
        "Sorry, pay said no (HTTP 403).",
        TEXTS_EN.nothing_confirmed,
        TEXTS_EN.missing,
    ]
    assert retry_final(ERRORS["unavailable"], ours)[1].startswith("pay is unavailable right now.")


def test_a_bad_template_or_table_fails_at_construction() -> None:
    with pytest.raises(ValueError, match=r"Texts\.refusal has an unknown placeholder \{kind\}"):
        replace(TEXTS_EN, refusal="no ({kind})")
    with pytest.raises(TypeError, match=r"LoopPolicy\.texts must be a Texts"):
        LoopPolicy(texts={"stop": "x"})  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"RetryRouterPolicy\.texts must be a Texts"):
        RetryRouterPolicy(texts="x")  # type: ignore[arg-type]


def test_texts_do_not_change_what_a_policy_decides() -> None:
    assert LoopPolicy(texts=TEXTS_ZH) == LoopPolicy()
    assert LoopPolicy(texts=TEXTS_ZH).label == LoopPolicy().label


@pytest.mark.parametrize(
    "text",
    [
        TEXTS_EN.render("loop_stop", detail="search was called 3 times"),
        TEXTS_ZH.loop_stop,
        "loop_check stopped the run: repeated_call: search was called 3 times.",  # earlier wording
    ],
)
def test_a_worker_stop_is_seen_by_its_parent_in_every_shipped_wording(text: str) -> None:
    call = AIMessage("", tool_calls=[{"name": "researcher", "args": {}, "id": "w1"}])
    history = [HumanMessage("book a trip"), call, ToolMessage(text, tool_call_id="w1")]
    assert detect_loop(history).reason == "subagent_stuck"


def test_a_custom_worker_stop_is_seen_when_the_parent_has_the_same_texts() -> None:
    ours = replace(TEXTS_EN, loop_stop="Stuck, sorry: {detail}.")
    call = AIMessage("", tool_calls=[{"name": "researcher", "args": {}, "id": "w1"}])
    result = ToolMessage("Stuck, sorry: search was called 3 times.", tool_call_id="w1")
    history = [HumanMessage("book a trip"), call, result]
    assert detect_loop(history, policy=LoopPolicy(texts=ours)).reason == "subagent_stuck"
    assert detect_loop(history).reason != "subagent_stuck"


@pytest.mark.parametrize("texts", [TEXTS_EN, TEXTS_ZH])
def test_the_reference_graph_outcomes_use_the_table(texts: Texts) -> None:
    refused = {"outcome": {"route": "refuse", "reason": "retry_router: permission"}}
    out = respond_outcome(refused, texts=texts)
    assert out["text"] == texts.step_refused and leaks(out["text"]) == []
    assert out["reason"] == "retry_router: permission"
    asked = respond_outcome({"outcome": {"route": "clarify", "missing": ["period"]}}, texts=texts)
    assert asked["text"] == texts.render("need_info", missing="period")
    assert respond_outcome({}, texts=texts)["text"] == texts.abstain
