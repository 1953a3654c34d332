"""Guard decisions reach LangSmith: the real exporter, pointed at a fake endpoint on 127.0.0.1."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph

from agent_guards import LoopPolicy, LoopState, create_retry_router
from agent_guards.core import GuardDecision, GuardState, Verdict
from agent_guards.graph import stamp
from tests.integration._fake_langsmith import FakeLangSmith, tracing_to


@pytest.fixture
def fake_langsmith() -> Iterator[FakeLangSmith]:
    with tracing_to(FakeLangSmith()) as server:
        yield server


def test_decision_is_posted_as_run_metadata_and_tag(fake_langsmith: FakeLangSmith) -> None:
    from langchain_core.tracers.langchain import wait_for_all_tracers
    from langsmith import Client

    decision = GuardDecision(
        guard="loop_check", verdict=Verdict.STOP, reason="repeated_call", selected_ids=["c1"]
    )

    def guard(state: GuardState, config: RunnableConfig) -> dict[str, Any]:
        return {"guard_log": [stamp(decision, config)]}

    builder = StateGraph(GuardState)
    builder.add_node("loop_check", guard)
    builder.add_edge(START, "loop_check")
    builder.add_edge("loop_check", END)
    graph = builder.compile()

    client = Client()
    from langchain_core.tracers.langchain import LangChainTracer

    tracer = LangChainTracer(client=client, project_name="agent-guards-tests")
    out = graph.invoke({}, {"callbacks": [tracer]})
    assert out["guard_log"][0].verdict is Verdict.STOP
    wait_for_all_tracers()
    client.flush()

    payload = fake_langsmith.payload()
    assert b"guard:loop_check:stop" in payload
    assert b"repeated_call" in payload
    assert b"guard_decisions" in payload


@pytest.mark.parametrize("loop", [None, LoopPolicy()])
def test_a_healthy_turn_s_route_decisions_reach_the_trace(
    fake_langsmith: FakeLangSmith, loop: LoopPolicy | None
) -> None:
    """The route's decisions on a healthy turn, which only the trace keeps, are posted with
    the traced run (``trace_only``: an untraced run makes no copy of them)."""
    from langchain_core.tracers.langchain import LangChainTracer, wait_for_all_tracers
    from langsmith import Client

    router = create_retry_router(loop_policy=loop)
    routes: list[str] = []

    def tools(state: LoopState, config: RunnableConfig) -> dict[str, Any]:
        routes.append(router.invoke(state, config))
        return {}

    graph = StateGraph(LoopState).add_node("tools", tools)
    graph = graph.add_edge(START, "tools").add_edge("tools", END).compile()
    call = {"name": "search", "args": {"q": "x"}, "id": "c1"}
    turn = {"messages": [AIMessage("", tool_calls=[call]), ToolMessage("found", tool_call_id="c1")]}

    client = Client()
    graph.invoke(turn, {"callbacks": [LangChainTracer(client=client)]})
    wait_for_all_tracers()
    client.flush()

    assert routes == ["continue"]
    payload = fake_langsmith.payload()
    assert b"guard:retry_router:continue" in payload and b"no_failure" in payload
    assert (b"no_loop" in payload) is (loop is not None)


def test_no_trace_no_error() -> None:
    """Outside a traced run, stamping is a no-op for tracing."""
    decision = GuardDecision(guard="g", verdict="nudge", reason="r")
    stamped = stamp(decision, {"metadata": {"langgraph_step": 3}})
    assert stamped.step == 3
    assert stamped.at is not None
    assert stamped == decision.with_context(step=3)
