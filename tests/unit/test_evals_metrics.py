"""The evaluation metrics (one formula each), the case-level diff and the saved run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent_guards.evals import CaseResult, EvalRun, compute_metrics, diff_runs, regressions


def result(
    kind: str,
    expected: dict[str, Any],
    observed: dict[str, Any],
    passed: bool = True,
    *,
    case_id: str = "c",
) -> CaseResult:
    return CaseResult(case_id, "s", kind, passed, () if passed else ("x",), observed, expected)


def metric(name: str, *results: CaseResult) -> Any:
    return compute_metrics(list(results))[name]


ANSWERED_RIGHT = result(
    "evidence", {"verdict": "answer", "value": "1"}, {"verdict": "answer", "value": "1"}
)
ANSWERED_WRONG = result(
    "evidence", {"verdict": "answer", "value": "1"}, {"verdict": "answer", "value": "2"}
)
ANSWERED_NOT_EXPECTED = result("evidence", {"verdict": "clarify"}, {"verdict": "answer"})
CONFLICT_FLAGGED = result(
    "evidence", {"conflicting_ids": ["a"]}, {"verdict": "answer", "conflicting_ids": ["a"]}
)
CONFLICT_MISSED = result(
    "evidence", {"verdict": "clarify"}, {"verdict": "answer", "conflicting_ids": []}
)
MEMORY_OVERRIDE = result(
    "memory",
    {"excluded": {"m": "overridden_by:t"}, "inject_ids": ["t"]},
    {"verdict": "continue", "conflicting_ids": ["m"], "inject_ids": ["t"]},
)
MEMORY_WRONG = result("memory", {"inject_ids": ["t"]}, {"verdict": "continue", "inject_ids": ["m"]})
ABSTAIN_RIGHT = result("evidence", {"verdict": "abstain"}, {"verdict": "abstain"})
ABSTAIN_WRONG = result("evidence", {"verdict": "answer"}, {"verdict": "abstain"})
RETRY_CLARIFY = result("retry", {"route": "clarify"}, {"verdict": "clarify"})
PLAN_LOOP = result(
    "planner",
    {"verdicts": ["execute", "clarify"]},
    {"verdict": "clarify", "replans": 0, "aborted": True},
)
PLAN_REPLAN = result(
    "planner",
    {"verdicts": ["execute", "replan"]},
    {"verdict": "replan", "replans": 1, "aborted": False},
)
LOOP_STOP = result(
    "loop",
    {"verdict": "stop"},
    {"verdict": "stop", "aborted": True, "tool_calls": 1, "unguarded_tool_calls": 5},
)
ESCALATED = result("evidence", {"verdict": "escalate"}, {"verdict": "escalate"})
ESCALATED_WRONG = result("evidence", {"verdict": "clarify"}, {"verdict": "escalate"})

# metric, results -> value (None: no case the metric applies to)
TABLE = [
    ("conflict_detection_recall", [CONFLICT_FLAGGED], 1.0),
    ("conflict_detection_recall", [CONFLICT_FLAGGED, CONFLICT_MISSED], 0.5),
    ("conflict_detection_recall", [MEMORY_OVERRIDE], 1.0),  # an override is a memory conflict
    ("conflict_detection_recall", [ANSWERED_RIGHT, LOOP_STOP], None),
    ("wrong_arbitration_rate", [ANSWERED_RIGHT], 0.0),
    ("wrong_arbitration_rate", [ANSWERED_RIGHT, ANSWERED_WRONG], 0.5),
    ("wrong_arbitration_rate", [ANSWERED_NOT_EXPECTED], 1.0),
    ("wrong_arbitration_rate", [MEMORY_OVERRIDE, MEMORY_WRONG], 0.5),
    ("wrong_arbitration_rate", [ABSTAIN_RIGHT], None),
    ("abstain_precision", [ABSTAIN_RIGHT, ABSTAIN_WRONG], 0.5),
    ("abstain_precision", [ANSWERED_RIGHT], None),
    ("clarify_precision", [RETRY_CLARIFY, PLAN_LOOP], 1.0),  # route / last of verdicts count
    ("clarify_precision", [CONFLICT_MISSED], None),
    ("human_escalation_precision", [ESCALATED, ESCALATED_WRONG], 0.5),
    ("replan_rate", [PLAN_LOOP, PLAN_REPLAN], 0.5),
    ("replan_rate", [LOOP_STOP], None),
    ("no_progress_abort_rate", [PLAN_LOOP, PLAN_REPLAN, LOOP_STOP], 0.6667),
    ("tool_calls_saved", [LOOP_STOP, LOOP_STOP], 8),
    ("tool_calls_saved", [ANSWERED_RIGHT], 0),
    ("pass_rate", [ANSWERED_RIGHT, result("evidence", {}, {}, passed=False)], 0.5),
]


@pytest.mark.parametrize(("name", "results", "value"), TABLE)
def test_metric_truth_table(name: str, results: list[CaseResult], value: Any) -> None:
    assert metric(name, *results) == value


def test_regression_pass_rate_against_a_baseline() -> None:
    now = [
        result("evidence", {}, {}, passed=p, case_id=i)
        for i, p in (("a", True), ("b", False), ("c", False))
    ]
    assert (
        compute_metrics(now, baseline={"a": True, "b": True, "c": False})["regression_pass_rate"]
        == 0.5
    )
    assert compute_metrics(now)["regression_pass_rate"] == compute_metrics(now)["pass_rate"]
    assert compute_metrics(now, baseline={"c": False})["regression_pass_rate"] is None


def run_of(*rows: tuple[str, bool, str]) -> EvalRun:
    return EvalRun(
        [result("evidence", {}, {"verdict": v}, passed=p, case_id=i) for i, p, v in rows]
    )


def test_diff_runs_and_the_gate() -> None:
    before = run_of(
        ("fixed", False, "answer"),
        ("broke", True, "answer"),
        ("same", True, "answer"),
        ("moved", False, "answer"),
        ("gone", True, "answer"),
    )
    after = run_of(
        ("fixed", True, "clarify"),
        ("broke", False, "clarify"),
        ("same", True, "answer"),
        ("moved", False, "abstain"),
        ("new", False, "answer"),
    )
    changes = {c.case_id: c.change for c in diff_runs(before, after)}
    assert changes == {
        "fixed": "fixed",
        "broke": "broke",
        "moved": "changed_verdict",
        "gone": "removed",
        "new": "new",
    }
    assert [c.case_id for c in regressions(diff_runs(before, after))] == ["broke"]
    assert "broke" in str(next(c for c in diff_runs(before, after) if c.case_id == "broke"))


def test_eval_run_save_and_load(tmp_path: Path) -> None:
    run = run_of(("a", True, "answer"), ("b", False, "clarify"))
    run.save(tmp_path / "run.json")
    loaded = EvalRun.load(tmp_path / "run.json")
    assert loaded.results == run.results
    assert loaded.policies == run.policies and loaded.policies["loop_check"] == "LoopPolicy@1"
    assert diff_runs(run, loaded) == []


VERDICTS = st.sampled_from(["answer", "clarify", "abstain", "escalate", "stop", "replan"])
RESULTS = st.lists(
    st.builds(
        lambda k, ev, ov, p, a: result(
            k, {"verdict": ev}, {"verdict": ov, "aborted": a, "replans": 1}, passed=p
        ),
        st.sampled_from(["evidence", "memory", "planner", "loop", "retry"]),
        VERDICTS,
        VERDICTS,
        st.booleans(),
        st.booleans(),
    ),
    max_size=20,
)


@settings(max_examples=80, deadline=None)
@given(results=RESULTS, seed=st.randoms(use_true_random=False))
def test_metric_laws(results: list[CaseResult], seed: Any) -> None:
    metrics = compute_metrics(results)
    shuffled = list(results)
    seed.shuffle(shuffled)
    assert compute_metrics(shuffled) == metrics  # order never matters
    for name, value in metrics.items():
        if name not in ("tool_calls_saved", "replan_rate") and value is not None:
            assert 0.0 <= value <= 1.0, name
    assert (metrics["pass_rate"] is None) == (not results)
    if results:  # a baseline where everything passed: the gate sees exactly the failures
        everything = {r.case_id: True for r in results}
        assert compute_metrics(results, baseline=everything)["regression_pass_rate"] is not None
