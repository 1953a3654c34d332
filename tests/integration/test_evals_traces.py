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
    EvidencePolicy,
    EvidenceState,
    GuardDecision,
    GuardState,
    LoopPolicy,
    MemoryPolicy,
    MemoryRecord,
    MemoryState,
    PlannerPolicy,
    PlanState,
    PlanVersion,
    RetryRouterPolicy,
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
from agent_guards.retry_router import Backoff, TransientToolError
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
    return _wire_tools(saver, model, [quote, search], RetryRouterPolicy(), LoopPolicy())


def _wire_tools(
    saver: Any, model: Any, tools: list[Any], retry: RetryRouterPolicy, loop: LoopPolicy
) -> Any:
    """model -> guarded tools -> retry_router (+ loop_check) on ``step_messages``."""
    guard = ToolCallGuard(
        sleep=lambda s: None, loop=loop, retry=retry, messages_key="step_messages"
    )

    def agent(state: ToolState) -> dict[str, Any]:
        history = state.get("step_messages") or [HumanMessage(state["task"])]
        return {"step_messages": [*history[:1], model.invoke(history)]}

    builder = StateGraph(ToolState)
    builder.add_node("model", agent)
    builder.add_node("tools", guard.tool_node(tools))
    builder.add_edge(START, "model")
    builder.add_conditional_edges(
        "model", lambda s: tools_condition(s, messages_key="step_messages")
    )
    add_retry_router(
        builder,
        "tools",
        model="model",
        tools="tools",
        policy=retry,
        loop_policy=loop,
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
    # the same states either way; the graph adds only its policies' options and their note
    same = [({**c.input, "policy": None}, c.expect) for c in via_graph]
    assert same == [({**c.input, "policy": None}, c.expect) for c in cases]
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


# -- a custom-configured graph: its drafts carry what its nodes were built with -------------

USER_KEY = "user_id"  # not the default "principal"
ACME = ("acme", "memories")  # not the default ("memories",)
STORM = RetryRouterPolicy(backoff=Backoff(base_delay=0.01, max_attempts=4), name="AcmeRetry")
LOOPS = LoopPolicy(nudge_at=3, stop_at=4, name="AcmeLoops")


def acme_namespace(principal: str) -> tuple[str, ...]:
    return memory_namespace(principal, prefix=ACME)


def custom_plan_graph(saver: Any, store: Any) -> Any:
    """memory_resolve and evidence_resolve read ``user_id``; memories live under acme/."""
    builder = StateGraph(PlanGraphState)
    memory = create_memory_resolve(
        principal_key=USER_KEY, namespace=acme_namespace, policy=MemoryPolicy(name="AcmeMemory")
    )
    builder.add_node("memory_resolve", memory)
    evidence = create_evidence_resolve(
        principal_key=USER_KEY, policy=EvidencePolicy(high_risk=True, name="AcmeEvidence")
    )
    builder.add_node("evidence_resolve", evidence)
    builder.add_edge(START, "memory_resolve")
    builder.add_edge("memory_resolve", "evidence_resolve")
    builder.add_edge("evidence_resolve", END)
    return builder.compile(checkpointer=saver, store=store)


def custom_tool_graph(saver: Any) -> Any:
    """Three 429s retried under a 4-attempt policy, then a search repeated until LOOPS stops."""
    attempts: list[str] = []

    @tool
    def quote(symbol: str) -> str:
        """Latest quote."""
        attempts.append(symbol)
        if len(attempts) <= 3:
            raise TransientToolError("429 Too Many Requests", retry_after=1)
        return "X: 42.10 USD"

    @tool
    def search(q: str) -> str:
        """Search."""
        return "Contracts above 500k need a second review (policy 2026, section 4.2)."

    model = ScriptedChatModel(
        script=[
            tool_call_message("quote", {"symbol": "X"}),
            tool_call_message("search", {"q": "x"}),
        ],
        repeat_last=True,
    )
    return _wire_tools(saver, model, [quote, search], STORM, LOOPS)


def record_custom_threads(saver: Any, store: Any) -> dict[str, Any]:
    save_memories(
        store,
        acme_namespace(PRINCIPAL),
        [MemoryRecord("m1", "report_format", "pdf", scope=PRINCIPAL, created_at="2026-01-01")],
    )
    run = {USER_KEY: PRINCIPAL, "agent_guards_now": NOW}
    facts = [{"key": "report_format", "value": "markdown", "persist": True}]
    graphs = {"acme-plans": custom_plan_graph(saver, store), "acme-tools": custom_tool_graph(saver)}
    graphs["acme-plans"].invoke(
        {"evidence": EVIDENCE, "memory_facts": facts},
        {"configurable": {**run, "thread_id": "acme-plans"}},
    )
    graphs["acme-tools"].invoke(
        {"task": "quote X, then find the review limit"},
        {"configurable": {**run, "thread_id": "acme-tools"}, "recursion_limit": 60},
    )
    return graphs


def test_drafts_of_a_custom_configured_graph_pass_on_their_own_thread(tmp_path: Path) -> None:
    with sqlite_persistence(tmp_path / "acme.sqlite") as (saver, store):
        graphs = record_custom_threads(saver, store)
        before = [c for t in graphs for c in cases_from_thread(saver, t, store=store)]
        after = [c for t, g in graphs.items() for c in cases_from_thread(saver, t, graph=g)]
    assert len(after) == len(before) and {c.kind for c in after} == {
        "memory",
        "evidence",
        "loop",
        "retry",
    }
    # from the checkpoints alone, the principal key, namespace and policies are not known
    assert run_cases(before).failed
    run = run_cases(after)
    assert run.failed == [], [(r.case_id, r.failures) for r in run.failed]

    memory = next(c for c in after if c.kind == "memory")
    assert memory.input["scopes"] == [PRINCIPAL] and memory.input["now"] == NOW  # pinned clock
    assert "m1" in {r["id"] for r in memory.input["records"]}  # read from acme/memories/...
    evidence = next(c for c in after if c.kind == "evidence")
    assert (evidence.input["principal"], evidence.input["as_of"]) == (PRINCIPAL, NOW)
    assert evidence.input["policy"] == {"high_risk": True, "name": "AcmeEvidence"}
    assert evidence.expect["absent_ids"] == ["memo"]
    retry = [c for c in after if c.kind == "retry"]
    backoff = {"base_delay": 0.01, "max_attempts": 4}
    assert retry[0].input["policy"] == {"backoff": backoff, "name": "AcmeRetry"}
    assert "its options are in input.policy" in retry[0].note
    loops = [c for c in after if c.kind == "loop" and "verdict" in c.expect]
    assert {c.input["policy"]["name"] for c in loops} == {"AcmeLoops"}


def test_cli_from_thread_reads_the_graph_it_is_given(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "acme.sqlite"
    with sqlite_persistence(db) as (saver, store):
        record_custom_threads(saver, store)
    module = tmp_path / "acme_graph.py"
    module.write_text(
        "from tests.integration.test_evals_traces import custom_plan_graph\n"
        "graph = custom_plan_graph(None, None)\n",
        encoding="utf-8",
    )
    out = tmp_path / "drafts.jsonl"
    argv = ["--from-thread", "acme-plans", "--db", str(db), "--out", str(out)]
    assert eval_cli([*argv, "--graph", f"{module}:graph"]) == 0
    drafts = load_cases([out])
    assert len(drafts) == 2 and run_cases(drafts).failed == []
    assert eval_cli(argv) == 0  # without --graph: drafted, but not what the nodes were built with
    assert run_cases(load_cases([out])).failed
    capsys.readouterr()


def test_demo_rate_limit_storm_drafts_pass_under_its_policy(tmp_path: Path) -> None:
    """The demo's storm retries 4 times (StormRetryPolicy); a draft replayed under the default
    3-attempt policy used to fail (1 of its cases). The CLI builds the demo graph itself."""
    from agent_guards.graphs.scenarios import SCENARIOS, run_scenario
    from agent_guards.persistence import open_persistence

    db = str(tmp_path / "demo.sqlite")
    with open_persistence(db) as (saver, store):
        run_scenario(SCENARIOS["rate_limit_storm"], saver, store, thread_id="rate_limit_storm-1")
        alone = cases_from_thread(saver, "rate_limit_storm-1", store=store)
    assert len(run_cases(alone).failed) == 1  # the checkpoints alone: StormRetryPolicy unknown
    out = tmp_path / "storm.jsonl"
    assert eval_cli(["--from-thread", "rate_limit_storm-1", "--db", db, "--out", str(out)]) == 0
    drafts = load_cases([out])
    assert len(drafts) == len(alone)
    run = run_cases(drafts)
    assert run.failed == [], [(r.case_id, r.failures) for r in run.failed]
    assert all(c.input["policy"]["name"] == "StormRetryPolicy" for c in drafts if c.kind == "retry")
