"""The loop scenarios through a compiled graph and through create_agent, sync and
async: content loops, conversation loops, cross-turn failure loops, condensation loops, a
stuck sub-agent, loop recovery by cutting the history back (OpenHands'
``tests/unit/controller/test_agent_controller_loop_recovery.py``) and the LLM-judged check.
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, StateGraph
from langgraph.prebuilt import tools_condition
from langgraph.types import Command

from agent_guards import ToolCallGuard
from agent_guards.loop_check import (
    LoopPolicy,
    LoopState,
    add_loop_check,
    add_reply_check,
    create_loop_check,
)
from agent_guards.middleware import LoopGuardMiddleware
from agent_guards.testing import ScriptedChatModel, tool_call_message
from agent_guards.tool_guard import annotate_tool

LIMIT: RunnableConfig = {"recursion_limit": 60}
MODES = ["sync", "async"]
CHANT = "I will now mark the task as complete.\n" * 15
_n = itertools.count(1)


async def invoke(app: Any, mode: str, value: Any, config: RunnableConfig | None = None) -> Any:
    config = {**LIMIT, **(config or {})}
    return app.invoke(value, config) if mode == "sync" else await app.ainvoke(value, config)


def log(out: dict[str, Any]) -> list[tuple[str, str]]:
    return [(d.verdict.value, d.reason) for d in out.get("guard_log", ())]


def answered(messages: list[BaseMessage]) -> bool:
    calls = {c["id"] for m in messages if isinstance(m, AIMessage) for c in m.tool_calls}
    return calls == {m.tool_call_id for m in messages if isinstance(m, ToolMessage)}


def model_node(model: ScriptedChatModel) -> Any:
    from langchain_core.runnables import RunnableLambda

    async def acall(state: dict[str, Any]) -> dict[str, Any]:
        return {"messages": [await model.ainvoke(state["messages"])]}

    return RunnableLambda(
        lambda state: {"messages": [model.invoke(state["messages"])]}, afunc=acall
    )


def graph(model: ScriptedChatModel, tools: list[Any], policy: LoopPolicy, **kw: Any) -> Any:
    """model -> reply check (tools / nudge / stop / end); tools -> loop_check -> model."""
    builder = StateGraph(LoopState)
    builder.add_node("model", model_node(model))
    builder.add_node("tools", ToolCallGuard(loop=policy).tool_node(tools))
    builder.add_edge(START, "model")
    add_loop_check(builder, "tools", continue_to="model", policy=policy)
    add_reply_check(builder, "model", policy=policy)
    return builder.compile(**kw)


def payment_tool() -> Any:
    @tool
    def update_payment(reservation_id: str, payment_id: str) -> str:
        """Pay for a reservation change."""
        return "Error: gift card balance is not enough"

    return annotate_tool(update_payment, read_only=False, destructive=True)


# -- a content loop inside one reply ------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
async def test_a_chanting_reply_is_nudged_then_stopped_in_a_graph(mode: str) -> None:
    model = ScriptedChatModel(script=[CHANT], repeat_last=True)
    out = await invoke(graph(model, [], LoopPolicy()), mode, {"messages": [HumanMessage("go")]})
    assert log(out) == [("nudge", "content_loop"), ("stop", "content_loop")]
    assert len(model.calls) == 2 and out["messages"][-1].name == "loop_check"


@pytest.mark.parametrize("mode", MODES)
async def test_a_chanting_reply_then_a_normal_one_ends_normally(mode: str) -> None:
    model = ScriptedChatModel(script=[CHANT, "The task is complete."])
    out = await invoke(graph(model, [], LoopPolicy()), mode, {"messages": [HumanMessage("go")]})
    assert log(out) == [("nudge", "content_loop")]
    assert out["messages"][-1].content == "The task is complete."


@pytest.mark.parametrize("mode", MODES)
async def test_a_chanting_reply_in_create_agent(mode: str) -> None:
    model = ScriptedChatModel(script=[CHANT], repeat_last=True)
    agent = create_agent(model, tools=[], middleware=[LoopGuardMiddleware()])
    out = await invoke(agent, mode, {"messages": [HumanMessage("go")]})
    assert log(out) == [("nudge", "content_loop"), ("stop", "content_loop")]
    assert len(model.calls) == 2


# -- a conversation loop across user turns -------------------------------------------------

ASK = "Could you please provide your user ID and the reservation ID?"


@pytest.mark.parametrize("mode", MODES)
async def test_a_conversation_loop_across_user_turns(mode: str) -> None:
    """The assistant asks for the same details turn after turn, never calling a tool."""
    model = ScriptedChatModel(script=[ASK], repeat_last=True)
    app = graph(model, [], LoopPolicy(), checkpointer=InMemorySaver())
    cfg: RunnableConfig = {"configurable": {"thread_id": f"c{next(_n)}"}}
    for text in ("change my flight", "it's the Vegas one"):
        assert log(await invoke(app, mode, {"messages": [HumanMessage(text)]}, cfg)) == []
    out = await invoke(app, mode, {"messages": [HumanMessage("my name is James")]}, cfg)
    assert log(out) == [("nudge", "conversation_loop"), ("stop", "conversation_loop")]


@pytest.mark.parametrize("mode", MODES)
async def test_a_conversation_loop_in_create_agent(mode: str) -> None:
    model = ScriptedChatModel(script=[ASK], repeat_last=True)
    agent = create_agent(
        model, tools=[], middleware=[LoopGuardMiddleware()], checkpointer=InMemorySaver()
    )
    cfg: RunnableConfig = {"configurable": {"thread_id": f"c{next(_n)}"}}
    for text in ("change my flight", "it's the Vegas one"):
        await invoke(agent, mode, {"messages": [HumanMessage(text)]}, cfg)
    out = await invoke(agent, mode, {"messages": [HumanMessage("my name is James")]}, cfg)
    assert log(out) == [("nudge", "conversation_loop"), ("stop", "conversation_loop")]


# -- the same failure across user turns ------------------------------------------------------


def paying(cards: list[str]) -> ScriptedChatModel:
    script: list[Any] = []
    for card in cards:
        args = {"reservation_id": "HXDUBJ", "payment_id": card}
        script += [tool_call_message("update_payment", args), "Sorry, the payment failed."]
    return ScriptedChatModel(script=script)


CARDS = ["gift_card_1", "gift_card_1", "gift_card_2", "gift_card_1"]


@pytest.mark.parametrize("mode", MODES)
async def test_a_failure_loop_across_user_turns_is_stopped_in_a_graph(mode: str) -> None:
    app = graph(paying(CARDS), [payment_tool()], LoopPolicy(), checkpointer=InMemorySaver())
    cfg: RunnableConfig = {"configurable": {"thread_id": f"f{next(_n)}"}}
    outs = [
        await invoke(app, mode, {"messages": [HumanMessage(f"please retry ({i})")]}, cfg)
        for i in range(4)
    ]
    loop = [[x for x in log(o) if x[0] in ("nudge", "stop")] for o in outs]
    assert loop[:2] == [[], []]
    assert loop[2] == [("nudge", "failure_loop")]
    assert loop[3][-1] == ("stop", "failure_loop")
    assert answered(outs[3]["messages"])


@pytest.mark.parametrize("mode", MODES)
async def test_a_failure_loop_across_user_turns_in_create_agent(mode: str) -> None:
    agent = create_agent(
        paying(CARDS),
        tools=[payment_tool()],
        middleware=[LoopGuardMiddleware()],
        checkpointer=InMemorySaver(),
    )
    cfg: RunnableConfig = {"configurable": {"thread_id": f"f{next(_n)}"}}
    outs = [
        await invoke(agent, mode, {"messages": [HumanMessage(f"please retry ({i})")]}, cfg)
        for i in range(4)
    ]
    stops = [d for d in outs[3]["guard_log"] if d.verdict.value == "stop"]
    assert stops and stops[-1].reason == "failure_loop"
    assert any(
        d.reason == "failure_loop" and d.verdict.value == "nudge" for d in outs[2]["guard_log"]
    )


# -- repeated condensations --------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
async def test_condensations_in_a_row_are_stopped(mode: str) -> None:
    """A context guard that keeps condensing while nothing else happens (OpenHands'
    context window error loop) ends with a stop, not at recursion_limit."""

    def condense(state: Any) -> dict[str, Any]:
        mark = {"agent_guards": {"role": "summary", "count": 3}}
        return {
            "messages": [HumanMessage("[Context summary by agent_guards]", additional_kwargs=mark)]
        }

    builder = StateGraph(LoopState)
    builder.add_node("condense", condense)
    builder.add_edge(START, "condense")
    add_loop_check(builder, "condense", continue_to="condense")
    out = await invoke(builder.compile(), mode, {"messages": [HumanMessage("go")]})
    assert log(out) == [("nudge", "condensation"), ("stop", "condensation")]


# -- a stuck sub-agent ----------------------------------------------------------------------------


def stuck_worker() -> Any:
    @tool
    def search(q: str) -> str:
        """Search."""
        return "rates are 4%"

    worker_model = ScriptedChatModel(
        script=[tool_call_message("search", {"q": "rates"})], repeat_last=True
    )
    builder = StateGraph(LoopState)
    builder.add_node("model", model_node(worker_model))
    builder.add_node("tools", ToolCallGuard().tool_node([annotate_tool(search, read_only=True)]))
    builder.add_edge(START, "model")
    builder.add_conditional_edges("model", tools_condition)
    add_loop_check(builder, "tools", continue_to="model")
    return builder.compile()


@pytest.mark.parametrize("mode", MODES)
async def test_a_stuck_worker_makes_its_parent_stop(mode: str) -> None:
    worker = stuck_worker()

    @tool
    async def research(task: str) -> str:
        """Ask the research worker."""
        out = await worker.ainvoke({"messages": [HumanMessage(task)]}, LIMIT)
        return str(out["messages"][-1].content)

    @tool("research")
    def research_sync(task: str) -> str:
        """Ask the research worker."""
        return str(worker.invoke({"messages": [HumanMessage(task)]}, LIMIT)["messages"][-1].content)

    tools = [research if mode == "async" else research_sync]
    model = ScriptedChatModel(
        script=[tool_call_message("research", {"task": "rates"})], repeat_last=True
    )
    out = await invoke(
        graph(model, tools, LoopPolicy()), mode, {"messages": [HumanMessage("rates?")]}
    )
    assert log(out)[-1] == ("stop", "subagent_stuck")
    assert len(model.calls) == 1, "the parent stopped at once instead of asking again"


# -- loop recovery: cut the history back -------------------------------------------------------


def repeating_ls() -> ScriptedChatModel:
    """A model asking for the same listing forever, a fresh message (and call id) each time."""
    return ScriptedChatModel(
        script=[lambda _: tool_call_message("ls", {"path": "."})], repeat_last=True
    )


def reading_tool(executed: list[str]) -> Any:
    @tool
    def ls(path: str) -> str:
        """List files."""
        executed.append(path)
        return "file1.txt file2.txt"

    return annotate_tool(ls, read_only=True)


@pytest.mark.parametrize("mode", MODES)
async def test_openhands_truncates_history_during_loop_recovery(mode: str) -> None:
    """OpenHands: test_controller_truncates_history_during_loop_recovery and
    test_controller_handles_loop_recovery_action_option_1 (recovery truncates the history
    to where the loop started). Agrees: ``on_loop="truncate"`` removes the repeated round
    (call and answer together), keeps the first, adds the note; the loop coming back after
    the cut is stopped (no endless cut-and-retry)."""
    executed: list[str] = []
    policy = LoopPolicy(on_loop="truncate")
    app = graph(repeating_ls(), [reading_tool(executed)], policy)
    out = await invoke(app, mode, {"messages": [HumanMessage("Hello, help me with this task")]})
    assert log(out) == [
        ("reuse", "repeated_call"),
        ("nudge", "repeated_call"),
        ("reuse", "repeated_call"),
        ("stop", "repeated_call"),
    ]
    assert out["guard_log"][1].data["truncated"] == 2
    assert "again after the history was cut back" in out["guard_log"][3].detail
    calls = [m for m in out["messages"] if isinstance(m, AIMessage) and m.tool_calls]
    assert len(calls) == 2, "the first round and the call that came back; the repeat was cut"
    assert answered(out["messages"]) and executed == ["."]


@pytest.mark.parametrize("mode", MODES)
async def test_truncation_in_create_agent(mode: str) -> None:
    executed: list[str] = []
    agent = create_agent(
        repeating_ls(),
        tools=[reading_tool(executed)],
        middleware=[LoopGuardMiddleware(policy=LoopPolicy(on_loop="truncate"))],
    )
    out = await invoke(agent, mode, {"messages": [HumanMessage("Hello")]})
    verdicts = [v for v, _ in log(out)]
    assert verdicts[-1] == "stop" and "nudge" in verdicts
    assert answered(out["messages"]) and executed == ["."]


@pytest.mark.parametrize("mode", MODES)
async def test_openhands_detects_loop_and_pauses(mode: str) -> None:
    """OpenHands: test_controller_detects_loop_and_produces_observation (a loop pauses the
    agent with an observation naming the loop). Agrees: with ``on_stop="escalate"`` the run
    pauses on an interrupt carrying the decision; test_controller_handles_loop_recovery_
    action_option_3 (stop): resuming with "stop" ends it."""
    executed: list[str] = []
    model = ScriptedChatModel(script=[tool_call_message("ls", {"path": "."})], repeat_last=True)
    policy = LoopPolicy(on_stop="escalate")
    app = graph(model, [reading_tool(executed)], policy, checkpointer=InMemorySaver())
    cfg: RunnableConfig = {"configurable": {"thread_id": f"e{next(_n)}"}}
    out = await invoke(app, mode, {"messages": [HumanMessage("Hello")]}, cfg)
    paused = out["__interrupt__"][0].value
    assert paused["decision"]["reason"] == "repeated_call" and "stuck" in paused["question"]
    done = await invoke(app, mode, Command(resume="stop"), cfg)
    assert log(done)[-2:] == [("escalate", "repeated_call"), ("stop", "human_stop")]
    assert done["messages"][-1].name == "loop_check"  # ended, with the partial result


@pytest.mark.parametrize("mode", MODES)
async def test_openhands_no_loop_recovery_when_not_stuck(mode: str) -> None:
    """OpenHands: test_controller_no_loop_recovery_when_not_stuck. Agrees: nothing cut."""
    script = [tool_call_message("ls", {"path": p}) for p in ("a", "b")] + ["Two folders listed."]
    executed: list[str] = []
    app = graph(
        ScriptedChatModel(script=script), [reading_tool(executed)], LoopPolicy(on_loop="truncate")
    )
    out = await invoke(app, mode, {"messages": [HumanMessage("list a and b")]})
    assert log(out) == [] and executed == ["a", "b"]


# -- the LLM-judged check ----------------------------------------------------------------------------


def working_model() -> ScriptedChatModel:
    return ScriptedChatModel(
        script=[tool_call_message("ls", {"path": p}) for p in ("a", "b", "c")] + ["All listed."]
    )


@pytest.mark.parametrize("mode", MODES)
async def test_an_llm_judge_nudges_in_create_agent(mode: str) -> None:
    judge = ScriptedChatModel(
        script=['{"is_loop": true, "confidence": 0.97, "reasoning": "it lists the same tree"}'],
        repeat_last=True,
    )
    policy = LoopPolicy(judge_after=2, judge_every=10)
    agent = create_agent(
        working_model(),
        tools=[reading_tool([])],
        middleware=[LoopGuardMiddleware(policy=policy, judge=judge)],
    )
    out = await invoke(agent, mode, {"messages": [HumanMessage("list")]})
    assert ("nudge", "llm_judged_loop") in log(out)
    assert len(judge.calls) == 1


@pytest.mark.parametrize("mode", MODES)
async def test_a_failing_judge_is_no_loop(mode: str) -> None:
    """gemini-cli: 'should handle errors from generateJson gracefully'. Agrees."""

    def broken(_: list[BaseMessage]) -> Any:
        raise RuntimeError("judge unavailable")

    judge = ScriptedChatModel(script=[broken], repeat_last=True)
    policy = LoopPolicy(judge_after=2, judge_every=10)
    agent = create_agent(
        working_model(),
        tools=[reading_tool([])],
        middleware=[LoopGuardMiddleware(policy=policy, judge=judge)],
    )
    out = await invoke(agent, mode, {"messages": [HumanMessage("list")]})
    assert ("continue", "judge_failed") in log(out)
    assert out["messages"][-1].content == "All listed."


def test_the_judge_must_be_a_chat_model() -> None:
    with pytest.raises(TypeError, match="judge must be a chat model"):
        LoopGuardMiddleware(judge="gpt-4o")  # type: ignore[arg-type]


def test_the_reply_check_routes() -> None:
    route = create_loop_check()
    assert route.invoke({"messages": [AIMessage(CHANT)]}) == "nudge"
