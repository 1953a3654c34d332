"""Time travel that keeps the run's config: ``replay_config`` on a user's own graph.

A replay with ``snapshot.config`` alone runs without the run's ``configurable``: no pinned
clock (a memory valid on the run's day is expired today), no principal (the user's own
memory is out of scope). With ``replay_config(snapshot, run_config)`` every replay from
every checkpoint makes the run's decisions again.
"""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import HumanMessage, SystemMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.store.memory import InMemoryStore

from agent_guards import replay_config
from agent_guards.memory_resolve import (
    MemoryRecord,
    MemoryState,
    create_memory_resolve,
    format_memories,
    memory_namespace,
    save_memories,
)
from agent_guards.testing import ScriptedChatModel

ALICE = "user:alice"
RUN = {"configurable": {"thread_id": "t1", "agent_guards_now": "2026-04-01T00:00:00+00:00",
                        "principal": ALICE}}  # fmt: skip


class State(MessagesState, MemoryState):
    pass


def user_graph() -> Any:
    model = ScriptedChatModel(script=["ok"], repeat_last=True)

    def respond(state: State) -> dict[str, Any]:
        memories = format_memories(state["memory_verdict"])
        return {"messages": [model.invoke([SystemMessage(memories), *state["messages"]])]}

    store = InMemoryStore()
    pdf = MemoryRecord("m_pdf", "report_format", "pdf", scope=ALICE, created_at="2026-01-01",
                       valid_until="2026-06-01")  # fmt: skip
    save_memories(store, memory_namespace(ALICE), [pdf])
    builder = StateGraph(State)
    builder.add_node("memory_resolve", create_memory_resolve())
    builder.add_node("respond", respond)
    builder.add_edge(START, "memory_resolve")
    builder.add_edge("memory_resolve", "respond")
    builder.add_edge("respond", END)
    return builder.compile(checkpointer=InMemorySaver(), store=store)


def decisions(state: dict[str, Any]) -> list[tuple[str, str, str, tuple[str, ...]]]:
    return [(d.guard, d.verdict.value, d.reason, d.selected_ids) for d in state["guard_log"]]


def test_every_replay_with_the_run_config_makes_the_same_decisions() -> None:
    graph = user_graph()
    original = graph.invoke({"messages": [HumanMessage("send me the report")]}, RUN)
    assert decisions(original)[0][3] == ("m_pdf",)  # alice's memory, valid on the run's day
    points = [s for s in graph.get_state_history(RUN) if s.next]
    assert len(points) == 3
    for snapshot in points:
        replayed = graph.invoke(None, replay_config(snapshot, RUN))
        assert decisions(replayed) == decisions(original)
    bare = graph.invoke(None, points[-1].config)  # the ids only: today's clock, no principal
    assert decisions(bare) != decisions(original)


def test_a_fork_keeps_the_run_config() -> None:
    graph = user_graph()
    original = graph.invoke({"messages": [HumanMessage("send me the report")]}, RUN)
    before = next(s for s in graph.get_state_history(RUN) if s.next == ("memory_resolve",))
    fork = graph.update_state(before.config, {"messages": [HumanMessage("and a summary")]})
    forked = graph.invoke(None, replay_config(fork, RUN))
    assert decisions(forked)[-1][3] == decisions(original)[-1][3] == ("m_pdf",)


@pytest.mark.parametrize(
    ("point", "message"),
    [
        ({"configurable": {"thread_id": "t1"}}, "replay_config needs a checkpoint"),
        ({"configurable": {"thread_id": "t2", "checkpoint_id": "x"}}, "on thread 't2'"),
    ],
)
def test_a_wrong_point_is_refused_with_the_fix(point: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        replay_config(point, RUN)


def test_without_the_run_config_it_is_read_back_from_the_checkpoint() -> None:
    """LangGraph copies the run's configurable into each checkpoint's metadata: a replay
    from any snapshot alone gets the same clock and principal back."""
    graph = user_graph()
    original = graph.invoke({"messages": [HumanMessage("send me the report")]}, RUN)
    for snapshot in [s for s in graph.get_state_history(RUN) if s.next]:
        config = replay_config(snapshot)
        assert config["configurable"]["principal"] == ALICE
        assert decisions(graph.invoke(None, config)) == decisions(original)
    with pytest.raises(ValueError, match="needs a StateSnapshot"):
        replay_config({"configurable": {"thread_id": "t1", "checkpoint_id": "x"}})


USER_MODULE = """
from langchain_core.messages import SystemMessage
from langgraph.graph import END, START, MessagesState, StateGraph

from agent_guards.memory_resolve import MemoryState, create_memory_resolve, format_memories
from agent_guards.testing import ScriptedChatModel


class State(MessagesState, MemoryState):
    pass


def respond(state):
    model = ScriptedChatModel(script=["ok"], repeat_last=True)
    memories = format_memories(state["memory_verdict"])
    return {"messages": [model.invoke([SystemMessage(memories), *state["messages"]])]}


builder = StateGraph(State)
builder.add_node("memory_resolve", create_memory_resolve())
builder.add_node("respond", respond)
builder.add_edge(START, "memory_resolve")
builder.add_edge("memory_resolve", "respond")
builder.add_edge("respond", END)
graph = builder.compile()  # checkpointer-free, as langgraph.json wants it
"""


def test_history_and_replay_work_on_any_thread_of_any_graph(
    tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """``agent-guards history|replay --graph path.py:attr`` on a user's own graph and thread."""
    from agent_guards.cli import main
    from agent_guards.graphs.demo import load_graph
    from agent_guards.persistence import open_persistence

    (tmp_path / "mygraph.py").write_text(USER_MODULE)
    spec, db = f"{tmp_path / 'mygraph.py'}:graph", str(tmp_path / "runs.sqlite")
    with open_persistence(db) as (saver, store):
        pdf = MemoryRecord("m_pdf", "report_format", "pdf", scope=ALICE, valid_until="2026-06-01")
        save_memories(store, memory_namespace(ALICE), [pdf])
        graph = load_graph(spec, saver, store)
        graph.invoke({"messages": [HumanMessage("send me the report")]}, RUN)
        past = next(s for s in graph.get_state_history(RUN) if s.next == ("memory_resolve",))
    checkpoint = past.config["configurable"]["checkpoint_id"]
    assert main(["history", "t1", "--db", db, "--graph", spec]) == 0
    assert checkpoint in capsys.readouterr().out
    assert main(["replay", "t1", "--db", db, "--graph", spec, "--checkpoint", checkpoint]) == 0
    assert "identical to the original run" in capsys.readouterr().out
    with pytest.raises(SystemExit, match="pass --graph module:attr"):
        main(["history", "t1", "--db", db])


def _loop_module(body: str, tools_node: str) -> str:
    """A user's graph file: ``body`` defines the tools and a ``model`` node; a tools node
    (``tools_node``) with loop_check on its edge, compiled without a checkpointer."""
    return f"""
import uuid

from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.graph import START, StateGraph
from langgraph.prebuilt import tools_condition

from agent_guards import LoopState, ToolCallGuard, add_loop_check
from agent_guards.tool_guard import RunLedger, annotate_tool
{body}

builder = StateGraph(LoopState)
builder.add_node("model", model)
builder.add_node("tools", {tools_node})
builder.add_edge(START, "model")
builder.add_conditional_edges("model", tools_condition)
add_loop_check(builder, "tools", continue_to="model")
graph = builder.compile()
"""


FRESH_IDS_MODULE = _loop_module(
    """
@tool
def search(q: str) -> str:
    '''Search.'''
    return "Rates are 4 percent for every contract above the review threshold."


def model(state):
    # a real model: every reply gives its tool calls fresh ids
    call = {"name": "search", "args": {"q": "rates"}, "id": f"call-{uuid.uuid4().hex[:8]}"}
    return {"messages": [AIMessage("", tool_calls=[call])]}
""",
    "ToolCallGuard().tool_node([annotate_tool(search, read_only=True)])",
)


def test_replay_with_fresh_call_ids_is_identical(
    tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """Asked again, a model gives its calls new ids: the same decisions on them (reuse,
    nudge, stop, each naming the calls) are the same run, not a DIFFERENT one."""
    from agent_guards.cli import main
    from agent_guards.graphs.demo import load_graph
    from agent_guards.persistence import open_persistence

    (tmp_path / "fresh.py").write_text(FRESH_IDS_MODULE)
    spec, db = f"{tmp_path / 'fresh.py'}:graph", str(tmp_path / "runs.sqlite")
    with open_persistence(db) as (saver, store):
        graph = load_graph(spec, saver, store)
        out = graph.invoke({"messages": [HumanMessage("rates?")]}, RUN)
        assert [d.verdict.value for d in out["guard_log"]][-1] == "stop"
        first = list(graph.get_state_history(RUN))[-2]  # before the first model call
    checkpoint = first.config["configurable"]["checkpoint_id"]
    assert main(["replay", "t1", "--db", db, "--graph", spec, "--checkpoint", checkpoint]) == 0
    printed = capsys.readouterr().out
    assert "identical to the original run" in printed and "! " not in printed


WRITE_MODULE = _loop_module(
    """
@tool
def pay(invoice: int) -> str:
    '''Pay an invoice (a write).'''
    return f"invoice {invoice} paid"


def model(state):
    if any(isinstance(m, ToolMessage) for m in state["messages"]):
        return {"messages": [AIMessage("paid")]}
    call = {"name": "pay", "args": {"invoice": 7}, "id": "call-pay-7"}
    return {"messages": [AIMessage("", tool_calls=[call])]}
""",
    "ToolCallGuard(ledger=RunLedger()).tool_node([annotate_tool(pay)])",
)


def test_replay_of_a_run_with_a_write_is_identical_and_the_write_not_run_again(
    tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """The fork answers the completed payment from the run ledger (it is not paid twice):
    that answer is the replay's record of the original execution, not a new decision."""
    from agent_guards.cli import main
    from agent_guards.graphs.demo import load_graph
    from agent_guards.persistence import open_persistence
    from agent_guards.tool_guard import RunLedger

    path = tmp_path / "payments.py"
    path.write_text(WRITE_MODULE)
    spec, db = f"{path}:graph", str(tmp_path / "runs.sqlite")
    with open_persistence(db) as (saver, store):
        graph = load_graph(spec, saver, store)
        graph.invoke({"messages": [HumanMessage("pay invoice 7")]}, RUN)
        first = list(graph.get_state_history(RUN))[-2]
    checkpoint = first.config["configurable"]["checkpoint_id"]
    assert main(["replay", "t1", "--db", db, "--graph", spec, "--checkpoint", checkpoint]) == 0
    printed = capsys.readouterr().out
    assert "identical to the original run" in printed
    assert "1 completed call(s) answered from the run ledger" in printed
    with open_persistence(db) as (_, store):
        assert RunLedger().executions(store, "t1") == 1  # paid once, replay or not


def test_a_replay_that_would_pay_again_is_refused_unless_asked(
    tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """The run had no store, so its ledger is in state, and a checkpoint before the payment
    does not know it: a replay from there would pay again. The CLI says so and stops,
    unless ``--run-writes``."""
    from agent_guards.cli import main
    from agent_guards.graphs.demo import load_graph
    from agent_guards.persistence import open_persistence

    path = tmp_path / "payments.py"
    path.write_text(WRITE_MODULE)
    spec, db = f"{path}:graph", str(tmp_path / "runs.sqlite")
    with open_persistence(db) as (saver, _store):
        graph = load_graph(spec, saver, None)  # the user's own run: no store
        assert graph.store is None
        out = graph.invoke({"messages": [HumanMessage("pay invoice 7")]}, RUN)
        assert [e["status"] for e in out["run_ledger"].values()] == ["done"]
        first = list(graph.get_state_history(RUN))[-2]
    checkpoint = first.config["configurable"]["checkpoint_id"]
    argv = ["replay", "t1", "--db", db, "--graph", spec, "--checkpoint", checkpoint]
    with pytest.raises(SystemExit, match=r"would run again the writes .*: pay \(call-pay-7\)"):
        main(argv)
    assert main([*argv, "--run-writes"]) == 0
    assert "identical to the original run" in capsys.readouterr().out


REFERENCE_PAYMENT_MODULE = """
from agent_guards.graphs.plan_execute import build_graph
from tests.integration._reference import payment_scenario

S = payment_scenario()
graph = build_graph(S.script().model(), S.tools(), policies=S.policies)
"""


def test_a_replay_of_a_thread_that_ran_without_a_store_runs_without_one(
    tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """The reference graph ran without a store (its ledger in state, context_guard without
    an archive). The CLI replays it without the store it opens for other threads: on one,
    every context_guard decision differed by ``archive_available`` alone."""
    from langgraph.types import Command

    from agent_guards.cli import main
    from agent_guards.graphs.demo import load_graph
    from agent_guards.graphs.scenarios import scenario_config
    from agent_guards.persistence import open_persistence
    from tests.integration._reference import payment_scenario

    path = tmp_path / "reference_payment.py"
    path.write_text(REFERENCE_PAYMENT_MODULE)
    spec, db = f"{path}:graph", str(tmp_path / "runs.sqlite")
    scenario = payment_scenario()
    config = scenario_config(scenario, "t1")
    with open_persistence(db) as (saver, _store):
        graph = load_graph(spec, saver, None)
        graph.invoke({"messages": [("user", scenario.message)]}, config)
        out = graph.invoke(Command(resume=True), config)  # approve the payment
        assert out["outcome"]["route"] == "answer"
        history = list(graph.get_state_history(config))  # newest first
    # the last checkpoint before the payment ran: one ledger entry (the lookup), not two
    before = next(s for s in history if len(s.values.get("run_ledger") or {}) == 1)
    checkpoint = before.config["configurable"]["checkpoint_id"]
    argv = ["replay", "t1", "--db", db, "--graph", spec, "--checkpoint", checkpoint]
    assert main([*argv, "--run-writes"]) == 0
    printed = capsys.readouterr().out
    assert "identical to the original run" in printed and "context_guard" in printed
