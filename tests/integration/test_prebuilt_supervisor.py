"""Supervisors, workers and plan-and-execute executors built on create_react_agent.

The supervisor is built by hand the way the langgraph-supervisor quickstart builds it (a
``create_react_agent`` with ``transfer_to_<worker>`` handoff tools returning
``Command(graph=Command.PARENT)``, workers as nodes going back to the supervisor), for
graphs that do not use the package; ``test_prebuilt_multi_agent.py`` runs the real
``create_supervisor`` and ``create_swarm``. The executor is the plan-and-execute
tutorial's, scripted.
"""

from __future__ import annotations

import operator
from typing import Annotated, Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import InjectedToolCallId, tool
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import InjectedState
from langgraph.types import Command
from typing_extensions import TypedDict

from agent_guards import GuardState
from agent_guards.prebuilt import add_subgraph, guard_updates, guarded_react_agent
from agent_guards.testing import ScriptedChatModel, tool_call_message
from agent_guards.tool_guard import annotate_tool


def handoff_tool(agent: str) -> Any:
    """A handoff tool as langgraph-supervisor's ``create_handoff_tool`` makes it."""

    @tool(f"transfer_to_{agent}")
    def handoff(
        state: Annotated[dict[str, Any], InjectedState],
        tool_call_id: Annotated[str, InjectedToolCallId],
    ) -> Command[Any]:
        """Hand the task over."""
        note = ToolMessage(
            f"Successfully transferred to {agent}",
            name=f"transfer_to_{agent}",
            tool_call_id=tool_call_id,
        )
        return Command(
            goto=agent, graph=Command.PARENT, update={"messages": [*state["messages"], note]}
        )

    handoff.metadata = {"__handoff_destination": agent}
    return handoff


class State(MessagesState, GuardState):
    pass


def _tools(log: dict[str, int]) -> tuple[Any, Any]:
    @tool
    def search(q: str) -> str:
        """Search."""
        log["search"] = log.get("search", 0) + 1
        return "GDP of France is 3T"

    @tool
    def pay(amount: int) -> str:
        """Pay."""
        log["pay"] = log.get("pay", 0) + 1
        raise PermissionError("403 Forbidden")

    return annotate_tool(search, read_only=True), pay


def _again(name: str, args: dict[str, Any]) -> Any:
    return lambda _: tool_call_message(name, args)  # a fresh call id on every call


def build_supervisor(supervisor_script: list[Any], research: Any, math: Any, log: Any) -> Any:
    search, pay = _tools(log)
    supervisor = guarded_react_agent(
        ScriptedChatModel(script=supervisor_script, repeat_last=True),
        [handoff_tool("research"), handoff_tool("math")],
        name="supervisor",
    )
    builder = StateGraph(State)
    add_subgraph(
        builder,
        "supervisor",
        supervisor,
        output_mode="full_history",
        destinations=("research", "math", END),
    )
    add_subgraph(builder, "research", guarded_react_agent(research, [search], name="research"))
    add_subgraph(builder, "math", guarded_react_agent(math, [pay], name="math"))
    builder.add_edge(START, "supervisor")
    builder.add_edge("research", "supervisor")
    builder.add_edge("math", "supervisor")
    return builder.compile()


async def _run(graph: Any, text: str, mode: str) -> dict[str, Any]:
    inputs = {"messages": [HumanMessage(text)]}
    cfg = {"recursion_limit": 60}
    if mode == "async":
        return await graph.ainvoke(inputs, cfg)  # type: ignore[no-any-return]
    return graph.invoke(inputs, cfg)  # type: ignore[no-any-return]


def _reasons(out: dict[str, Any]) -> list[tuple[str, str, str]]:
    return [(d.guard, d.verdict.value, d.reason) for d in out["guard_log"]]


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_a_looping_worker_stops_and_the_parent_sees_why(mode: str) -> None:
    log: dict[str, int] = {}
    research = ScriptedChatModel(script=[_again("search", {"q": "gdp"})], repeat_last=True)
    graph = build_supervisor(
        [_again("transfer_to_research", {}), "France's GDP is 3T."],
        research,
        ScriptedChatModel(script=["unused"]),
        log,
    )
    out = await _run(graph, "GDP of France?", mode)
    assert len(research.calls) <= 3
    assert log == {"search": 1}
    assert ("loop_check", "stop", "repeated_call") in _reasons(out)
    assert out["messages"][-1].content == "France's GDP is 3T."
    assert out["usage"]["tool_calls"] == 1  # counted once in the parent, not once per level


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_a_refusing_worker_executes_once_and_the_parent_sees_it(mode: str) -> None:
    log: dict[str, int] = {}
    math = ScriptedChatModel(script=[_again("pay", {"amount": 5})], repeat_last=True)
    graph = build_supervisor(
        [_again("transfer_to_math", {}), "Payment is not allowed."],
        ScriptedChatModel(script=["unused"]),
        math,
        log,
    )
    out = await _run(graph, "pay 5", mode)
    assert log == {"pay": 1}
    assert [(g, v) for g, v, _ in _reasons(out)] == [("retry_router", "refuse")]
    refusal = [m for m in out["messages"] if m.name == "retry_router"]
    assert refusal and refusal[-1].content.startswith("I can't do that")


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_the_supervisors_handoff_loop_is_bounded(mode: str) -> None:
    log: dict[str, int] = {}
    research = ScriptedChatModel(script=["GDP of France is 3T"], repeat_last=True)
    graph = build_supervisor(
        [_again("transfer_to_research", {})],  # hands over forever
        research,
        ScriptedChatModel(script=["unused"]),
        log,
    )
    out = await _run(graph, "GDP of France?", mode)
    assert len(research.calls) == 2  # the second round brought nothing new
    assert ("loop_check", "stop", "repeated_handoff") in _reasons(out)
    last = out["messages"][-1]
    assert last.name == "loop_check"
    assert "- research: GDP of France is 3T" in last.content  # the workers' answers so far
    assert "Successfully transferred" not in last.content
    assert _reasons(out) == [("loop_check", "stop", "repeated_handoff")]  # no stray nudge
    answered = {m.tool_call_id for m in out["messages"] if isinstance(m, ToolMessage)}
    pending = [
        c
        for m in out["messages"]
        if isinstance(m, AIMessage)
        for c in m.tool_calls
        if c["id"] not in answered
    ]
    assert pending == []


def test_handoffs_with_progress_are_not_stopped() -> None:
    log: dict[str, int] = {}
    answers = iter(["GDP is 3T", "GDP grew 1%", "GDP per head is 45k"])
    research = ScriptedChatModel(script=[lambda _: next(answers)], repeat_last=True)
    hand = _again("transfer_to_research", {})
    graph = build_supervisor(
        [hand, hand, hand, "done"], research, ScriptedChatModel(script=["unused"]), log
    )
    out = graph.invoke({"messages": [HumanMessage("GDP?")]}, {"recursion_limit": 60})
    assert len(research.calls) == 3
    assert out["messages"][-1].content == "done"
    assert not any(d.verdict.value == "stop" for d in out["guard_log"])


def test_add_subgraph_names_the_missing_channels() -> None:
    builder = StateGraph(MessagesState)
    agent = guarded_react_agent(ScriptedChatModel(script=[]), [])
    with pytest.raises(ValueError, match=r"add agent_guards\.GuardState"):
        add_subgraph(builder, "worker", agent)


class OwnChannels(MessagesState):
    guard_log: list[Any]
    usage: dict[str, Any]


def test_add_subgraph_refuses_guard_channels_without_reducers() -> None:
    # a second worker's decisions and counts would replace the first one's
    agent = guarded_react_agent(ScriptedChatModel(script=[]), [])
    with pytest.raises(ValueError, match=r"channel has no reducer.*agent_guards\.GuardState"):
        add_subgraph(StateGraph(OwnChannels), "worker", agent)


class PlanExecute(GuardState, total=False):
    """The tutorial's state, plus the guard channels."""

    input: str
    plan: list[str]
    past_steps: Annotated[list[tuple[str, str]], operator.add]
    response: str


class Plan(TypedDict):
    steps: list[str]


def build_plan_and_execute(executor_model: Any, log: dict[str, int]) -> Any:
    search, _pay = _tools(log)
    agent_executor = guarded_react_agent(executor_model, [search])

    def plan_step(state: PlanExecute) -> dict[str, Any]:
        return {"plan": ["find France's GDP", "find Germany's GDP"]}

    def execute_step(state: PlanExecute) -> dict[str, Any]:
        task = state["plan"][0]
        out = agent_executor.invoke({"messages": [("user", task)]})
        return {"past_steps": [(task, out["messages"][-1].content)], **guard_updates(out)}

    def replan_step(state: PlanExecute) -> dict[str, Any]:
        done = [step for step, _ in state["past_steps"]]
        rest = [step for step in state["plan"] if step not in done]
        return (
            {"plan": rest} if rest else {"response": "; ".join(r for _, r in state["past_steps"])}
        )

    builder = StateGraph(PlanExecute)
    builder.add_node("planner", plan_step)
    builder.add_node("agent", execute_step)
    builder.add_node("replan", replan_step)
    builder.add_edge(START, "planner")
    builder.add_edge("planner", "agent")
    builder.add_edge("agent", "replan")
    builder.add_conditional_edges("replan", lambda s: END if s.get("response") else "agent")
    return builder.compile()


def test_the_plan_and_execute_executor_stops_and_reports_to_the_parent() -> None:
    log: dict[str, int] = {}
    executor = ScriptedChatModel(script=[_again("search", {"q": "gdp"})], repeat_last=True)
    out = build_plan_and_execute(executor, log).invoke({"input": "compare GDPs"})
    assert len(executor.calls) <= 6  # two steps, each stopped within 3 model calls
    assert log == {"search": 2}
    stops = [d for d in out["guard_log"] if d.verdict.value == "stop"]
    assert len(stops) == 2
    assert out["usage"] == {"tool_calls": 2}
    assert all(r.startswith("I stopped because I kept repeating") for _, r in out["past_steps"])


def test_an_interrupt_inside_a_worker_reaches_the_parent_and_resumes() -> None:
    from langgraph.checkpoint.memory import InMemorySaver

    from agent_guards import LoopPolicy

    log: dict[str, int] = {}
    search, _pay = _tools(log)
    research = ScriptedChatModel(script=[_again("search", {"q": "gdp"})], repeat_last=True)
    worker = guarded_react_agent(research, [search], loop=LoopPolicy(on_stop="escalate"))
    builder = StateGraph(State)
    add_subgraph(builder, "research", worker)
    builder.add_edge(START, "research")
    graph = builder.compile(checkpointer=InMemorySaver())
    cfg = {"configurable": {"thread_id": "w"}}
    first = graph.invoke({"messages": [HumanMessage("GDP?")]}, cfg)
    assert first["__interrupt__"][0].value["guard"] == "loop_check"
    out = graph.invoke(Command(resume="stop"), cfg)
    assert out["guard_log"][-1].verdict.value == "stop"
    assert out["messages"][-1].name == "loop_check"
    assert log == {"search": 1}
