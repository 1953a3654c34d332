"""Two worker processes serving one thread never both run a tool call.

Each test leaves a pending tool turn on a thread (the checkpoint before ``tools``), starts
two processes that resume it at once, and counts real executions in a shared file. On
SQLite and on PostgreSQL (a throwaway server on 127.0.0.1) every call runs exactly once,
every execution is in the ledger once, and the worker that did not run a call answers it
with the other's outcome. Synchronized with files, no timing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from agent_guards.persistence import open_persistence
from agent_guards.tool_guard import RunLedger
from tests.integration._ledger_worker import CALLS, graph

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def database(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield str(tmp_path / "run.sqlite")
    else:
        yield request.getfixturevalue("postgres_url")


def _pending_turn(db: str, thread: str, logs: Path, with_slow: bool) -> None:
    """Run the thread up to the checkpoint before its tool turn."""
    with open_persistence(db) as (saver, store):
        app = graph(saver, store, logs, with_slow)
        app.invoke({"messages": [("user", "charge every invoice")]},
                   {"configurable": {"thread_id": thread}}, interrupt_before=["tools"])  # fmt: skip


def _worker(db: str, thread: str, logs: Path, with_slow: bool) -> subprocess.Popen[bytes]:
    env = {**os.environ, "LANGGRAPH_STRICT_MSGPACK": "true", "LANGSMITH_TRACING": "false"}
    args = [db, thread, str(logs), "slow" if with_slow else "fast"]
    return subprocess.Popen(
        [sys.executable, "-m", "tests.integration._ledger_worker", *args],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip


def _wait_for(condition: Callable[[], bool], what: str, limit: float = 120.0) -> None:
    """Poll a file-system condition (a generous safety limit, not a timing assertion)."""
    deadline = time.monotonic() + limit
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what}")
        time.sleep(0.02)


def _result(worker: subprocess.Popen[bytes]) -> dict[str, Any]:
    """What the worker ended with: the ledger reasons in its state, each call's answer."""
    out, err = worker.communicate(timeout=180)
    assert worker.returncode == 0, err.decode()
    return dict(json.loads(out.decode().strip().splitlines()[-1]))


def _executions(db: str, thread: str) -> int:
    with open_persistence(db) as (_, store):
        return RunLedger().executions(store, thread)


def test_two_workers_racing_on_one_turn_run_each_call_once(database: str, tmp_path: Path) -> None:
    thread = f"race-{uuid.uuid4().hex[:8]}"
    _pending_turn(database, thread, tmp_path, with_slow=False)
    workers = [_worker(database, thread, tmp_path, with_slow=False) for _ in range(2)]
    (tmp_path / "go").touch()
    results = [_result(w) for w in workers]
    runs = Counter((tmp_path / "calls.log").read_text().splitlines())
    assert runs == Counter(f"charge {i}" for i in range(CALLS))
    assert _executions(database, thread) == CALLS
    expected = {f"call-{i}": f"charged invoice {i}" for i in range(CALLS)}
    # whichever worker ran a call, both end with its real answer (the one that did not run
    # it answered from the ledger, or found the turn already done)
    assert [r["answers"] for r in results] == [expected, expected]


def test_a_worker_waits_for_the_outcome_of_a_call_another_is_running(
    database: str, tmp_path: Path
) -> None:
    thread = f"wait-{uuid.uuid4().hex[:8]}"
    _pending_turn(database, thread, tmp_path, with_slow=True)
    (tmp_path / "go").touch()
    first = _worker(database, thread, tmp_path, with_slow=True)
    _wait_for((tmp_path / "slow.started").exists, "the first worker to run slow")
    second = _worker(database, thread, tmp_path, with_slow=True)
    _wait_for((tmp_path / "waiting").exists, "the second worker to wait for slow")
    (tmp_path / "slow.release").touch()
    assert "recorded_outcome" in _result(second)["reasons"]
    assert _result(first)["answers"]["slow"] == "slow write 0 done"
    runs = Counter((tmp_path / "calls.log").read_text().splitlines())
    assert runs == Counter([*(f"charge {i}" for i in range(CALLS)), "slow 0"])
    assert _executions(database, thread) == CALLS + 1
