"""create_react_agent with the guards: the route through its own extension points.

The natural attempt, ``create_react_agent(model, ToolCallGuard().tool_node(tools))``,
never stops (the tools node always goes back to the model) and drops the decisions
without the guard channels; these tests pin the supported route instead.
"""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.prebuilt import ToolNode, create_react_agent
from langgraph.types import Command

from agent_guards import LoopPolicy, ToolCallGuard
from agent_guards.prebuilt import GuardedReactState, guarded_react_agent, react_agent_hooks
from agent_guards.retry_router import Backoff, RetryRouterPolicy, TransientToolError
from agent_guards.testing import ScriptedChatModel, tool_call_message
from agent_guards.tool_guard import annotate_tool


def _search_tool(calls: list[str]) -> Any:
    @tool
    def search(q: str) -> str:
        """Search."""
        calls.append(q)
        return "rates are 4%"

    return annotate_tool(search, read_only=True)


def _pay_tool(calls: list[int]) -> Any:
    @tool
    def pay(amount: int) -> str:
        """Pay."""
        calls.append(amount)
        raise PermissionError("403 Forbidden: not allowed to pay")

    return pay


def _unanswered(messages: list[Any]) -> list[str]:
    answered = {m.tool_call_id for m in messages if isinstance(m, ToolMessage)}
    return [
        c["id"]
        for m in messages
        if isinstance(m, AIMessage)
        for c in m.tool_calls
        if c["id"] not in answered
    ]


async def _run(agent: Any, inputs: Any, mode: str, config: Any = None) -> dict[str, Any]:
    if mode == "async":
        return await agent.ainvoke(inputs, config)  # type: ignore[no-any-return]
    return agent.invoke(inputs, config)  # type: ignore[no-any-return]


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_a_loop_stops_within_three_model_calls(mode: str) -> None:
    calls: list[str] = []
    model = ScriptedChatModel(
        script=[lambda _: tool_call_message("search", {"q": "rates"})], repeat_last=True
    )
    agent = guarded_react_agent(model, [_search_tool(calls)])
    out = await _run(agent, {"messages": [HumanMessage("rates?")]}, mode)
    assert len(model.calls) <= 3
    assert len(calls) == 1  # the repeat was answered from the first result
    assert [d.verdict.value for d in out["guard_log"]] == ["reuse", "nudge", "stop"]
    assert out["usage"] == {"tool_calls": 1}
    last = out["messages"][-1]
    assert isinstance(last, AIMessage) and not last.tool_calls
    assert last.content.startswith("I stopped because I kept repeating myself")
    assert _unanswered(out["messages"]) == []


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_a_permission_error_executes_once(mode: str) -> None:
    calls: list[int] = []
    model = ScriptedChatModel(
        script=[lambda _: tool_call_message("pay", {"amount": 5})], repeat_last=True
    )
    agent = guarded_react_agent(model, [_pay_tool(calls)])
    out = await _run(agent, {"messages": [HumanMessage("pay 5")]}, mode)
    assert calls == [5]
    # create_react_agent always calls the model after the tools: its next call is answered
    assert len(model.calls) == 2
    assert [(d.guard, d.verdict.value) for d in out["guard_log"]] == [("retry_router", "refuse")]
    assert out["messages"][-1].content.startswith("I can't do that: pay refused the request")
    assert _unanswered(out["messages"]) == []


def test_a_refusal_does_not_end_the_next_turn() -> None:
    calls: list[int] = []
    model = ScriptedChatModel(script=[tool_call_message("pay", {"amount": 5}), "x", "hello"])
    agent = guarded_react_agent(model, [_pay_tool(calls)], checkpointer=InMemorySaver())
    cfg = {"configurable": {"thread_id": "t"}}
    agent.invoke({"messages": [HumanMessage("pay 5")]}, cfg)
    out = agent.invoke({"messages": [HumanMessage("hi")]}, cfg)
    assert out["messages"][-1].content == "hello"
    assert [d.verdict.value for d in out["guard_log"]] == ["refuse"]


def test_the_hooks_plug_into_create_react_agent_with_a_users_state() -> None:
    class State(GuardedReactState, total=False):
        topic: str

    calls: list[str] = []
    hooks = react_agent_hooks([_search_tool(calls)], state_schema=State)
    model = ScriptedChatModel(
        script=[lambda _: tool_call_message("search", {"q": "rates"})], repeat_last=True
    )
    agent = create_react_agent(model, **hooks.kwargs())
    out = agent.invoke({"messages": [HumanMessage("rates?")], "topic": "fx"})
    assert out["topic"] == "fx"
    assert out["guard_log"][-1].verdict.value == "stop"
    assert len(calls) == 1


def test_an_escalation_interrupts_and_a_stop_answer_ends() -> None:
    calls: list[str] = []
    model = ScriptedChatModel(
        script=[lambda _: tool_call_message("search", {"q": "rates"})], repeat_last=True
    )
    agent = guarded_react_agent(
        model,
        [_search_tool(calls)],
        loop=LoopPolicy(on_stop="escalate"),
        checkpointer=InMemorySaver(),
    )
    cfg = {"configurable": {"thread_id": "e"}}
    first = agent.invoke({"messages": [HumanMessage("rates?")]}, cfg)
    assert first["__interrupt__"][0].value["guard"] == "loop_check"
    out = agent.invoke(Command(resume="stop"), cfg)
    assert out["guard_log"][-1].verdict.value == "stop"
    assert _unanswered(out["messages"]) == []


def test_the_escalation_question_comes_from_the_policys_texts() -> None:
    from agent_guards.core.texts import TEXTS_ZH

    model = ScriptedChatModel(
        script=[lambda _: tool_call_message("search", {"q": "rates"})], repeat_last=True
    )
    agent = guarded_react_agent(
        model,
        [_search_tool([])],
        loop=LoopPolicy(on_stop="escalate", texts=TEXTS_ZH),
        checkpointer=InMemorySaver(),
    )
    cfg = {"configurable": {"thread_id": "zh"}}
    paused = agent.invoke({"messages": [HumanMessage("rates?")]}, cfg)["__interrupt__"][0].value
    assert paused["question"] == TEXTS_ZH.stuck_question
    assert paused["decision"]["reason"] == "repeated_call"  # the code stays in the decision
    out = agent.invoke(Command(resume="stop"), cfg)
    assert out["messages"][-1].content.startswith(TEXTS_ZH.loop_stop)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"version": "v1"}, 'needs version="v2"'),
        ({"pre_model_hook": lambda s: {}}, "sets pre_model_hook itself"),
        ({"state_schema": dict}, "GuardedReactState"),
        ({"guard": ToolCallGuard(), "loop": None}, "not both"),
    ],
)
def test_mistakes_fail_when_the_agent_is_built(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        guarded_react_agent(ScriptedChatModel(script=[]), [_search_tool([])], **kwargs)


class OwnChannels(GuardedReactState):
    """The guard channels redeclared without their reducers."""

    guard_log: list[Any]  # type: ignore[misc]
    usage: dict[str, Any]  # type: ignore[misc]


def test_a_state_schema_whose_guard_channels_have_no_reducer_is_refused() -> None:
    # two tool calls in one step would each write usage: one value per step, or a lost count
    with pytest.raises(
        ValueError, match=r"'guard_log', 'usage' channel has no reducer.*GuardedReactState"
    ):
        guarded_react_agent(ScriptedChatModel(script=[]), [_search_tool([])],
                            state_schema=OwnChannels)  # fmt: skip


def test_a_plain_tool_node_is_rejected_with_the_fix() -> None:
    with pytest.raises(ValueError, match="pass the list of tools"):
        react_agent_hooks(ToolNode([_search_tool([])]))


def test_a_guarded_tool_node_is_accepted_and_made_to_retry_in_place() -> None:
    node = ToolCallGuard().tool_node([_search_tool([])])
    assert react_agent_hooks(node).tools is node
    # the agent has no retry edge: the node serves its retries in the call
    assert node._wrap_tool_call.retry_in_place is True
    plain = ToolCallGuard(retry=None).tool_node([_search_tool([])])
    assert react_agent_hooks(plain).tools is plain and plain._wrap_tool_call.retry_in_place is False


def _flaky_tool(calls: list[str], failures: int) -> Any:
    @tool
    def quote(symbol: str) -> str:
        """Quote a symbol."""
        calls.append(symbol)
        if len(calls) <= failures:
            raise TransientToolError("429 Too Many Requests")
        return f"{symbol} is at 42"

    return annotate_tool(quote, read_only=True)


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("given", ["policy", "guard"])
async def test_a_transient_failure_is_retried_in_the_tool_call(mode: str, given: str) -> None:
    """Before, a 429 reached the model as final: the agent's tools always go back to the
    model, and no edge served the retry route. Now the tool call retries with its backoff."""
    calls: list[str] = []
    waited: list[float] = []

    async def asleep(delay: float) -> None:
        waited.append(delay)

    policy = RetryRouterPolicy(backoff=Backoff(max_attempts=3, base_delay=0.05, jitter="none"))
    guard = ToolCallGuard(retry=policy, sleep=waited.append, asleep=asleep)
    model = ScriptedChatModel(script=[tool_call_message("quote", {"symbol": "ACME"}), "42."])
    tools = [_flaky_tool(calls, failures=2)]
    hooks = react_agent_hooks(tools, guard=guard) if given == "guard" else None
    if hooks is not None:
        agent = create_react_agent(model, **hooks.kwargs())
    else:
        agent = guarded_react_agent(model, tools, retry=policy)
    out = await _run(agent, {"messages": [HumanMessage("ACME?")]}, mode)
    assert calls == ["ACME"] * 3 and out["messages"][-1].content == "42."
    tool_messages = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    assert [m.content for m in tool_messages] == ["ACME is at 42"]  # one answer per call
    retries = [d for d in out["guard_log"] if d.verdict.value == "retry"]
    assert len(retries) == 2 and out["usage"]["tool_calls"] == 3
    if given == "guard":
        assert waited == [0.05, 0.1]
    assert len(model.calls) == 2  # the model never saw the failures
