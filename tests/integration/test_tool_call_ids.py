"""Tool calls without an id: never executed, answered with their position."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from agent_guards.core import Verdict
from agent_guards.testing import ScriptedChatModel
from tests.integration.test_loops_graph import Counter, build, make_tools


def _no_id_turn() -> AIMessage:
    calls: list[Any] = [
        {"name": "search", "args": {"q": "limit"}, "id": None},
        {"name": "fetch", "args": {"doc": "d1"}, "id": ""},
    ]
    return AIMessage(content="", tool_calls=calls)


def _run(mode: str) -> tuple[dict[str, Any], Counter]:
    counter = Counter()
    model = ScriptedChatModel(script=[_no_id_turn(), "done"])
    graph = build(model, make_tools(counter))
    inputs = {"messages": [HumanMessage("q")]}
    if mode == "async":
        import asyncio

        out = asyncio.run(graph.ainvoke(inputs, {"recursion_limit": 30}))
    else:
        out = graph.invoke(inputs, {"recursion_limit": 30})
    return out, counter


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_call_without_an_id_is_not_run_and_its_answer_names_its_position(mode: str) -> None:
    out, counter = _run(mode)
    assert counter.calls == [], "a call that cannot be paired with its result never runs"
    answers = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    assert [m.tool_call_id for m in answers] == ["missing-id-0", "missing-id-1"]
    assert all(m.status == "error" and "'None'" not in m.tool_call_id for m in answers)
    assert "tool call #1 (fetch) has no id" in str(answers[1].content)
    refused = [d for d in out["guard_log"] if d.reason == "invalid_input"]
    assert [d.verdict for d in refused] == [Verdict.REFUSE, Verdict.REFUSE]
    assert [d.data["item"] for d in refused] == ["#0", "#1"]
    assert [d.data["field"] for d in refused] == ["id", "id"]
    assert "tool call #0 (search)" in refused[0].detail
    assert "usage" not in out or not out["usage"].get("tool_calls")
