"""Time travel on the reference graph: replay from every checkpoint, forks, and the CLI.

* From every checkpoint in ``get_state_history``, ``invoke(None, past_config)`` replays to
  the same guard decisions (GuardDecision equality ignores ``step`` and ``at``), the same
  usage and the same answer.
* ``update_state`` forks: correct the evidence, change the goal or the user's stated fact
  at step k, and the run from there decides differently, and correctly.
* ``agent-guards history`` and ``agent-guards replay`` on a recorded thread.

The graph routes with ``Command(goto=...)``, so a fork that must re-run a node reached by a
goto is written as ``update_state(cfg, Command(goto=node, update=...), as_node=...)``.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from langgraph.types import Command

from agent_guards import Evidence, GuardDecision, Verdict, cli
from agent_guards.graphs.scenarios import SCENARIOS, Scenario, scenario_config
from agent_guards.planner_gate import Goal
from tests.integration._reference import (
    graph_for,
    lookups_scenario,
    memory_persistence,
    persistence,
    run_sync,
)

# The breaker of rate_limit_storm lives in the store (shared by threads, not checkpointed):
# its replays are tested on their own below.
REPLAYABLE = sorted(n for n in SCENARIOS if n != "rate_limit_storm")


def _cid(snapshot: Any) -> str:
    return str(snapshot.config["configurable"]["checkpoint_id"])


def _replay_every_checkpoint(scenario: Scenario, graph: Any, thread: str) -> int:
    """Replay from each checkpoint of the original run; return how many were replayed."""
    original = graph.get_state(scenario_config(scenario, thread)).values
    history = list(graph.get_state_history({"configurable": {"thread_id": thread}}))
    assert len(history) > 5
    for snapshot in reversed(history):
        before = len(snapshot.values.get("guard_log") or [])
        config = scenario_config(scenario, thread, checkpoint_id=_cid(snapshot))
        replayed = graph.invoke(None, config)
        where = f"checkpoint at step {snapshot.metadata['step']} (next={snapshot.next})"
        assert replayed["guard_log"][before:] == original["guard_log"][before:], where
        assert replayed["outcome"] == original["outcome"], where
        assert replayed["usage"] == original["usage"], where
        assert replayed["plans"] == original["plans"], where
    return len(history)


@pytest.mark.parametrize("name", REPLAYABLE)
def test_replay_from_every_checkpoint_gives_the_same_decisions(name: str, tmp_path: Path) -> None:
    scenario = SCENARIOS[name]
    with persistence("sqlite", tmp_path) as (saver, store):
        run_sync(scenario, saver, store, name)
        _replay_every_checkpoint(scenario, graph_for(scenario, saver, store), name)


def test_replay_of_a_two_step_plan_from_every_checkpoint() -> None:
    scenario = lookups_scenario()
    saver, store = memory_persistence()
    run_sync(scenario, saver, store, "t")
    assert _replay_every_checkpoint(scenario, graph_for(scenario, saver, store), "t") > 20


def test_decisions_compare_equal_although_step_and_time_differ() -> None:
    a = GuardDecision(guard="g", verdict=Verdict.STOP, reason="r", step=3, at="2026-01-01T00:00:00")
    b = GuardDecision(guard="g", verdict=Verdict.STOP, reason="r", step=9, at="2027-01-01T00:00:00")
    assert a == b
    assert a != GuardDecision(guard="g", verdict=Verdict.STOP, reason="other", step=3)


def test_the_rate_limit_replays_depend_on_the_shared_breaker(tmp_path: Path) -> None:
    """Replays from before the first call are the same with the store as it was then; on
    the store where the breaker is open, the replay falls back without calling the tool."""
    scenario = SCENARIOS["rate_limit_storm"]
    thread = "storm"
    saver, store = memory_persistence()
    original = run_sync(scenario, saver, store, thread)
    history = list(
        graph_for(scenario, saver, store).get_state_history({"configurable": {"thread_id": thread}})
    )
    before_tools = [s for s in history if s.values.get("usage", {}).get("tool_calls", 0) == 0]
    assert len(before_tools) > 3
    from langgraph.store.memory import InMemoryStore

    for snapshot in before_tools:
        fresh = graph_for(scenario, saver, InMemoryStore())  # the store before the run
        before = len(snapshot.values.get("guard_log") or [])
        config = scenario_config(scenario, thread, checkpoint_id=_cid(snapshot))
        replayed = fresh.invoke(None, config)
        assert replayed["guard_log"][before:] == original["guard_log"][before:]
        assert replayed["usage"] == original["usage"]
    # the original store remembers the open breaker: no hammering on replay
    snapshot = before_tools[0]
    replayed = graph_for(scenario, saver, store).invoke(
        None, scenario_config(scenario, thread, checkpoint_id=_cid(snapshot))
    )
    retries = [
        (d.verdict.value, d.reason) for d in replayed["guard_log"] if d.guard == "retry_router"
    ]
    assert retries[-1] == ("fallback", "circuit_open")
    assert replayed["usage"].get("tool_calls", 0) == 0
    assert original["usage"]["tool_calls"] == 3


# -- forks --------------------------------------------------------------------------------


def _at(graph: Any, thread: str, node: str) -> Any:
    """The first checkpoint of the thread's history whose next node is ``node``."""
    history = list(graph.get_state_history({"configurable": {"thread_id": thread}}))
    return next(s for s in reversed(history) if s.next == (node,))


def test_fork_with_corrected_evidence_answers_from_the_correction(tmp_path: Path) -> None:
    """A newer official version arrives before evidence_resolve: it wins, with citation."""
    scenario = SCENARIOS["procurement_threshold"]
    with persistence("sqlite", tmp_path) as (saver, store):
        original = run_sync(scenario, saver, store, "t")
        graph = graph_for(scenario, saver, store)
        past = _at(graph, "t", "evidence_resolve")
        correction = Evidence(
            "policy_2026b",
            "approval_threshold",
            "40w",
            source_type="official",
            version="2026b",
            updated_at="2026-05-15",
            supersedes=("policy_2026",),
        )
        forked = graph.update_state(
            past.config,
            Command(goto="evidence_resolve", update={"evidence": [correction]}),
            as_node="review",
        )
        assert graph.get_state(forked).next == ("evidence_resolve",)
        out = graph.invoke(None, scenario_config(scenario, "t", **_ids(forked)))
        # the original branch is still there, unchanged
        first_end = _end_of_branch(graph, "t", _cid(past))
    assert original["outcome"]["cited"] == ["policy_2026"]
    assert out["outcome"]["route"] == "answer"
    assert out["outcome"]["cited"] == ["policy_2026b"]
    assert "40w" in out["outcome"]["text"]
    decision = out["guard_log"][-1]
    assert decision.guard == "evidence_resolve"
    assert "policy_2026b" in decision.selected_ids
    assert set(decision.conflicting_ids) == {"policy_2024", "policy_2026"}
    assert out["guard_log"][:-1] == original["guard_log"][:-1]
    assert first_end["outcome"] == original["outcome"]


@pytest.mark.parametrize("form", ["goal", "json"])
def test_fork_with_a_changed_goal_covers_the_new_dimensions(form: str, tmp_path: Path) -> None:
    """The goal now also asks for the approval records: the answer covers both, cited.
    The goal may be written in its JSON form (as Studio or an SDK client writes it)."""
    scenario = SCENARIOS["procurement_threshold"]
    with persistence("sqlite", tmp_path) as (saver, store):
        run_sync(scenario, saver, store, "t")
        graph = graph_for(scenario, saver, store)
        past = _at(graph, "t", "plan")
        dims = ["approval_threshold", "approval_records"]
        goal: Any = (
            Goal("approval_threshold", dimensions=tuple(dims))
            if form == "goal"
            else {"intent": "approval_threshold", "dimensions": dims}
        )
        forked = graph.update_state(past.config, {"goal": goal}, as_node="memory_resolve")
        assert graph.get_state(forked).next == ("plan",)
        out = graph.invoke(None, scenario_config(scenario, "t", **_ids(forked)))
    assert out["outcome"]["route"] == "answer"
    assert out["outcome"]["cited"] == ["policy_2026", "faq"]
    assert "approval_records" in out["outcome"]["text"]


def test_fork_with_a_required_constraint_missing_clarifies(tmp_path: Path) -> None:
    scenario = SCENARIOS["procurement_threshold"]
    with persistence("memory", tmp_path) as (saver, store):
        run_sync(scenario, saver, store, "t")
        graph = graph_for(scenario, saver, store)
        past = _at(graph, "t", "plan")
        goal = Goal("approval_threshold", required=("region",), dimensions=("approval_threshold",))
        forked = graph.update_state(past.config, {"goal": goal}, as_node="memory_resolve")
        out = graph.invoke(None, scenario_config(scenario, "t", **_ids(forked)))
    gate = [d for d in out["guard_log"] if d.guard == "planner_gate"]
    assert (gate[-1].verdict.value, gate[-1].reason) == ("clarify", "missing_constraints")
    assert out["outcome"]["route"] == "clarify"
    assert out["usage"].get("tool_calls", 0) == 0


def test_fork_with_the_users_fact_corrected_keeps_the_stored_memory(tmp_path: Path) -> None:
    """Fork before memory_resolve with the turn's 'Markdown' fact removed: PDF is used."""
    scenario = SCENARIOS["pdf_vs_markdown"]
    with persistence("sqlite", tmp_path) as (saver, store):
        original = run_sync(scenario, saver, store, "t")
        graph = graph_for(scenario, saver, store)
        past = _at(graph, "t", "memory_resolve")
        forked = graph.update_state(
            past.config,
            Command(goto="memory_resolve", update={"memory_facts": []}),
            as_node="parse_goal",
        )
        out = graph.invoke(None, scenario_config(scenario, "t", **_ids(forked)))
    assert original["outcome"]["format"] == "markdown"
    assert out["outcome"]["format"] == "pdf"
    memory = next(d for d in reversed(out["guard_log"]) if d.guard == "memory_resolve")
    assert memory.selected_ids == ("m_pdf",)
    assert memory.reason != "current_turn_override"


def _ids(config: Any) -> dict[str, Any]:
    return {"checkpoint_id": config["configurable"]["checkpoint_id"]}


def _end_of_branch(graph: Any, thread: str, checkpoint: str) -> dict[str, Any]:
    from agent_guards.graphs.demo import _history, _original_end

    snaps, children = _history(graph, thread)
    end = _original_end(snaps, children, checkpoint)
    return dict(snaps[end].values) if end in snaps else {}


# -- the CLI --------------------------------------------------------------------------------


def _demo(db: Path, name: str, capsys: pytest.CaptureFixture[str]) -> str:
    status = cli.main(["demo", "--scenario", name, "--db", str(db), "--no-baseline"])
    out = capsys.readouterr().out
    assert status == 0
    found = re.search(r"thread: (\S+)", out)
    assert found is not None, out
    return found.group(1)


def _history(db: Path, thread: str, capsys: pytest.CaptureFixture[str]) -> list[list[str]]:
    assert cli.main(["history", thread, "--db", str(db)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:3] == ["step", "checkpoint", "next"]
    return [line.split() for line in lines[1:]]


def test_history_lists_every_checkpoint_with_plan_and_usage(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "demo.sqlite"
    thread = _demo(db, "duplicate_tool_call", capsys)
    rows = _history(db, thread, capsys)
    assert [r[0] for r in rows] == [str(i) for i in range(-1, len(rows) - 1)]
    assert rows[0][2] == "__start__" and rows[-1][2] == "-"
    plans = [r[3] for r in rows]
    assert plans[0] == "-" and plans[-1] == "v1"
    model_calls = [int(r[4]) for r in rows]
    assert model_calls == sorted(model_calls) and model_calls[-1] == 6  # cumulative
    assert any("loop_check:stop:repeated_call" in " ".join(r) for r in rows)


def test_replay_from_a_checkpoint_is_identical(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "demo.sqlite"
    thread = _demo(db, "duplicate_tool_call", capsys)
    rows = _history(db, thread, capsys)
    for row in (next(r for r in rows if r[2] == "agent"), rows[1]):
        status = cli.main(["replay", thread, "--checkpoint", row[1], "--db", str(db)])
        out = capsys.readouterr().out
        assert status == 0, out
        assert "identical to the original run" in out
        assert "! " not in out


def test_replay_compares_with_the_original_branch_not_a_later_fork(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """After a fork that changed the answer, a replay still diffs against the original."""
    db = tmp_path / "demo.sqlite"
    thread = _demo(db, "procurement_threshold", capsys)
    scenario = SCENARIOS["procurement_threshold"]
    from agent_guards.graphs.demo import open_persistence

    with open_persistence(str(db)) as (saver, store):
        graph = graph_for(scenario, saver, store)
        past = _at(graph, thread, "evidence_resolve")
        newer = Evidence("p9", "approval_threshold", "10w", source_type="official", version="9")
        forked = graph.update_state(
            past.config,
            Command(goto="evidence_resolve", update={"evidence": [newer]}),
            as_node="review",
        )
        graph.invoke(None, scenario_config(scenario, thread, **_ids(forked)))
        first = _cid(_at(graph, thread, "parse_goal"))
    assert cli.main(["replay", thread, "--checkpoint", first, "--db", str(db)]) == 0
    assert "identical to the original run" in capsys.readouterr().out


def test_replay_on_a_two_turn_thread_compares_with_its_own_turn(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A replay from turn 1 ends where turn 1 ended; turn 2 is not part of the diff."""
    db = tmp_path / "demo.sqlite"
    thread = "procurement_threshold-two-turns"
    scenario = SCENARIOS["procurement_threshold"]
    from agent_guards.graphs.demo import open_persistence

    with open_persistence(str(db)) as (saver, store):
        run_sync(scenario, saver, store, thread)
        run_sync(scenario, saver, store, thread, message="And for services contracts?")
        first = _cid(_at(graph_for(scenario, saver, store), thread, "plan"))
    assert cli.main(["replay", thread, "--checkpoint", first, "--db", str(db)]) == 0
    assert "identical to the original run" in capsys.readouterr().out


def test_replay_of_an_unknown_checkpoint_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "demo.sqlite"
    thread = _demo(db, "permission_denied", capsys)
    with pytest.raises(SystemExit, match="no checkpoint"):
        cli.main(["replay", thread, "--checkpoint", "nope", "--db", str(db)])
    with pytest.raises(SystemExit, match="not made by the demo"):
        cli.main(["history", "someone-elses-thread", "--db", str(db)])
