"""A retry storm against one rate-limited tool, with and without the shared retry budget.

50 threads (each its own graph thread, one after another until the storm ends) call one
tool that always answers 429. Each failed call is retried with retry_router's backoff.
Without a cap every caller retries on its own schedule; with ``RetryBudget`` (tokens
claimed in one SQLite store, shared by every thread) at most ``max_retries`` retries of the
tool start per one-second slot, whatever the number of callers. Reported: the peak number
of retries that reached the tool in one slot, against the cap (capped peak / cap <= 1.00
means the storm never made the rate limit worse than the cap), and the same peak without
the budget.
"""

from __future__ import annotations

import sqlite3
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Annotated, Any

from langchain_core.messages import HumanMessage
from langchain_core.tools import InjectedToolCallId, tool
from langgraph.graph import START, StateGraph
from langgraph.prebuilt import tools_condition

from agent_guards import ToolCallGuard
from agent_guards.retry_router import (
    Backoff,
    RetryBudget,
    RetryRouterPolicy,
    RetryState,
    TransientToolError,
    add_retry_router,
)
from agent_guards.testing import ScriptedChatModel, tool_call_message
from agent_guards.tool_guard import annotate_tool

CALLERS = 50
CAP = 20  # retries per second for the whole storm
POLICY = RetryRouterPolicy(backoff=Backoff(base_delay=0.02, max_delay=0.2, max_attempts=6))


class _Storm:
    """The tool, and when each execution that was a retry reached it."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.retries: list[float] = []
        self.seen: set[str] = set()

    def tool(self) -> Any:
        @tool
        def quote(symbol: str, call_id: Annotated[str, InjectedToolCallId]) -> str:
            """Latest quote (always rate-limited here)."""
            with self.lock:  # a retry re-runs the same call id
                if call_id in self.seen:
                    self.retries.append(time.time())
                self.seen.add(call_id)
            raise TransientToolError("429 Too Many Requests", status_code=429)

        return annotate_tool(quote, read_only=True)


def _graph(storm: _Storm, store: Any, budget: RetryBudget | None) -> Any:
    def reply(messages: list[Any]) -> Any:  # a new call per run, then give up
        last = messages[-1]
        return tool_call_message("quote", {"symbol": "X"}) if last.type == "human" else "gave up"

    model = ScriptedChatModel(script=[reply], repeat_last=True)
    guard = ToolCallGuard(retry=POLICY, retry_budget=budget, loop=None, log_decisions=False)
    builder = StateGraph(RetryState)
    builder.add_node("model", lambda s: {"messages": [model.invoke(s["messages"][-1:])]})
    builder.add_node("tools", guard.tool_node([storm.tool()]))
    builder.add_edge(START, "model")
    builder.add_conditional_edges("model", tools_condition)
    add_retry_router(builder, "tools", model="model", tools="tools", policy=POLICY)
    return builder.compile(store=store)


def _storm(store: Any, budget: RetryBudget | None, seconds: float) -> Counter[int]:
    storm = _Storm()
    graph = _graph(storm, store, budget)
    deadline = time.time() + seconds

    def caller(n: int) -> None:
        run = 0
        while time.time() < deadline:
            graph.invoke({"messages": [HumanMessage("quote X")]},
                         {"configurable": {"thread_id": f"c{n}-{run}"}, "recursion_limit": 40})  # fmt: skip
            run += 1

    threads = [threading.Thread(target=caller, args=(n,)) for n in range(CALLERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return Counter(int(t) for t in storm.retries)  # retries per one-second slot


def run(quick: bool = False) -> list[dict[str, Any]]:
    seconds = 2.5 if quick else 6.0
    with tempfile.TemporaryDirectory() as tmp:
        from langgraph.store.sqlite import SqliteStore

        conn = sqlite3.connect(str(Path(tmp) / "store.sqlite"), check_same_thread=False,
                               isolation_level=None)  # fmt: skip
        conn.execute("PRAGMA journal_mode=WAL")
        store = SqliteStore(conn)
        store.setup()
        free = _storm(store, None, seconds)
        capped = _storm(store, RetryBudget(max_retries=CAP, per=1.0), seconds)
        conn.close()

    # whole slots only: the first and last second of a storm are partial
    def peak(slots: Counter[int]) -> int:
        inner = sorted(slots)[1:-1] or sorted(slots)
        return max((slots[s] for s in inner), default=0)

    free_peak, capped_peak = peak(free), peak(capped)
    return [
        {
            "name": f"retry storm, {CALLERS} callers on one 429 tool: peak retries/s with the "
            f"retry budget / cap ({CAP}/s)",
            "value": round(capped_peak / CAP, 2),
            "unit": "x",
            "note": f"{capped_peak} retries/s with RetryBudget(max_retries={CAP}, per=1s) vs "
            f"{free_peak} retries/s without it",
        },
        {
            "name": f"retry storm, {CALLERS} callers on one 429 tool: peak retries/s without "
            "a cap / with it",
            "value": round(free_peak / max(1, capped_peak), 2),
            "unit": "x",
            "note": "every caller retrying on its own schedule, against the shared budget",
        },
    ]
