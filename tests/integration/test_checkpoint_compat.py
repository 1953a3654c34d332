"""A checkpoint database written by agent-guards 0.1.0 loads with today's code.

``tests/fixtures/checkpoints_v0_1_0.sqlite`` was written by 0.1.0 (commit 78f742f, before
the guards moved into one package each) with
``LANGGRAPH_STRICT_MSGPACK=true agent-guards demo --scenario procurement_threshold
--db checkpoints_v0_1_0.sqlite --no-baseline``. Its blobs name the 0.1.0 module paths
(``agent_guards.types``, ``agent_guards._evidence_model``...), which no longer exist.
"""

from __future__ import annotations

import logging
import shutil
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.sqlite import SqliteSaver

from agent_guards import Evidence, GuardDecision, PlanVersion, guard_serializer
from agent_guards.evidence_resolve import EvidenceVerdict
from agent_guards.memory_resolve import MemoryVerdict
from agent_guards.planner_gate import Goal
from agent_guards.serde import RENAMED_MODULES, serde_allowlist

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "checkpoints_v0_1_0.sqlite"


@pytest.fixture
def saver(tmp_path: Path) -> Any:
    db = tmp_path / "old.sqlite"
    shutil.copy(FIXTURE, db)
    with closing(sqlite3.connect(db, check_same_thread=False)) as conn:
        yield SqliteSaver(conn, serde=guard_serializer())


def _thread(saver: Any) -> dict[str, Any]:
    (thread,) = {c.config["configurable"]["thread_id"] for c in saver.list(None)}
    return {"configurable": {"thread_id": thread}}


def _everything(saver: Any) -> list[Any]:
    """Every value the thread's checkpoints and their writes hold, decoded."""
    values: list[Any] = []
    for tup in saver.list(_thread(saver)):
        values.extend(tup.checkpoint["channel_values"].values())
        values.extend(value for _task, _channel, value in tup.pending_writes or ())
    return values


def _flatten(values: list[Any]) -> list[Any]:
    out: list[Any] = []
    for v in values:
        out.extend(v if isinstance(v, list) else [v])
    return out


def test_the_fixture_names_the_old_private_paths() -> None:
    """The test means something only while the fixture really holds 0.1.0's paths."""
    with closing(sqlite3.connect(FIXTURE)) as conn:
        blobs = b"".join(
            row[0] or b""
            for row in conn.execute(
                "SELECT checkpoint FROM checkpoints UNION ALL SELECT value FROM writes"
            )
        )
    for old in RENAMED_MODULES:
        assert old.encode() in blobs, old


@pytest.mark.parametrize(
    "cls", [GuardDecision, PlanVersion, Evidence, EvidenceVerdict, MemoryVerdict, Goal]
)
def test_old_checkpoints_load_as_the_guard_types(
    saver: Any, cls: type, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING):
        values = _flatten(_everything(saver))
    assert any(isinstance(v, cls) for v in values), f"no {cls.__name__} came back"
    assert not [r for r in caplog.records if "deserializ" in r.getMessage().lower()]


def test_nothing_comes_back_as_a_raw_dict_of_a_guard_type(saver: Any) -> None:
    """A blocked type comes back as its kwargs dict: no GuardDecision-shaped dict may remain."""
    values = _flatten(_everything(saver))
    shaped = [v for v in values if isinstance(v, dict) and {"guard", "verdict", "reason"} <= set(v)]
    assert not shaped


def test_the_allowlist_names_public_paths_only() -> None:
    modules = {module for module, _name in serde_allowlist()}
    assert not [m for m in modules if any(part.startswith("_") for part in m.split("."))]
    assert not set(RENAMED_MODULES) & modules


def test_a_plain_serializer_cannot_read_them() -> None:
    """Without the renaming the old types are blocked (so the test above is not vacuous)."""
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

    with closing(sqlite3.connect(FIXTURE, check_same_thread=False)) as conn:
        plain = SqliteSaver(
            conn, serde=JsonPlusSerializer(allowed_msgpack_modules=serde_allowlist())
        )
        values = _flatten(_everything(plain))
    assert not any(isinstance(v, GuardDecision) for v in values)
