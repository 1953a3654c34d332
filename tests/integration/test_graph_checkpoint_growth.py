"""Checkpoint growth: bytes the guard channels write per super-step stay flat (SQLite).

SqliteSaver stores a full copy of every plain channel in each checkpoint, so a channel
that grows by one item per step makes the run quadratic (LANGGRAPH_FACTS.md). For each
guard channel we measure, at every super-step, its share of the checkpoint blob plus the
writes its tasks stored, and compare the medians of the 63 super-steps up to step 10, 100
and 1000 of one long run (a plan of 150 cheap steps, each one lookup), and the means of
the two halves of the run (``guard_log``, ``plans`` and ``evidence`` are delta channels that
write a full snapshot every 100 updates). The run's plan and tool come from
``benchmarks/bench_graph.py``, which measures the whole checkpoint the same way.

Measured on this run (bytes per super-step; median at 10 / 100 / 1000; mean 100-1000;
``.venv/bin/python -m pytest tests/integration/test_graph_checkpoint_growth.py``):

* guard_log (``delta_log()``): 0 / 0 / 0; mean 425 (snapshots of up to 200 decisions).
* plans (``delta_channel(merge_plans)``): 0 / 0 / 0; mean 7.7 KB, the same in both halves of
  the run (7.6 / 7.8 KB). A step that changes the plan writes the changed version whole
  (``start_step`` and ``record_step`` mark a step), plus a snapshot every 100 updates, so
  the plan still costs ~65 bytes per plan step per super-step (~0.36 KB when every
  checkpoint carried the whole plan): 16 MB of SQLite for this run instead of 52 MB.
* evidence (``delta_channel(merge_evidence)``): 0 / 0 / 0; mean 26 (1116 per checkpoint
  when it was a plain channel).
* usage ~45, memory_verdict 394, goal 90, context_pinned_ids ~25, context_tally ~0.2 KB (a few
  numbers and ids), step_messages ~1.6 KB (cleared at each plan step): flat.
* run_ledger (``delta_channel(merge_ledger)``; the run ledger in state, the graph has no
  store): the step's intent and outcome entries, flat (a plain channel copied the whole
  record of the run into every checkpoint: 2.5x the bytes per super-step by step 1000).
* step_messages inside one long ReAct step grows with each tool call of that step,
  until the budget stops the step (bounded by ``max_tool_calls``, not by the run).
"""

from __future__ import annotations

import json
import sqlite3
import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import BaseMessage
from langchain_core.tools import tool
from langgraph.checkpoint.sqlite import SqliteSaver

from agent_guards import Budget, guard_serializer
from agent_guards.graphs.plan_execute import Policies, build_graph
from agent_guards.graphs.scenarios import RoleScript
from agent_guards.testing import tool_call_message
from benchmarks.bench_graph import long_plan, lookup

pytestmark = pytest.mark.slow

GUARD_CHANNELS = (
    "guard_log",
    "usage",
    "plans",
    "evidence",
    "evidence_verdict",
    "memory_verdict",
    "step_messages",
    "goal",
    "context_pins",
    "context_pinned_ids",
    "context_tally",
    "run_ledger",
    "executed_writes",
)
FLAT = GUARD_CHANNELS


def _pager(messages: list[BaseMessage]) -> Any:
    page = sum(m.type == "ai" for m in messages) + 1
    return tool_call_message("read_page", {"page": page})


@tool
def read_page(page: int) -> str:
    """Read one page of a report (every page is different)."""
    return f"page {page}: " + "row " * 20


def _paging_plan() -> RoleScript:
    plan = {"steps": [{"id": "s1", "description": "read the report", "tool": "read_page"}]}
    return RoleScript(
        parse_goal=[json.dumps({"intent": "read", "dimensions": ["report"]})],
        plan=[json.dumps(plan)],
        agent=[_pager],
        review=[json.dumps({"action": "finish"})],
    )


def _run(tmp_path: Path, script: RoleScript, tools: list[Any], budget: Budget) -> dict[str, Any]:
    db = tmp_path / "growth.sqlite"
    conn = sqlite3.connect(str(db), check_same_thread=False)
    saver = SqliteSaver(conn, serde=guard_serializer())
    graph = build_graph(script.model(), tools, policies=Policies(budget=budget), checkpointer=saver)
    config: Any = {
        "recursion_limit": 100_000,
        "configurable": {"thread_id": "long", "agent_guards_now": "2026-06-01T09:00:00+00:00"},
    }
    state = graph.invoke({"messages": [("user", "go")]}, config)
    conn.close()
    return dict(state)


def _bytes_per_step(db: Path) -> dict[int, dict[str, int]]:
    """Super-step -> guard channel -> bytes written (checkpoint share + stored writes)."""
    serde = guard_serializer()
    conn = sqlite3.connect(str(db))
    writes: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for checkpoint_id, channel, value in conn.execute(
        "SELECT checkpoint_id, channel, value FROM writes WHERE thread_id = 'long'"
    ):
        writes[checkpoint_id][channel] += len(value or b"")
    out: dict[int, dict[str, int]] = {}
    for checkpoint_id, kind, blob, metadata in conn.execute(
        "SELECT checkpoint_id, type, checkpoint, metadata FROM checkpoints WHERE thread_id = 'long'"
    ):
        values = serde.loads_typed((kind, blob))["channel_values"]
        step = json.loads(metadata)["step"]
        out[step] = {
            channel: (len(serde.dumps_typed(values[channel])[1]) if channel in values else 0)
            + writes[checkpoint_id].get(channel, 0)
            for channel in GUARD_CHANNELS
        }
    conn.close()
    return out


WINDOW = 63
"""Super-steps per median: whole cycles of a plan step (7 super-steps, or 9), so the median
does not depend on where in a step's cycle the window starts."""


def _median(per_step: dict[int, dict[str, int]], channel: str, around: int) -> float:
    first = max(1, around - WINDOW + 1)
    return statistics.median(per_step[s][channel] for s in range(first, around + 1))


@pytest.fixture(scope="module")
def long_run(tmp_path_factory: pytest.TempPathFactory) -> dict[int, dict[str, int]]:
    """One run of ~1000 super-steps: a 150-step plan, each step one lookup."""
    tmp_path = tmp_path_factory.mktemp("growth")
    budget = Budget(max_steps=2000, max_tool_calls=500, max_model_calls=1000)
    state = _run(tmp_path, long_plan(150), [lookup], budget)
    assert state["outcome"]["route"] == "answer"
    assert state["usage"]["tool_calls"] == 150
    per_step = _bytes_per_step(tmp_path / "growth.sqlite")
    assert max(per_step) >= 1000
    return per_step


def _mean(per_step: dict[int, dict[str, int]], channel: str, start: int, end: int) -> float:
    return statistics.mean(per_step[s][channel] for s in range(start, end + 1))


@pytest.mark.parametrize("channel", FLAT)
def test_guard_channel_bytes_per_step_stay_flat(
    channel: str, long_run: dict[int, dict[str, int]]
) -> None:
    at10, at100, at1000 = (_median(long_run, channel, s) for s in (10, 100, 1000))
    # flat: step 1000 costs what step 100 costs (small slack for the ids' digits); between
    # step 10 and 100 a channel may first appear (evidence: the five recurring records)
    assert at1000 <= at100 * 1.1 + 64, (channel, at10, at100, at1000)
    assert at100 <= at10 * 1.1 + 2048, (channel, at10, at100, at1000)
    assert at1000 < 4096, (channel, at1000)
    # and on average, snapshots included: the second half of the run is no heavier
    first, second = _mean(long_run, channel, 100, 550), _mean(long_run, channel, 551, 1000)
    assert second <= first * 1.25 + 512, (channel, first, second)


def test_guard_log_writes_only_what_each_step_adds(long_run: dict[int, dict[str, int]]) -> None:
    """The log holds 200 decisions by step 1000; a step writes its few new decisions, plus
    a snapshot every 100 updates (``delta_log()``)."""
    assert statistics.median(long_run[s]["guard_log"] for s in range(100, 1001)) == 0
    assert _mean(long_run, "guard_log", 100, 1000) < 1024


def test_the_plan_writes_only_the_versions_a_step_changes(
    long_run: dict[int, dict[str, int]],
) -> None:
    """Most super-steps do not touch the plan and write nothing for it; the whole plan was
    ~42 KB per super-step when every checkpoint carried it."""
    assert statistics.median(long_run[s]["plans"] for s in range(100, 1001)) == 0
    first, second = _mean(long_run, "plans", 100, 550), _mean(long_run, "plans", 551, 1000)
    assert second <= first * 1.1, (first, second)
    # a 150-step plan (~55 KB whole), written by 2 of each step's 7 super-steps
    assert _mean(long_run, "plans", 100, 1000) < 16 * 1024


def test_the_plan_costs_little_per_plan_step(tmp_path: Path) -> None:
    """A changed version is written whole: still linear in the plan, ~65 bytes per plan step
    per super-step (was ~0.36 KB with the whole plan in every checkpoint)."""
    means = {}
    for steps in (10, 40):
        run_dir = tmp_path / f"plan{steps}"
        run_dir.mkdir()
        budget = Budget(max_steps=1000, max_tool_calls=200, max_model_calls=400)
        _run(run_dir, long_plan(steps), [lookup], budget)
        per_step = _bytes_per_step(run_dir / "growth.sqlite")
        means[steps] = _mean(per_step, "plans", 0, max(per_step))
    per_plan_step = (means[40] - means[10]) / 30
    assert 0 < per_plan_step < 150, means


def test_a_long_react_step_is_bounded_by_the_tool_budget(tmp_path: Path) -> None:
    """step_messages grows with each call inside one step; the budget ends the step."""
    budget = Budget(max_steps=500, max_tool_calls=30, max_model_calls=100)
    state = _run(tmp_path, _paging_plan(), [read_page], budget)
    assert state["usage"]["tool_calls"] == 30
    assert state["outcome"]["route"] == "partial"
    assert state["outcome"]["reason"] == "max_tool_calls"
    per_step = _bytes_per_step(tmp_path / "growth.sqlite")
    biggest = max(s["step_messages"] for s in per_step.values())
    per_call = biggest / 30
    assert biggest < 30 * 1024 and per_call < 1024, (biggest, per_call)
