"""Built-in demo scenarios: scripted models and tools that reproduce the seed traces.

``agent-guards demo`` (``make demo``) runs them on the embedded default: a SQLite file
under ``.agent_guards/``, a scripted chat model, no network, no keys.
"""

from __future__ import annotations

import argparse
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.errors import GraphRecursionError
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.graph.state import CompiledStateGraph

from agent_guards.budget import Budget, recursion_limit_for
from agent_guards.testing import ScriptedChatModel, tool_call_message
from agent_guards.types import GuardDecision, GuardState, Verdict


class LoopState(MessagesState, GuardState):
    """Messages plus the guard channels (guard_log, usage)."""


@tool
def search(query: str) -> str:
    """Search the knowledge base."""
    return f"3 results for {query!r}"


def build_tool_loop(
    model: Any, *, budget: Budget | None, checkpointer: Any = None
) -> CompiledStateGraph[Any, Any, Any, Any]:
    """model -> tools -> model ..., with an optional budget check on the edge."""

    def agent(state: LoopState) -> dict[str, Any]:
        reply = model.invoke(state["messages"])
        return {"messages": [reply], "usage": {"model_calls": 1, "steps": 1}}

    def tools(state: LoopState) -> dict[str, Any]:
        calls = state["messages"][-1].tool_calls  # type: ignore[union-attr]
        results = [ToolMessage(search.invoke(c["args"]), tool_call_id=c["id"]) for c in calls]
        return {"messages": results, "usage": {"tool_calls": len(calls)}}

    def stop(state: LoopState) -> dict[str, Any]:
        reason = budget.check(state) if budget else None
        decision = GuardDecision(
            guard="budget",
            verdict=Verdict.STOP,
            reason=reason.reason if reason else "stop",
            detail=str(reason),
            policy="Budget@1",
        )
        note = AIMessage(f"Stopped: {reason}. Partial result: what the searches returned so far.")
        return {"messages": [note], "guard_log": [decision]}

    def route(state: LoopState) -> str:
        last = state["messages"][-1]
        if not isinstance(last, AIMessage) or not last.tool_calls:
            return END
        if budget is not None and budget.check(state) is not None:
            return "stop"
        return "tools"

    builder = StateGraph(LoopState)
    builder.add_node("agent", agent)
    builder.add_node("tools", tools)
    builder.add_node("stop", stop)
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", route, ["tools", "stop", END])
    builder.add_edge("tools", "agent")
    builder.add_edge("stop", END)
    return builder.compile(checkpointer=checkpointer)


@dataclass
class Outcome:
    name: str
    steps: int
    model_calls: int
    tool_calls: int
    ended: str
    decisions: list[GuardDecision]


def looping_model() -> ScriptedChatModel:
    return ScriptedChatModel(
        script=[tool_call_message("search", {"query": "q3 revenue"})], repeat_last=True
    )


def run_budget_loop(checkpointer: Any) -> Outcome:
    budget = Budget(max_steps=20, max_tool_calls=3)
    graph = build_tool_loop(looping_model(), budget=budget, checkpointer=checkpointer)
    config = {
        "configurable": {"thread_id": f"budget-loop-{time.time_ns()}"},
        "recursion_limit": recursion_limit_for(budget, nodes_per_step=2),
    }
    state = graph.invoke({"messages": [("user", "How did Q3 revenue change?")]}, config)
    usage = state["usage"]
    return Outcome(
        "budget_loop",
        usage.get("steps", 0),
        usage.get("model_calls", 0),
        usage.get("tool_calls", 0),
        "stopped by budget",
        state["guard_log"],
    )


LANGGRAPH_DEFAULT_RECURSION_LIMIT = 10_007
BASELINE_MEASURED_STEPS = 200


def run_unguarded_loop() -> Outcome:
    """The same looping script with no guard: it only ends at ``recursion_limit``.

    Running all 10,007 super-steps takes ~20 s (the message list grows every step), so the
    baseline runs the first 200 steps for real, checks that it never stopped on its own,
    and scales the measured cost per step to LangGraph's default limit.
    """
    model = looping_model()
    graph = build_tool_loop(model, budget=None)
    try:
        graph.invoke(
            {"messages": [("user", "How did Q3 revenue change?")]},
            {"recursion_limit": BASELINE_MEASURED_STEPS},
        )
        return Outcome("unguarded", 0, len(model.calls), len(model.calls), "finished", [])
    except GraphRecursionError:
        pass
    scale = LANGGRAPH_DEFAULT_RECURSION_LIMIT / BASELINE_MEASURED_STEPS
    calls = round(len(model.calls) * scale)
    return Outcome(
        "unguarded",
        LANGGRAPH_DEFAULT_RECURSION_LIMIT,
        calls,
        calls,
        f"GraphRecursionError (measured {len(model.calls)} model calls in "
        f"{BASELINE_MEASURED_STEPS} steps, scaled to the default limit)",
        [],
    )


def _print(outcome: Outcome) -> None:
    print(
        f"  {outcome.name}: {outcome.ended}; steps={outcome.steps} "
        f"model_calls={outcome.model_calls} tool_calls={outcome.tool_calls}"
    )
    for d in outcome.decisions:
        print(f"    [{d.guard}] {d.verdict.value} ({d.reason}) {d.detail}")


SCENARIOS: dict[str, Callable[[Any], Outcome]] = {"budget_loop": run_budget_loop}


def open_sqlite(path: str) -> Any:
    from langgraph.checkpoint.sqlite import SqliteSaver

    Path(path).parent.mkdir(parents=True, exist_ok=True)
    return SqliteSaver(sqlite3.connect(path, check_same_thread=False))


def demo_main(args: argparse.Namespace) -> int:
    """``agent-guards demo``: run the scenarios and print their decisions."""
    if args.list:
        print("\n".join(SCENARIOS))
        return 0
    names = args.scenario or list(SCENARIOS)
    unknown = [n for n in names if n not in SCENARIOS]
    if unknown:
        raise SystemExit(f"unknown scenario(s) {unknown}; allowed: {', '.join(SCENARIOS)}")
    checkpointer = open_sqlite(args.db)
    print(f"agent-guards demo (checkpoints: {args.db}, scripted model)")
    for name in names:
        print(f"\n== {name}")
        _print(SCENARIOS[name](checkpointer))
    if not args.no_baseline:
        print("\n== without guards (LangGraph's default recursion_limit only)")
        _print(run_unguarded_loop())
    return 0
