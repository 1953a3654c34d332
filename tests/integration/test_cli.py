"""The agent-guards command."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from agent_guards.cli import main, package_version


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["version"]) == 0
    assert capsys.readouterr().out.strip() == f"agent-guards {package_version()}"


def test_help_lists_the_subcommands() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "agent_guards.cli", "--help"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "usage: agent-guards" in out
    for command in ("version", "demo"):
        assert command in out


def test_demo_runs_offline_on_sqlite(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "demo.sqlite"
    assert main(["demo", "--db", str(db)]) == 0
    out = capsys.readouterr().out
    assert db.exists()
    assert "stop" in out
    assert "GraphRecursionError" in out


def test_demo_rejects_unknown_scenarios(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match="unknown scenario"):
        main(["demo", "--db", str(tmp_path / "x.sqlite"), "--scenario", "nope"])


@pytest.mark.parametrize("command", [["history", "t"], ["replay", "t", "--checkpoint", "c"]])
def test_history_and_replay_of_a_missing_database_create_nothing(
    command: list[str], tmp_path: Path
) -> None:
    """A mistyped --db names the path; it is not created as an empty database."""
    db = tmp_path / "demo.sqllite"
    with pytest.raises(SystemExit, match="no SQLite database at"):
        main([*command, "--db", str(db)])
    assert not db.exists()
