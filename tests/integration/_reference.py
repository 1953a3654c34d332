"""Shared helpers for the reference-graph tests (agent_guards/graphs/plan_execute.py).

Persistence factories (InMemory, SQLite sync and async, all with ``guard_serializer()``),
runners that drive a scenario sync or async on any of them, decision summaries, and three
scripted scenarios of our own next to the six built-in ones:

* ``LOOKUPS``: two plan steps (``fetch_alpha`` then ``fetch_beta``); a later turn asking
  for "gamma" plans one ``fetch_gamma`` step. Used for budgets, time travel, crashes.
* ``PAYMENT``: ``create_draft`` (a side effect with a compensation hook) then a high-risk
  ``send_payment`` that the planner gate sends to a human.
* ``lookups_scenario(log_dir, block_beta=True)``: ``fetch_beta`` waits on a file flag, so a
  test can kill the process while a tool is running (see ``_crash_worker``).
* ``DRAFTING``: reads around a write: ``fetch_alpha``, then ``create_draft`` (declared a
  write with ``annotate_tool``), then ``fetch_beta``. Used to kill a run at every node.

Tools append one line per execution to ``<log_dir>/calls.log`` when given a directory, so
executions can be counted across processes.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from functools import partial
from pathlib import Path
from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage
from langchain_core.tools import BaseTool, tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.memory import InMemoryStore

from agent_guards import Budget, EvidencePolicy, GuardDecision, guard_serializer
from agent_guards.graphs.plan_execute import Policies, build_graph
from agent_guards.graphs.scenarios import (
    CONTINUE,
    FINISH,
    NOW,
    RoleScript,
    Scenario,
    scenario_config,
    seed_memories,
)
from agent_guards.memory_resolve import asave_memories, memory_namespace
from agent_guards.persistence import open_persistence
from agent_guards.testing import tool_call_message
from agent_guards.tool_guard import annotate_tool
from agent_guards.tool_guard.ledger import RunLedger

__all__ = [
    "CONFLICT",
    "DRAFTING",
    "LOOKUPS",
    "NOW",
    "PAYMENT",
    "ROUTINE",
    "brief",
    "calls_logged",
    "drafting_scenario",
    "graph_for",
    "lookups_scenario",
    "memory_persistence",
    "no_serde_events",
    "persistence",
    "run_async",
    "run_sync",
]

ROUTINE = {("context_guard", "within_budget"), ("memory_resolve", "no_memory")}


def brief(decisions: Sequence[GuardDecision]) -> list[tuple[str, str, str]]:
    """(guard, verdict, reason) of each decision, without the routine 'nothing to do' ones."""
    return [
        (d.guard, d.verdict.value, d.reason)
        for d in decisions
        if (d.guard, d.reason) not in ROUTINE
    ]


# -- persistence ----------------------------------------------------------------------------


@contextmanager
def no_serde_events() -> Iterator[list[Any]]:
    """Fail if a checkpoint read blocks or merely tolerates a type (strict msgpack)."""
    from langgraph.checkpoint.serde.event_hooks import register_serde_event_listener

    events: list[Any] = []
    unregister = register_serde_event_listener(events.append)
    try:
        yield events
    finally:
        unregister()
    assert events == [], f"serializer events (blocked or unregistered types): {events}"


def memory_persistence() -> tuple[InMemorySaver, InMemoryStore]:
    return InMemorySaver(serde=guard_serializer()), InMemoryStore()


@contextmanager
def persistence(kind: str, tmp_path: Path) -> Iterator[tuple[Any, Any]]:
    """``(checkpointer, store)``: "memory", or "sqlite" (one file in ``tmp_path``)."""
    if kind == "memory":
        yield memory_persistence()
        return
    with open_persistence(str(tmp_path / "graph.sqlite")) as pair:
        yield pair


@asynccontextmanager
async def async_persistence(kind: str, tmp_path: Path) -> AsyncIterator[tuple[Any, Any]]:
    """The async counterparts: SqliteSaver/SqliteStore have no async methods."""
    if kind == "memory":
        yield memory_persistence()
        return
    import aiosqlite
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
    from langgraph.store.sqlite.aio import AsyncSqliteStore

    path = str(tmp_path / "graph-async.sqlite")
    async with (
        aiosqlite.connect(path) as conn,
        AsyncSqliteStore.from_conn_string(path) as store,
    ):
        await store.setup()
        yield AsyncSqliteSaver(conn, serde=guard_serializer()), store


# -- running --------------------------------------------------------------------------------


def graph_for(
    scenario: Scenario,
    checkpointer: Any,
    store: Any,
    *,
    policies: Policies | None = None,
    compensations: Any = None,
    ledger: RunLedger | None = None,
) -> Any:
    """The guarded reference graph for ``scenario`` (a fresh scripted model)."""
    return build_graph(
        scenario.script().model(),
        scenario.tools(),
        policies=policies or scenario.policies,
        checkpointer=checkpointer,
        store=store,
        compensations=scenario.compensations if compensations is None else compensations,
        ledger=ledger,
    )


def run_sync(
    scenario: Scenario,
    checkpointer: Any,
    store: Any,
    thread: str,
    *,
    message: str | None = None,
    policies: Policies | None = None,
) -> dict[str, Any]:
    """One turn of ``scenario`` on ``thread``; memories seeded into ``store`` first."""
    seed_memories(store, scenario)
    graph = graph_for(scenario, checkpointer, store, policies=policies)
    config = scenario_config(replace_policies(scenario, policies), thread)
    return dict(graph.invoke({"messages": [("user", message or scenario.message)]}, config))


async def run_async(
    scenario: Scenario,
    checkpointer: Any,
    store: Any,
    thread: str,
    *,
    message: str | None = None,
    policies: Policies | None = None,
) -> dict[str, Any]:
    """``run_sync`` through ``ainvoke`` (the async nodes, edges and tool wrappers)."""
    if scenario.memories:
        await asave_memories(store, memory_namespace(scenario.principal), scenario.memories)
    graph = graph_for(scenario, checkpointer, store, policies=policies)
    config = scenario_config(replace_policies(scenario, policies), thread)
    return dict(await graph.ainvoke({"messages": [("user", message or scenario.message)]}, config))


def replace_policies(scenario: Scenario, policies: Policies | None) -> Scenario:
    if policies is None:
        return scenario
    from dataclasses import replace

    return replace(scenario, policies=policies)


def calls_logged(log_dir: Path) -> list[str]:
    path = log_dir / "calls.log"
    return path.read_text().split() if path.exists() else []


# -- scripted scenarios of our own ----------------------------------------------------------


def _goal(intent: str, dims: Sequence[str]) -> str:
    return json.dumps({"intent": intent, "dimensions": list(dims)})


def _plan(*steps: dict[str, Any]) -> str:
    return json.dumps({"steps": list(steps), "reason": "scripted"})


def _step(id: str, tool_name: str, *, after: str | None = None, **extra: Any) -> dict[str, Any]:
    return {
        "id": id,
        "description": f"run {tool_name}",
        "tool": tool_name,
        "args": {},
        "depends_on": [after] if after else [],
        **extra,
    }


def _last_human(messages: Sequence[BaseMessage]) -> str:
    return next((str(m.content) for m in reversed(messages) if isinstance(m, HumanMessage)), "")


def _lookup_goal(messages: list[BaseMessage]) -> str:
    if "gamma" in _last_human(messages):
        return _goal("audit", ["gamma"])
    return _goal("audit", ["alpha", "beta"])


def _lookup_plan(messages: list[BaseMessage]) -> str:
    if "gamma" in _last_human(messages):
        return _plan(_step("s3", "fetch_gamma"))
    return _plan(_step("s1", "fetch_alpha"), _step("s2", "fetch_beta", after="s1"))


def _lookups_script() -> RoleScript:
    return RoleScript(
        parse_goal=[_lookup_goal],
        plan=[_lookup_plan],  # alpha then beta; a request naming gamma plans fetch_gamma
        agent={
            "s1": [tool_call_message("fetch_alpha", {}), "alpha fetched"],
            "s2": [tool_call_message("fetch_beta", {}), "beta fetched"],
            "s3": [tool_call_message("fetch_gamma", {}), "gamma fetched"],
        },
        review=[CONTINUE, FINISH],
    )


def _log(log_dir: Path | None, name: str) -> None:
    if log_dir is not None:
        with open(log_dir / "calls.log", "a") as f:
            f.write(name + "\n")


def _wait_for_release(log_dir: Path) -> None:
    """Tell the test this tool runs (a file flag), then wait until it is released."""
    (log_dir / "beta.started").touch()
    deadline = time.monotonic() + 120
    while not (log_dir / "beta.release").exists():
        if time.monotonic() > deadline:  # the test died: do not hang forever
            raise TimeoutError("fetch_beta was never released")
        time.sleep(0.01)


def _lookup_tools(log_dir: Path | None = None, block_beta: bool = False) -> list[BaseTool]:
    def make(name: str, value: str) -> BaseTool:
        @tool(name, response_format="content_and_artifact")
        def fetch() -> tuple[str, list[dict[str, Any]]]:
            """Fetch one official figure."""
            _log(log_dir, name)
            if block_beta and name == "fetch_beta" and log_dir is not None:
                _wait_for_release(log_dir)
            item = {
                "id": f"doc_{value}",
                "claim_key": value,
                "value": f"{value}-ok",
                "source_type": "official",
                "updated_at": "2026-05-01",
            }
            return f"doc_{value}: {value}-ok", [item]

        return annotate_tool(fetch, read_only=True)  # a read: it may simply run again

    return [make("fetch_alpha", "alpha"), make("fetch_beta", "beta"), make("fetch_gamma", "gamma")]


def lookups_scenario(
    log_dir: Path | None = None, *, block_beta: bool = False, policies: Policies | None = None
) -> Scenario:
    """The LOOKUPS scenario, logging tool executions to ``log_dir``."""
    return Scenario(
        "lookups",
        "two official lookups, then a follow-up turn",
        "Audit alpha and beta.",
        _lookups_script,
        partial(_lookup_tools, log_dir, block_beta),
        "answer",
        policies=policies or Policies(),
    )


LOOKUPS = lookups_scenario()


def _payment_script() -> RoleScript:
    return RoleScript(
        parse_goal=[_goal("pay_invoice", ["payment"])],
        plan=[
            _plan(
                _step("s1", "create_draft"),
                _step("s2", "send_payment", after="s1", risk="high"),
            )
        ],
        agent={
            "s1": [tool_call_message("create_draft", {}), "draft created"],
            "s2": [tool_call_message("send_payment", {}), "payment sent"],
        },
        review=[CONTINUE, FINISH],
    )


def payment_tools(log_dir: Path | None = None) -> list[BaseTool]:
    @tool(response_format="content_and_artifact")
    def create_draft() -> tuple[str, list[dict[str, Any]]]:
        """Create a payment draft (a side effect: it must be undone on cancel)."""
        _log(log_dir, "create_draft")
        return "draft d-7", [
            {"id": "draft_7", "claim_key": "draft", "value": "d-7", "source_type": "official"}
        ]

    @tool(response_format="content_and_artifact")
    def send_payment() -> tuple[str, list[dict[str, Any]]]:
        """Send the payment (high risk: a human approves it first)."""
        _log(log_dir, "send_payment")
        return "paid", [
            {"id": "payment_7", "claim_key": "payment", "value": "sent", "source_type": "official"}
        ]

    return [create_draft, send_payment]


def payment_scenario(
    log_dir: Path | None = None, undo: Callable[[Any], str] | None = None
) -> Scenario:
    return Scenario(
        "payment",
        "a high-risk step approved or cancelled by a human",
        "Pay invoice 7.",
        _payment_script,
        partial(payment_tools, log_dir),
        "answer",
        compensations={"create_draft": undo} if undo is not None else {},
    )


PAYMENT = payment_scenario()


def _drafting_script() -> RoleScript:
    return RoleScript(
        parse_goal=[_goal("draft_invoice", ["alpha", "draft", "beta"])],
        plan=[
            _plan(
                _step("s1", "fetch_alpha"),
                _step("s2", "create_draft", after="s1"),
                _step("s3", "fetch_beta", after="s2"),
            )
        ],
        agent={
            "s1": [tool_call_message("fetch_alpha", {}), "alpha fetched"],
            "s2": [tool_call_message("create_draft", {}), "draft created"],
            "s3": [tool_call_message("fetch_beta", {}), "beta fetched"],
        },
        review=[CONTINUE, CONTINUE, FINISH],
    )


def drafting_tools(log_dir: Path | None = None) -> list[BaseTool]:
    """Two reads and a write whose effect is declared (``annotate_tool``: a write)."""
    alpha, beta, _ = _lookup_tools(log_dir)
    create_draft = payment_tools(log_dir)[0]
    return [alpha, annotate_tool(create_draft), beta]


def drafting_scenario(log_dir: Path | None = None) -> Scenario:
    """DRAFTING, logging tool executions to ``log_dir``."""
    return Scenario(
        "drafting",
        "a write between two reads",
        "Draft invoice 7 from alpha and beta.",
        _drafting_script,
        partial(drafting_tools, log_dir),
        "answer",
    )


DRAFTING = drafting_scenario()


def _conflict_script() -> RoleScript:
    return RoleScript(
        parse_goal=[_goal("limit", ["limit"])],
        plan=[_plan(_step("s1", "lookup"))],
        agent=[tool_call_message("lookup", {}), "found two documents"],
        review=[FINISH],
    )


def _conflict_tools() -> list[BaseTool]:
    @tool(response_format="content_and_artifact")
    def lookup() -> tuple[str, list[dict[str, Any]]]:
        """Look up the limit (two official documents that disagree)."""
        same = {"claim_key": "limit", "source_type": "official", "updated_at": "2026-01-01"}
        docs = [
            {"id": "doc_a", "value": "10", "confidence": 0.9, **same},
            {"id": "doc_b", "value": "20", "confidence": 0.9, **same},
        ]
        return "doc_a: 10; doc_b: 20", docs

    return [lookup]


CONFLICT = Scenario(
    "conflict",
    "two official documents disagree on a high-risk question",
    "What is the limit?",
    _conflict_script,
    _conflict_tools,
    "escalate",
    policies=Policies(evidence=EvidencePolicy(high_risk=True)),
)
"""A close call on a high-risk question: respond escalates to a human (interrupt)."""

TIGHT = Policies(budget=Budget(max_steps=80, max_model_calls=11))
"""LOOKUPS turn 1 spends 8 model calls, a gamma turn 5: 11 fits one of each, not both."""
