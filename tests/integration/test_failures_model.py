"""Failures of the model call itself: the tool taxonomy on LangGraph's RetryPolicy (the
reference graph's model nodes) and on LangChain's ModelRetryMiddleware (create_agent)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import ModelFallbackMiddleware
from langchain_core.exceptions import (
    ModelAPIError,
    ModelPermissionDeniedError,
    ModelRateLimitError,
)
from langchain_core.messages import BaseMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.errors import GraphRecursionError
from langgraph.graph import START, StateGraph
from langgraph.types import RetryPolicy
from pydantic import Field

from agent_guards.core import Verdict
from agent_guards.graphs.plan_execute import build_graph
from agent_guards.graphs.scenarios import SCENARIOS, RoleScript, scenario_config
from agent_guards.middleware import RetryRouterMiddleware, model_retry_middleware
from agent_guards.retry_router import (
    Backoff,
    RetryRouterPolicy,
    RetryState,
    model_retry_policy,
    retryable,
)
from agent_guards.testing import ScriptedChatModel, tool_call_message

FAST = RetryRouterPolicy(backoff=Backoff(base_delay=0.001, max_delay=0.002, max_attempts=3))


class FlakyModel(ScriptedChatModel):
    """A scripted model that raises ``fault(role, n)`` (n: 1-based call of that role)."""

    fault: Any = None
    seen: dict[str, int] = Field(default_factory=dict)

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
        role = RoleScript.role_of(messages)
        self.seen[role] = self.seen.get(role, 0) + 1
        error = self.fault(role, self.seen[role]) if self.fault else None
        if error is not None:
            raise error
        return super()._generate(messages, *args, **kwargs)


def flaky(scenario: Any, fault: Any) -> FlakyModel:
    return FlakyModel(script=[scenario.script()], repeat_last=True, fault=fault, seen={})


def run_reference(fault: Any, *, aio: bool = False) -> tuple[dict[str, Any], FlakyModel]:
    scenario = SCENARIOS["procurement_threshold"]
    policies = replace(scenario.policies, retry=FAST)
    model = flaky(scenario, fault)
    app = build_graph(model, scenario.tools(), policies=policies, checkpointer=InMemorySaver())
    config = scenario_config(replace(scenario, policies=policies), "m")
    state = {"messages": [("user", scenario.message)]}
    return app.invoke(state, config), model


def test_retryable_reads_langchain_core_model_errors() -> None:
    # truth table: the tool taxonomy, applied to the model call
    assert retryable(ModelAPIError("502 Bad Gateway")) is True
    assert retryable(ModelRateLimitError("429 Too Many Requests")) is True
    assert retryable(ModelPermissionDeniedError("no access")) is False
    assert retryable(PermissionError("403 Forbidden")) is False
    assert retryable(KeyError("bug")) is False  # unknown: never retried by default


def test_a_429_on_every_agent_call_stops_the_reference_graph_with_a_reason() -> None:
    out, model = run_reference(
        lambda role, n: ModelRateLimitError("429 Too Many Requests") if role == "agent" else None
    )
    assert model.seen["agent"] == FAST.backoff.max_attempts, "retried with backoff, then stop"
    assert out["outcome"]["reason"] == "model_failed"
    assert "the model call in agent failed (transient): 429" in out["outcome"]["text"]
    stop = [d for d in out["guard_log"] if d.reason == "model_failed"]
    assert stop and stop[0].verdict is Verdict.STOP and stop[0].data["node"] == "agent"
    assert out["messages"][-1].name == "respond"


def test_a_single_429_is_retried_and_the_run_succeeds() -> None:
    clean, clean_model = run_reference(None)
    out, model = run_reference(
        lambda role, n: ModelRateLimitError("429") if role == "agent" and n == 1 else None
    )
    assert model.seen["agent"] == clean_model.seen["agent"] + 1
    assert out["outcome"]["route"] == clean["outcome"]["route"]
    assert out["messages"][-1].content == clean["messages"][-1].content


def test_a_permission_error_of_the_model_is_not_retried() -> None:
    out, model = run_reference(
        lambda role, n: ModelPermissionDeniedError("403") if role == "parse_goal" else None
    )
    assert model.seen["parse_goal"] == 1
    assert out["outcome"]["reason"] == "model_failed"
    assert "the model call in parse_goal failed (permission)" in out["outcome"]["text"]


def test_a_bug_in_a_node_still_raises() -> None:
    with pytest.raises(KeyError, match="bug"):
        run_reference(lambda role, n: KeyError("bug") if role == "plan" else None)


def _one_node(model: Any, policy: RetryPolicy) -> Any:
    builder = StateGraph(RetryState)
    builder.add_node(
        "model",
        lambda s: {"messages": [model.invoke(s["messages"])]},
        retry_policy=policy,
    )
    builder.add_edge(START, "model")
    return builder.compile()


@pytest.mark.parametrize(
    ("error", "calls"),
    [(ModelAPIError("500"), 3), (ModelRateLimitError("429"), 3), (ModelPermissionDeniedError(), 1)],
)
async def test_model_retry_policy_on_a_plain_node_sync_and_async(error: Any, calls: int) -> None:
    for mode in ("sync", "async"):
        model = FlakyModel(script=["ok"], repeat_last=True, fault=lambda r, n: error, seen={})
        graph = _one_node(model, model_retry_policy(FAST))
        with pytest.raises(type(error)):
            if mode == "sync":
                graph.invoke({"messages": [HumanMessage("q")]})
            else:
                await graph.ainvoke({"messages": [HumanMessage("q")]})
        assert model.seen["agent"] == calls, mode


# create_agent: ModelRetryMiddleware / ModelFallbackMiddleware -------------------------


def test_model_retry_middleware_retries_a_429_then_the_run_goes_on() -> None:
    model = FlakyModel(
        script=["all good"], fault=lambda r, n: ModelRateLimitError("429") if n == 1 else None,
        seen={},
    )  # fmt: skip
    agent = create_agent(model, tools=[], middleware=[model_retry_middleware(FAST)])
    out = agent.invoke({"messages": [HumanMessage("q")]}, {"recursion_limit": 20})
    assert model.seen["agent"] == 2 and out["messages"][-1].content == "all good"


def test_model_retry_middleware_stops_with_a_reason_and_never_retries_permission() -> None:
    model = FlakyModel(script=["x"], fault=lambda r, n: ModelPermissionDeniedError("403"), seen={})
    agent = create_agent(model, tools=[], middleware=[model_retry_middleware(FAST)])
    with pytest.raises(ModelPermissionDeniedError):
        agent.invoke({"messages": [HumanMessage("q")]}, {"recursion_limit": 20})
    assert model.seen["agent"] == 1
    always = FlakyModel(script=["x"], fault=lambda r, n: ModelAPIError("503"), seen={})
    agent = create_agent(always, tools=[], middleware=[model_retry_middleware(FAST)])
    out = agent.invoke({"messages": [HumanMessage("q")]}, {"recursion_limit": 20})
    assert always.seen["agent"] == 3
    assert out["messages"][-1].content.startswith("The model is unavailable (transient")


async def test_retry_then_fall_back_to_another_model_sync_and_async() -> None:
    for mode in ("sync", "async"):
        primary = FlakyModel(script=["x"], fault=lambda r, n: ModelAPIError("503"), seen={})
        backup = ScriptedChatModel(script=["from the backup"])
        middleware = [
            ModelFallbackMiddleware(backup),
            model_retry_middleware(FAST, on_failure="error"),
        ]
        agent = create_agent(primary, tools=[], middleware=middleware)
        state = {"messages": [HumanMessage("q")]}
        cfg: RunnableConfig = {"recursion_limit": 20}
        out = agent.invoke(state, cfg) if mode == "sync" else await agent.ainvoke(state, cfg)
        assert primary.seen["agent"] == 3, mode
        assert out["messages"][-1].content == "from the backup", mode


# a permission error from an untyped exception, with RetryRouterMiddleware alone --------


def _payroll(calls: list[str], error: Exception) -> Any:
    @tool
    def payroll(employee: str) -> str:
        """Payroll record."""
        calls.append(employee)
        raise error

    return payroll


@pytest.mark.parametrize(
    "error",
    [
        Exception("403 Forbidden"),
        RuntimeError("permission denied for relation payroll"),
        Exception("AccessDenied: User is not authorized to perform s3:GetObject"),
    ],
)
async def test_retry_router_middleware_alone_refuses_an_untyped_403(error: Exception) -> None:
    for mode in ("sync", "async"):
        calls: list[str] = []
        payroll = _payroll(calls, error)

        model = ScriptedChatModel(
            script=[tool_call_message("payroll", {"employee": "e7"})], repeat_last=True
        )
        agent = create_agent(model, tools=[payroll], middleware=[RetryRouterMiddleware()])
        state = {"messages": [HumanMessage("salary of e7?")]}
        cfg: RunnableConfig = {"recursion_limit": 40}
        try:
            out = agent.invoke(state, cfg) if mode == "sync" else await agent.ainvoke(state, cfg)
        except GraphRecursionError:  # pragma: no cover - the bug this test pins
            pytest.fail(f"{mode}: looped to GraphRecursionError on {error!r}")
        assert len(calls) == 1, mode
        assert out["guard_log"][-1].verdict is Verdict.REFUSE, mode
        assert out["guard_log"][-1].data["kind"] == "permission"
