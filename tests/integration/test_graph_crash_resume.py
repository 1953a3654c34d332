"""Resume after a crash mid-step: kill -9 while a tool runs, then ``invoke(None, config)``.

The subprocess runs LOOKUPS on a SQLite file; ``fetch_beta`` (step s2) signals through a
file that it is running and waits. The test kills the process there, resumes the thread
in-process, and compares with the same run uninterrupted: nothing lost, step s1 not
executed again, usage the same (no fresh quota). Synchronized with files, no timing.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from agent_guards.graphs.scenarios import scenario_config
from agent_guards.persistence import open_persistence
from tests.integration._crash_worker import THREAD
from tests.integration._reference import (
    calls_logged,
    graph_for,
    lookups_scenario,
    persistence,
    run_sync,
)

ROOT = Path(__file__).resolve().parents[2]


def _wait_for(condition: Callable[[], bool], what: str, limit: float = 120.0) -> None:
    """Poll a file-system condition (a generous safety limit, not a timing assertion)."""
    deadline = time.monotonic() + limit
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what}")
        time.sleep(0.02)


def _paused_at_tools(db: Path, log_dir: Path) -> bool:
    """The checkpoint before the tools node is on disk (the tool is running past it)."""
    scenario = lookups_scenario(log_dir)
    try:
        with open_persistence(str(db)) as (saver, store):
            snapshot = graph_for(scenario, saver, store).get_state(
                scenario_config(scenario, THREAD)
            )
    except sqlite3.OperationalError:  # the worker holds a write lock right now
        return False
    return bool(snapshot.next == ("tools",))


def test_resume_after_kill_9_while_a_tool_runs(tmp_path: Path) -> None:
    db, logs = tmp_path / "crash.sqlite", tmp_path / "logs"
    logs.mkdir()
    env = {**os.environ, "LANGGRAPH_STRICT_MSGPACK": "true", "LANGSMITH_TRACING": "false"}
    worker = subprocess.Popen(
        [sys.executable, "-m", "tests.integration._crash_worker", str(db), str(logs)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        _wait_for(
            lambda: (logs / "beta.started").exists() or worker.poll() is not None,
            "fetch_beta to start",
        )
        assert worker.poll() is None, worker.communicate()[1].decode()
        _wait_for(lambda: _paused_at_tools(db, logs), "the checkpoint before the tools node")
        os.kill(worker.pid, signal.SIGKILL)
        worker.wait()
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()
        if worker.stderr is not None:
            worker.stderr.close()
    assert worker.returncode == -signal.SIGKILL
    assert calls_logged(logs) == ["fetch_alpha", "fetch_beta"]

    # the same run, uninterrupted, in another file: what "nothing lost" means
    reference_dir = tmp_path / "reference"
    reference_dir.mkdir()
    with persistence("sqlite", reference_dir) as (saver, store):
        reference = run_sync(lookups_scenario(), saver, store, THREAD)

    (logs / "beta.release").touch()  # fetch_beta no longer blocks when it runs again
    scenario = lookups_scenario(logs, block_beta=True)
    config = scenario_config(scenario, THREAD)
    with open_persistence(str(db)) as (saver, store):
        graph = graph_for(scenario, saver, store)
        crashed = graph.get_state(config)
        assert crashed.next == ("tools",)
        # what was done before the crash is in the checkpoint
        assert crashed.values["plans"][-1].step("s1").status.value == "done"
        assert crashed.values["usage"]["tool_calls"] == 1
        assert crashed.values["usage"]["model_calls"] == 6
        resumed = graph.invoke(None, config)

    # s1 was not executed again; only the interrupted s2 call ran once more
    assert calls_logged(logs) == ["fetch_alpha", "fetch_beta", "fetch_beta"]
    assert resumed["outcome"] == reference["outcome"]
    assert resumed["outcome"]["route"] == "answer"
    assert resumed["outcome"]["cited"] == ["doc_alpha", "doc_beta"]
    assert resumed["guard_log"] == reference["guard_log"]
    assert resumed["plans"] == reference["plans"]
    # usage continued from the checkpoint: the same totals as the uninterrupted run,
    # neither a fresh quota nor a double count (the killed attempt left no write)
    assert resumed["usage"] == reference["usage"]
    assert resumed["usage"]["model_calls"] > crashed.values["usage"]["model_calls"]
