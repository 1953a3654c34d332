"""The guard channels inside real graphs: fan-out, resume, bounds, serialization, interrupts."""

from __future__ import annotations

import json
import sqlite3
import warnings
from pathlib import Path
from typing import Annotated, Any

import pytest
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.errors import GraphInterrupt
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.types import Command, Send, interrupt

from agent_guards.core import GuardDecision, GuardState, InvalidInputError, Verdict, keep_last
from agent_guards.graph import guarded, invalid_input, runnable, stamp
from agent_guards.serde import delta_log


class State(MessagesState, GuardState):
    pass


def _sqlite(path: Path) -> SqliteSaver:
    return SqliteSaver(sqlite3.connect(str(path), check_same_thread=False))


def fanout_graph(branches: int, checkpointer: Any = None) -> Any:
    def start(state: State) -> dict[str, Any]:
        return {"usage": {"steps": 1, "started_at": 100.0}}

    def fan(state: State) -> list[Send]:
        return [Send("work", {"i": i}) for i in range(branches)]

    def work(arg: dict[str, int]) -> dict[str, Any]:
        return {"usage": {"tool_calls": 1, "tokens": 10 + arg["i"], "started_at": 200.0 + arg["i"]}}

    builder = StateGraph(State)
    builder.add_node("start", start)
    builder.add_node("work", work)
    builder.add_edge(START, "start")
    builder.add_conditional_edges("start", fan, ["work"])
    builder.add_edge("work", END)
    return builder.compile(checkpointer=checkpointer)


@pytest.mark.parametrize("branches", [1, 5, 17])
def test_parallel_branches_never_lose_counts(branches: int) -> None:
    out = fanout_graph(branches).invoke({"messages": []})
    assert out["usage"] == {
        "steps": 1,
        "started_at": 100.0,
        "tool_calls": branches,
        "tokens": sum(10 + i for i in range(branches)),
    }


def test_counts_survive_a_resume_from_sqlite(tmp_path: Path) -> None:
    """Counts accumulate across invocations and a process restart: no fresh quota."""
    db = tmp_path / "cp.sqlite"
    cfg: RunnableConfig = {"configurable": {"thread_id": "t1"}}
    fanout_graph(3, _sqlite(db)).invoke({"messages": []}, cfg)
    # a new saver on the same file, as after a crash
    out = fanout_graph(2, _sqlite(db)).invoke({"messages": []}, cfg)
    assert out["usage"]["tool_calls"] == 5
    assert out["usage"]["steps"] == 2
    assert out["usage"]["started_at"] == 100.0


def test_guard_log_stays_bounded_in_a_long_run() -> None:
    def tick(state: State) -> dict[str, Any]:
        n = state.get("usage", {}).get("steps", 0)
        d = GuardDecision(guard="tick", verdict=Verdict.CONTINUE, reason="tick", data={"n": n})
        return {"guard_log": [d], "usage": {"steps": 1}}

    def again(state: State) -> str:
        return "tick" if state["usage"]["steps"] < 450 else END

    builder = StateGraph(State)
    builder.add_node("tick", tick)
    builder.add_edge(START, "tick")
    builder.add_conditional_edges("tick", again, ["tick", END])
    out = builder.compile().invoke({"messages": []}, {"recursion_limit": 1000})
    assert len(out["guard_log"]) == 200
    assert [d.data["n"] for d in out["guard_log"]] == list(range(250, 450))


def test_every_guard_value_round_trips_sqlite_strict(tmp_path: Path) -> None:
    decision = GuardDecision(
        guard="evidence_resolve",
        verdict=Verdict.ANSWER,
        reason="newer_version",
        detail="policy_2026 supersedes policy_2024",
        selected_ids=("d_new",),
        conflicting_ids=("d_old",),
        dropped_ids=("faq",),
        policy="EvidencePolicy@1",
        step=2,
        at="2026-01-01T00:00:00+00:00",
        data={"value": "50w", "values": {"finance": 1.5}, "nested": [1, "a", None]},
    )

    def node(state: State) -> dict[str, Any]:
        return {"guard_log": [decision], "usage": {"steps": 1, "tokens": 42, "started_at": 1.5}}

    builder = StateGraph(State)
    builder.add_node("node", node)
    builder.add_edge(START, "node")
    builder.add_edge("node", END)
    cfg: RunnableConfig = {"configurable": {"thread_id": "strict"}}
    db = tmp_path / "strict.sqlite"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        builder.compile(checkpointer=_sqlite(db)).invoke({"messages": []}, cfg)
        # read back through a fresh saver: nothing cached in memory
        restored = builder.compile(checkpointer=_sqlite(db)).get_state(cfg).values
    [back] = restored["guard_log"]
    assert type(back) is GuardDecision
    assert back.verdict is Verdict.ANSWER
    assert back == decision and back.at == decision.at
    assert restored["usage"] == {"steps": 1, "tokens": 42, "started_at": 1.5}


def _interrupting_adapter() -> Any:
    """A guard adapter built like the real ones (guarded + runnable) that asks a human."""

    def core(state: State, config: RunnableConfig) -> dict[str, Any]:
        answer = interrupt({"question": "approve?"})
        d = GuardDecision(guard="approval", verdict=Verdict.EXECUTE, reason=str(answer))
        return {"guard_log": [stamp(d, config)]}

    def on_invalid(err: InvalidInputError) -> dict[str, Any]:
        return {"guard_log": [invalid_input("approval", err)]}

    return runnable("approval", guarded(core, on_invalid))


@pytest.mark.parametrize("use_async", [False, True])
async def test_interrupt_passes_through_a_guard_adapter(use_async: bool) -> None:
    builder = StateGraph(State)
    builder.add_node("approval", _interrupting_adapter())
    builder.add_edge(START, "approval")
    builder.add_edge("approval", END)
    graph = builder.compile(checkpointer=InMemorySaver())
    cfg: RunnableConfig = {"configurable": {"thread_id": f"i-{use_async}"}}
    if use_async:
        first = await graph.ainvoke({"messages": []}, cfg)
    else:
        first = graph.invoke({"messages": []}, cfg)
    assert first["__interrupt__"][0].value == {"question": "approve?"}
    assert not first.get("guard_log"), "the interrupt must not be turned into a decision"
    done = graph.invoke(Command(resume="yes"), cfg)
    assert done["guard_log"][-1].reason == "yes"


def test_guarded_reraises_interrupts_and_converts_bad_input() -> None:
    def raises_interrupt(*_: Any) -> None:
        raise GraphInterrupt(())

    def raises_invalid(*_: Any) -> None:
        raise InvalidInputError("not a date", item="doc-1", field="updated_at")

    def on_invalid(err: InvalidInputError) -> GuardDecision:
        return invalid_input("evidence_resolve", err)

    with pytest.raises(GraphInterrupt):
        guarded(raises_interrupt, on_invalid)({}, {})
    decision = guarded(raises_invalid, on_invalid)({}, {})
    assert decision.reason == "invalid_input"
    assert decision.dropped_ids == ("doc-1",)
    assert decision.data["field"] == "updated_at"
    assert "item 'doc-1' field 'updated_at': not a date" in decision.detail


class DeltaState(MessagesState):
    guard_log: Annotated[list[GuardDecision], delta_log(50, snapshot_frequency=25)]
    n: int


def _ticking(limit: int) -> Any:
    def tick(state: DeltaState) -> dict[str, Any]:
        n = state.get("n", 0) + 1
        d = GuardDecision(guard="tick", verdict=Verdict.CONTINUE, reason="tick", data={"n": n})
        return {"n": n, "guard_log": [d]}

    builder = StateGraph(DeltaState)
    builder.add_node("tick", tick)
    builder.add_edge(START, "tick")
    builder.add_conditional_edges(
        "tick", lambda s: "tick" if s["n"] < limit else END, ["tick", END]
    )
    return builder


def test_delta_log_keeps_the_window_and_writes_only_deltas(tmp_path: Path) -> None:
    db = tmp_path / "delta.sqlite"
    graph = _ticking(300).compile(checkpointer=_sqlite(db))
    cfg: RunnableConfig = {"configurable": {"thread_id": "d"}, "recursion_limit": 1000}
    out = graph.invoke({"messages": []}, cfg)
    assert [d.data["n"] for d in out["guard_log"]] == list(range(251, 301))
    # time travel reconstructs the window as it was at that step
    at_100 = next(s for s in graph.get_state_history(cfg) if s.metadata["step"] == 100)
    assert [d.data["n"] for d in at_100.values["guard_log"]] == list(range(51, 101))
    # checkpoints between snapshots hold no copy of the log: step 290 weighs what step 20 does
    conn = sqlite3.connect(str(db))
    sizes = {
        json.loads(meta)["step"]: len(blob)
        for blob, meta in conn.execute("SELECT checkpoint, metadata FROM checkpoints")
    }
    assert sizes[290] <= sizes[20] + 64
    assert sizes[290] < 2000


def test_delta_log_equals_keep_last_on_every_batching() -> None:
    channel = delta_log(3)
    reduce = keep_last(3)
    batches = [[["a"]], [["b"], ["c", "d"]], [], [["e"]]]
    state: list[str] = []
    whole: list[str] = []
    for batch in batches:
        state = channel.reducer(state, batch)
        for update in batch:
            whole = reduce(whole, update)
    assert state == whole == ["c", "d", "e"]
    assert channel.reducer([], [u for b in batches for u in b]) == whole
