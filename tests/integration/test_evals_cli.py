"""``agent-guards eval``: every shipped slice, the metrics table, --save/--baseline and the gate."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from agent_guards.evals import SHIPPED_SLICES, EvalRun
from agent_guards.evals.cli import run as eval_cli

BROKEN = """
from agent_guards import EvidencePolicy, LoopPolicy
from agent_guards.evals import EvalPolicies

# forum above official: a credibility regression someone could ship by accident
POLICIES = EvalPolicies(
    evidence=EvidencePolicy(source_weights={"forum": 4, "memory": 3, "internal": 2, "official": 1}, version=2),
)
LOOPS = EvalPolicies(loop=LoopPolicy(stop_at=10, nudge_at=None, reuse_results=False, version=2))
NOT_POLICIES = 42
"""


@pytest.fixture
def broken_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    (tmp_path / "broken_eval_conf.py").write_text(BROKEN)
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("broken_eval_conf", None)
    return "broken_eval_conf"


def test_all_shipped_slices_pass_with_a_metrics_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert eval_cli([]) == 0
    out = capsys.readouterr().out
    for name in (*SHIPPED_SLICES, "overall"):
        assert f"\n{name} " in out
    assert "conflict_recall" in out and "calls_saved" in out
    assert " 0 failed" in out and "FAIL" not in out


def test_json_output(capsys: pytest.CaptureFixture[str]) -> None:
    assert eval_cli(["--json", "--slice", "planner_loop", "--slice", "duplicate_tool_call"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert sorted(data["slices"]) == ["duplicate_tool_call", "planner_loop"]
    assert data["metrics"]["pass_rate"] == 1.0 and data["exit_status"] == 0
    assert data["metrics"]["tool_calls_saved"] > 0
    assert data["policies"]["planner_gate"] == "PlannerPolicy@1"
    assert len(data["results"]) == sum(v["cases"] for v in data["slices"].values())


def test_regression_gate_fails_on_a_broken_policy(
    tmp_path: Path, broken_module: str, capsys: pytest.CaptureFixture[str]
) -> None:
    baseline = tmp_path / "run.json"
    assert eval_cli(["--save", str(baseline), "--quiet"]) == 0
    assert EvalRun.load(baseline).policies["evidence_resolve"] == "EvidencePolicy@1"
    capsys.readouterr()

    assert eval_cli(["--baseline", str(baseline)]) == 0  # same policies: nothing changed
    assert "no changes against the baseline" in capsys.readouterr().out

    status = eval_cli(["--baseline", str(baseline), "--policies", f"{broken_module}:POLICIES"])
    out = capsys.readouterr().out
    assert status == 1
    assert "regression gate FAILED" in out
    for case in (
        "sc-official-beats-newer-forum",
        "sc-numerous-forum-posts",
        "cv-seed-resolver-demo",
    ):
        assert f"broke           source_credibility/{case}:" in out or f"/{case}:" in out
    assert "EvidencePolicy@2" in out

    status = eval_cli(
        ["--baseline", str(baseline), "--policies", f"{broken_module}:LOOPS", "--json"]
    )
    data = json.loads(capsys.readouterr().out)
    assert status == 1
    assert "dt-same-search-three-times" in data["regressions"]
    assert all(c.startswith(("dt-", "at-")) for c in data["regressions"])


def test_fixed_cases_pass_the_gate(
    tmp_path: Path, broken_module: str, capsys: pytest.CaptureFixture[str]
) -> None:
    broken_run = tmp_path / "broken.json"
    eval_cli(["--save", str(broken_run), "--quiet", "--policies", f"{broken_module}:POLICIES"])
    capsys.readouterr()
    assert eval_cli(["--baseline", str(broken_run)]) == 0  # the fix: cases fixed, none broke
    out = capsys.readouterr().out
    assert "fixed           source_credibility/sc-official-beats-newer-forum" in out
    assert "regression gate passed" in out


def test_extra_cases_and_failures(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    mine = tmp_path / "mine.jsonl"
    wrong = {
        "id": "my-1",
        "slice": "mine",
        "kind": "evidence",
        "note": "expects the wrong thing",
        "input": {"items": []},
        "expect": {"verdict": "answer"},
    }
    mine.write_text(json.dumps(wrong) + "\n")
    assert eval_cli(["--cases", str(mine), "--slice", "mine"]) == 1  # no baseline: any failure
    out = capsys.readouterr().out
    assert "FAIL mine/my-1: verdict: expected 'answer', got 'abstain'" in out
    with pytest.raises(SystemExit, match="unknown slice"):
        eval_cli(["--slice", "nope"])


def test_policies_option_errors(broken_module: str) -> None:
    with pytest.raises(SystemExit, match="module:attribute"):
        eval_cli(["--policies", "nocolon"])
    with pytest.raises(SystemExit, match="not EvalPolicies"):
        eval_cli(["--policies", f"{broken_module}:NOT_POLICIES"])


def test_ramdocs_option(capsys: pytest.CaptureFixture[str]) -> None:
    assert eval_cli(["--ramdocs", "--limit", "25"]) == 0
    out = capsys.readouterr().out
    assert "RAMDocs replay (labels=none" in out and "questions" in out
    assert eval_cli(["--ramdocs", "--limit", "25", "--labels", "oracle", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["labels"] == "oracle"
    grouped = ["--ramdocs", "--limit", "25", "--labels", "oracle_entities", "--group-entities"]
    assert eval_cli(grouped) == 0
    assert "labels=oracle_entities, group_entities" in capsys.readouterr().out


def test_ramdocs_sibling_dated_option(capsys: pytest.CaptureFixture[str]) -> None:
    assert eval_cli(["--dated", "--limit", "50", "--seed", "3"]) == 0
    out = capsys.readouterr().out
    assert "Dated replay (50 questions" in out and "seed 3" in out and "newest_first" in out
    assert eval_cli(["--dated", "--limit", "20", "--json"]) == 0
    assert set(json.loads(capsys.readouterr().out)["methods"]) == {
        "resolver",
        "newest_first",
        "majority",
    }


def test_agent_guards_command_wires_eval(capsys: pytest.CaptureFixture[str]) -> None:
    from agent_guards.cli import build_parser, main

    commands = build_parser()._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    if "eval" not in commands:
        pytest.skip("agent_guards.cli does not register the eval subcommand yet")
    assert main(["eval", "--slice", "noise", "--quiet"]) == 0
    assert "10 cases, 0 failed" in capsys.readouterr().out
