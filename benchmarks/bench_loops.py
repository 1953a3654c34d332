"""loop_check: detect_loop cost vs history length, and what a loop costs with and without it.

1. ``detect_loop`` on histories of 10, 100, 1,000 and 10,000 messages (distinct calls, so
   no early exit: the whole window is read). It reads a bounded tail (``window`` actions),
   so the cost stays near-constant; the 10k/100 ratio shows it.
2. The same looping script (a model that repeats one tool call forever) run twice:
   guarded (ToolCallGuard + loop_check) and unguarded (plain ``ToolNode`` +
   ``tools_condition``) with an explicit ``recursion_limit=500``, counting model calls and
   tool executions until the run stops. The unguarded count at LangGraph's default limit
   (10007) is extrapolated linearly from the measured run (2 super-steps per loop turn);
   that row says so in its note.
"""

from __future__ import annotations

import time
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.errors import GraphRecursionError
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

from agent_guards import ToolCallGuard
from agent_guards.core.history import _result_digest
from agent_guards.loop_check import LoopState, add_loop_check, detect_loop
from agent_guards.testing import ScriptedChatModel, tool_call_message
from benchmarks._timing import median_us

SIZES = (10, 100, 1_000, 10_000)
UNGUARDED_LIMIT = 500
DEFAULT_LIMIT = 10_007


def _history(n: int) -> list[BaseMessage]:
    out: list[BaseMessage] = [HumanMessage("compare the policies")]
    i = 0
    while len(out) < n:
        out.append(
            AIMessage(
                content="",
                tool_calls=[{"name": "search", "args": {"q": f"topic {i}"}, "id": f"c{i}"}],
            )
        )
        out.append(
            ToolMessage(f"result {i}: " + "policy text " * 20, tool_call_id=f"c{i}", name="search")
        )
        i += 1
    return out[:n]


def _looping_model() -> ScriptedChatModel:
    return ScriptedChatModel(
        script=[tool_call_message("search", {"q": "review limit"})], repeat_last=True
    )


def _search(counter: list[int]) -> Any:
    @tool
    def search(q: str) -> str:
        """Search."""
        counter.append(1)
        return "Reviews start above 500k (section 4.2)."

    return search


def _run_loop(guarded: bool) -> tuple[int, int, float, bool]:
    """(model calls, tool executions, seconds, ended_by_recursion_error)."""
    model, executed = _looping_model(), []
    builder = StateGraph(LoopState if guarded else MessagesState)
    builder.add_node("model", lambda s: {"messages": [model.invoke(s["messages"])]})
    tools = _search(executed)
    builder.add_node("tools", ToolCallGuard().tool_node([tools]) if guarded else ToolNode([tools]))
    builder.add_edge(START, "model")
    builder.add_conditional_edges("model", tools_condition)
    if guarded:
        add_loop_check(builder, "tools", continue_to="model")
    else:
        builder.add_edge("tools", "model")
    graph = builder.compile()
    start = time.perf_counter()
    hit_limit = False
    try:
        graph.invoke({"messages": [HumanMessage("limit?")]}, {"recursion_limit": UNGUARDED_LIMIT})
    except GraphRecursionError:
        hit_limit = True
    return len(model.calls), len(executed), time.perf_counter() - start, hit_limit


def run(quick: bool = False) -> list[dict[str, Any]]:
    repeats, inner = (3, 20) if quick else (7, 200)
    rows: list[dict[str, Any]] = []
    cost: dict[int, float] = {}
    for n in SIZES:
        history = _history(n)
        cost[n] = median_us(lambda h=history: detect_loop(h), calls=inner, repeats=repeats)  # type: ignore[misc]
        rows.append(
            {
                "name": f"detect_loop on {n:,} messages",
                "value": round(cost[n], 1),
                "unit": "us",
                "note": "distinct calls: full window (50 actions) read; results memoized",
            }
        )
    big = _history(10_000)

    def cold() -> None:
        _result_digest.cache_clear()
        detect_loop(big)

    rows.append(
        {
            "name": "detect_loop on 10,000 messages, cold",
            "value": round(median_us(cold, calls=inner, repeats=repeats), 1),
            "unit": "us",
            "note": "result-normalization memo cleared before each call",
        }
    )
    rows.append(
        {
            "name": "detect_loop cost 10k / 100 messages",
            "value": round(cost[10_000] / cost[100], 2),
            "unit": "x",
            "note": "same run; ~1 means a bounded window",
        }
    )
    rows.append(
        {
            "name": "detect_loop cost 10k / 10 messages",
            "value": round(cost[10_000] / cost[10], 2),
            "unit": "x",
            "note": "10 messages hold only 4 actions",
        }
    )

    g_calls, g_exec, g_secs, g_limit = _run_loop(guarded=True)
    u_calls, u_exec, u_secs, u_limit = _run_loop(guarded=False)
    assert not g_limit and u_limit, "the guarded run must stop by itself; the unguarded one cannot"
    per_turn = u_secs / max(u_calls, 1)
    extrapolated = u_calls * DEFAULT_LIMIT / UNGUARDED_LIMIT
    rows += [
        {
            "name": "looping script, guarded: model calls until stop",
            "value": g_calls,
            "unit": "calls",
            "note": f"{g_exec} tool execution(s); stopped by loop_check",
        },
        {
            "name": f"looping script, unguarded: model calls (limit {UNGUARDED_LIMIT})",
            "value": u_calls,
            "unit": "calls",
            "note": f"{u_exec} tool executions; ended by GraphRecursionError",
        },
        {
            "name": f"looping script, unguarded: model calls at default limit {DEFAULT_LIMIT}",
            "value": round(extrapolated),
            "unit": "calls",
            "note": f"extrapolated linearly from the limit-{UNGUARDED_LIMIT} run (2 super-steps per turn)",
        },
        {
            "name": "model calls saved: unguarded (default limit) / guarded",
            "value": round(extrapolated / g_calls, 1),
            "unit": "x",
            "note": "extrapolated unguarded count",
        },
        {
            "name": "looping script, unguarded: wall time per loop turn",
            "value": round(per_turn * 1e6, 1),
            "unit": "us",
            "note": "scripted model, no checkpointer",
        },
        {
            "name": "looping script, guarded: wall time until stop",
            "value": round(g_secs * 1e6, 1),
            "unit": "us",
            "note": "scripted model, no checkpointer",
        },
    ]
    return rows


if __name__ == "__main__":  # pragma: no cover
    for row in run():
        print(row)
