"""``max_tool_calls`` is checked per call, not per turn: one turn asking for 200 parallel
calls against a limit of 40 runs 40, and every other call gets a budget answer."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.graph import START, StateGraph
from langgraph.prebuilt import tools_condition
from langgraph.store.memory import InMemoryStore

from agent_guards import (
    Budget,
    LoopPolicy,
    LoopState,
    RetryState,
    ToolCallGuard,
    add_loop_check,
    add_retry_router,
)
from agent_guards.core import GuardState
from agent_guards.retry_router import TransientToolError
from agent_guards.testing import ScriptedChatModel
from agent_guards.tool_guard import RunLedger, annotate_tool


class LedgerState(LoopState, GuardState):
    """Messages and the guard channels, the run ledger among them."""


def fan_out(n: int, start: int = 0) -> AIMessage:
    calls = [{"name": "fetch", "args": {"i": i}, "id": f"c{i}"} for i in range(start, start + n)]
    return AIMessage("", tool_calls=calls)


def build(model: ScriptedChatModel, runs: list[int], budget: Budget, ledger: str = "none") -> Any:
    @tool
    def fetch(i: int) -> str:
        """Fetch item i."""
        runs.append(i)
        return f"item {i}"

    guard = ToolCallGuard(budget=budget, ledger=RunLedger() if ledger != "none" else None)
    builder = StateGraph(LedgerState if ledger == "state" else LoopState)
    builder.add_node("model", lambda s: {"messages": [model.invoke(s["messages"])]})
    builder.add_node("tools", guard.tool_node([fetch]))
    builder.add_edge(START, "model")
    builder.add_conditional_edges("model", tools_condition)
    add_loop_check(builder, "tools", continue_to="model")
    return builder.compile(store=InMemoryStore() if ledger == "store" else None)


async def run_fan_out(
    n: int, budget: Budget, ledger: str, mode: str, *, thread: str = "t"
) -> tuple[list[int], Any]:
    """One turn of ``n`` parallel calls on ``thread`` (sync or async): the items fetched, in
    the order they ran, and the final state."""
    runs: list[int] = []
    graph = build(ScriptedChatModel(script=[fan_out(n), "done"]), runs, budget, ledger)
    state = {"messages": [HumanMessage("fetch everything")]}
    config = {"configurable": {"thread_id": thread}}
    out = graph.invoke(state, config) if mode == "sync" else await graph.ainvoke(state, config)
    return runs, out


@pytest.mark.parametrize("ledger", ["none", "store", "state"])
@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_two_hundred_parallel_calls_against_forty_run_forty(mode: str, ledger: str) -> None:
    """With the run ledger on, the turn's calls that already claimed are in its count once
    (added to it again, 200 calls against 40 ran 21)."""
    runs, out = await run_fan_out(200, Budget(max_tool_calls=40), ledger, mode)
    assert len(runs) == 40 and out["usage"] == {"tool_calls": 40}
    answers = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    assert len(answers) == 200  # every pending call answered
    refused = [m for m in answers if m.content.startswith("[budget] Not executed")]
    assert len(refused) == 160
    budget = [d for d in out["guard_log"] if d.guard == "budget"]
    assert len(budget) == 160 and {d.reason for d in budget} == {"max_tool_calls"}


@pytest.mark.parametrize("ledger", ["store", "state"])
@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_a_thread_id_with_a_dot_keeps_its_budget(mode: str, ledger: str) -> None:
    """``alice@example.com`` as a thread id: the ledger's namespace label is escaped (a store
    refuses a ``.`` in a label), and the budget is spent as on any thread."""
    runs, out = await run_fan_out(5, Budget(max_tool_calls=3), ledger, mode,
                                  thread="alice@example.com")  # fmt: skip
    assert len(runs) == 3 and out["usage"] == {"tool_calls": 3}
    refused = [m for m in out["messages"] if str(m.content).startswith("[budget] Not executed")]
    assert len(refused) == 2


def build_guarded(runs: list[Any], guard: ToolCallGuard) -> Any:
    @tool
    def fetch(i: int, trace_id: str = "") -> str:
        """Fetch item i."""
        runs.append(i)
        return f"item {i}"

    model = ScriptedChatModel(
        script=[
            AIMessage(
                "",
                tool_calls=[
                    {"name": "fetch", "args": {"i": 1, "trace_id": f"t{n}"}, "id": f"c{n}"}
                    for n in range(4)
                ],
            ),
            "done",
        ]
    )
    builder = StateGraph(LoopState)
    builder.add_node("model", lambda s: {"messages": [model.invoke(s["messages"])]})
    builder.add_node("tools", guard.tool_node([annotate_tool(fetch, read_only=True)]))
    builder.add_edge(START, "model")
    builder.add_conditional_edges("model", tools_condition)
    builder.add_edge("tools", "model")
    return builder.compile()


@pytest.mark.parametrize(
    "guard",
    [
        ToolCallGuard(budget=Budget(max_tool_calls=2), loop=None),
        ToolCallGuard(budget=Budget(max_tool_calls=2), loop=LoopPolicy(ignore_arg_keys=set())),
    ],
    ids=["no loop policy", "trace ids kept in signatures"],
)
def test_duplicates_in_a_turn_that_run_are_counted_without_a_ledger(guard: ToolCallGuard) -> None:
    """Four alike calls in one turn, each of which runs (no loop policy answers duplicates,
    or the policy tells them apart by their trace ids): two run, two get the budget answer."""
    runs: list[Any] = []
    out = build_guarded(runs, guard).invoke({"messages": [HumanMessage("go")]})
    assert runs == [1, 1] and out["usage"] == {"tool_calls": 2}
    answers = [m.content for m in out["messages"] if isinstance(m, ToolMessage)]
    assert [a.startswith("[budget]") for a in answers] == [False, False, True, True]


def test_duplicates_the_loop_policy_answers_in_the_turn_cost_nothing() -> None:
    runs: list[Any] = []
    guard = ToolCallGuard(budget=Budget(max_tool_calls=2))
    out = build_guarded(runs, guard).invoke({"messages": [HumanMessage("go")]})
    assert runs == [1] and out["usage"] == {"tool_calls": 1}
    answers = [m.content for m in out["messages"] if isinstance(m, ToolMessage)]
    assert not any(a.startswith("[budget]") for a in answers)


def test_a_later_turn_on_a_spent_budget_runs_nothing() -> None:
    runs: list[int] = []
    model = ScriptedChatModel(script=[fan_out(3), fan_out(3, start=3), "done"])
    out = build(model, runs, Budget(max_tool_calls=3)).invoke({"messages": [HumanMessage("go")]})
    assert runs == [0, 1, 2] and out["usage"]["tool_calls"] == 3
    last_turn = [m for m in out["messages"] if isinstance(m, ToolMessage)][3:]
    assert [m.tool_call_id for m in last_turn] == ["c3", "c4", "c5"]
    assert all(m.content.startswith("[budget]") for m in last_turn)


def test_a_retry_never_spends_past_the_budget() -> None:
    calls: list[str] = []

    @tool
    def quote(symbol: str) -> str:
        """Latest quote."""
        calls.append(symbol)
        raise TransientToolError("upstream 503", status_code=503)

    model = ScriptedChatModel(
        script=[
            AIMessage("", tool_calls=[{"name": "quote", "args": {"symbol": "X"}, "id": "q1"}]),
            "done",
        ]
    )
    guard = ToolCallGuard(budget=Budget(max_tool_calls=1), sleep=lambda s: None)
    builder = StateGraph(RetryState)
    builder.add_node("model", lambda s: {"messages": [model.invoke(s["messages"])]})
    builder.add_node("tools", guard.tool_node([quote]))
    builder.add_edge(START, "model")
    builder.add_conditional_edges("model", tools_condition)
    add_retry_router(builder, "tools", model="model", tools="tools")
    out = builder.compile().invoke({"messages": [HumanMessage("quote X")]})
    assert calls == ["X"] and out["usage"]["tool_calls"] == 1
    assert any(d.guard == "budget" for d in out["guard_log"])
    answers = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    assert [m.tool_call_id for m in answers] == ["q1"]  # answered once: replaced in place
    assert answers[0].content.startswith("[budget] Not executed")


def test_the_budget_must_be_a_budget() -> None:
    with pytest.raises(TypeError, match=r"ToolCallGuard\.budget must be a Budget or None"):
        ToolCallGuard(budget={"max_tool_calls": 3})  # type: ignore[arg-type]


class RacingStore(InMemoryStore):
    """A real store whose first two budget reads meet: both workers pass the budget check
    before either claims its call, the interleaving that could overspend."""

    def __init__(self) -> None:
        super().__init__()
        self.meet = threading.Barrier(2, timeout=10)
        self.armed = 2

    def search(self, *args: Any, **kwargs: Any) -> Any:
        found = super().search(*args, **kwargs)
        if self.armed > 0:
            self.armed -= 1
            self.meet.wait()
        return found


def test_two_workers_racing_for_the_last_call_never_both_run() -> None:
    """Two workers on one thread (a fork and its original, say) each want the last unit of
    ``max_tool_calls=1``; both see it free, then both claim. At most one may run."""
    runs: list[str] = []

    @tool
    def charge(invoice: str) -> str:
        """Charge an invoice (a write)."""
        runs.append(invoice)
        return f"charged {invoice}"

    store, ledger = RacingStore(), RunLedger()
    guard = ToolCallGuard(ledger=ledger, budget=Budget(max_tool_calls=1))
    builder = StateGraph(LoopState)
    builder.add_node("tools", guard.tool_node([annotate_tool(charge)]))
    builder.add_edge(START, "tools")
    graph = builder.compile(store=store)
    cfg = {"configurable": {"thread_id": "shared"}}

    def worker(invoice: str) -> Any:
        call = {"name": "charge", "args": {"invoice": invoice}, "id": invoice}
        return graph.invoke({"messages": [AIMessage("", tool_calls=[call])]}, cfg)

    with ThreadPoolExecutor(2) as pool:
        outs = list(pool.map(worker, ["inv-1", "inv-2"]))
    assert len(runs) <= 1  # the budget holds under the race
    assert ledger.executions(store, "shared") == len(runs)  # and every execution is recorded
    answers = [m for out in outs for m in out["messages"] if isinstance(m, ToolMessage)]
    assert len(answers) == 2  # each call answered: run, or refused by the budget
    refused = [m for m in answers if m.content.startswith("[budget] Not executed")]
    assert len(refused) == 2 - len(runs)


def _asks_forever() -> ScriptedChatModel:
    """A model that asks for a new call each turn, whatever the tools answer."""
    n = iter(range(1000))
    return ScriptedChatModel(
        script=[lambda _: AIMessage("", tool_calls=[{"name": "fetch", "args": {"i": next(n)},
                                                      "id": f"ask{next(n)}"}])],
        repeat_last=True,
    )  # fmt: skip


@pytest.mark.parametrize("edge", ["loop_check", "retry_router"])
def test_a_model_asking_past_the_spent_budget_is_stopped_with_the_budget_as_reason(
    edge: str,
) -> None:
    """The refusal asks the model to answer with what it has. One that asks again was
    refused until the recursion limit under add_loop_check (no edge acted on the refusal),
    and told "fetch is unavailable right now" under add_retry_router."""
    runs: list[int] = []

    @tool
    def fetch(i: int) -> str:
        """Fetch item i."""
        runs.append(i)
        return f"item {i}"

    model = _asks_forever()
    builder = StateGraph(RetryState)
    builder.add_node("model", lambda s: {"messages": [model.invoke(s["messages"])]})
    builder.add_node("tools", ToolCallGuard(budget=Budget(max_tool_calls=3)).tool_node([fetch]))
    builder.add_edge(START, "model")
    builder.add_conditional_edges("model", tools_condition)
    if edge == "loop_check":
        add_loop_check(builder, "tools", continue_to="model")
    else:
        add_retry_router(builder, "tools", model="model", tools="tools", loop_policy=LoopPolicy())
    out = builder.compile().invoke({"messages": [HumanMessage("fetch them all")]},
                                   {"recursion_limit": 60})  # fmt: skip
    assert len(runs) == 3
    final = out["messages"][-1]
    assert final.content.startswith("I had to stop before finishing: the tool budget is spent")
    # the loop edge gives the model one refused turn to answer; the retry edge ends on it
    assert len(model.calls) == {"loop_check": 5, "retry_router": 4}[edge]
    assert (
        out["guard_log"][-1].reason
        == {"loop_check": "max_tool_calls", "retry_router": "quota"}[edge]
    )


def test_at_the_limit_an_execution_that_never_happened_frees_its_unit() -> None:
    """Below the limit the ledger's number of entries stands for its count (no entry is
    read); at the limit the count is exact: a thread with one execution and one start
    that never happened (voided) has one of its two units left, and the call runs."""
    runs: list[int] = []
    model = ScriptedChatModel(script=[fan_out(1, start=5), "done"])
    graph = build(model, runs, Budget(max_tool_calls=2), "store")
    ledger = RunLedger()
    done = ledger.start(graph.store, "t", "c0", tool="fetch", signature="fetch|c0",
                        effect="read", previous={})  # fmt: skip
    ledger.finish(graph.store, "t", "c0", content="item 0", ok=True, started=done)
    never = ledger.start(graph.store, "t", "c1", tool="fetch", signature="fetch|c1",
                         effect="read", previous={})  # fmt: skip
    assert done is not None and never is not None
    ledger.void(graph.store, "t", never)
    out = graph.invoke({"messages": [HumanMessage("fetch")]}, {"configurable": {"thread_id": "t"}})
    assert runs == [5] and ledger.executions(graph.store, "t") == 2
    assert not [d for d in out["guard_log"] if d.guard == "budget"]
