"""From a recorded thread to regression cases: real guard nodes, SQLite and Postgres savers."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Annotated, Any

import pytest
from langchain_core.messages import AnyMessage, HumanMessage
from langchain_core.tools import tool
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import tools_condition
from langgraph.types import Command

from agent_guards import (
    EvidenceState,
    GuardDecision,
    GuardState,
    LoopPolicy,
    MemoryRecord,
    MemoryState,
    PlannerPolicy,
    PlanState,
    PlanVersion,
    ToolCallGuard,
    add_planner_gate,
    add_retry_router,
    create_evidence_resolve,
    create_memory_resolve,
)
from agent_guards.evals import load_cases, run_cases
from agent_guards.evals.cli import run as eval_cli
from agent_guards.evals.traces import cases_from_thread, draft_cases, write_cases
from agent_guards.memory_resolve import memory_namespace, save_memories
from agent_guards.planner_gate import current_plan, mark_step, next_step, progress_update
from agent_guards.retry_router import TransientToolError
from agent_guards.serde import delta_log, guard_serializer
from agent_guards.testing import ScriptedChatModel, tool_call_message

NOW = "2026-04-01T00:00:00+00:00"
PRINCIPAL = "user:alice"
DRAFTS = [
    PlanVersion.linear(1, ["收集资料", "分析", "输出"]),
    PlanVersion.linear(2, ["先明确目标", "再收集资料", "再分析"], trigger="critique", parent=1),
    PlanVersion.linear(3, ["确认需求", "收集资料", "分析"], trigger="critique", parent=1),
]
EVIDENCE = [
    {
        "id": "p24",
        "claim_key": "limit",
        "value": "100w",
        "source_type": "official",
        "updated_at": "2024-06-01",
    },
    {
        "id": "p26",
        "claim_key": "limit",
        "value": "50w",
        "source_type": "official",
        "updated_at": "2026-01-01",
    },
    {
        "id": "memo",
        "claim_key": "limit",
        "value": "30w",
        "source_type": "official",
        "updated_at": "2026-03-01",
        "allowed": ["board"],
    },
]


class PlanGraphState(EvidenceState, MemoryState, PlanState):
    pass


def plan_graph(saver: Any, store: Any) -> Any:
    """memory_resolve -> evidence_resolve -> planner (critique-only replans) -> planner_gate."""

    def planner(state: PlanGraphState) -> dict[str, Any]:
        return {"plans": [DRAFTS[len(state.get("plans") or [])]]}

    def execute(state: PlanGraphState) -> dict[str, Any]:
        plan = current_plan(state["plans"])
        step = next_step(plan)
        return {
            "plans": [mark_step(plan, step.id, "done")],
            **progress_update(executed=1, observations=1),
        }

    def review(state: PlanGraphState) -> Command[Any]:
        if len(state["plans"]) < len(DRAFTS):
            return Command(goto="planner")
        return Command(goto=END)

    builder = StateGraph(PlanGraphState)
    builder.add_node("memory_resolve", create_memory_resolve())
    builder.add_node("evidence_resolve", create_evidence_resolve())
    builder.add_node("planner", planner)
    builder.add_node("execute", execute)
    builder.add_node("review", review, destinations=("planner", END))
    builder.add_node("clarify", lambda state: {})
    add_planner_gate(builder, policy=PlannerPolicy(), destinations={"escalate": "clarify"})
    builder.add_edge(START, "memory_resolve")
    builder.add_edge("memory_resolve", "evidence_resolve")
    builder.add_edge("evidence_resolve", "planner")
    builder.add_edge("planner", "planner_gate")
    builder.add_edge("execute", "review")
    builder.add_edge("clarify", END)
    return builder.compile(checkpointer=saver, store=store)


class ToolState(GuardState, total=False):
    """Like the reference graph: the sub-loop's messages in their own channel, and a
    ``delta_log`` guard_log (LangGraph's DeltaChannel: no full log in each checkpoint)."""

    task: str
    step_messages: Annotated[list[AnyMessage], add_messages]
    guard_log: Annotated[list[GuardDecision], delta_log()]


def tool_graph(saver: Any, attempts: list[str]) -> Any:
    """A ReAct loop: a 429 that is retried, then the same search three times."""

    @tool
    def quote(symbol: str) -> str:
        """Latest quote."""
        attempts.append(symbol)
        if len(attempts) == 1:
            raise TransientToolError("429 Too Many Requests", retry_after=2)
        return "X: 42.10 USD"

    @tool
    def search(q: str) -> str:
        """Search."""
        return "Contracts above 500k need a second review (policy 2026, section 4.2)."

    call = tool_call_message("search", {"q": "review limit"})
    model = ScriptedChatModel(
        script=[tool_call_message("quote", {"symbol": "X"}), call], repeat_last=True
    )
    guard = ToolCallGuard(sleep=lambda s: None, messages_key="step_messages")

    def agent(state: ToolState) -> dict[str, Any]:
        history = state.get("step_messages") or [HumanMessage(state["task"])]
        return {"step_messages": [*history[:1], model.invoke(history)]}

    builder = StateGraph(ToolState)
    builder.add_node("model", agent)
    builder.add_node("tools", guard.tool_node([quote, search]))
    builder.add_edge(START, "model")
    builder.add_conditional_edges(
        "model", lambda s: tools_condition(s, messages_key="step_messages")
    )
    add_retry_router(
        builder,
        "tools",
        model="model",
        tools="tools",
        loop_policy=LoopPolicy(),
        messages_key="step_messages",
    )
    return builder.compile(checkpointer=saver)


def record_threads(saver: Any, store: Any) -> None:
    save_memories(
        store,
        memory_namespace(PRINCIPAL),
        [MemoryRecord("m1", "report_format", "pdf", scope=PRINCIPAL, created_at="2026-01-01")],
    )
    config = {"configurable": {"principal": PRINCIPAL, "agent_guards_now": NOW}}
    facts = [{"key": "report_format", "value": "markdown", "persist": True}]
    plan_graph(saver, store).invoke(
        {"evidence": EVIDENCE, "memory_facts": facts},
        {"configurable": {**config["configurable"], "thread_id": "plans"}},
    )
    tool_graph(saver, []).invoke(
        {"task": "quote X, then find the review limit"},
        {"configurable": {**config["configurable"], "thread_id": "tools"}},
    )


@contextmanager
def sqlite_persistence(path: Path) -> Iterator[tuple[Any, Any]]:
    from langgraph.checkpoint.sqlite import SqliteSaver
    from langgraph.store.sqlite import SqliteStore

    with (
        closing(sqlite3.connect(path, check_same_thread=False)) as conn,
        SqliteStore.from_conn_string(str(path)) as store,
    ):
        store.setup()
        yield SqliteSaver(conn, serde=guard_serializer()), store


def check_drafts(saver: Any, store: Any) -> None:
    raw = [
        t.checkpoint["channel_values"] for t in saver.list({"configurable": {"thread_id": "tools"}})
    ]
    assert not any(isinstance(v.get("guard_log"), list) for v in raw)  # a delta channel
    plans, skipped = draft_cases(saver, "plans", store=store)
    tools = cases_from_thread(saver, "tools")
    kinds = [c.kind for c in plans + tools]
    assert set(kinds) == {"memory", "evidence", "planner", "loop", "retry"}
    assert skipped == {}
    # every draft reproduces the decision it was made from: the rebuild is faithful
    run = run_cases(plans + tools)
    assert run.failed == [], [(r.case_id, r.failures) for r in run.failed]

    memory = next(c for c in plans if c.kind == "memory")
    assert memory.input["scopes"] == [PRINCIPAL] and memory.input["now"] == NOW
    assert {
        "id": "m1",
        "key": "report_format",
        "value": "pdf",
        "scope": PRINCIPAL,
        "created_at": "2026-01-01T00:00:00+00:00",
    } in memory.input["records"]
    assert memory.expect["reason"] == "current_turn_override"

    evidence = next(c for c in plans if c.kind == "evidence")
    assert (evidence.input["principal"], evidence.input["as_of"]) == (PRINCIPAL, NOW)
    assert evidence.expect["value"] == "50w"
    assert evidence.expect["absent_ids"] == ["memo"]  # hidden from alice: checked, not shown

    planner = [c.expect["reason"] for c in plans if c.kind == "planner"]
    assert planner[:3] == ["initial_plan", "critique_only", "critique_only"]

    retry = [c for c in tools if c.kind == "retry"]
    assert retry[0].expect == {"route": "retry", "kind": "transient", "reason": "transient"}
    loops = {c.expect.get("verdict", "reuse") for c in tools if c.kind == "loop"}
    assert loops == {"reuse", "nudge", "stop"}
    assert all(c.note.startswith("Drafted from thread") for c in plans + tools)


def test_cases_from_a_sqlite_thread(tmp_path: Path) -> None:
    with sqlite_persistence(tmp_path / "runs.sqlite") as (saver, store):
        record_threads(saver, store)
        check_drafts(saver, store)


def test_cli_from_thread_writes_jsonl(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "runs.sqlite"
    with sqlite_persistence(db) as (saver, store):
        record_threads(saver, store)
    out = tmp_path / "drafts.jsonl"
    assert (
        eval_cli(
            [
                "--from-thread",
                "plans",
                "--db",
                str(db),
                "--out",
                str(out),
                "--draft-slice",
                "regressions",
            ]
        )
        == 0
    )
    assert "draft case(s) from thread 'plans'" in capsys.readouterr().err
    drafts = load_cases([out])
    assert {c.slice for c in drafts} == {"regressions"}
    assert run_cases(drafts).failed == []
    # the drafts join a slice and run with the rest: trace -> badcase -> slice -> regression
    assert eval_cli(["--cases", str(out), "--slice", "regressions", "--quiet"]) == 0
    with pytest.raises(FileNotFoundError):
        eval_cli(["--from-thread", "plans", "--db", str(tmp_path / "nope.sqlite")])


def test_unknown_thread_is_an_error(tmp_path: Path) -> None:
    with (
        sqlite_persistence(tmp_path / "runs.sqlite") as (saver, _),
        pytest.raises(ValueError, match="thread 'ghost' has no checkpoints"),
    ):
        cases_from_thread(saver, "ghost")


def test_write_cases_round_trip(tmp_path: Path) -> None:
    cases = load_cases()[:3]
    write_cases(cases, tmp_path / "x.jsonl")
    assert load_cases([tmp_path / "x.jsonl"]) == cases


@pytest.mark.postgres
def test_cases_from_a_postgres_thread(postgres_url: str) -> None:
    from langgraph.checkpoint.postgres import PostgresSaver
    from langgraph.store.postgres import PostgresStore

    with (
        PostgresSaver.from_conn_string(postgres_url) as saver,
        PostgresStore.from_conn_string(postgres_url) as store,
    ):
        saver.setup()
        store.setup()
        record_threads(saver.with_allowlist([]), store)
        check_drafts(saver, store)
    assert eval_cli(["--from-thread", "tools", "--db", postgres_url, "--out", "/dev/null"]) == 0


@pytest.mark.parametrize("name", ["procurement_threshold", "planner_loop"])
def test_cases_from_a_reference_graph_thread_with_delta_channels(tmp_path: Path, name: str) -> None:
    """plans and evidence are delta channels in the reference graph: most checkpoints hold
    no value for them, the drafter rebuilds it (from the writes, or through the graph)."""
    from langgraph.checkpoint.sqlite import SqliteSaver
    from langgraph.store.memory import InMemoryStore

    from agent_guards.graphs.plan_execute import build_graph
    from agent_guards.graphs.scenarios import SCENARIOS, run_scenario

    scenario = SCENARIOS[name]
    store = InMemoryStore()
    with closing(sqlite3.connect(str(tmp_path / "ref.sqlite"), check_same_thread=False)) as conn:
        saver = SqliteSaver(conn, serde=guard_serializer())
        run_scenario(scenario, saver, store, thread_id=name)
        raw = [
            t.checkpoint["channel_values"]
            for t in saver.list({"configurable": {"thread_id": name}})
        ]
        assert any("plans" not in values for values in raw)  # a delta channel, not copied
        cases = cases_from_thread(saver, name, store=store)
        graph = build_graph(
            scenario.script().model(), scenario.tools(), policies=scenario.policies, store=store
        )
        via_graph = cases_from_thread(saver, name, store=store, graph=graph)
    assert [c.to_dict() for c in via_graph] == [c.to_dict() for c in cases]
    planner = [c for c in cases if c.kind == "planner"]
    evidence = [c for c in cases if c.kind == "evidence"]
    assert planner and evidence
    assert all(c.input["versions"] for c in planner)
    assert all(c.input["items"] for c in evidence)
    if name == "planner_loop":  # each replan is judged against every earlier version
        assert [len(c.input["versions"]) for c in planner] == [1, 2, 3, 4]
    assert run_cases(planner + evidence).failed == []


@pytest.mark.parametrize("draft", [cases_from_thread, draft_cases])
def test_a_misspelled_option_is_refused_with_the_allowed_ones(draft: Any) -> None:
    from langgraph.checkpoint.memory import InMemorySaver

    with pytest.raises(TypeError, match=r"unknown option\(s\) \['slise'\]; allowed: slice"):
        draft(InMemorySaver(), "t1", slise="x")
