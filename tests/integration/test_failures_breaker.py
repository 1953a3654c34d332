"""retry_router in compiled graphs: untyped refusals, malformed artifacts in a
parallel turn, string failures, Retry-After 0, the breaker's half-open trial, updates from
two busy writers (threads and processes; SQLite and PostgreSQL), the real clock, the retry
budget."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langgraph.store.memory import InMemoryStore

from agent_guards import ToolCallGuard
from agent_guards.core import Verdict
from agent_guards.middleware import RetryRouterMiddleware
from agent_guards.persistence import open_persistence
from agent_guards.retry_router import (
    Backoff,
    CircuitBreaker,
    RetryBudget,
    RetryRouterPolicy,
    TransientToolError,
)
from agent_guards.testing import ScriptedChatModel, tool_call_message
from agent_guards.tool_guard import annotate_tool
from tests.integration._breaker_worker import BREAKER
from tests.integration.test_failures_graph import Scripted, build, cfg, quote_then, routes

ROOT = Path(__file__).resolve().parents[2]
TUTORIAL = "Not permitted to reschedule to a flight that departs in less than 3 hours."


async def _both(graph: Any, state: Any, config: RunnableConfig) -> list[dict[str, Any]]:
    return [graph.invoke(state, config), await graph.ainvoke(state, config)]


# 1. an untyped 403 in a graph ---------------------------------------------------------------


@pytest.mark.parametrize(
    "error", [Exception("403 Forbidden"), RuntimeError("AccessDenied: s3:GetObject")]
)
async def test_an_untyped_403_is_refused_at_once_in_a_graph(error: Exception) -> None:
    for mode in ("sync", "async"):
        source = Scripted(lambda n: error)
        model = ScriptedChatModel(
            script=[tool_call_message("quote", {"symbol": "X"})], repeat_last=True
        )
        graph = build(model, [source.tool()], guard=ToolCallGuard(sleep=lambda s: None))
        state = {"messages": [HumanMessage("q")]}
        out = graph.invoke(state, cfg()) if mode == "sync" else await graph.ainvoke(state, cfg())
        assert source.calls == 1 and len(model.calls) == 1, mode
        assert out["guard_log"][-1].verdict is Verdict.REFUSE, mode


# 3. a malformed artifact beside a refusal in one parallel turn ------------------------------


def _parallel_turn() -> tuple[list[Any], dict[str, int], ScriptedChatModel]:
    calls = {"lookup": 0, "salary": 0}

    @tool(response_format="content_and_artifact")
    def lookup(key: str) -> tuple[str, Any]:
        """Look a key up."""
        calls["lookup"] += 1
        return "odd", {"agent_guards_failure": {"kind": "weird"}}

    @tool
    def salary(employee: str) -> str:
        """Salary (HR only)."""
        calls["salary"] += 1
        raise PermissionError("HR only")

    turn = AIMessage("", tool_calls=[
        {"name": "lookup", "args": {"key": "k"}, "id": "a1"},
        {"name": "salary", "args": {"employee": "e7"}, "id": "a2"},
    ])  # fmt: skip
    model = ScriptedChatModel(script=[turn], repeat_last=True)
    tools = [annotate_tool(lookup, read_only=True), annotate_tool(salary, read_only=True)]
    return tools, calls, model


async def test_a_malformed_artifact_does_not_hide_a_siblings_refusal_in_a_graph() -> None:
    for mode in ("sync", "async"):
        tools, calls, model = _parallel_turn()
        graph = build(model, tools, guard=ToolCallGuard(sleep=lambda s: None))
        state = {"messages": [HumanMessage("q")]}
        out = graph.invoke(state, cfg()) if mode == "sync" else await graph.ainvoke(state, cfg())
        assert calls == {"lookup": 1, "salary": 1}, f"{mode}: the denied tool never runs again"
        assert out["guard_log"][-1].verdict is Verdict.REFUSE, mode
        assert any(d.reason == "invalid_input" for d in out["guard_log"]), "reported"


async def test_a_malformed_artifact_does_not_hide_a_siblings_refusal_in_middleware() -> None:
    for mode in ("sync", "async"):
        tools, calls, model = _parallel_turn()
        agent = create_agent(model, tools=tools, middleware=[RetryRouterMiddleware()])
        state = {"messages": [HumanMessage("q")]}
        limit: RunnableConfig = {"recursion_limit": 40}
        out = agent.invoke(state, limit) if mode == "sync" else await agent.ainvoke(state, limit)
        assert calls == {"lookup": 1, "salary": 1}, mode
        assert out["guard_log"][-1].verdict is Verdict.REFUSE, mode


# 4. failures returned as ordinary strings ---------------------------------------------------


def _reschedule() -> tuple[Any, list[str]]:
    calls: list[str] = []

    @tool
    def update_ticket(ticket: str) -> str:
        """Reschedule a ticket (returns its refusals as text, like the tutorial's tools)."""
        calls.append(ticket)
        return TUTORIAL

    return annotate_tool(update_ticket, read_only=False), calls


DETECT = RetryRouterPolicy(failure_patterns={"update_ticket": [(r"^not permitted", "permission")]})


async def test_a_string_refusal_is_refused_with_a_detector_in_a_graph() -> None:
    for mode in ("sync", "async"):
        tool_, calls = _reschedule()
        model = ScriptedChatModel(
            script=[tool_call_message("update_ticket", {"ticket": "T1"})], repeat_last=True
        )
        graph = build(model, [tool_], guard=ToolCallGuard(retry=DETECT, loop=None), policy=DETECT)
        state = {"messages": [HumanMessage("move my flight")]}
        out = graph.invoke(state, cfg()) if mode == "sync" else await graph.ainvoke(state, cfg())
        assert len(calls) == 1 and len(model.calls) == 1, mode
        assert out["guard_log"][-1].verdict is Verdict.REFUSE, mode
        assert out["guard_log"][-1].data["kind"] == "permission"


async def test_a_string_refusal_is_refused_with_a_detector_in_middleware() -> None:
    for mode in ("sync", "async"):
        tool_, calls = _reschedule()
        model = ScriptedChatModel(
            script=[tool_call_message("update_ticket", {"ticket": "T1"})], repeat_last=True
        )
        agent = create_agent(
            model, tools=[tool_], middleware=[RetryRouterMiddleware(policy=DETECT)]
        )
        state = {"messages": [HumanMessage("move my flight")]}
        limit: RunnableConfig = {"recursion_limit": 40}
        out = agent.invoke(state, limit) if mode == "sync" else await agent.ainvoke(state, limit)
        assert len(calls) == 1, mode
        assert out["guard_log"][-1].verdict is Verdict.REFUSE, mode


# 5. Retry-After: 0 means retry now ------------------------------------------------------------


async def test_retry_after_zero_retries_at_once_sync_and_async() -> None:
    waits: list[float] = []
    awaits: list[float] = []

    async def asleep(s: float) -> None:
        awaits.append(s)

    for mode in ("sync", "async"):
        source = Scripted({1: TransientToolError("429", retry_after=0, status_code=429)})
        guard = ToolCallGuard(sleep=waits.append, asleep=asleep)
        graph = build(quote_then("ok"), [source.tool()], guard=guard)
        state = {"messages": [HumanMessage("q")]}
        out = graph.invoke(state, cfg()) if mode == "sync" else await graph.ainvoke(state, cfg())
        assert source.calls == 2 and out["messages"][-1].content == "ok", mode
        assert out["guard_log"][0].data["delay"] == 0.0
    assert waits == awaits == [], "no jittered backoff after Retry-After: 0"


# 6. half-open: 5 parallel calls in one turn, one trial ----------------------------------------


async def test_half_open_runs_one_of_five_parallel_calls() -> None:
    for mode in ("sync", "async"):
        store = InMemoryStore()
        breaker = CircuitBreaker(failure_threshold=1, cooldown=30)
        breaker.record(store, "quote", ok=False, now=time.time() - 31)  # cooled down
        # the service is still down: the trial fails and reopens it; whether ToolNode runs
        # the five calls at once or one after another, no other call reaches the tool
        source = Scripted(lambda n: TimeoutError("still down"))
        turn = AIMessage("", tool_calls=[
            {"name": "quote", "args": {"symbol": f"S{i}"}, "id": f"q{i}"} for i in range(5)
        ])  # fmt: skip
        model = ScriptedChatModel(script=[turn, "done"])
        guard = ToolCallGuard(breaker=breaker, sleep=lambda s: None, loop=None)
        graph = build(model, [source.tool()], guard=guard, store=store)
        state = {"messages": [HumanMessage("q")]}
        out = graph.invoke(state, cfg()) if mode == "sync" else await graph.ainvoke(state, cfg())
        assert source.calls == 1, f"{mode}: only the trial call runs"
        blocked = [d for d in out["guard_log"] if d.reason == "circuit_open"]
        assert len(blocked) >= 4, mode


# 7. two busy writers lose no update ---------------------------------------------------------


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def database(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield str(tmp_path / "breaker.sqlite")
    else:
        url = request.getfixturevalue("postgres_url")
        with open_persistence(url) as (_, store):  # a clean slate for this test
            for item in store.search(("agent_guards", "circuit_breaker"), limit=100_000):
                store.delete(item.namespace, item.key)
        yield url


def test_two_os_threads_lose_no_breaker_update(database: str) -> None:
    per_writer = 150
    with open_persistence(database) as (_, store):
        barrier = threading.Barrier(2)
        errors: list[BaseException] = []

        def writer() -> None:
            try:
                barrier.wait()
                for _ in range(per_writer):
                    BREAKER.record(store, "svc", ok=False)
            except BaseException as err:  # pragma: no cover - reported below
                errors.append(err)

        threads = [threading.Thread(target=writer) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        value = BREAKER.read(store, "svc")
        assert value is not None and value["failures"] == 2 * per_writer


def test_two_processes_lose_no_breaker_update(database: str, tmp_path: Path) -> None:
    per_writer = 150
    go = tmp_path / "go"
    env = {**os.environ, "LANGSMITH_TRACING": "false"}
    with open_persistence(database):  # tables exist before both writers start
        pass
    workers = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.integration._breaker_worker",
                database,
                str(go),
                str(per_writer),
            ],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for _ in range(2)
    ]
    go.touch()
    for w in workers:
        _, err = w.communicate(timeout=300)
        assert w.returncode == 0, err.decode()
    with open_persistence(database) as (_, store):
        value = BREAKER.read(store, "svc")
    assert value is not None and value["failures"] == 2 * per_writer


# 8. a run pinned to 2100 does not open another thread's breaker --------------------------------


def test_a_run_pinned_to_2100_does_not_open_the_breaker_for_years() -> None:
    store = InMemoryStore()
    breaker = CircuitBreaker(failure_threshold=1, cooldown=30)
    policy = RetryRouterPolicy(backoff=Backoff(max_attempts=1))
    source = Scripted(lambda n: TimeoutError("down"))
    guard = ToolCallGuard(retry=policy, breaker=breaker, sleep=lambda s: None)
    pinned = 4_102_444_800.0  # 2100-01-01
    build(quote_then(), [source.tool()], guard=guard, policy=policy, store=store).invoke(
        {"messages": [HumanMessage("q")]}, cfg("pinned", pinned)
    )
    value = breaker.read(store, "quote")
    assert value is not None and value["state"] == "open"
    now = time.time()
    assert value["opened_at"] < now + 1, "opened on the real clock, not in 2100"
    # another thread, after the real cool-down: half-open, not open until 2100
    assert breaker.allow(store, "quote", now=now + 31) == (True, "half_open")


def test_replaying_a_blocked_call_reads_the_recorded_decision_not_the_store() -> None:
    store = InMemoryStore()
    breaker = CircuitBreaker(failure_threshold=1, cooldown=600)
    breaker.record(store, "quote", ok=False)
    source = Scripted()
    guard = ToolCallGuard(breaker=breaker, sleep=lambda s: None)
    out = build(quote_then("sorry"), [source.tool()], guard=guard, store=store).invoke(
        {"messages": [HumanMessage("q")]}, cfg()
    )
    assert source.calls == 0 and out["guard_log"][-1].reason == "circuit_open"
    # the router's decision is a function of the messages: no store, same route
    from agent_guards.retry_router import route_failures

    history = [m for m in out["messages"] if not (isinstance(m, AIMessage) and m.name)]
    assert route_failures(history).reason == "circuit_open"


async def test_a_replay_repeats_the_recorded_refusal_not_the_live_breaker() -> None:
    from langgraph.checkpoint.memory import InMemorySaver

    for mode in ("sync", "async"):
        store = InMemoryStore()
        breaker = CircuitBreaker(failure_threshold=1, cooldown=600)
        breaker.record(store, "quote", ok=False)  # open for this run
        source = Scripted()
        guard = ToolCallGuard(breaker=breaker, sleep=lambda s: None)
        graph = build(quote_then("sorry", "sorry"), [source.tool()], guard=guard, store=store,
                      checkpointer=InMemorySaver())  # fmt: skip
        config = cfg(f"replay-{mode}")
        state = {"messages": [HumanMessage("q")]}
        out = graph.invoke(state, config) if mode == "sync" else await graph.ainvoke(state, config)
        assert source.calls == 0 and out["guard_log"][-1].reason == "circuit_open"
        for item in store.search(("agent_guards", "circuit_breaker", "events"), limit=1000):
            store.delete(item.namespace, item.key)  # the service recovered: the breaker is closed
        assert breaker.allow(store, "quote") == (True, "closed")
        before = next(s for s in graph.get_state_history(config) if s.next == ("tools",))
        again = (
            graph.invoke(None, before.config)
            if mode == "sync"
            else await graph.ainvoke(None, before.config)
        )
        assert source.calls == 0, f"{mode}: the replay repeats the recorded decision"
        assert again["guard_log"][-1].reason == "circuit_open"


# 10. the retry budget in a graph ----------------------------------------------------------------


def test_a_spent_retry_budget_routes_fallback_without_calling_the_tool() -> None:
    store = InMemoryStore()
    budget = RetryBudget(max_retries=1, per=3600)
    source = Scripted(lambda n: TransientToolError("429", status_code=429))
    policy = RetryRouterPolicy(backoff=Backoff(max_attempts=5))
    guard = ToolCallGuard(retry=policy, retry_budget=budget, sleep=lambda s: None)
    out = build(quote_then(), [source.tool()], guard=guard, policy=policy, store=store).invoke(
        {"messages": [HumanMessage("q")]}, cfg()
    )
    assert source.calls == 2, "the first call and the one retry the budget allowed"
    assert routes(out)[-1] == ("fallback", "retry_budget_exhausted")


# 9. the reference graph under langgraph dev: the server's store holds the breaker -----------


@pytest.mark.parametrize("store", [True, False], ids=["server store", "no store"])
async def test_the_reference_graph_breaker_uses_the_store_the_run_brings(store: bool) -> None:
    """Built store-free by the ``langgraph.json`` factory, then given the store the Agent
    Server attaches: rate_limit_storm opens the breaker in that store. A run with no store
    at all has no breaker, and still ends with its reason."""
    from langgraph.checkpoint.memory import InMemorySaver

    from agent_guards.graphs.plan_execute import graph as factory
    from agent_guards.graphs.scenarios import SCENARIOS, scenario_config

    scenario = SCENARIOS["rate_limit_storm"]
    for mode in ("sync", "async"):
        graph = factory({"configurable": {"scenario": "rate_limit_storm"}})
        server = InMemoryStore() if store else None
        graph = graph.copy(update={"checkpointer": InMemorySaver(), "store": server})
        config = scenario_config(scenario, f"dev-{mode}")
        state = {"messages": [("user", scenario.message)]}
        out = graph.invoke(state, config) if mode == "sync" else await graph.ainvoke(state, config)
        blocked = [d for d in out["guard_log"] if d.reason == "circuit_open"]
        assert bool(blocked) is store, mode
        assert out["outcome"]["route"], mode
