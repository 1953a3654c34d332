"""retry_router wired into compiled StateGraphs: retries, refusals, breaker, resume."""

from __future__ import annotations

import sqlite3
import threading
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig, RunnableLambda
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import START, StateGraph
from langgraph.prebuilt import tools_condition
from langgraph.store.memory import InMemoryStore
from langgraph.store.sqlite import SqliteStore
from langgraph.types import Command, interrupt

from agent_guards import ToolCallGuard
from agent_guards.core import GuardDecision, Verdict
from agent_guards.loop_check import LoopPolicy
from agent_guards.retry_router import (
    AmbiguousInput,
    Backoff,
    CircuitBreaker,
    EmptyResult,
    PermissionDenied,
    PreconditionFailed,
    RetryRouterPolicy,
    RetryState,
    TransientToolError,
    add_retry_router,
    create_retry_router,
)
from agent_guards.testing import ScriptedChatModel, tool_call_message
from agent_guards.tool_guard import annotate_tool

T0 = 1_767_225_600.0  # 2026-01-01T00:00:00Z


class HTTPStatusError(Exception):
    """httpx-style: ``.response.status_code`` and ``.response.headers``."""

    def __init__(self, status: int, retry_after: float | None = None) -> None:
        super().__init__(f"HTTP {status}")
        headers = {} if retry_after is None else {"retry-after": str(retry_after)}
        self.response = type("R", (), {"status_code": status, "headers": headers})()


class Scripted:
    """A tool whose n-th call (1-based) raises ``faults[n]`` or returns the answer."""

    def __init__(
        self,
        faults: dict[int, BaseException] | Callable[[int], BaseException | None] | None = None,
        answer: str = "42.0 USD",
    ) -> None:
        self.faults = faults or {}
        self.answer = answer
        self.calls = 0
        self.lock = threading.Lock()

    def tool(self, name: str = "quote") -> Any:
        def quote(symbol: str) -> str:
            """Latest quote for a symbol."""
            with self.lock:
                self.calls += 1
                n = self.calls
            fault = self.faults(n) if callable(self.faults) else self.faults.get(n)
            if fault is not None:
                raise fault
            return self.answer

        quote.__name__ = name
        return annotate_tool(tool(quote), read_only=True)


def build(
    model: ScriptedChatModel,
    tools: list[Any],
    *,
    guard: ToolCallGuard | None = None,
    policy: RetryRouterPolicy | None = None,
    loop_policy: LoopPolicy | None = None,
    checkpointer: Any = None,
    store: Any = None,
    interrupt_before: list[str] | None = None,
) -> Any:
    builder = StateGraph(RetryState)

    def call_model(state: RetryState) -> dict[str, Any]:
        return {"messages": [model.invoke(state["messages"])], "usage": {"model_calls": 1}}

    async def acall_model(state: RetryState) -> dict[str, Any]:
        return {"messages": [await model.ainvoke(state["messages"])], "usage": {"model_calls": 1}}

    builder.add_node("model", RunnableLambda(call_model, afunc=acall_model))
    builder.add_node(
        "tools", (guard or ToolCallGuard(retry=policy or RetryRouterPolicy())).tool_node(tools)
    )
    builder.add_edge(START, "model")
    builder.add_conditional_edges("model", tools_condition)
    add_retry_router(
        builder, "tools", model="model", tools="tools", policy=policy, loop_policy=loop_policy
    )
    return builder.compile(
        checkpointer=checkpointer, store=store, interrupt_before=interrupt_before
    )


def quote_then(*replies: str) -> ScriptedChatModel:
    return ScriptedChatModel(script=[tool_call_message("quote", {"symbol": "X"}), *replies])


def cfg(thread: str = "t", now: float = T0) -> RunnableConfig:
    return {"configurable": {"thread_id": thread, "agent_guards_now": now}, "recursion_limit": 60}


def routes(out: dict[str, Any]) -> list[tuple[str, str]]:
    return [(d.verdict.value, d.reason) for d in out["guard_log"]]


@pytest.mark.parametrize(
    ("retry_after", "expected"),
    [((3, 3), [3.0, 3.0]), ((1, 4, 2), [1.0, 4.0, 2.0])],
)
def test_a_429_storm_waits_as_told_by_retry_after(
    retry_after: tuple[int, ...], expected: list[float]
) -> None:
    source = Scripted({i + 1: HTTPStatusError(429, ra) for i, ra in enumerate(retry_after)})
    waits: list[float] = []
    policy = RetryRouterPolicy(backoff=Backoff(max_attempts=4))
    guard = ToolCallGuard(retry=policy, sleep=waits.append)
    out = build(quote_then("X is 42.0 USD"), [source.tool()], guard=guard, policy=policy).invoke(
        {"messages": [HumanMessage("quote X")]}, cfg()
    )
    assert waits == expected
    assert source.calls == len(retry_after) + 1
    assert out["usage"] == {"tool_calls": len(retry_after) + 1, "model_calls": 2}
    assert routes(out) == [("retry", "transient")] * len(retry_after)
    assert [d.data["delay"] for d in out["guard_log"]] == expected
    answers = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    assert len(answers) == 1, "retries replace the failed answer in place"
    assert (
        answers[0].content == "42.0 USD"
        and answers[0].response_metadata["agent_guards"]["attempt"] == len(expected) + 1
    )
    assert out["messages"][-1].content == "X is 42.0 USD"


def test_without_retry_after_the_jittered_backoff_is_used() -> None:
    source = Scripted({1: TimeoutError("slow"), 2: TimeoutError("slow")})
    waits: list[float] = []
    policy = RetryRouterPolicy(backoff=Backoff(base_delay=2, max_attempts=3))
    out = build(
        quote_then("ok"),
        [source.tool()],
        guard=ToolCallGuard(retry=policy, sleep=waits.append),
        policy=policy,
    ).invoke({"messages": [HumanMessage("q")]}, cfg())
    call_id = out["messages"][1].tool_calls[0]["id"]
    key = f'{call_id}:quote:{{"symbol":"X"}}'
    assert waits == [policy.backoff.delay(1, key=key), policy.backoff.delay(2, key=key)]
    assert 0 <= waits[0] <= 2 and 0 <= waits[1] <= 4


def test_retries_run_out_then_fall_back() -> None:
    source = Scripted(lambda n: HTTPStatusError(503))
    waits: list[float] = []
    policy = RetryRouterPolicy(backoff=Backoff(max_attempts=3, base_delay=0.1))
    out = build(
        quote_then(),
        [source.tool()],
        guard=ToolCallGuard(retry=policy, sleep=waits.append),
        policy=policy,
    ).invoke({"messages": [HumanMessage("q")]}, cfg())
    assert source.calls == 3 and len(waits) == 2
    assert routes(out)[-2:] == [("retry", "transient"), ("fallback", "retries_exhausted")]
    final = out["messages"][-1]
    assert final.name == "retry_router" and "quote is unavailable right now." in final.content


def test_attempts_survive_a_restart_no_fresh_quota(tmp_path: Path) -> None:
    """Pause before every tools run, restart from the SQLite file each time: still 3 attempts."""
    db = str(tmp_path / "cp.sqlite")
    source = Scripted(lambda n: TimeoutError("down"))
    policy = RetryRouterPolicy(backoff=Backoff(max_attempts=3, base_delay=0.1))
    config = cfg("restart")
    graph = build(
        quote_then(),
        [source.tool()],
        guard=ToolCallGuard(retry=policy, sleep=lambda s: None),
        policy=policy,
        checkpointer=SqliteSaver(sqlite3.connect(db, check_same_thread=False)),
        interrupt_before=["tools"],
    )
    graph.invoke({"messages": [HumanMessage("q")]}, config)
    restarts = 0
    while graph.get_state(config).next:
        restarts += 1
        assert restarts < 10
        model = ScriptedChatModel(script=["unused"])  # a fresh process: new model, new saver
        graph = build(
            model,
            [source.tool()],
            guard=ToolCallGuard(retry=policy, sleep=lambda s: None),
            policy=policy,
            checkpointer=SqliteSaver(sqlite3.connect(db, check_same_thread=False)),
            interrupt_before=["tools"],
        )
        graph.invoke(None, config)
    state = graph.get_state(config).values
    assert source.calls == 3
    assert restarts == 3
    assert state["usage"]["tool_calls"] == 3
    assert state["guard_log"][-1].reason == "retries_exhausted"


@pytest.mark.parametrize(
    "error",
    [PermissionError("HR only"), PermissionDenied("HR only"), HTTPStatusError(403)],
    ids=["PermissionError", "PermissionDenied", "http 403"],
)
def test_permission_errors_are_never_retried(error: BaseException) -> None:
    source = Scripted(lambda n: error)
    waits: list[float] = []
    model = ScriptedChatModel(
        script=[tool_call_message("quote", {"symbol": "X"})], repeat_last=True
    )
    out = build(model, [source.tool()], guard=ToolCallGuard(sleep=waits.append)).invoke(
        {"messages": [HumanMessage("q")]}, cfg()
    )
    assert source.calls == 1 and waits == [] and len(model.calls) == 1
    assert out["guard_log"][-1].verdict is Verdict.REFUSE
    refusals = [d for d in out["guard_log"] if d.verdict is Verdict.REFUSE]
    assert len(refusals) == 1, "one failure, one decision (not one per node that saw it)"
    assert out["messages"][-1].name == "retry_router"
    assert "I won't retry it or try to work around it" in out["messages"][-1].content


def test_invalid_args_are_repaired_then_given_up_when_repeated() -> None:
    source = Scripted()
    bad = tool_call_message("quote", {"sym": "X"})
    model = ScriptedChatModel(script=[bad], repeat_last=True)
    out = build(model, [source.tool()]).invoke({"messages": [HumanMessage("q")]}, cfg())
    assert source.calls == 0
    assert routes(out)[0] == ("repair", "invalid_args")
    first_answer = next(m for m in out["messages"] if isinstance(m, ToolMessage))
    assert "symbol: Field required" in first_answer.content
    assert (
        out["guard_log"][-1].verdict is Verdict.ABSTAIN
        and out["guard_log"][-1].reason == "same_invalid_args"
    )
    assert len(model.calls) == 2


def test_ambiguous_input_asks_the_user() -> None:
    source = Scripted(
        lambda n: AmbiguousInput(
            "two listings", question="Which X: NYSE or LSE?", options=["NYSE", "LSE"]
        )
    )
    out = build(quote_then(), [source.tool()]).invoke({"messages": [HumanMessage("q")]}, cfg())
    assert out["messages"][-1].content == "Which X: NYSE or LSE? Options: NYSE, LSE."
    assert out["guard_log"][-1].verdict is Verdict.CLARIFY


@pytest.mark.parametrize(
    ("error", "route", "calls"),
    [
        (PreconditionFailed("symbol delisted"), "replan", 1),
        (EmptyResult("no trades today", business=True), "continue", 1),
        (EmptyResult("upstream returned nothing", business=False), "retry", 2),
    ],
)
def test_other_kinds_route_back_to_the_model(error: BaseException, route: str, calls: int) -> None:
    source = Scripted({1: error})
    out = build(
        quote_then("final"), [source.tool()], guard=ToolCallGuard(sleep=lambda s: None)
    ).invoke({"messages": [HumanMessage("q")]}, cfg())
    assert source.calls == calls
    assert out["guard_log"][0].data["route"] == route
    assert out["messages"][-1].content == "final"


def _sqlite_store(path: Path) -> SqliteStore:
    store = SqliteStore(sqlite3.connect(str(path), check_same_thread=False, isolation_level=None))
    store.setup()
    return store


def test_a_breaker_in_one_sqlite_store_is_shared_by_threads(tmp_path: Path) -> None:
    store = _sqlite_store(tmp_path / "store.sqlite")
    # the breaker runs on its own (real) clock, never the run's pinned one: a fake one here
    clock = {"now": T0}
    breaker = CircuitBreaker(
        failure_threshold=2, cooldown=60, success_threshold=2, clock=lambda: clock["now"]
    )
    policy = RetryRouterPolicy(backoff=Backoff(max_attempts=2, base_delay=0.1))
    down = {"on": True}
    source = Scripted(lambda n: TimeoutError("down") if down["on"] else None)
    guard = ToolCallGuard(retry=policy, breaker=breaker, sleep=lambda s: None)

    def run(thread: str, now: float) -> dict[str, Any]:
        clock["now"] = now
        return build(
            quote_then("done"), [source.tool()], guard=guard, policy=policy, store=store
        ).invoke({"messages": [HumanMessage("q")]}, cfg(thread, now))

    a = run("thread-a", T0)
    assert source.calls == 2 and a["guard_log"][-1].reason == "retries_exhausted"
    assert breaker.read(store, "quote")["state"] == "open"  # type: ignore[index]
    b = run("thread-b", T0 + 5)  # another thread: the open breaker routes to fallback at once
    assert source.calls == 2, "an open breaker never calls the tool"
    assert (b["guard_log"][-1].verdict, b["guard_log"][-1].reason) == (
        Verdict.FALLBACK,
        "circuit_open",
    )
    assert "tool_calls" not in b["usage"], "a blocked call is not an execution"
    down["on"] = False
    c = run("thread-c", T0 + 70)  # after the cool-down: half-open trial call
    assert (
        c["messages"][-1].content == "done" and breaker.read(store, "quote")["state"] == "half_open"
    )  # type: ignore[index]
    run("thread-d", T0 + 71)
    assert breaker.read(store, "quote")["state"] == "closed"  # type: ignore[index]
    assert source.calls == 4


def test_a_breaker_shared_by_two_os_threads(tmp_path: Path) -> None:
    store = _sqlite_store(tmp_path / "store.sqlite")
    breaker = CircuitBreaker(failure_threshold=3, cooldown=600)
    policy = RetryRouterPolicy(backoff=Backoff(max_attempts=2, base_delay=0.1))
    source = Scripted(lambda n: TimeoutError("down"))
    guard = ToolCallGuard(retry=policy, breaker=breaker, sleep=lambda s: None)
    errors: list[BaseException] = []

    def worker(name: str) -> None:
        try:
            for i in range(3):
                build(
                    quote_then(), [source.tool()], guard=guard, policy=policy, store=store
                ).invoke({"messages": [HumanMessage("q")]}, cfg(f"{name}-{i}", T0 + i))
        except BaseException as err:  # pragma: no cover - reported below
            errors.append(err)

    workers = [threading.Thread(target=worker, args=(n,)) for n in ("w1", "w2")]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert errors == []
    assert breaker.read(store, "quote")["state"] == "open"  # type: ignore[index]
    assert source.calls < 12, "once open, the breaker stops calls from both threads"


async def test_sync_and_async_paths_agree() -> None:
    waits: list[float] = []
    awaits: list[float] = []

    async def asleep(s: float) -> None:
        awaits.append(s)

    policy = RetryRouterPolicy(backoff=Backoff(max_attempts=4))
    storm = {1: HTTPStatusError(429, 2), 2: HTTPStatusError(429, 5)}
    out = build(
        quote_then("ok"),
        [Scripted(dict(storm)).tool()],
        guard=ToolCallGuard(retry=policy, sleep=waits.append),
        policy=policy,
    ).invoke({"messages": [HumanMessage("q")]}, cfg())
    aout = await build(
        quote_then("ok"),
        [Scripted(dict(storm)).tool()],
        guard=ToolCallGuard(retry=policy, asleep=asleep),
        policy=policy,
    ).ainvoke({"messages": [HumanMessage("q")]}, cfg())
    assert waits == awaits == [2.0, 5.0]
    assert routes(out) == routes(aout)
    assert out["usage"] == aout["usage"]


async def test_async_breaker_with_an_async_capable_store() -> None:
    store = InMemoryStore()
    breaker = CircuitBreaker(failure_threshold=1, cooldown=60)
    source = Scripted(lambda n: TimeoutError("down"))
    guard = ToolCallGuard(breaker=breaker, sleep=lambda s: None)
    await build(quote_then(), [source.tool()], guard=guard, store=store).ainvoke(
        {"messages": [HumanMessage("q")]}, cfg("a1")
    )
    out = await build(quote_then(), [source.tool()], guard=guard, store=store).ainvoke(
        {"messages": [HumanMessage("q")]}, cfg("a2", T0 + 1)
    )
    assert out["guard_log"][-1].reason == "circuit_open"
    assert source.calls == 1


def test_one_edge_serves_both_guards() -> None:
    source = Scripted()
    model = ScriptedChatModel(
        script=[tool_call_message("quote", {"symbol": "X"})], repeat_last=True
    )
    out = build(model, [source.tool()], loop_policy=LoopPolicy()).invoke(
        {"messages": [HumanMessage("q")]}, cfg()
    )
    assert source.calls == 1 and len(model.calls) == 3
    assert routes(out) == [
        ("reuse", "repeated_call"),
        ("nudge", "repeated_call"),
        ("reuse", "repeated_call"),
        ("stop", "repeated_call"),
    ]


def test_failures_round_trip_through_sqlite_in_strict_mode(tmp_path: Path) -> None:
    saver = SqliteSaver(sqlite3.connect(str(tmp_path / "cp.sqlite"), check_same_thread=False))
    source = Scripted({1: TransientToolError("busy", retry_after=1)})
    graph = build(
        quote_then("ok"),
        [source.tool()],
        guard=ToolCallGuard(sleep=lambda s: None),
        checkpointer=saver,
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = graph.invoke({"messages": [HumanMessage("q")]}, cfg("strict"))
        state = graph.get_state(cfg("strict")).values
    assert not [
        w
        for w in caught
        if "serializ" in str(w.message).lower() or "msgpack" in str(w.message).lower()
    ]
    assert state["messages"] == out["messages"] and state["guard_log"] == out["guard_log"]
    assert isinstance(state["guard_log"][0], GuardDecision)


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_an_interrupt_inside_a_tool_is_not_a_failure(mode: str) -> None:
    @tool
    def approve(amount: int) -> str:
        """Ask a human."""
        return f"approved: {interrupt({'amount': amount})}"

    model = ScriptedChatModel(script=[tool_call_message("approve", {"amount": 5}), "done"])
    graph = build(model, [approve], checkpointer=InMemorySaver())
    config = cfg(mode)
    run = graph.invoke if mode == "sync" else None
    first = (
        run({"messages": [HumanMessage("pay")]}, config)
        if run
        else await graph.ainvoke({"messages": [HumanMessage("pay")]}, config)
    )
    assert "__interrupt__" in first and first["guard_log"] == []
    out = (
        graph.invoke(Command(resume="ok"), config)
        if run
        else await graph.ainvoke(Command(resume="ok"), config)
    )
    assert [m.content for m in out["messages"] if isinstance(m, ToolMessage)] == ["approved: ok"]


def test_router_edge_bad_input_routes_to_continue() -> None:
    edge = create_retry_router()
    bad: list[BaseMessage] = [
        AIMessage(content="", tool_calls=[{"name": "t", "args": {}, "id": "t1"}]),
        ToolMessage("x", tool_call_id="t1", artifact={"agent_guards_failure": {"kind": "weird"}}),
    ]
    assert edge.invoke({"messages": bad}) == "continue"
    assert edge.invoke({"messages": []}) == "continue"


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"model": ""}, "model must be a node name"),
        ({"tools": None}, "tools must be a node name"),
        ({"policy": "strict"}, "policy must be a RetryRouterPolicy"),
    ],
)
def test_wiring_rejects_bad_options(kwargs: dict[str, Any], error: str) -> None:
    options: dict[str, Any] = {"model": "model", "tools": "tools", **kwargs}
    with pytest.raises((ValueError, TypeError), match=error):
        add_retry_router(StateGraph(RetryState), "tools", **options)
    with pytest.raises(TypeError, match=r"ToolCallGuard\.breaker"):
        ToolCallGuard(breaker="on")  # type: ignore[arg-type]


def test_a_retry_reruns_only_the_failed_call_of_a_turn() -> None:
    flaky = Scripted({1: TimeoutError("slow")})
    steady = Scripted(answer="EUR 0.92")
    turn = AIMessage(
        content="",
        tool_calls=[
            {"name": "quote", "args": {"symbol": "X"}, "id": "q1"},
            {"name": "fx", "args": {"symbol": "EUR"}, "id": "q2"},
        ],
    )
    model = ScriptedChatModel(script=[turn, "X is 42.0 USD, EUR 0.92"])
    out = build(
        model, [flaky.tool(), steady.tool("fx")], guard=ToolCallGuard(sleep=lambda s: None)
    ).invoke({"messages": [HumanMessage("q")]}, cfg())
    assert (flaky.calls, steady.calls) == (2, 1)
    answers = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    assert sorted(m.tool_call_id for m in answers) == ["q1", "q2"]
    assert all(m.status == "success" for m in answers)
    assert out["usage"]["tool_calls"] == 3


def test_a_malformed_failure_artifact_never_breaks_the_run() -> None:
    calls = []

    @tool(response_format="content_and_artifact")
    def lookup(key: str) -> tuple[str, Any]:
        """Look a key up."""
        calls.append(key)
        if len(calls) == 1:
            return "odd", {"agent_guards_failure": {"kind": "weird"}}
        raise TimeoutError("slow")

    model = ScriptedChatModel(
        script=[
            tool_call_message("lookup", {"key": "k"}),
            tool_call_message("lookup", {"key": "k"}),
            "gave up",
        ]
    )
    out = build(model, [lookup], guard=ToolCallGuard(sleep=lambda s: None)).invoke(
        {"messages": [HumanMessage("q")]}, cfg()
    )
    # the malformed artifact of the first call no longer hides the second call's failure:
    # a timeout of a tool of unknown effect may have run, so it is not retried
    assert out["guard_log"][-1].reason == "outcome_unknown"
    assert out["messages"][-1].name == "retry_router"
    invalid = [d for d in out["guard_log"] if d.reason == "invalid_input"]
    assert invalid and all(d.data["field"] == "agent_guards_failure.kind" for d in invalid)
    assert len(calls) == 2
