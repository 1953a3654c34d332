"""Kill -9 at every node of the reference graph, and inside its tool node; then resume.

One worker process runs DRAFTING (``fetch_alpha``, the write ``create_draft``, then
``fetch_beta``) on a SQLite file once per kill point, in a forked child that SIGKILLs
itself when the run reaches the point (a callback handler finds it: no timing). Each
test resumes one killed thread in-process (``invoke(None, config)`` on the same file)
and compares with an uninterrupted run. It proves, for every point:

* the write ran exactly once across both processes, and no call whose result the
  checkpoint held ran again (only a read killed before its checkpoint runs once more);
* a write killed between its recorded intent and its recorded outcome is surfaced as an
  ``unknown_write_outcome`` interrupt, not re-run, and only then;
* the ledger counted every real execution (``RunLedger.executions`` equals calls.log);
* the final answer, the plan record and the usage counters are those of the
  uninterrupted run.

The reference graph checkpoints each step before the next starts (``durability="sync"``);
with LangGraph's default a kill at a node's start lost a dozen steps, and most points
failed. A write answered from the ledger brings back its artifact (the evidence) and
counts once in the resumed history's usage; a write a human says did not happen is not
counted.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import ToolMessage
from langgraph.types import Command

from agent_guards.graphs.scenarios import scenario_config
from agent_guards.persistence import open_persistence
from agent_guards.tool_guard.ledger import RunLedger
from tests.integration._crash_worker import THREAD, KillAt, KillPoint
from tests.integration._reference import calls_logged, drafting_scenario, graph_for

ROOT = Path(__file__).resolve().parents[2]

VISITS = {
    "parse_goal": 1,
    "memory_resolve": 1,
    "plan": 1,
    "planner_gate": 3,
    "start_step": 3,
    "agent": 6,
    "tools": 3,
    "record_step": 3,
    "review": 3,
    "evidence_resolve": 1,
    "respond": 1,
}
"""How many times the uninterrupted DRAFTING run enters each node (checked below)."""

WRITE, READS = "create_draft", ("fetch_alpha", "fetch_beta")
POINTS = [
    *(KillPoint("start", node, k) for node, n in VISITS.items() for k in range(1, n + 1)),
    # the tools node returned (outcomes in the ledger), its checkpoint not yet written
    *(KillPoint("end", "tools", k) for k in range(1, VISITS["tools"] + 1)),
    # a tool returned, its outcome not yet in the ledger
    *(KillPoint("tool_end", tool) for tool in (*READS, WRITE)),
    # the write's intent is in the ledger, the write has not run
    KillPoint("tool_start", WRITE),
]
UNKNOWN_WRITE = {KillPoint("tool_start", WRITE), KillPoint("tool_end", WRITE)}
"""The kills between the write's recorded intent and its recorded outcome."""
DRAFT = [{"id": "draft_7", "claim_key": "draft", "value": "d-7", "source_type": "official"}]
"""What create_draft returns as its artifact (its evidence for the answer)."""


RERUN = {
    KillPoint("tool_end", "fetch_alpha"): "fetch_alpha",
    KillPoint("end", "tools", 1): "fetch_alpha",
    KillPoint("tool_end", "fetch_beta"): "fetch_beta",
    KillPoint("end", "tools", 3): "fetch_beta",
}
"""The kills after a read ran and before its checkpoint: that read runs once more."""


class NodeVisits(KillAt):
    """Count the node runs of a graph run, found as ``KillAt`` finds them (it never kills)."""

    def __init__(self) -> None:
        super().__init__(KillPoint("start", "", 1))
        self.visits: Counter[str] = Counter()

    def _reached(self, event: str, name: Any) -> None:
        if event == "start":
            self.visits[str(name)] += 1


@dataclass(frozen=True)
class Run:
    """A run to its end: final state, calls.log, the ledger's count, interrupts answered."""

    state: dict[str, Any]
    calls: list[str]
    executions: int
    asked: list[dict[str, Any]]


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> tuple[Run, Counter[str]]:
    """The uninterrupted run, and how often it entered each node."""
    run_dir = tmp_path_factory.mktemp("reference")
    scenario, spy = drafting_scenario(run_dir), NodeVisits()
    config = scenario_config(scenario, THREAD)
    with open_persistence(str(run_dir / "graph.sqlite")) as (saver, store):
        graph = graph_for(scenario, saver, store)
        out = graph.invoke(
            {"messages": [("user", scenario.message)]}, {**config, "callbacks": [spy]}
        )
        run = Run(dict(out), calls_logged(run_dir), RunLedger().executions(store, THREAD), [])
    return run, spy.visits


@pytest.fixture(scope="module")
def killed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One worker process; one killed run per point, each in ``ROOT/<point.slug>``."""
    root = tmp_path_factory.mktemp("killed")
    (root / "points.txt").write_text("\n".join(str(p) for p in POINTS) + "\n")
    env = {**os.environ, "LANGGRAPH_STRICT_MSGPACK": "true", "LANGSMITH_TRACING": "false"}
    done = subprocess.run(
        [sys.executable, "-m", "tests.integration._crash_worker", "--kill-at", str(root)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        timeout=600,  # a safety limit only
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode()
    return root


def _what_happened(run_dir: Path, asked: dict[str, Any]) -> dict[str, Any]:
    """The human's answer, from the world (calls.log): did the write happen? With what
    the write returned (``artifact``: what a resume would need to restore its evidence)."""
    if asked["tool"] in calls_logged(run_dir):
        return {"ran": True, "result": "draft d-7", "artifact": DRAFT}
    return {"ran": False}


def resume(run_dir: Path) -> tuple[Run, dict[str, Any]]:
    """Resume the killed thread to its end; the run, and the state the crash left."""
    scenario = drafting_scenario(run_dir)
    config = scenario_config(scenario, THREAD)
    asked: list[dict[str, Any]] = []
    with open_persistence(str(run_dir / "graph.sqlite")) as (saver, store):
        # no other worker serves this thread: a write that started and never reported
        # back did not run elsewhere in the meantime, so it is asked about at once
        graph = graph_for(scenario, saver, store, ledger=RunLedger(wait=0))
        crashed = dict(graph.get_state(config).values)
        # killed before the input's checkpoint was written: the turn is sent again
        out = graph.invoke(None if crashed else {"messages": [("user", scenario.message)]}, config)
        while out.get("__interrupt__"):
            (pending,) = out["__interrupt__"]
            asked.append(pending.value)
            out = graph.invoke(Command(resume=_what_happened(run_dir, pending.value)), config)
        executions = RunLedger().executions(store, THREAD)
    return Run(dict(out), calls_logged(run_dir), executions, asked), crashed


@dataclass(frozen=True)
class Resumed:
    """A killed run, resumed: what ran before the kill, the state it left, the end."""

    before: list[str]
    crashed: dict[str, Any]
    run: Run


@pytest.fixture(scope="module")
def resumed(killed: Path) -> Callable[[KillPoint], Resumed]:
    """Each killed thread resumed once (the tests below read the same resumed run)."""
    done: dict[KillPoint, Resumed] = {}

    def get(point: KillPoint) -> Resumed:
        if point not in done:
            run_dir = killed / point.slug
            status = int((run_dir / "status").read_text())
            error = run_dir / "error.txt"
            assert os.WIFSIGNALED(status), error.read_text() if error.exists() else status
            assert os.WTERMSIG(status) == signal.SIGKILL
            before = calls_logged(run_dir)
            run, crashed = resume(run_dir)
            done[point] = Resumed(before, crashed, run)
        return done[point]

    return get


def completed_calls(state: dict[str, Any]) -> set[str]:
    """The tools whose results the checkpoint holds (done steps, the running step's)."""
    done = {
        step.tool
        for plan in state.get("plans") or []
        for step in plan.steps
        if step.status.value == "done" and step.tool
    }
    running = {m.name for m in state.get("step_messages") or [] if isinstance(m, ToolMessage)}
    return done | {str(name) for name in running if name}


def params() -> list[Any]:
    """Every kill point, named."""
    return [pytest.param(point, id=str(point)) for point in POINTS]


def test_the_kill_points_cover_every_node_the_run_visits(
    reference: tuple[Run, Counter[str]],
) -> None:
    """Every node execution of the uninterrupted run is a kill point (VISITS is exact)."""
    run, visits = reference
    assert dict(visits) == VISITS
    assert run.state["outcome"]["route"] == "answer"
    assert run.state["outcome"]["cited"] == ["doc_alpha", "draft_7", "doc_beta"]
    assert run.calls == ["fetch_alpha", WRITE, "fetch_beta"]
    assert run.executions == 3 == run.state["usage"]["tool_calls"]


@pytest.mark.parametrize("point", params())
def test_a_kill_repeats_no_completed_call_and_surfaces_an_unknown_write(
    point: KillPoint, resumed: Callable[[KillPoint], Resumed], reference: tuple[Run, Counter[str]]
) -> None:
    """SIGKILL at ``point``, resume: the write ran once across both processes, no call
    whose result the checkpoint held ran again, only a read killed before its checkpoint
    ran twice, an unknown write was asked about (only then), no execution went uncounted
    and the ledger's count covers the checkpointed usage."""
    got, (uninterrupted, _) = resumed(point), reference
    run = got.run
    assert run.calls[: len(got.before)] == got.before
    again = run.calls[len(got.before) :]
    assert not completed_calls(got.crashed) & set(again), f"ran again: {again}"
    assert run.calls.count(WRITE) == 1
    rerun = [RERUN[point]] if point in RERUN else []
    assert Counter(run.calls) == Counter(uninterrupted.calls) + Counter(rerun)
    # surfaced exactly when the kill fell between the write's intent and its outcome
    assert [(a["type"], a["tool"]) for a in run.asked] == (
        [("unknown_write_outcome", WRITE)] if point in UNKNOWN_WRITE else []
    )
    assert run.executions >= len(run.calls)  # the ledger missed no execution
    # the budget's account (the ledger) never holds less than the checkpointed usage
    assert run.state["usage"]["tool_calls"] <= run.executions


@pytest.mark.parametrize("point", params())
def test_the_ledger_counts_each_execution_once(
    point: KillPoint, resumed: Callable[[KillPoint], Resumed]
) -> None:
    """The thread's ledger holds exactly the real executions, the killed attempts' too."""
    run = resumed(point).run
    assert run.executions == len(run.calls)


@pytest.mark.parametrize("point", params())
def test_the_resumed_run_gives_the_uninterrupted_answer(
    point: KillPoint, resumed: Callable[[KillPoint], Resumed], reference: tuple[Run, Counter[str]]
) -> None:
    """The same outcome (route, text, citations) and plan record as without the kill."""
    run, (uninterrupted, _) = resumed(point).run, reference
    assert run.state["outcome"] == uninterrupted.state["outcome"]
    assert run.state["plans"] == uninterrupted.state["plans"]


@pytest.mark.parametrize("point", params())
def test_the_resumed_run_spends_the_uninterrupted_usage(
    point: KillPoint, resumed: Callable[[KillPoint], Resumed], reference: tuple[Run, Counter[str]]
) -> None:
    """The checkpointed usage counts each call of the lineage once: neither a fresh quota
    nor a lost or double count (a killed attempt is in the ledger, not in this lineage)."""
    run, (uninterrupted, _) = resumed(point).run, reference
    assert run.state["usage"] == uninterrupted.state["usage"]


def test_the_graph_checkpoints_each_step_before_the_next_and_keeps_its_serde_allowlist() -> None:
    """``durability="sync"`` is set on the compiled graph itself: a copy (``with_config``)
    would drop the strict-msgpack allowlist compile() derived from the state schema."""
    from langgraph.checkpoint.memory import InMemorySaver

    from agent_guards.graphs.plan_execute import build_graph
    from agent_guards.graphs.scenarios import SCENARIOS

    scenario = SCENARIOS["procurement_threshold"]
    plain = build_graph(scenario.script().model(), scenario.tools())
    durable = build_graph(scenario.script().model(), scenario.tools(), checkpointer=InMemorySaver())
    assert durable.config["configurable"]["__pregel_durability"] == "sync"
    assert "__pregel_durability" not in (plain.config or {}).get("configurable", {})
    assert durable._serde_allowlist and durable._serde_allowlist == plain._serde_allowlist
