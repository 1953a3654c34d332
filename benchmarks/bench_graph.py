"""The reference graph: what the guards cost per run, and what a checkpoint weighs.

1. Guard overhead: the same scripted plan (one tool call per step) on the guarded graph and
   on the same graph built with ``Policies(guards=False)``, about 200 super-steps each, on
   an InMemorySaver; the median of the ratios of many on/off pairs run back to back, and
   the middle half of them (how far one pair strays). In the same rounds, the guarded
   graph with every tool turn in ToolNode's thread pool, as the unguarded graph runs them:
   the guards' cost without what the tools node saves.
2. Checkpoint bytes per step on SQLite at super-step 10, 100 and 1000 of one long run:
   the serialized checkpoint (every channel, as SqliteSaver stores it) and the part the
   guard channels take. Flat means the run's length does not make each step heavier.
3. A large tool result (10 MB; 1 MB with ``--quick``) in one step of a plan, on SQLite with
   a SqliteStore: how much the checkpoint file grows per byte of the result.
4. Where the guarded run's extra time goes: the CPU time each guard takes per call, on
   the thread that runs it, over the same plan as 1. And what the guarded tools node saves
   apart from its guard: it runs a turn of one call on its own thread, where ToolNode
   starts a thread pool every turn (the same no-op call through each, no guard).
5. The overhead of 1 counted in instructions (valgrind's cachegrind, when installed): what
   the machine's load and speed do not move. Each variant runs in two processes, once and
   five times after a warm-up run, every graph built before; the difference is five runs
   less one, so start-up, imports and building are no run's cost.
6. Model calls until the run stops, guarded vs unguarded, for the looping scenarios.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import json
import os
import re
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode
from langgraph.store.sqlite import SqliteStore

from agent_guards import Budget, ToolCallGuard, guard_serializer
from agent_guards.context_guard.graph import ContextGuardNode
from agent_guards.graph import GuardLambda
from agent_guards.graphs.plan_execute import Policies, build_graph
from agent_guards.graphs.scenarios import SCENARIOS, RoleScript, run_baseline, run_scenario
from agent_guards.testing import tool_call_message
from agent_guards.tool_guard.node import GuardedToolNode
from benchmarks.bench_ledger import compare, noop, one_call_runner

GUARD_CHANNELS = (
    "guard_log",
    "usage",
    "plans",
    "evidence",
    "evidence_verdict",
    "memory_verdict",
    "goal",
    "step_messages",
    "context_pins",
    "context_pinned_ids",
    "context_tally",
    "outcome",
)


@tool(response_format="content_and_artifact")
def lookup(i: int) -> tuple[str, list[dict[str, Any]]]:
    """Look up record i."""
    return f"record {i % 5}", [
        {"id": f"rec_{i % 5}", "claim_key": "records", "value": "ok", "source_type": "official"}
    ]


def _agent_reply(messages: list[BaseMessage]) -> Any:
    found = re.search(r"Step s(\d+):", "\n".join(str(m.content) for m in messages))
    return tool_call_message("lookup", {"i": int(found.group(1)) if found else 0})


def long_plan(steps: int) -> RoleScript:
    """A plan of ``steps`` steps, each one tool call then "done"; review always continues."""
    plan = {
        "steps": [
            {
                "id": f"s{i}",
                "description": f"look up record {i}",
                "tool": "lookup",
                "args": {"i": i},
            }
            for i in range(1, steps + 1)
        ],
        "reason": "bench",
    }
    return RoleScript(
        parse_goal=[json.dumps({"intent": "audit", "dimensions": ["records"]})],
        plan=[json.dumps(plan)],
        agent={"*": [_agent_reply, "done"]},
        review=[json.dumps({"action": "continue"})],
    )


def _policies(guards: bool, steps: int) -> Policies:
    budget = Budget(max_steps=steps * 10, max_tool_calls=steps * 2, max_model_calls=steps * 4)
    return Policies(guards=guards, budget=budget)


def _graph(guards: bool, plan_steps: int, checkpointer: Any = None) -> Any:
    return build_graph(
        long_plan(plan_steps).model(),
        [lookup],
        policies=_policies(guards, plan_steps),
        checkpointer=checkpointer,
    )


def _run(guards: bool, plan_steps: int, checkpointer: Any = None, thread: str = "b") -> int:
    return _stream(_graph(guards, plan_steps, checkpointer), thread)


def _stream(graph: Any, thread: str) -> int:
    """Run the plan on ``graph``; the number of super-steps it took."""
    config: dict[str, Any] = {
        "recursion_limit": 100_000,
        "configurable": {"thread_id": thread, "agent_guards_now": "2026-06-01"},
    }
    steps = 0
    for _ in graph.stream(
        {"messages": [("user", "audit the records")]}, config, stream_mode="updates"
    ):
        steps += 1
    return steps


def guard_overhead(quick: bool) -> list[dict[str, Any]]:
    plan_steps = 6 if quick else 22  # ~7 super-steps per plan step, guarded or not
    # the median of many: one pair swings by a fifth here, and a median of 21 moved from
    # 1.03x to 1.11x between runs on a loaded machine (61: 1.05x to 1.06x)
    pairs = 2 if quick else 61
    # "pooled": guards on, every tool turn in ToolNode's thread pool as the unguarded graph's
    # ToolNode runs it, so the ratio to "off" is what the guards alone cost
    variants = ("off", "on", "pooled")
    times: dict[str, list[float]] = {v: [] for v in variants}
    cpu: dict[str, list[float]] = {v: [] for v in variants}
    supersteps: dict[str, int] = {}
    for guards in (False, True):  # untimed: imports and one-time setup are no run's cost
        _run(guards, plan_steps, InMemorySaver(), thread=f"warm-{guards}")
    for r in range(pairs):
        # Each run is timed alone: the graph is built before the clock starts (building is
        # not a super-step), the garbage of the run before is collected first (not this
        # run's cost), and the order alternates (no variant always runs first or last).
        for variant in variants if r % 2 == 0 else variants[::-1]:
            graph = _graph(variant != "off", plan_steps, InMemorySaver())
            gc.collect()
            with _pool_every_turn() if variant == "pooled" else contextlib.nullcontext():
                start, start_cpu = time.perf_counter(), time.process_time()
                supersteps[variant] = _stream(graph, thread=f"{variant}-{r}")
                times[variant].append(time.perf_counter() - start)
                cpu[variant].append(time.process_time() - start_cpu)
    # The ratio of each pair (the two runs back to back), then the median of the pairs: the
    # machine's speed drifts from second to second, and a pair sees one speed for both.
    ratio = _paired(times["on"], times["off"])
    low, high = _middle_half(times["on"], times["off"])
    per_step = supersteps["off"] / supersteps["on"]
    cpu_ratio = _paired(cpu["on"], cpu["off"])
    on, off = statistics.median(times["on"]), statistics.median(times["off"])
    return [
        {
            "name": f"reference graph, guards on ({supersteps['on']} super-steps)",
            "value": round(on * 1e3, 1),
            "unit": "ms",
            "note": f"{plan_steps} plan steps, InMemorySaver, median of {pairs} (graph built "
            "before timing)",
        },
        {
            "name": f"reference graph, guards off ({supersteps['off']} super-steps)",
            "value": round(off * 1e3, 1),
            "unit": "ms",
            "note": "Policies(guards=False), same script",
        },
        {
            "name": "guard overhead per run: guards on / off",
            "value": round(ratio, 2),
            "unit": "x",
            "target": "<= 1.20",
            "note": f"median of {pairs} on/off pairs run back to back (the middle half of "
            f"them {low:.2f}x to {high:.2f}x); includes the guard nodes (planner_gate, "
            "evidence_resolve; context_guard runs inside agent)",
        },
        {
            "name": "guard overhead per super-step: on / off",
            "value": round(ratio * per_step, 2),
            "unit": "x",
            "target": "<= 1.05",
            "note": "time per super-step, guarded vs unguarded (the per-run ratio times "
            f"the super-step counts' ratio; the middle half of the pairs {low * per_step:.2f}x "
            f"to {high * per_step:.2f}x)",
        },
        {
            "name": "guard overhead per run, CPU time: guards on / off",
            "value": round(cpu_ratio, 2),
            "unit": "x",
            "note": "process CPU time of the same pairs (every thread)",
        },
        {
            "name": "guard overhead per run, every tool turn in ToolNode's pool: on / off",
            "value": round(_paired(times["pooled"], times["off"]), 2),
            "unit": "x",
            "note": "the guarded run with its tools node's lone-call path off, timed in the "
            "same rounds: what the guards alone cost, without what the tools node saves",
        },
    ]


@contextlib.contextmanager
def _pool_every_turn() -> Iterator[None]:
    """The guarded tools node with every turn in ToolNode's thread pool: its lone-call path
    answers None ("not a lone call") while the block runs."""
    lone = GuardedToolNode.__dict__["_lone"]
    setattr(GuardedToolNode, "_lone", lambda self, *args: None)  # noqa: B010
    try:
        yield
    finally:
        setattr(GuardedToolNode, "_lone", lone)  # noqa: B010


def _ratios(first: list[float], second: list[float]) -> list[float]:
    """first / second, pair by pair (run ``i`` of each is one pair)."""
    return [a / b for a, b in zip(first, second, strict=True)]


def _paired(first: list[float], second: list[float]) -> float:
    """The median of first / second over the pairs."""
    return statistics.median(_ratios(first, second))


def _middle_half(first: list[float], second: list[float]) -> tuple[float, float]:
    """The first and third quartiles of first / second over the pairs: how far one pair's
    ratio strays from the median (the machine's speed moves between the pairs)."""
    low, _, high = statistics.quantiles(_ratios(first, second), n=4, method="inclusive")
    return low, high


# What each guard's CPU time is read from: (class, method) -> label. Methods run nested
# (the tool runs inside the guard's __call__, the tool calls inside the tools node), so
# a label is the time inside it, and the rows subtract what they say they exclude.
_PIECES = {
    (ContextGuardNode, "run"): "context",
    (ToolCallGuard, "__call__"): "tool guard",
    (ToolNode, "_execute_tool_sync"): "tool",
    (ToolCallGuard, "_claim"): "ledger",
    (ToolCallGuard, "_ledger_finish"): "ledger",
    (GuardedToolNode, "_func"): "tools node",
    (GuardedToolNode, "_lone"): "tool calls",  # a turn of one call (None for any other)
    (ToolNode, "_func"): "tool calls",  # any other turn, after _lone
}


@contextlib.contextmanager
def _cpu_by_piece() -> Iterator[tuple[dict[str, float], Counter[str]]]:
    """Thread CPU seconds and calls per label of ``_PIECES`` (and per ``GuardLambda`` node
    name) while the block runs; the methods are restored after. Graphs must be built inside
    the block: a node binds its function when it is built."""
    seconds: dict[str, float] = defaultdict(float)
    calls: Counter[str] = Counter()

    def timed(original: Any, label: Any) -> Any:
        @functools.wraps(original)  # LangGraph reads the signature (config, reader, ...)
        def method(*args: Any, **kwargs: Any) -> Any:
            name = label(args[0]) if callable(label) else label
            start = time.thread_time()
            try:
                return original(*args, **kwargs)
            finally:
                seconds[name] += time.thread_time() - start
                calls[name] += 1

        return method

    pieces: dict[tuple[type, str], Any] = {**_PIECES, (GuardLambda, "invoke"): lambda n: n.name}
    saved = {key: key[0].__dict__[key[1]] for key in pieces}
    try:
        for (owner, attr), label in pieces.items():
            setattr(owner, attr, timed(saved[owner, attr], label))
        yield seconds, calls
    finally:
        for (owner, attr), original in saved.items():
            setattr(owner, attr, original)


def guard_costs(quick: bool) -> list[dict[str, Any]]:
    """The CPU time per call of each guard in the guarded run of ``guard_overhead``."""
    plan_steps, runs = (6, 1) if quick else (22, 5)
    _run(True, plan_steps, InMemorySaver(), thread="warm-costs")
    with _cpu_by_piece() as (seconds, calls):
        for r in range(runs):
            _run(True, plan_steps, InMemorySaver(), thread=f"costs-{r}")
    per = defaultdict(float, {k: seconds[k] / max(calls[k], 1) * 1e6 for k in seconds})
    guard = (seconds["tool guard"] - seconds["tool"]) / max(calls["tool guard"], 1) * 1e6
    each = f"CPU time on the thread that runs it, mean of {runs} runs of {plan_steps} plan steps"
    return [
        {
            "name": "context_guard per model call (inside the agent node)",
            "value": round(per["context"], 1),
            "unit": "us",
            "note": f"{calls['context'] // runs} calls per run; {each}",
        },
        {
            "name": "ToolCallGuard per tool call, the tool's own run excluded",
            "value": round(guard, 1),
            "unit": "us",
            "note": f"of which the run ledger (kept in state here: no store) "
            f"{seconds['ledger'] / max(calls['tool guard'], 1) * 1e6:.0f} us; the tool itself "
            f"{per['tool']:.0f} us; on the tools node's thread (a turn of one call)",
        },
        {
            "name": "retry_router + loop_check route per tool turn (in the tools node)",
            "value": round(
                (seconds["tools node"] - seconds["tool calls"]) / max(calls["tools node"], 1) * 1e6,
                1,
            ),
            "unit": "us",
            "note": f"the route itself {per['retry_router']:.0f} us, on the state with the "
            "turn's writes applied to the channels it writes (a conditional edge would read a "
            "copy of every channel)",
        },
        {
            "name": "planner_gate per plan step",
            "value": round(per["planner_gate"], 1),
            "unit": "us",
            "note": f"{calls['planner_gate'] // runs} gate runs per run; {each}",
        },
    ]


def lone_turn(quick: bool) -> list[dict[str, Any]]:
    """A tools node's turn of one no-op call, no guard: the guarded tools node, which runs
    the call on its own thread, against LangGraph's ToolNode, which starts a pool for it."""
    graphs = []
    call = {"name": "noop", "args": {"i": 0}, "id": "c0"}
    for node in (GuardedToolNode([noop]), ToolNode([noop])):
        builder = StateGraph(MessagesState)
        builder.add_node("tools", node)
        builder.add_edge(START, "tools")
        graphs.append(builder.compile())
        answer = graphs[-1].invoke({"messages": [AIMessage("", tool_calls=[call])]})
        if answer["messages"][-1].content != "ok":  # the tool ran, not an error path
            raise RuntimeError(f"the no-op call failed: {answer['messages'][-1].content}")
    ratio, ours, theirs = compare(*map(one_call_runner, graphs), 20 if quick else 200)
    return [
        {
            "name": "tools node turn of one call, guarded node / ToolNode, no guard",
            "value": round(ratio, 2),
            "unit": "x",
            "note": f"{ours:.0f} us vs {theirs:.0f} us per turn: part of what the guarded run "
            "saves against ToolNode, apart from its guards (median of 15 rounds)",
        }
    ]


_IREFS = re.compile(r"I\s+refs:\s+([\d,]+)")


def guard_instructions(quick: bool) -> list[dict[str, Any]]:
    """Instructions per run of ``guard_overhead``'s plan, guards on and off, and per super-step."""
    valgrind = shutil.which("valgrind")
    name = "guard overhead per run, instructions: guards on / off"
    if valgrind is None:
        return [{"name": name, "value": 0, "unit": "skip", "note": "skipped: no valgrind here"}]
    plan_steps, many = (4, 2) if quick else (22, 5)
    # all four at once: a count does not depend on what else the machine runs
    counting = {
        (guards, runs): _counting(valgrind, guards, runs, plan_steps, built=many + 1)
        for guards in (True, False)
        for runs in (1, many)
    }
    counts: dict[tuple[bool, int], int] = {}
    supersteps: dict[bool, int] = {}
    for (guards, runs), process in counting.items():
        out, err = process.communicate()
        found = _IREFS.search(err)
        if process.returncode != 0 or found is None:
            raise RuntimeError(f"counting instructions failed ({process.args}):\n{err[-2000:]}")
        counts[guards, runs] = int(found.group(1).replace(",", ""))
        supersteps[guards] = int(out.split()[-1])
    per_run = {g: (counts[g, many] - counts[g, 1]) / (many - 1) for g in (True, False)}
    ratio = per_run[True] / per_run[False]
    return [
        {
            "name": name,
            "value": round(ratio, 3),
            "unit": "x",
            "note": f"{per_run[True] / 1e6:.0f}M vs {per_run[False] / 1e6:.0f}M instructions "
            f"per run of the {plan_steps}-step plan (valgrind cachegrind: {many} runs less 1 "
            "run, PYTHONHASHSEED=0); the time rows above carry the targets",
        },
        {
            "name": "guard overhead per super-step, instructions: guards on / off",
            "value": round(ratio * supersteps[False] / supersteps[True], 3),
            "unit": "x",
            "note": f"{supersteps[True]} vs {supersteps[False]} super-steps",
        },
    ]


def _counting(
    valgrind: str, guards: bool, runs: int, plan_steps: int, *, built: int
) -> subprocess.Popen[str]:
    """A process that runs the plan ``runs`` times under cachegrind (see ``_count_runs``)."""
    command = [valgrind, "--tool=cachegrind", "--cache-sim=no", f"--cachegrind-out-file={os.devnull}",
               sys.executable, "-m", "benchmarks.bench_graph", "--count",
               "on" if guards else "off", str(runs), str(plan_steps), str(built)]  # fmt: skip
    return subprocess.Popen(
        command,
        cwd=Path(__file__).resolve().parents[1],
        env={**os.environ, "PYTHONHASHSEED": "0", "LANGGRAPH_STRICT_MSGPACK": "true"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _count_runs(guards: bool, runs: int, plan_steps: int, built: int) -> int:
    """What ``_counting`` runs: ``built`` graphs built, a warm-up run on the first, then
    ``runs`` runs; the super-steps of a run. Both processes of a variant build as many."""
    sys.setswitchinterval(1000)  # valgrind runs one thread at a time: fewer hand-offs
    graphs = [_graph(guards, plan_steps, InMemorySaver()) for _ in range(built)]
    steps = _stream(graphs[0], "warm")
    for i, graph in enumerate(graphs[1 : runs + 1]):
        steps = _stream(graph, f"count-{i}")
    return steps


def _bytes_per_step(db: Path, thread: str) -> dict[int, int]:
    """Bytes SqliteSaver wrote for each super-step: the checkpoint row plus its writes."""
    conn = sqlite3.connect(str(db))
    writes = dict(
        conn.execute(
            "SELECT checkpoint_id, SUM(LENGTH(value)) FROM writes WHERE thread_id = ? GROUP BY checkpoint_id",
            (thread,),
        ).fetchall()
    )
    out: dict[int, int] = {}
    for checkpoint_id, checkpoint, metadata in conn.execute(
        "SELECT checkpoint_id, checkpoint, metadata FROM checkpoints WHERE thread_id = ?", (thread,)
    ):
        step = json.loads(metadata).get("step")
        if isinstance(step, int) and step >= 0:
            out[step] = len(checkpoint) + len(metadata) + int(writes.get(checkpoint_id) or 0)
    conn.close()
    return out


def checkpoint_growth(quick: bool) -> list[dict[str, Any]]:
    """Mean bytes written per super-step in a window of 10 steps ending at 10, 100, 1000."""
    at = (10, 100) if quick else (10, 100, 1000)
    plan_steps = 18 if quick else 150  # ~7 super-steps per plan step
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "cp.sqlite"
        conn = sqlite3.connect(str(db), check_same_thread=False)
        total = _run(True, plan_steps, SqliteSaver(conn, serde=guard_serializer()), thread="long")
        conn.close()
        per_step = _bytes_per_step(db, "long")
    mean = {s: statistics.mean(per_step[i] for i in range(s - 9, s + 1)) for s in at}
    rows = [
        {
            "name": f"bytes written per super-step around step {s} (SQLite)",
            "value": round(mean[s] / 1024, 1),
            "unit": "KB",
            "note": f"mean of steps {s - 9}-{s}; run of {total} super-steps, {plan_steps}-step plan",
        }
        for s in at
    ]
    rows.append(
        {
            "name": f"bytes per super-step, step {at[-1]} / step {at[0]}",
            "value": round(mean[at[-1]] / mean[at[0]], 2),
            "unit": "x",
            "target": "<= 1.10",
            "note": "~1 = flat; guard_log, plans and evidence are delta channels",
        }
    )
    return rows


def _big_lookup(size: int) -> Any:
    @tool("lookup", response_format="content_and_artifact")
    def big_lookup(i: int) -> tuple[str, list[dict[str, Any]]]:
        """Look up record i (record 2 is a large export)."""
        text = ("x" * 99 + "\n") * (size // 100) if i == 2 else f"record {i % 5}"
        return text, [{"id": f"rec_{i}", "claim_key": "records", "value": "ok"}]

    return big_lookup


def large_result(quick: bool) -> list[dict[str, Any]]:
    """SQLite file growth for one large tool result, over the result's size."""
    size = (1 if quick else 10) * 1024 * 1024
    with tempfile.TemporaryDirectory() as tmp:
        db, store_db = Path(tmp) / "cp.sqlite", Path(tmp) / "store.sqlite"
        conn = sqlite3.connect(str(db), check_same_thread=False)
        store_conn = sqlite3.connect(str(store_db), check_same_thread=False, isolation_level=None)
        store = SqliteStore(store_conn)
        store.setup()
        graph = build_graph(
            long_plan(4).model(),
            [_big_lookup(size)],
            policies=_policies(True, 4),
            checkpointer=SqliteSaver(conn, serde=guard_serializer()),
            store=store,
        )
        config: Any = {"configurable": {"thread_id": "big", "agent_guards_now": "2026-06-01"}}
        graph.invoke({"messages": [("user", "audit the records")]}, config)
        conn.close()
        store_conn.close()
        grown, archived = os.path.getsize(db), os.path.getsize(store_db)
    mb = size / 2**20
    return [
        {
            "name": f"large tool result ({mb:.0f} MB): SQLite checkpoint growth / size",
            "value": round(grown / size, 2),
            "unit": "x",
            "target": "<= 2.00",
            "note": f"checkpoint file {grown / 2**20:.1f} MB; archive (SqliteStore) {archived / 2**20:.1f} MB",
        }
    ]


def looping_scenarios(quick: bool) -> list[dict[str, Any]]:
    rows = []
    names = (
        ("duplicate_tool_call",)
        if quick
        else ("planner_loop", "duplicate_tool_call", "rate_limit_storm", "permission_denied")
    )
    for name in names:
        scenario = SCENARIOS[name]
        guarded = run_scenario(scenario, InMemorySaver(), None, thread_id=f"bench-{name}")
        unguarded = run_baseline(scenario)
        rows.append(
            {
                "name": f"{name}: model calls until stop, unguarded / guarded",
                "value": round(unguarded.model_calls / max(guarded.model_calls, 1), 1),
                "unit": "x",
                "note": f"{guarded.model_calls} vs {unguarded.model_calls} ({unguarded.ended})",
            }
        )
    return rows


def run(quick: bool = False) -> list[dict[str, Any]]:
    return [
        *guard_overhead(quick),
        *guard_costs(quick),
        *lone_turn(quick),
        *guard_instructions(quick),
        *checkpoint_growth(quick),
        *large_result(quick),
        *looping_scenarios(quick),
    ]


if __name__ == "__main__":
    if sys.argv[1:2] == ["--count"]:  # a child of guard_instructions
        on, runs, plan_steps, built = sys.argv[2] == "on", *map(int, sys.argv[3:6])
        print(_count_runs(on, runs, plan_steps, built))
    else:
        for row in run():
            print(row)
