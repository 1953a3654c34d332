"""LoopGuardMiddleware and RetryRouterMiddleware inside ``langchain.agents.create_agent``."""

from __future__ import annotations

from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.memory import InMemoryStore
from langgraph.types import Command, interrupt

from agent_guards.core import LoopDetected, Verdict
from agent_guards.loop_check import LoopPolicy
from agent_guards.middleware import LoopGuardMiddleware, RetryRouterMiddleware
from agent_guards.retry_router import (
    AmbiguousInput,
    Backoff,
    CircuitBreaker,
    RetryRouterPolicy,
    TransientToolError,
)
from agent_guards.serde import guard_serializer
from agent_guards.testing import ScriptedChatModel, tool_call_message
from agent_guards.tool_guard import annotate_tool

LIMIT: RunnableConfig = {"recursion_limit": 60}


class Source:
    def __init__(
        self, faults: dict[int, BaseException] | None = None, always: BaseException | None = None
    ) -> None:
        self.calls = 0
        self.faults = faults or {}
        self.always = always

    def tool(self) -> Any:
        @tool
        def search(q: str) -> str:
            """Search the policy base."""
            self.calls += 1
            if self.always is not None:
                raise self.always
            if self.calls in self.faults:
                raise self.faults[self.calls]
            return f"Reviews start above 500k for {q!r} (section 4.2)."

        return annotate_tool(search, read_only=True)


def forever() -> ScriptedChatModel:
    return ScriptedChatModel(script=[tool_call_message("search", {"q": "limit"})], repeat_last=True)


def answered(messages: list[BaseMessage]) -> bool:
    calls = {c["id"] for m in messages if isinstance(m, AIMessage) for c in m.tool_calls}
    answers = {m.tool_call_id for m in messages if isinstance(m, ToolMessage)}
    return calls == answers


def test_a_repeating_agent_is_stopped_with_one_execution() -> None:
    source, model = Source(), forever()
    agent = create_agent(
        model, tools=[source.tool()], middleware=[LoopGuardMiddleware(), RetryRouterMiddleware()]
    )
    out = agent.invoke({"messages": [HumanMessage("limit?")]}, LIMIT)
    assert source.calls == 1 and len(model.calls) == 3
    assert [d.verdict.value for d in out["guard_log"]] == ["reuse", "nudge", "stop"]
    assert out["usage"] == {"tool_calls": 1}
    final = out["messages"][-1]
    assert final.name == "loop_check" and "500k" in final.content
    assert answered(out["messages"]), "the stopped call got a ToolMessage"


async def test_sync_and_async_agents_agree() -> None:
    runs = []
    for mode in ("sync", "async"):
        source, model = Source(), forever()
        agent = create_agent(
            model,
            tools=[source.tool()],
            middleware=[LoopGuardMiddleware(), RetryRouterMiddleware()],
        )
        inp = {"messages": [HumanMessage("limit?")]}
        out = agent.invoke(inp, LIMIT) if mode == "sync" else await agent.ainvoke(inp, LIMIT)
        runs.append(
            ([d.verdict.value for d in out["guard_log"]], out["messages"][-1].content, source.calls)
        )
    assert runs[0] == runs[1]


def test_exit_behavior_error_raises_loop_detected() -> None:
    agent = create_agent(
        forever(), tools=[Source().tool()], middleware=[LoopGuardMiddleware(exit_behavior="error")]
    )
    with pytest.raises(LoopDetected) as info:
        agent.invoke({"messages": [HumanMessage("limit?")]}, LIMIT)
    assert (info.value.reason, info.value.value, info.value.limit) == ("repeated_call", 3, 3)


def test_escalation_interrupts_the_agent() -> None:
    agent = create_agent(
        forever(),
        tools=[Source().tool()],
        middleware=[LoopGuardMiddleware(policy=LoopPolicy(on_stop="escalate"))],
        checkpointer=InMemorySaver(),
    )
    cfg: RunnableConfig = {"configurable": {"thread_id": "e"}, "recursion_limit": 60}
    first = agent.invoke({"messages": [HumanMessage("limit?")]}, cfg)
    assert first["__interrupt__"][0].value["guard"] == "loop_check"
    out = agent.invoke(Command(resume="stop"), cfg)
    assert out["messages"][-1].name == "loop_check" and answered(out["messages"])


def test_a_429_storm_is_retried_inside_the_call() -> None:
    source = Source(
        {1: TransientToolError("429", retry_after=2), 2: TransientToolError("429", retry_after=3)}
    )
    waits: list[float] = []
    model = ScriptedChatModel(
        script=[tool_call_message("search", {"q": "limit"}), "Reviews start above 500k."]
    )
    mw = RetryRouterMiddleware(
        policy=RetryRouterPolicy(backoff=Backoff(max_attempts=4)), sleep=waits.append
    )
    out = create_agent(model, tools=[source.tool()], middleware=[mw]).invoke(
        {"messages": [HumanMessage("q")]}, LIMIT
    )
    assert waits == [2.0, 3.0] and source.calls == 3
    assert out["usage"] == {"tool_calls": 3}
    assert [d.verdict for d in out["guard_log"]] == [Verdict.RETRY, Verdict.RETRY]
    assert out["messages"][-1].content == "Reviews start above 500k."


async def test_async_retry_uses_the_async_sleep() -> None:
    waits: list[float] = []

    async def asleep(s: float) -> None:
        waits.append(s)

    source = Source({1: TransientToolError("429", retry_after=1)})
    model = ScriptedChatModel(script=[tool_call_message("search", {"q": "limit"}), "ok"])
    mw = RetryRouterMiddleware(
        asleep=asleep, sleep=lambda s: pytest.fail("sync sleep in async run")
    )
    out = await create_agent(model, tools=[source.tool()], middleware=[mw]).ainvoke(
        {"messages": [HumanMessage("q")]}, LIMIT
    )
    assert waits == [1.0] and out["messages"][-1].content == "ok"


def test_permission_errors_end_the_run_without_retry() -> None:
    source = Source(always=PermissionError("HR only"))
    waits: list[float] = []
    model = forever()
    out = create_agent(
        model, tools=[source.tool()], middleware=[RetryRouterMiddleware(sleep=waits.append)]
    ).invoke({"messages": [HumanMessage("q")]}, LIMIT)
    assert source.calls == 1 and waits == [] and len(model.calls) == 1
    assert out["guard_log"][-1].verdict is Verdict.REFUSE
    assert out["messages"][-1].name == "retry_router"


@pytest.mark.parametrize(
    "error",
    [
        PermissionError("403 Forbidden"),  # refuse
        AmbiguousInput("two cities match", question="Which Springfield?", options=["IL", "MO"]),
    ],
)
def test_an_ending_does_not_end_the_next_user_turn(error: Exception) -> None:
    source = Source(always=error)
    model = ScriptedChatModel(script=[tool_call_message("search", {"q": "x"}), "Springfield, IL."])
    agent = create_agent(
        model,
        tools=[source.tool()],
        middleware=[LoopGuardMiddleware(), RetryRouterMiddleware()],
        checkpointer=InMemorySaver(serde=guard_serializer()),
    )
    cfg: RunnableConfig = {"configurable": {"thread_id": "t"}, "recursion_limit": 60}
    first = agent.invoke({"messages": [HumanMessage("book it")]}, cfg)
    assert first["messages"][-1].name == "retry_router" and len(model.calls) == 1
    # the user answers: the model reads the answer, the earlier failure is not judged again
    out = agent.invoke({"messages": [HumanMessage("the one in Illinois")]}, cfg)
    assert len(model.calls) == 2 and out["messages"][-1].content == "Springfield, IL."
    assert len(out["guard_log"]) == len(first["guard_log"])


def test_the_breaker_uses_the_agents_store() -> None:
    store = InMemoryStore()
    breaker = CircuitBreaker(failure_threshold=1, cooldown=600)
    mw = RetryRouterMiddleware(
        breaker=breaker, policy=RetryRouterPolicy(backoff=Backoff(max_attempts=1))
    )
    source = Source(always=TimeoutError("down"))
    for thread in ("a", "b"):
        model = ScriptedChatModel(
            script=[tool_call_message("search", {"q": "limit"})], repeat_last=True
        )
        out = create_agent(model, tools=[source.tool()], middleware=[mw], store=store).invoke(
            {"messages": [HumanMessage("q")]},
            {"configurable": {"thread_id": thread}, "recursion_limit": 60},
        )
        assert out["guard_log"][-1].verdict is Verdict.FALLBACK
    assert source.calls == 1
    assert out["guard_log"][-1].reason == "circuit_open"


def test_an_interrupt_inside_a_tool_passes_through_both_middlewares() -> None:
    @tool
    def approve(amount: int) -> str:
        """Ask a human."""
        return f"approved: {interrupt({'amount': amount})}"

    model = ScriptedChatModel(script=[tool_call_message("approve", {"amount": 5}), "done"])
    agent = create_agent(
        model,
        tools=[approve],
        middleware=[LoopGuardMiddleware(), RetryRouterMiddleware()],
        checkpointer=InMemorySaver(),
    )
    cfg: RunnableConfig = {"configurable": {"thread_id": "i"}, "recursion_limit": 60}
    first = agent.invoke({"messages": [HumanMessage("pay")]}, cfg)
    assert first["__interrupt__"][0].value == {"amount": 5}
    out = agent.invoke(Command(resume="yes"), cfg)
    assert [m.content for m in out["messages"] if isinstance(m, ToolMessage)] == ["approved: yes"]
    assert out["messages"][-1].content == "done"


@pytest.mark.parametrize(
    ("factory", "error"),
    [
        (lambda: LoopGuardMiddleware(policy="strict"), TypeError),  # type: ignore[arg-type]
        (lambda: LoopGuardMiddleware(exit_behavior="crash"), ValueError),  # type: ignore[arg-type]
        (lambda: RetryRouterMiddleware(policy=LoopPolicy()), TypeError),  # type: ignore[arg-type]
    ],
)
def test_bad_options_fail_at_build_time(factory: Any, error: type[Exception]) -> None:
    with pytest.raises(error):
        factory()


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_a_refusal_is_one_decision_not_two(mode: str) -> None:
    """The tool wrapper decides ``refuse`` for the 403; the ending that follows before the
    next model call is that decision's consequence, not a second one in the log."""
    from agent_guards.retry_router import PermissionDenied

    @tool
    def pay(invoice: int) -> str:
        """Pay an invoice."""
        raise PermissionDenied("403 forbidden")

    model = ScriptedChatModel(script=[tool_call_message("pay", {"invoice": 7}), "paid"])
    agent = create_agent(model, tools=[pay], middleware=[RetryRouterMiddleware()])
    state = {"messages": [HumanMessage("pay invoice 7")]}
    out = agent.invoke(state) if mode == "sync" else await agent.ainvoke(state)
    assert [(d.verdict.value, d.reason) for d in out["guard_log"]] == [("refuse", "permission")]
    assert out["messages"][-1].content.startswith("I can't do that: pay refused the request")
