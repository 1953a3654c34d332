"""ToolCallGuard(timeout=...): a tool that blocks does not hold the run; what it did later is
recorded; a write past its limit is not retried blindly."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import tools_condition
from langgraph.store.memory import InMemoryStore

from agent_guards import GuardState, LoopPolicy, ToolCallGuard, add_retry_router
from agent_guards.core import annotate_tool
from agent_guards.tool_guard import RunLedger
from agent_guards.tool_guard.deadline import ToolTimeoutError, arun_within

RELEASE = threading.Event()
STARTED: list[str] = []


@tool
def slow_report(q: str) -> str:
    """Build a report (blocks until released)."""
    STARTED.append(q)
    RELEASE.wait(30)
    return f"report {q}"


@tool
def slow_transfer(amount: int) -> str:
    """Move money (blocks until released)."""
    STARTED.append(f"transfer {amount}")
    RELEASE.wait(30)
    return f"moved {amount}"


annotate_tool(slow_report, read_only=True)


class State(MessagesState, GuardState):
    pass


def graph(script: list[Any], guard: ToolCallGuard, store: Any = None) -> Any:
    replies = iter(script)
    builder = StateGraph(State)
    builder.add_node("model", lambda s: {"messages": [next(replies)]})
    builder.add_node("tools", guard.tool_node([slow_report, slow_transfer]))
    builder.add_edge(START, "model")
    builder.add_conditional_edges("model", tools_condition)
    add_retry_router(builder, "tools", model="model", tools="tools", loop_policy=LoopPolicy())
    return builder.compile(store=store)


def call(name: str, args: dict[str, Any], i: str = "c1") -> AIMessage:
    return AIMessage("", tool_calls=[{"name": name, "args": args, "id": i}])


def _join_workers() -> None:
    for thread in threading.enumerate():
        if thread.name.startswith("agent_guards-tool"):
            thread.join(30)


@pytest.fixture(autouse=True)
def _reset() -> Any:
    RELEASE.clear()
    STARTED.clear()
    yield
    RELEASE.set()
    _join_workers()


def test_a_blocking_read_times_out_and_the_run_goes_on() -> None:
    guard = ToolCallGuard(timeout=0.05, sleep=lambda s: None)
    out = graph([call("slow_report", {"q": "q3"}), AIMessage("sorry")], guard).invoke(
        {"messages": [("user", "report")]}
    )
    assert not RELEASE.is_set()  # the run ended while every execution was still blocked
    errors = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    assert errors and all(m.status == "error" for m in errors)
    assert "did not answer within 0.05 s" in str(errors[-1].content)
    # a read may run again: retried until the retry policy gave up, each run counted
    assert len(STARTED) == out["usage"]["tool_calls"] >= 2
    assert out["guard_log"][-1].reason == "retries_exhausted"


def test_a_blocking_write_is_not_retried_and_its_late_outcome_is_recorded() -> None:
    store, ledger = InMemoryStore(), RunLedger()
    guard = ToolCallGuard(timeout={"slow_transfer": 0.05}, ledger=ledger, sleep=lambda s: None)
    app = graph([call("slow_transfer", {"amount": 30}), AIMessage("checking")], guard, store)
    cfg = {"configurable": {"thread_id": "late"}}
    out = app.invoke({"messages": [("user", "move 30")]}, cfg)
    assert STARTED == ["transfer 30"]  # a write that may have run is never run again
    assert [(d.verdict.value, d.reason) for d in out["guard_log"]] == [
        ("clarify", "outcome_unknown")
    ]
    assert "may have let it run" in str(out["messages"][-1].content)
    assert ledger.entry(store, "late", "c1")["status"] == "started"  # open while it runs
    RELEASE.set()
    _join_workers()
    entry = ledger.entry(store, "late", "c1")
    assert entry["status"] == "done" and entry["content"] == "moved 30"


def test_without_a_store_a_write_past_its_limit_stays_started_in_state() -> None:
    guard = ToolCallGuard(timeout={"slow_transfer": 0.05}, ledger=RunLedger(), sleep=lambda s: None)
    app = graph([call("slow_transfer", {"amount": 30}), AIMessage("checking")], guard)
    out = app.invoke({"messages": [("user", "move 30")]})
    assert STARTED == ["transfer 30"]
    entry = out["run_ledger"]["c1#1"]
    # slow_transfer declares nothing: unknown, a possible write
    assert (entry["effect"], entry["status"]) == ("unknown", "started")
    assert out["usage"]["tool_calls"] == 1  # counted: it may have run


def test_an_async_tool_is_cancelled_at_its_limit() -> None:
    cancelled: list[bool] = []

    async def hang(request: Any) -> str:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.append(True)
            raise
        return "never"

    async def own_timeout(request: Any) -> str:
        raise TimeoutError("the tool's own")

    async def main() -> None:
        with pytest.raises(ToolTimeoutError, match=r"report did not answer within 0\.05 s"):
            await arun_within(hang, {"name": "report"}, 0.05)
        await asyncio.sleep(0)
        with pytest.raises(TimeoutError, match="the tool's own") as err:
            await arun_within(own_timeout, {"name": "report"}, 5)
        assert not isinstance(err.value, ToolTimeoutError)

    asyncio.run(main())
    assert cancelled == [True]


async def test_the_async_graph_path_keeps_the_limit() -> None:
    async def nap(s: float) -> None:
        return None

    guard = ToolCallGuard(timeout=0.05, sleep=lambda s: None, asleep=nap)
    out = await graph([call("slow_report", {"q": "a"}), AIMessage("sorry")], guard).ainvoke(
        {"messages": [("user", "report")]}
    )
    assert not RELEASE.is_set()
    assert "did not answer within 0.05 s" in str(out["messages"][-2].content)
    RELEASE.set()  # the blocked tool runs in the loop's executor: let it end with the test


@pytest.mark.parametrize(
    ("timeout", "error"),
    [
        (0, "ToolCallGuard.timeout must be seconds > 0, got 0"),
        (True, "ToolCallGuard.timeout must be seconds > 0, got True"),
        ({"pay": -1}, "ToolCallGuard.timeout['pay'] must be seconds > 0, got -1"),
    ],
)
def test_a_bad_timeout_is_refused_naming_it(timeout: Any, error: str) -> None:
    with pytest.raises(ValueError, match=error.replace("[", r"\[").replace("]", r"\]")):
        ToolCallGuard(timeout=timeout)
