"""The reference graph on PostgresSaver + PostgresStore (a throwaway server on 127.0.0.1).

The path to many workers and to the Agent Server: the same scenarios end to end, the
memory scenario reading its stored preference from PostgresStore, one circuit breaker
shared by two threads through the store, time travel, and the demo CLI with
``--db postgresql://...``.
"""

from __future__ import annotations

import re
import uuid

import pytest

from agent_guards import cli
from agent_guards.graphs.demo import open_persistence
from agent_guards.graphs.scenarios import SCENARIOS, scenario_config
from agent_guards.memory_resolve import memory_namespace
from tests.integration._reference import brief, graph_for, no_serde_events, run_sync
from tests.integration.test_graph_scenarios import _check_run

pytestmark = pytest.mark.postgres

BREAKER_NS = ("agent_guards", "circuit_breaker")


def _thread(name: str) -> str:
    return f"{name}-{uuid.uuid4().hex[:8]}"


@pytest.mark.parametrize(
    "name", ["procurement_threshold", "pdf_vs_markdown", "planner_loop", "duplicate_tool_call"]
)
def test_scenario_end_to_end_on_postgres(name: str, postgres_url: str) -> None:
    scenario = SCENARIOS[name]
    thread = _thread(name)
    with no_serde_events(), open_persistence(postgres_url) as (saver, store):
        state = run_sync(scenario, saver, store, thread)
        _check_run(name, state)
        snapshot = graph_for(scenario, saver, store).get_state(scenario_config(scenario, thread))
        assert snapshot.next == ()
        assert snapshot.values["guard_log"] == state["guard_log"]
        assert snapshot.values["plans"] == state["plans"]


def test_the_memory_scenario_reads_its_memory_from_postgres_store(postgres_url: str) -> None:
    scenario = SCENARIOS["pdf_vs_markdown"]
    with open_persistence(postgres_url) as (saver, store):
        state = run_sync(scenario, saver, store, _thread("memory"))
        stored = store.search(memory_namespace(scenario.principal))
    assert [item.key for item in stored] == ["m_pdf"]
    assert stored[0].value["value"] == "pdf"
    memory = next(d for d in state["guard_log"] if d.guard == "memory_resolve")
    assert memory.conflicting_ids == ("m_pdf",)
    assert state["outcome"]["format"] == "markdown"


def test_one_breaker_is_shared_by_two_threads_through_the_store(postgres_url: str) -> None:
    """Thread A opens the breaker after three 429s; thread B never calls the tool."""
    scenario = SCENARIOS["rate_limit_storm"]
    with open_persistence(postgres_url) as (saver, store):
        for item in store.search(BREAKER_NS, limit=100_000):  # events and trial slots
            store.delete(item.namespace, item.key)
        first = run_sync(scenario, saver, store, _thread("storm-a"))
        second = run_sync(scenario, saver, store, _thread("storm-b"))
        breaker = scenario.policies.breaker.read(store, "fx_rate")  # type: ignore[union-attr]
    assert first["usage"]["tool_calls"] == 3
    assert [r for _, _, r in brief(first["guard_log"]) if r != "initial_plan"] == [
        "transient",
        "transient",
        "transient",
        "circuit_open",
        "no_evidence",
    ]
    assert second["usage"].get("tool_calls", 0) == 0
    assert brief(second["guard_log"]) == [
        ("planner_gate", "execute", "initial_plan"),
        ("retry_router", "fallback", "circuit_open"),
        ("evidence_resolve", "abstain", "no_evidence"),
    ]
    assert first["outcome"]["route"] == second["outcome"]["route"] == "abstain"
    assert breaker is not None and breaker["state"] == "open"


def test_time_travel_on_postgres(postgres_url: str) -> None:
    scenario = SCENARIOS["duplicate_tool_call"]
    thread = _thread("travel")
    with open_persistence(postgres_url) as (saver, store):
        original = run_sync(scenario, saver, store, thread)
        graph = graph_for(scenario, saver, store)
        history = list(graph.get_state_history({"configurable": {"thread_id": thread}}))
        mid = next(s for s in reversed(history) if s.next == ("agent",))
        before = len(mid.values["guard_log"])
        checkpoint = mid.config["configurable"]["checkpoint_id"]
        replayed = graph.invoke(None, scenario_config(scenario, thread, checkpoint_id=checkpoint))
    assert replayed["guard_log"][before:] == original["guard_log"][before:]
    assert replayed["usage"] == original["usage"]


def test_demo_history_and_replay_cli_on_postgres(
    postgres_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["--db", postgres_url]
    assert cli.main(["demo", "--scenario", "procurement_threshold", "--no-baseline", *args]) == 0
    out = capsys.readouterr().out
    assert "-> answer: approval_threshold: 50w [policy_2026]" in out
    found = re.search(r"thread: (\S+)", out)
    assert found is not None
    thread = found.group(1)
    assert cli.main(["history", thread, *args]) == 0
    rows = [line.split() for line in capsys.readouterr().out.splitlines()[1:]]
    assert rows[-1][2] == "-" and rows[-1][3] == "v1"
    agent = next(r for r in rows if r[2] == "agent")
    assert cli.main(["replay", thread, "--checkpoint", agent[1], *args]) == 0
    assert "identical to the original run" in capsys.readouterr().out
