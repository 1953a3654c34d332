"""The public test helpers: ScriptedChatModel and faulty_tool."""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import tool
from pydantic import BaseModel, ValidationError

from agent_guards.testing import ScriptedChatModel, ScriptExhausted, faulty_tool, tool_call_message


@tool
def lookup(q: str) -> str:
    """Look something up."""
    return f"result for {q}"


class Goal(BaseModel):
    topic: str
    region: str | None = None


def test_replays_in_order_and_records_prompts() -> None:
    model = ScriptedChatModel(script=["one", AIMessage("two"), lambda msgs: f"saw {len(msgs)}"])
    assert model.invoke("a").content == "one"
    assert model.invoke([HumanMessage("b")]).content == "two"
    assert model.invoke([HumanMessage("c"), HumanMessage("d")]).content == "saw 2"
    assert [len(c) for c in model.calls] == [1, 1, 2]
    with pytest.raises(ScriptExhausted, match="call #4 but its script has 3 replies"):
        model.invoke("e")


def test_repeat_last_models_a_stuck_agent() -> None:
    model = ScriptedChatModel(script=[tool_call_message("lookup", {"q": "x"})], repeat_last=True)
    replies = [model.invoke("go") for _ in range(3)]
    assert all(r.tool_calls[0]["args"] == {"q": "x"} for r in replies)
    assert len({id(r) for r in replies}) == 3, "each reply is a fresh message"


def test_bind_tools_returns_the_same_script() -> None:
    model = ScriptedChatModel(script=[tool_call_message("lookup", {"q": "x"}, id="c1")])
    bound = model.bind_tools([lookup])
    assert bound.invoke("go").tool_calls[0]["id"] == "c1"
    assert model.bound_tools == ["lookup"]
    assert len(model.calls) == 1


async def test_async_path_shares_the_script() -> None:
    model = ScriptedChatModel(script=["a", "b"])
    assert (await model.ainvoke("x")).content == "a"
    assert model.invoke("y").content == "b"


def test_structured_output_validates_scripted_json() -> None:
    model = ScriptedChatModel(script=[{"topic": "pricing", "region": "EU"}, {"region": "US"}])
    runnable = model.with_structured_output(Goal)
    assert runnable.invoke("x") == Goal(topic="pricing", region="EU")
    with pytest.raises(ValidationError):
        runnable.invoke("y")


def test_structured_output_reads_tool_call_args_and_raw() -> None:
    model = ScriptedChatModel(script=[tool_call_message("Goal", {"topic": "t"})])
    out = model.with_structured_output(Goal, include_raw=True).invoke("x")
    assert out["parsed"] == Goal(topic="t")
    assert out["raw"].tool_calls


def test_faulty_tool_injects_faults_by_call_number() -> None:
    slept: list[float] = []
    t = faulty_tool(
        lookup,
        fail_on={2: ConnectionError},
        empty_on=[3],
        delay_on={4: 2.5},
        sleep=slept.append,
    )
    assert t.name == "lookup" and t.description == lookup.description
    assert t.invoke({"q": "a"}) == "result for a"
    with pytest.raises(ConnectionError):
        t.invoke({"q": "a"})
    assert t.invoke({"q": "a"}) == ""
    assert t.invoke({"q": "a"}) == "result for a"
    assert slept == [2.5]
    assert t.calls == 4


async def test_faulty_tool_async_and_fail_always() -> None:
    dead = faulty_tool(lookup, fail_always=TimeoutError("down"))
    with pytest.raises(TimeoutError, match="down"):
        await dead.ainvoke({"q": "a"})
    with pytest.raises(TimeoutError):
        dead.invoke({"q": "a"})
    assert dead.calls == 2


def test_faulty_tool_rejects_bad_call_numbers() -> None:
    with pytest.raises(ValueError, match="1-based call numbers"):
        faulty_tool(lookup, fail_on={0: ValueError})


async def test_faulty_tool_keeps_effect_annotations_and_artifacts() -> None:
    from agent_guards.core import Effect, annotate_tool, effects_of_tools

    @tool(response_format="content_and_artifact")
    def search(q: str) -> tuple[str, dict[str, str]]:
        """Search, returning the hits as an artifact."""
        return f"1 hit for {q}", {"hit": q}

    flaky = faulty_tool(annotate_tool(search, read_only=True), empty_on=[2])
    assert effects_of_tools([flaky]) == {"search": Effect.READ}
    call = {"type": "tool_call", "name": "search", "args": {"q": "a"}, "id": "c1"}
    first = flaky.invoke(call)
    assert (first.content, first.artifact) == ("1 hit for a", {"hit": "a"})
    empty = await flaky.ainvoke({**call, "id": "c2"})
    assert (empty.content, empty.artifact) == ("", None)
    third = await flaky.ainvoke({**call, "id": "c3"})
    assert third.artifact == {"hit": "a"}
