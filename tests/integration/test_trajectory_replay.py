"""Real recorded agent runs (tau-bench gpt-4o, airline) replayed through the tool wrapper.

Every tool-call step of every recorded run goes through ``ToolCallGuard(...).tool_node``
and the ``loop_check`` edge in a compiled graph, each tool answering with the result the
real tool returned. Targets: no stale answer, and no stop on a run that succeeded, with
the effects declared and with none declared. Synthetic runs show the metrics can fail.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from agent_guards import LoopPolicy
from agent_guards.tool_guard import ToolEffects
from benchmarks.trajectories import extract
from benchmarks.trajectories.replay import (
    CORPUS,
    Tally,
    Trajectory,
    configurations,
    load,
    replay_corpus,
    tau_effects,
    tool_names,
)


def raw_rows() -> list[dict[str, Any]]:
    with gzip.open(CORPUS, "rt", encoding="utf-8") as lines:
        return [json.loads(line) for line in lines if line.strip()]


@pytest.fixture(scope="module")
def tallies() -> dict[str, Tally]:
    trajectories = load()
    policies = configurations(tool_names(trajectories), headless=True)
    return {t.config: t for t in replay_corpus(trajectories, policies)}


def test_the_corpus_is_what_the_fixture_holds() -> None:
    rows = raw_rows()
    trajectories = load()
    assert len(trajectories) == len(rows) > 0
    calls = sum(len(t.get("calls", ())) for r in rows for t in r["turns"])
    results = sum(t["role"] == "tool" for r in rows for t in r["turns"])
    assert sum(len(t.calls()) for t in trajectories) == calls == results > 0
    assert {t.domain for t in trajectories} <= {"airline", "retail"}
    assert any(t.success for t in trajectories) and not all(t.success for t in trajectories)
    assert CORPUS.stat().st_size < 1_500_000


@pytest.mark.parametrize("config", ["effects declared", "no effects"])
def test_no_stale_answer_and_no_stop_on_a_successful_run(
    tallies: dict[str, Tally], config: str
) -> None:
    rows = raw_rows()
    tally = tallies[config]
    assert tally.trajectories == len(rows)
    assert tally.successful == sum(r["reward"] >= 1.0 for r in rows)
    assert tally.calls == sum(len(t.get("calls", ())) for r in rows for t in r["turns"])
    assert tally.executed + tally.reused + tally.refused + tally.stopped == tally.calls
    assert tally.missing == 0
    assert tally.stale == 0, [c for c in tally.cases if c.kind == "stale"]
    assert tally.false_stops == 0, [c for c in tally.cases if c.success]


@pytest.mark.parametrize("config", ["effects declared", "no effects"])
def test_no_nudge_on_a_successful_run_and_real_loops_end_early(
    tallies: dict[str, Tally], config: str
) -> None:
    """Nudges on successful runs stay 0; the failed runs a stop ended early are counted with
    the recorded steps the stop saved (each stop comes before the recorded end)."""
    tally = tallies[config]
    assert tally.success_nudges == 0
    assert tally.loops_stopped == len(tally.steps_before_end) > 0
    assert all(n >= 0 for n in tally.steps_before_end)
    assert tally.mean_steps_before_end == round(
        sum(tally.steps_before_end) / len(tally.steps_before_end), 1
    )


def test_undeclared_tools_are_never_refused(tallies: dict[str, Tally]) -> None:
    assert tallies["no effects"].refused == 0
    assert tallies["no effects"].executed >= tallies["effects declared"].executed


def test_headless_reuses_real_results_and_none_is_stale(tallies: dict[str, Tally]) -> None:
    """Headless mode (a user turn does not start afresh) answers real repeated reads from
    the earlier result: each answer must be what the real tool returned again."""
    tally = tallies["effects declared, headless"]
    assert tally.reused > 0
    assert tally.stale == 0 and tally.saved == tally.reused


# synthetic runs: the metrics can fail ------------------------------------------------


def run_of(*turns: dict[str, Any], reward: float = 1.0) -> Trajectory:
    return Trajectory("airline", 999, 0, reward, (user("please help"), *turns))


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "text": text}


def call(call_id: str, name: str, args: dict[str, Any], result: str) -> list[dict[str, Any]]:
    """An assistant turn with one tool call, and the real tool's recorded result."""
    content, _ = extract.cut_result(result)
    return [
        {"role": "assistant", "text": "", "calls": [{"id": call_id, "name": name, "args": args}]},
        {
            "role": "tool",
            "tool_call_id": call_id,
            "name": name,
            "content": content,
            "sha256": extract.sha256(result),
            "chars": len(result),
            "truncated": content != result,
        },
    ]


READ = {"reservation_id": "R1"}
READ_CANCEL_READ = run_of(
    *call("c1", "get_reservation_details", READ, '{"status": "active"}'),
    *call("c2", "cancel_reservation", READ, '{"status": "cancelled"}'),
    *call("c3", "get_reservation_details", READ, '{"status": "cancelled"}'),
)


def one(trajectory: Trajectory, effects: ToolEffects) -> Tally:
    (tally,) = replay_corpus([trajectory], {"synthetic": LoopPolicy(effects=effects)})
    return tally


def test_a_write_mis_declared_read_only_makes_a_stale_answer() -> None:
    wrong = ToolEffects(read_only=frozenset({"get_reservation_details", "cancel_reservation"}))
    tally = one(READ_CANCEL_READ, wrong)
    assert (tally.stale, tally.reused, tally.saved) == (1, 1, 0)
    (case,) = [c for c in tally.cases if c.kind == "stale"]
    assert (case.step, case.tool) == (3, "get_reservation_details")
    assert "cancelled" in case.why


def test_the_same_run_with_the_write_declared_is_not_stale() -> None:
    tally = one(READ_CANCEL_READ, tau_effects(tool_names([READ_CANCEL_READ])))
    assert (tally.stale, tally.reused, tally.executed, tally.false_stops) == (0, 0, 3, 0)


def test_a_repeated_identical_read_is_an_execution_saved() -> None:
    result = '{"status": "active", "flights": ["HAT001"]}'
    trajectory = run_of(
        *call("c1", "get_reservation_details", READ, result),
        *call("c2", "get_reservation_details", READ, result),
    )
    tally = one(trajectory, tau_effects(tool_names([trajectory])))
    assert (tally.executed, tally.reused, tally.saved, tally.stale) == (1, 1, 1, 0)
    assert tally.false_stops == 0  # a nudge is not a stop
    assert tally.nudges == 1


def test_a_refused_write_on_a_successful_run_is_a_false_stop() -> None:
    trajectory = run_of(
        *call("c1", "cancel_reservation", READ, '{"status": "cancelled"}'),
        *call("c2", "cancel_reservation", READ, "Error: reservation already cancelled"),
    )
    tally = one(trajectory, tau_effects(tool_names([trajectory])))
    assert (tally.refused, tally.false_stops, tally.failed_run_stops) == (1, 1, 0)
    assert [c.kind for c in tally.cases] == ["refused"]
    assert "returned something else" in tally.cases[0].why
    failed = one(
        Trajectory("airline", 999, 0, 0.0, trajectory.turns),
        tau_effects(tool_names([trajectory])),
    )
    assert (failed.false_stops, failed.failed_run_stops) == (0, 1)


def test_a_long_result_is_stored_cut_and_still_compares_by_its_full_digest() -> None:
    head = "x" * 50
    a, b = head + "a", head + "b"
    cut_a, cut_b = extract.cut_result(a, 50), extract.cut_result(b, 50)
    assert cut_a[1] and cut_b[1] and cut_a[0] != cut_b[0]
    assert cut_a[0].startswith(head) and extract.sha256(a) in cut_a[0]
    assert extract.cut_result(a, 50) == cut_a and extract.cut_result("short", 50) == (
        "short",
        False,
    )


def test_extraction_is_deterministic(tmp_path: Path) -> None:
    record = {
        "task_id": 3,
        "trial": 1,
        "reward": 1.0,
        "info": {"ignored": True},
        "traj": [
            {"role": "system", "content": "the policy"},
            {"role": "user", "content": "cancel R1"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "cancel_reservation", "arguments": '{"r": "R1"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "name": "cancel_reservation", "content": "ok"},
            {"role": "assistant", "content": "Done."},
        ],
    }
    source = tmp_path / "gpt-4o-airline.json"
    source.write_text(json.dumps([record]))
    first, second = tmp_path / "a.jsonl.gz", tmp_path / "b.jsonl.gz"
    assert extract.main([str(tmp_path), "-o", str(first)]) == 0
    assert extract.main([str(source), "-o", str(second)]) == 0
    assert first.read_bytes() == second.read_bytes()
    (row,) = [json.loads(x) for x in gzip.decompress(first.read_bytes()).splitlines()]
    assert (row["domain"], row["task_id"], row["trial"], row["reward"]) == ("airline", 3, 1, 1.0)
    assert [t["role"] for t in row["turns"]] == ["user", "assistant", "tool", "assistant"]
    assert row["turns"][1]["calls"] == [
        {"id": "c1", "name": "cancel_reservation", "args": {"r": "R1"}}
    ]
    assert row["turns"][2]["sha256"] == extract.sha256("ok")
