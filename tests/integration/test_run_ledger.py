"""The run ledger: completed writes are never run again on a resume or a fork, a write that
started but never reported back is surfaced (not blindly re-run), and the tool budget is
spent from one account across forks. Real checkpointers and stores (InMemory, SQLite)."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Annotated, Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import InjectedToolCallId, tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, StateGraph
from langgraph.prebuilt import tools_condition
from langgraph.store.memory import InMemoryStore
from langgraph.types import Command, interrupt

from agent_guards import Budget, LoopState, ToolCallGuard, add_loop_check
from agent_guards.core.signatures import call_signature
from agent_guards.testing import ScriptedChatModel
from agent_guards.tool_guard import annotate_tool
from agent_guards.tool_guard.ledger import GRANT_KEY, RunLedger


class World:
    """A bank account and a log of every real execution."""

    def __init__(self) -> None:
        self.balance = 100
        self.runs: list[str] = []

    def tools(self) -> list[Any]:
        @tool
        def transfer(amount: int) -> str:
            """Move money out."""
            self.runs.append("transfer")
            self.balance -= amount
            return f"transferred {amount}; balance {self.balance}"

        @tool
        def get_balance() -> str:
            """The balance."""
            self.runs.append("get_balance")
            return f"balance {self.balance}"

        @tool
        def fetch(i: int) -> str:
            """Fetch item i."""
            self.runs.append(f"fetch {i}")
            return f"item {i}"

        return [
            annotate_tool(transfer),
            annotate_tool(get_balance, read_only=True),
            annotate_tool(fetch, read_only=True),
        ]


def replies(*steps: tuple[str, dict[str, Any]]) -> ScriptedChatModel:
    """A model whose reply depends only on how many tool results it has seen, so a fork
    from an earlier checkpoint asks for the same calls again (same ids)."""

    def reply(messages: list[BaseMessage]) -> AIMessage:
        n = sum(isinstance(m, ToolMessage) for m in messages)
        if n >= len(steps):
            return AIMessage("done")
        name, args = steps[n]
        return AIMessage("", tool_calls=[{"name": name, "args": args, "id": f"call-{n}"}])

    return ScriptedChatModel(script=[reply], repeat_last=True)


def build(model: Any, world: World, saver: Any, store: Any, **guard: Any) -> Any:
    builder = StateGraph(LoopState)
    builder.add_node("model", lambda s: {"messages": [model.invoke(s["messages"])]})
    builder.add_node("tools", ToolCallGuard(ledger=RunLedger(), **guard).tool_node(world.tools()))
    builder.add_edge(START, "model")
    builder.add_conditional_edges("model", tools_condition)
    add_loop_check(builder, "tools", continue_to="model")
    return builder.compile(checkpointer=saver, store=store)


@contextmanager
def persistence(kind: str, tmp_path: Path) -> Iterator[tuple[Any, Any]]:
    if kind == "memory":
        yield InMemorySaver(), InMemoryStore()
        return
    from langgraph.checkpoint.sqlite import SqliteSaver
    from langgraph.store.sqlite import SqliteStore

    db = str(tmp_path / "run.sqlite")
    with (
        closing(sqlite3.connect(db, check_same_thread=False)) as conn,
        SqliteStore.from_conn_string(db) as store,
    ):
        store.setup()
        yield SqliteSaver(conn), store


CFG = {"configurable": {"thread_id": "t1"}}


def before_tools(graph: Any, call_id: str) -> Any:
    """The checkpoint just before the tools node ran ``call_id``: where a crash after the
    tool returned (and before the checkpoint) resumes from, and where a fork starts."""
    for snap in graph.get_state_history(CFG):
        last = snap.values["messages"][-1]
        if snap.next == ("tools",) and getattr(last, "tool_calls", [{}])[0].get("id") == call_id:
            return snap.config
    raise AssertionError(f"no checkpoint before {call_id}")


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_a_completed_write_is_answered_from_the_ledger_on_a_fork(kind: str, tmp_path: Path) -> None:
    world = World()
    with persistence(kind, tmp_path) as (saver, store):
        graph = build(replies(("transfer", {"amount": 30})), world, saver, store)
        graph.invoke({"messages": [HumanMessage("pay 30")]}, CFG)
        assert world.runs == ["transfer"]
        for _ in range(3):  # replaying the tools step: the crash-resume and fork case
            out = graph.invoke(None, before_tools(graph, "call-0"))
        assert world.runs == ["transfer"] and world.balance == 70
        answer = [m for m in out["messages"] if isinstance(m, ToolMessage)][-1]
        assert answer.content == "transferred 30; balance 70"
        assert ("reuse", "recorded_outcome") in [
            (d.verdict.value, d.reason) for d in out["guard_log"]
        ]


def each_turn(name: str, args: dict[str, Any]) -> ScriptedChatModel:
    """A model that makes the same call, with the same id, on every user turn."""

    def reply(messages: list[BaseMessage]) -> AIMessage:
        last_user = max(i for i, m in enumerate(messages) if isinstance(m, HumanMessage))
        if any(isinstance(m, ToolMessage) for m in messages[last_user:]):
            return AIMessage("done")
        return AIMessage("", tool_calls=[{"name": name, "args": args, "id": "call-0"}])

    return ScriptedChatModel(script=[reply], repeat_last=True)


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_a_call_id_repeated_in_a_later_turn_is_a_new_request(kind: str, tmp_path: Path) -> None:
    """Some models repeat a call id from one user turn to the next. The user asked again:
    the write runs again. A replay of that turn's tool step is still answered from the
    ledger: it serves the same user message."""
    world = World()
    with persistence(kind, tmp_path) as (saver, store):
        graph = build(each_turn("transfer", {"amount": 30}), world, saver, store)
        graph.invoke({"messages": [HumanMessage("pay 30")]}, CFG)
        out = graph.invoke({"messages": [HumanMessage("pay 30 again, please")]}, CFG)
        assert world.runs == ["transfer", "transfer"] and world.balance == 40
        answer = [m for m in out["messages"] if isinstance(m, ToolMessage)][-1]
        assert answer.content == "transferred 30; balance 40"
        snaps = [s for s in graph.get_state_history(CFG) if s.next == ("tools",)]
        graph.invoke(None, snaps[0].config)  # the latest: the second turn's tool step
        assert world.runs == ["transfer", "transfer"] and world.balance == 40


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_a_fork_of_an_earlier_turn_is_answered_from_that_turns_execution(
    kind: str, tmp_path: Path
) -> None:
    """The call id came back in turn 2 and ran again there; a fork of turn 1's tool step
    is answered from turn 1's execution, not taken for a new request."""
    world = World()
    with persistence(kind, tmp_path) as (saver, store):
        graph = build(each_turn("transfer", {"amount": 30}), world, saver, store)
        graph.invoke({"messages": [HumanMessage("pay 30")]}, CFG)
        graph.invoke({"messages": [HumanMessage("pay 30 again, please")]}, CFG)
        assert world.balance == 40
        snaps = [s for s in graph.get_state_history(CFG) if s.next == ("tools",)]
        out = graph.invoke(None, snaps[-1].config)  # the oldest: the first turn's tool step
        assert world.runs == ["transfer", "transfer"] and world.balance == 40
        answer = [m for m in out["messages"] if isinstance(m, ToolMessage)][-1]
        assert answer.content == "transferred 30; balance 70"  # turn 1's own result


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_a_replay_from_the_first_checkpoint_answers_the_write(kind: str, tmp_path: Path) -> None:
    """Replaying from before the input applies it again, and ``add_messages`` gives the
    id-less user message a new random id: the turn is still the same (same place, same
    text), so the write is answered from the ledger. The same words in a later turn are
    a new request."""
    world = World()
    with persistence(kind, tmp_path) as (saver, store):
        graph = build(each_turn("transfer", {"amount": 30}), world, saver, store)
        graph.invoke({"messages": [("user", "pay 30")]}, CFG)
        first = list(graph.get_state_history(CFG))[-1]
        assert first.next == ("__start__",)
        out = graph.invoke(None, first.config)
        assert world.runs == ["transfer"] and world.balance == 70
        assert ("reuse", "recorded_outcome") in [
            (d.verdict.value, d.reason) for d in out["guard_log"]
        ]
        graph.invoke({"messages": [("user", "pay 30")]}, CFG)  # the user asks again
        assert world.runs == ["transfer", "transfer"] and world.balance == 40


def test_a_write_answering_with_a_command_is_recorded_by_its_message() -> None:
    """A tool returning ``Command(update=...)``: the ledger keeps the ToolMessage it carries,
    so a fork is answered with the tool's own words, not the Command's repr."""
    runs: list[int] = []

    @tool
    def pay(amount: int, tool_call_id: Annotated[str, InjectedToolCallId]) -> Command[Any]:
        """Pay, answering with a state update."""
        runs.append(amount)
        answer = ToolMessage(f"paid {amount}", tool_call_id=tool_call_id, artifact={"n": 1})
        return Command(update={"messages": [answer]})

    model = replies(("pay", {"amount": 5}))
    builder = StateGraph(LoopState)
    builder.add_node("model", lambda s: {"messages": [model.invoke(s["messages"])]})
    builder.add_node("tools", ToolCallGuard(ledger=RunLedger()).tool_node([annotate_tool(pay)]))
    builder.add_edge(START, "model")
    builder.add_conditional_edges("model", tools_condition)
    add_loop_check(builder, "tools", continue_to="model")
    graph = builder.compile(checkpointer=InMemorySaver(), store=InMemoryStore())
    graph.invoke({"messages": [HumanMessage("pay 5")]}, CFG)
    out = graph.invoke(None, before_tools(graph, "call-0"))
    answer = next(m for m in out["messages"][::-1] if isinstance(m, ToolMessage))
    assert runs == [5]
    assert (answer.content, answer.artifact) == ("paid 5", {"n": 1})


def test_a_fork_that_edits_a_calls_arguments_runs_the_edited_call() -> None:
    """Time travel to correct a pending call (same id, other arguments): the recorded
    outcome was of another call, so the edited one runs."""
    world, store = World(), InMemoryStore()
    graph = build(replies(("transfer", {"amount": 300})), world, InMemorySaver(), store)
    graph.invoke({"messages": [HumanMessage("pay 30")]}, CFG)
    assert world.runs == ["transfer"] and world.balance == -200
    past = before_tools(graph, "call-0")
    pending = graph.get_state(past).values["messages"][-1]
    call = {**pending.tool_calls[0], "args": {"amount": 30}}
    edited = pending.model_copy(update={"tool_calls": [call]})
    fork = graph.update_state(past, {"messages": [edited]})
    out = graph.invoke(None, fork)
    assert world.runs == ["transfer", "transfer"] and world.balance == -230
    answers = [m.content for m in out["messages"] if isinstance(m, ToolMessage)]
    assert answers == ["transferred 30; balance -230"]
    assert RunLedger().executions(store, "t1") == 2


def test_a_write_answered_from_the_ledger_on_a_fork_still_makes_the_next_read_run() -> None:
    """Read, transfer, read; then a fork from before the transfer. The transfer is answered
    from the ledger (it ran), and it changed the world in this history too: the read after
    it runs again and sees 70, not the first read's 100."""
    world, store = World(), InMemoryStore()
    story = (("get_balance", {}), ("transfer", {"amount": 30}), ("get_balance", {}))
    graph = build(replies(*story), world, InMemorySaver(), store)
    graph.invoke({"messages": [HumanMessage("pay 30 and show the balance")]}, CFG)
    assert world.runs == ["get_balance", "transfer", "get_balance"]
    out = graph.invoke(None, before_tools(graph, "call-1"))
    assert world.runs == ["get_balance", "transfer", "get_balance", "get_balance"]
    answers = [m.content for m in out["messages"] if isinstance(m, ToolMessage)]
    assert answers[-1] == "balance 70"
    decisions = [(d.verdict.value, d.reason) for d in out["guard_log"]]
    assert ("reuse", "repeated_call") not in decisions
    assert ("nudge", "repeated_call") not in decisions


def test_a_read_runs_again_on_a_fork() -> None:
    world = World()
    graph = build(replies(("get_balance", {})), world, InMemorySaver(), InMemoryStore())
    graph.invoke({"messages": [HumanMessage("balance?")]}, CFG)
    graph.invoke(None, before_tools(graph, "call-0"))
    assert world.runs == ["get_balance", "get_balance"]


def started_but_unknown(store: Any) -> None:
    """What a crash while the tool ran leaves behind: an intent with no outcome."""
    signature = call_signature("transfer", {"amount": 30})  # the call the model will make
    RunLedger().start(store, "t1", "call-0", tool="transfer", signature=signature, effect="write")


@pytest.mark.parametrize(
    ("resume", "runs", "balance"),
    [
        ({"ran": True, "result": "transferred 30 (bank log)"}, [], 100),
        ({"ran": False}, ["transfer"], 70),
    ],
    ids=["it happened", "it did not"],
)
def test_a_write_that_never_reported_back_is_asked_about_not_re_run(
    resume: dict[str, Any], runs: list[str], balance: int
) -> None:
    world, store = World(), InMemoryStore()
    started_but_unknown(store)
    graph = build(replies(("transfer", {"amount": 30})), world, InMemorySaver(), store)
    first = graph.invoke({"messages": [HumanMessage("pay 30")]}, CFG)
    (pending,) = first["__interrupt__"]
    assert pending.value["type"] == "unknown_write_outcome" and pending.value["tool"] == "transfer"
    assert world.runs == []
    graph.invoke(Command(resume=resume), CFG)
    assert world.runs == runs and world.balance == balance
    assert RunLedger().entry(store, "t1", "call-0")["status"] == "done"


def test_a_reconcile_hook_decides_without_a_human() -> None:
    world, store = World(), InMemoryStore()
    started_but_unknown(store)
    ledger = RunLedger(reconcile=lambda entry: f"{entry['tool']} found in the bank's log")
    builder = StateGraph(LoopState)
    model = replies(("transfer", {"amount": 30}))
    builder.add_node("model", lambda s: {"messages": [model.invoke(s["messages"])]})
    builder.add_node("tools", ToolCallGuard(ledger=ledger).tool_node(world.tools()))
    builder.add_edge(START, "model")
    builder.add_conditional_edges("model", tools_condition)
    add_loop_check(builder, "tools", continue_to="model")
    out = builder.compile(checkpointer=InMemorySaver(), store=store).invoke(
        {"messages": [HumanMessage("pay 30")]}, CFG
    )
    assert world.runs == []
    assert [m.content for m in out["messages"] if isinstance(m, ToolMessage)] == [
        "transfer found in the bank's log"
    ]
    assert ("reuse", "reconciled") in [(d.verdict.value, d.reason) for d in out["guard_log"]]


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_a_tool_that_asks_a_human_is_resumed_with_the_humans_answer(mode: str) -> None:
    """A write that calls ``interrupt()`` before it acts: the one resume answers the tool's
    own question, and the tool then runs once (the ledger's claim of the interrupted run
    is given back, so it is not taken for a write that never reported back)."""
    booked: list[str] = []

    @tool
    def book(city: str) -> str:
        """Book a room, once a human gives the address."""
        address = interrupt({"type": "confirm", "city": city})
        booked.append(address)
        return f"booked at {address}"

    store, saver = InMemoryStore(), InMemorySaver()
    builder = StateGraph(LoopState)
    model = replies(("book", {"city": "Oslo"}))
    builder.add_node("model", lambda s: {"messages": [model.invoke(s["messages"])]})
    builder.add_node("tools", ToolCallGuard(ledger=RunLedger()).tool_node([annotate_tool(book)]))
    builder.add_edge(START, "model")
    builder.add_conditional_edges("model", tools_condition)
    add_loop_check(builder, "tools", continue_to="model")
    graph = builder.compile(checkpointer=saver, store=store)

    async def run(value: Any) -> Any:
        return graph.invoke(value, CFG) if mode == "sync" else await graph.ainvoke(value, CFG)

    first = await run({"messages": [HumanMessage("book Oslo")]})
    assert [i.value for i in first["__interrupt__"]] == [{"type": "confirm", "city": "Oslo"}]
    out = await run(Command(resume="Main St 1"))
    assert "__interrupt__" not in out and booked == ["Main St 1"]
    assert [m.content for m in out["messages"] if isinstance(m, ToolMessage)] == [
        "booked at Main St 1"
    ]
    assert RunLedger().executions(store, "t1") == 1
    assert RunLedger().entry(store, "t1", "call-0")["status"] == "done"


def test_forks_of_a_spent_thread_execute_nothing_more_without_a_grant() -> None:
    world = World()
    steps = [("fetch", {"i": i}) for i in range(4)]
    graph = build(
        replies(*steps), world, InMemorySaver(), InMemoryStore(), budget=Budget(max_tool_calls=2)
    )
    graph.invoke({"messages": [HumanMessage("fetch")]}, CFG)
    assert world.runs == ["fetch 0", "fetch 1"]  # the budget stopped the rest
    start = before_tools(graph, "call-0")
    for _ in range(5):
        graph.invoke(None, start)  # each fork starts from usage 0 in state; the ledger says 2
    assert world.runs == ["fetch 0", "fetch 1"]
    granted = {**start, "configurable": {**start["configurable"], GRANT_KEY: {"tool_calls": 1}}}
    out = graph.invoke(None, granted)
    assert world.runs == ["fetch 0", "fetch 1", "fetch 0"]
    assert ("continue", "granted") in [(d.verdict.value, d.reason) for d in out["guard_log"]]


def test_a_bad_namespace_is_refused() -> None:
    with pytest.raises(ValueError, match="labels without dots"):
        RunLedger(namespace=("agent.guards",))


def test_the_user_turn_a_call_serves_skips_the_guards_own_messages() -> None:
    """A nudge or a context summary is no user turn: a call repeated after one is the same
    request, answered from the ledger when it already ran."""
    from agent_guards.tool_guard.ledger import Turn

    def user_turn(state: dict[str, Any]) -> str | None:
        turn = Turn.of(state)
        return turn.id if turn is not None else None

    messages = [
        HumanMessage("pay 30", id="u1"),
        AIMessage("", tool_calls=[{"name": "transfer", "args": {"amount": 30}, "id": "c1"}]),
        ToolMessage("transferred 30", tool_call_id="c1"),
        HumanMessage("[loop_check] you repeat yourself", name="loop_check", id="n1"),
        HumanMessage("summary", id="s1", additional_kwargs={"agent_guards": {"role": "summary"}}),
    ]
    assert user_turn({"messages": messages}) == "u1"
    assert user_turn({"messages": [*messages, HumanMessage("again", id="u2")]}) == "u2"
    assert user_turn({"messages": messages[1:3]}) is None
    assert user_turn({"step_messages": messages}) is None


def _timing_out(effect: str, fail_first: int) -> tuple[Any, list[int]]:
    """A graph whose one tool times out ``fail_first`` times (after doing its work), with
    the ledger in an InMemoryStore and retry_router's edge."""
    from agent_guards import RetryState, add_retry_router, guard_serializer

    runs: list[int] = []

    @tool
    def pay(amount: int) -> str:
        """Pay, or set a value when declared idempotent."""
        runs.append(amount)  # the work is done...
        if len(runs) <= fail_first:
            raise TimeoutError("gateway timed out")  # ...and the answer is lost
        return f"paid {amount}"

    annotate_tool(pay, idempotent=effect == "idempotent")
    builder = StateGraph(RetryState)
    model = replies(("pay", {"amount": 5}))
    builder.add_node("model", lambda s: {"messages": [model.invoke(s["messages"])]})
    guard = ToolCallGuard(ledger=RunLedger(), sleep=lambda s: None)
    builder.add_node("tools", guard.tool_node([pay]))
    builder.add_edge(START, "model")
    builder.add_conditional_edges("model", tools_condition)
    add_retry_router(builder, "tools", model="model", tools="tools")
    saver = InMemorySaver(serde=guard_serializer())
    return builder.compile(checkpointer=saver, store=InMemoryStore()), runs


def test_a_write_that_timed_out_is_asked_about_on_a_fork_not_run_again() -> None:
    """The write timed out after doing its work: not retried in the run (outcome_unknown),
    and a fork from before it asks whether it happened instead of paying again."""
    graph, runs = _timing_out("write", fail_first=1)
    out = graph.invoke({"messages": [HumanMessage("pay 5")]}, CFG)
    assert runs == [5] and "outcome_unknown" in [d.reason for d in out["guard_log"]]
    forked = graph.invoke(None, before_tools(graph, "call-0"))
    assert runs == [5]
    assert forked["__interrupt__"][0].value["type"] == "unknown_write_outcome"
    out = graph.invoke(Command(resume={"ran": True, "result": "paid 5"}), CFG)
    assert runs == [5] and "reconciled" in [d.reason for d in out["guard_log"]]


def test_an_idempotent_write_that_timed_out_is_retried_without_asking() -> None:
    graph, runs = _timing_out("idempotent", fail_first=1)
    out = graph.invoke({"messages": [HumanMessage("set 5")]}, CFG)
    assert runs == [5, 5] and "__interrupt__" not in out
    answers = [m.content for m in out["messages"] if isinstance(m, ToolMessage)]
    assert answers[-1] == "paid 5"
