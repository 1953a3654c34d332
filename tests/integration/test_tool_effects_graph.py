"""Real tools change the world: the balance/transfer, edit/re-run-tests and cancel/rebook
stories end to end, through a compiled graph (ToolCallGuard + loop_check) and through
``create_agent`` middleware, sync and async. The tools keep real state, so a stale answer
or a repeated write shows up in that state, not only in the messages."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableLambda
from langchain_core.tools import tool
from langgraph.graph import START, StateGraph
from langgraph.prebuilt import tools_condition

from agent_guards import LoopPolicy, LoopState, ToolCallGuard, Verdict, add_loop_check
from agent_guards.testing import ScriptedChatModel, tool_call_message
from agent_guards.tool_guard import ToolEffects, annotate_tool


class Bank:
    """One account, and a log of every real execution."""

    def __init__(self) -> None:
        self.balance = 100
        self.runs: list[str] = []
        self.reads: list[str] = []  # what each get_balance execution returned

    def tools(self) -> list[Any]:
        @tool
        def get_balance(account: str) -> str:
            """The balance of an account."""
            self.runs.append("get_balance")
            self.reads.append(f"balance of {account}: {self.balance}")
            return self.reads[-1]

        @tool
        def transfer(account: str, amount: int) -> str:
            """Move money out of an account."""
            self.runs.append("transfer")
            self.balance -= amount
            return f"transferred {amount} from {account}"

        return [annotate_tool(get_balance, read_only=True), annotate_tool(transfer)]


class Repo:
    """A code base with 8 failing tests; each different fix repairs one."""

    def __init__(self) -> None:
        self.fixed: set[str] = set()
        self.runs: list[str] = []

    def tools(self) -> list[Any]:
        @tool
        def run_tests() -> str:
            """Run the test suite."""
            self.runs.append("run_tests")
            return f"{8 - len(self.fixed)} failed, {12 + len(self.fixed)} passed"

        @tool
        def edit_file(path: str, fix: str) -> str:
            """Apply a fix to a file."""
            self.runs.append("edit_file")
            self.fixed.add(fix)
            return f"saved {path}"

        return [annotate_tool(run_tests, read_only=True), annotate_tool(edit_file)]


class Hotel:
    """Reservations: booking the same room again after a cancellation is a new booking."""

    def __init__(self) -> None:
        self.bookings: dict[str, str] = {}
        self.runs: list[str] = []
        self.made = 0

    def tools(self) -> list[Any]:
        @tool
        def book(room: int) -> str:
            """Book a room."""
            self.runs.append("book")
            self.made += 1
            ref = f"R{self.made}"
            self.bookings[ref] = f"room {room}"
            return f"booked room {room} as {ref}"

        @tool
        def cancel(ref: str) -> str:
            """Cancel a booking."""
            self.runs.append("cancel")
            self.bookings.pop(ref, None)
            return f"cancelled {ref}"

        return [annotate_tool(book), annotate_tool(cancel, idempotent=True)]


def echo_last(messages: list[BaseMessage]) -> AIMessage:
    """The model's final answer: what the last tool result told it."""
    last = next(m for m in reversed(messages) if isinstance(m, ToolMessage))
    return AIMessage(f"Done. The tool said: {last.content}")


def script(*calls: tuple[str, dict[str, Any]]) -> ScriptedChatModel:
    steps: list[Any] = [tool_call_message(name, args) for name, args in calls]
    return ScriptedChatModel(script=[*steps, echo_last])


def graph(model: ScriptedChatModel, tools: list[Any]) -> Any:
    builder = StateGraph(LoopState)

    def call(state: LoopState) -> dict[str, Any]:
        return {"messages": [model.invoke(state["messages"])]}

    async def acall(state: LoopState) -> dict[str, Any]:
        return {"messages": [await model.ainvoke(state["messages"])]}

    builder.add_node("model", RunnableLambda(call, afunc=acall))
    builder.add_node("tools", ToolCallGuard().tool_node(tools))
    builder.add_edge(START, "model")
    builder.add_conditional_edges("model", tools_condition)
    add_loop_check(builder, "tools", continue_to="model")
    return builder.compile()


def agent(model: ScriptedChatModel, tools: list[Any]) -> Any:
    from langchain.agents import create_agent

    from agent_guards import LoopGuardMiddleware, RetryRouterMiddleware

    return create_agent(
        model, tools=tools, middleware=[LoopGuardMiddleware(), RetryRouterMiddleware()]
    )


async def run(kind: str, mode: str, model: ScriptedChatModel, tools: list[Any]) -> dict[str, Any]:
    app = graph(model, tools) if kind == "graph" else agent(model, tools)
    state = {"messages": [HumanMessage("go")]}
    return app.invoke(state) if mode == "sync" else await app.ainvoke(state)


def verdicts(out: dict[str, Any]) -> list[tuple[str, str]]:
    return [(d.verdict.value, d.reason) for d in out.get("guard_log", [])]


SHAPES = pytest.mark.parametrize(
    ("kind", "mode"), [("graph", "sync"), ("graph", "async"), ("agent", "sync"), ("agent", "async")]
)
BAL = ("get_balance", {"account": "A"})
PAY = ("transfer", {"account": "A", "amount": 30})


@SHAPES
async def test_a_balance_read_after_a_transfer_is_the_real_balance(kind: str, mode: str) -> None:
    bank = Bank()
    out = await run(kind, mode, script(BAL, PAY, BAL), bank.tools())
    assert bank.runs == ["get_balance", "transfer", "get_balance"]
    assert out["messages"][-1].content == "Done. The tool said: balance of A: 70"
    assert not [v for v in verdicts(out) if v[0] in ("reuse", "nudge", "stop")]
    assert out["usage"]["tool_calls"] == 3


@SHAPES
async def test_a_repeated_transfer_is_not_run_twice(kind: str, mode: str) -> None:
    bank = Bank()
    out = await run(kind, mode, script(PAY, PAY), bank.tools())
    assert bank.runs == ["transfer"] and bank.balance == 70
    assert ("refuse", "repeated_write") in verdicts(out)
    refused = [m for m in out["messages"] if isinstance(m, ToolMessage)][-1]
    assert refused.content.startswith("[loop_check] Not executed: transfer already ran")
    assert out["usage"]["tool_calls"] == 1


@SHAPES
async def test_tests_re_run_after_each_different_edit_are_never_nudged(
    kind: str, mode: str
) -> None:
    repo = Repo()
    calls: list[tuple[str, dict[str, Any]]] = [("run_tests", {})]
    for fix in ("f1", "f2", "f3"):
        calls += [("edit_file", {"path": "a.py", "fix": fix}), ("run_tests", {})]
    out = await run(kind, mode, script(*calls), repo.tools())
    assert repo.runs.count("run_tests") == 4 and repo.runs.count("edit_file") == 3
    assert out["messages"][-1].content == "Done. The tool said: 5 failed, 15 passed"
    assert not [v for v in verdicts(out) if v[0] in ("reuse", "nudge", "stop")]


@SHAPES
async def test_rebooking_after_a_cancellation_books_again(kind: str, mode: str) -> None:
    hotel = Hotel()
    calls = [("book", {"room": 7}), ("cancel", {"ref": "R1"}), ("book", {"room": 7})]
    out = await run(kind, mode, script(*calls), hotel.tools())
    assert hotel.runs == ["book", "cancel", "book"]
    assert hotel.bookings == {"R2": "room 7"}
    assert out["messages"][-1].content == "Done. The tool said: booked room 7 as R2"


@SHAPES
async def test_an_idempotent_repeat_is_answered_as_already_done(kind: str, mode: str) -> None:
    hotel = Hotel()
    calls = [("book", {"room": 7}), ("cancel", {"ref": "R1"}), ("cancel", {"ref": "R1"})]
    out = await run(kind, mode, script(*calls), hotel.tools())
    assert hotel.runs == ["book", "cancel"]
    assert out["messages"][-1].content.startswith("Done. The tool said: [loop_check] Already done")


@pytest.mark.parametrize(
    ("tools", "executions"),
    [(lambda: Bank().tools()[0], 1), (lambda: _plain_balance(), 2)],  # noqa: PLW0108
    ids=["read-only", "unknown"],
)
def test_a_stuck_model_costs_one_run_of_a_read_and_two_of_an_unknown_tool(
    tools: Callable[[], Any], executions: int
) -> None:
    t = tools()
    model = ScriptedChatModel(script=[tool_call_message(*BAL)], repeat_last=True)
    out = graph(model, [t]).invoke({"messages": [HumanMessage("go")]})
    assert out["guard_log"][-1].verdict is Verdict.STOP
    assert out["usage"]["tool_calls"] == executions
    assert len(model.calls) == 3


def _plain_balance() -> Any:
    @tool
    def get_balance(account: str) -> str:
        """The balance of an account (declares nothing)."""
        return f"balance of {account}: 100"

    return get_balance


def test_the_policy_can_declare_effects_for_tools_that_say_nothing() -> None:
    model = ScriptedChatModel(script=[tool_call_message(*BAL)], repeat_last=True)
    policy = LoopPolicy(effects=ToolEffects(read_only={"get_balance"}))
    builder = StateGraph(LoopState)
    builder.add_node("model", lambda s: {"messages": [model.invoke(s["messages"])]})
    builder.add_node("tools", ToolCallGuard(loop=policy).tool_node([_plain_balance()]))
    builder.add_edge(START, "model")
    builder.add_conditional_edges("model", tools_condition)
    add_loop_check(builder, "tools", continue_to="model", policy=policy)
    out = builder.compile().invoke({"messages": [HumanMessage("go")]})
    assert out["usage"]["tool_calls"] == 1
    effects = [
        m.response_metadata["agent_guards"].get("effect")
        for m in out["messages"]
        if isinstance(m, ToolMessage) and "reused_from" not in m.response_metadata["agent_guards"]
    ]
    assert effects == ["read"]


# -- a retry after a failure that may have let the call run ------------------------------------


class FlakyBank(Bank):
    """The bank moves the money, then the answer is lost: a timeout after the write. Its
    ``set_limit`` is idempotent and times out once, before doing anything."""

    def __init__(self) -> None:
        super().__init__()
        self.limit = 0

    def tools(self) -> list[Any]:
        @tool
        def transfer(account: str, amount: int) -> str:
            """Move money out of an account."""
            self.runs.append("transfer")
            self.balance -= amount
            raise TimeoutError("read timed out")

        @tool
        def set_limit(account: str, limit: int) -> str:
            """Set the daily limit of an account."""
            self.runs.append("set_limit")
            if self.runs.count("set_limit") == 1:
                raise TimeoutError("read timed out")
            self.limit = limit
            return f"limit of {account} is {limit}"

        return [annotate_tool(transfer), annotate_tool(set_limit, idempotent=True)]


def retry_graph(model: ScriptedChatModel, tools: list[Any]) -> Any:
    from agent_guards import RetryState, add_retry_router

    builder = StateGraph(RetryState)
    builder.add_node("model", RunnableLambda(lambda s: {"messages": [model.invoke(s["messages"])]},
                                             afunc=lambda s: _acall(model, s)))  # fmt: skip
    builder.add_node("tools", ToolCallGuard(sleep=lambda s: None, asleep=_no_wait).tool_node(tools))
    builder.add_edge(START, "model")
    builder.add_conditional_edges("model", tools_condition)
    add_retry_router(builder, "tools", model="model", tools="tools", loop_policy=LoopPolicy())
    return builder.compile()


async def _acall(model: ScriptedChatModel, state: Any) -> dict[str, Any]:
    return {"messages": [await model.ainvoke(state["messages"])]}


async def _no_wait(seconds: float) -> None:
    return None


async def run_retry(kind: str, mode: str, model: ScriptedChatModel, tools: list[Any]) -> Any:
    if kind == "graph":
        app = retry_graph(model, tools)
    else:
        from langchain.agents import create_agent

        from agent_guards import RetryRouterMiddleware

        guard = RetryRouterMiddleware(sleep=lambda s: None, asleep=_no_wait)
        app = create_agent(model, tools=tools, middleware=[guard])
    state = {"messages": [HumanMessage("go")]}
    return app.invoke(state) if mode == "sync" else await app.ainvoke(state)


@SHAPES
async def test_a_transfer_that_timed_out_after_moving_money_is_not_retried(
    kind: str, mode: str
) -> None:
    bank = FlakyBank()
    out = await run_retry(kind, mode, script(PAY), bank.tools())
    assert bank.runs == ["transfer"] and bank.balance == 70  # moved once, never twice
    assert ("clarify", "outcome_unknown") in verdicts(out)
    assert out["messages"][-1].content.startswith(
        "transfer failed in a way that may have let it run, so it was not retried"
    )


@SHAPES
async def test_an_idempotent_write_that_timed_out_is_retried(kind: str, mode: str) -> None:
    bank = FlakyBank()
    out = await run_retry(kind, mode, script(("set_limit", {"account": "A", "limit": 500})),
                          bank.tools())  # fmt: skip
    assert bank.runs == ["set_limit", "set_limit"] and bank.limit == 500
    assert ("retry", "transient") in verdicts(out)
    assert out["messages"][-1].content == "Done. The tool said: limit of A is 500"


def flaky_rate() -> tuple[Any, list[int]]:
    """A rate tool that declares nothing and times out on its first call; its calls."""
    calls: list[int] = []

    @tool
    def get_rate(pair: str) -> str:
        """The exchange rate of a currency pair (declares nothing)."""
        calls.append(1)
        if len(calls) == 1:
            raise TimeoutError("read timed out")
        return f"{pair} is 1.08"

    return get_rate, calls


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("declared", [True, False])
async def test_retry_router_middleware_takes_the_policys_effects(mode: str, declared: bool) -> None:
    """A tool that says nothing about itself times out once: declared a read (the same
    ToolEffects the loop policy holds) it is retried; left unknown, it may have written,
    so the user is asked instead."""
    from langchain.agents import create_agent

    from agent_guards import LoopGuardMiddleware, RetryRouterMiddleware

    effects = ToolEffects(read_only={"get_rate"}) if declared else None
    get_rate, calls = flaky_rate()
    middleware = [
        LoopGuardMiddleware(policy=LoopPolicy(effects=effects or ToolEffects())),
        RetryRouterMiddleware(effects=effects, sleep=lambda s: None, asleep=_no_wait),
    ]
    agent = create_agent(script(("get_rate", {"pair": "EURUSD"})), tools=[get_rate],
                         middleware=middleware)  # fmt: skip
    state = {"messages": [HumanMessage("rate?")]}
    out = agent.invoke(state) if mode == "sync" else await agent.ainvoke(state)
    assert len(calls) == (2 if declared else 1)
    assert (("retry", "transient") in verdicts(out)) is declared


def test_effects_given_twice_differently_are_refused() -> None:
    with pytest.raises(ValueError, match="effects given twice, differently"):
        ToolCallGuard(loop=LoopPolicy(), effects=ToolEffects(read_only={"get_rate"}))


@pytest.mark.parametrize("kind", ["graph", "agent"])
def test_a_read_beside_a_transfer_in_a_later_turn_is_read_again_under_a_read_default(
    kind: str,
) -> None:
    """balance, then [transfer, balance] in one turn, with every tool read-only by default
    and the transfer a write by its annotation only: the second balance is the real one."""
    from langchain.agents import create_agent

    from agent_guards import LoopGuardMiddleware
    from agent_guards.tool_guard import Effect

    bank = Bank()
    both = AIMessage(
        "",
        tool_calls=[
            {"name": PAY[0], "args": PAY[1], "id": "w1"},
            {"name": BAL[0], "args": BAL[1], "id": "r2"},
        ],
    )
    model = ScriptedChatModel(script=[tool_call_message(*BAL), both, echo_last])
    policy = LoopPolicy(effects=ToolEffects(default=Effect.READ))
    if kind == "graph":
        builder = StateGraph(LoopState)
        builder.add_node("model", lambda s: {"messages": [model.invoke(s["messages"])]})
        builder.add_node("tools", ToolCallGuard(loop=policy).tool_node(bank.tools()))
        builder.add_edge(START, "model")
        builder.add_conditional_edges("model", tools_condition)
        add_loop_check(builder, "tools", continue_to="model", policy=policy)
        app = builder.compile()
    else:
        app = create_agent(
            model, tools=bank.tools(), middleware=[LoopGuardMiddleware(policy=policy)]
        )
    out = app.invoke({"messages": [HumanMessage("pay 30, then show the balance")]})
    # the two calls of the second turn run in parallel, in no set order: the balance read
    # beside the transfer is a real execution, whatever it saw, never the first turn's
    assert bank.runs.count("get_balance") == 2
    assert out["messages"][-1].content == f"Done. The tool said: {bank.reads[-1]}"
    assert not [v for v in verdicts(out) if v[0] in ("reuse", "stop")]
