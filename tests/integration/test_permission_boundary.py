"""Permission at the boundary: a restricted item is nowhere, in any channel, store, trace or log.

The reference graph filters each tool result for the run's principal inside the tool's own
run (``permission_filtered``), so the legal-only draft of the procurement scenario never
reaches ``step_messages``, a checkpoint, a prompt, a plan's step note, the run ledger, the
context archive, a LangSmith payload or a log line. Each test greps everything for the
draft's id, text and value, byte for byte (SQLite file included).
"""

from __future__ import annotations

import json
import logging
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import BaseMessage
from langchain_core.tools import BaseTool, tool

from agent_guards import ContextPolicy
from agent_guards.context_guard import DEFAULT_NAMESPACE, archive_scope
from agent_guards.context_guard.archive import create_archive_reader_tool
from agent_guards.graphs.plan_execute import Policies, build_graph
from agent_guards.graphs.scenarios import (
    PROCUREMENT_DOCS,
    SCENARIOS,
    RoleScript,
    scenario_config,
)
from agent_guards.persistence import open_persistence
from agent_guards.testing import tool_call_message
from agent_guards.tool_guard import annotate_tool
from tests.integration._fake_langsmith import FakeLangSmith, tracing_to

SCENARIO = SCENARIOS["procurement_threshold"]
DRAFT = next(d for d in PROCUREMENT_DOCS if d.get("allowed"))
SECRETS = (DRAFT["id"], DRAFT["text"], "拟调整为 30 万", DRAFT["value"])


@pytest.fixture(scope="module")
def fake_langsmith() -> Iterator[FakeLangSmith]:
    """One endpoint for the module (``tracing_to`` resets what LangSmith cached)."""
    with tracing_to(FakeLangSmith()) as server:
        yield server


def _echo(messages: Sequence[BaseMessage]) -> str:
    """A model that repeats its whole prompt back (what a leaky prompt would give away)."""
    return "\n".join(str(m.content) for m in messages)


def _echoing_script() -> RoleScript:
    script = SCENARIO.script()
    replies = dict(script.replies)
    replies["agent"] = [tool_call_message("search_policies", {"query": "q"}), _echo]
    return RoleScript(**replies)


def _long_tools() -> list[BaseTool]:
    """The procurement search, with a long visible page (it gets archived)."""

    @tool(response_format="content_and_artifact")
    def search_policies(query: str) -> tuple[str, list[dict[str, Any]]]:
        """Search the procurement policies."""
        docs = [dict(d) for d in PROCUREMENT_DOCS]
        docs[0]["text"] = "超过 100 万需要复核。" + " 背景说明" * 900
        lines = [f"{d['id']}: {d.get('text', d['value'])}" for d in docs]
        return "\n".join(lines), docs

    return [annotate_tool(search_policies, read_only=True)]


def _needles() -> list[bytes]:
    out: list[bytes] = []
    for secret in SECRETS:
        out.append(secret.encode())
        out.append(json.dumps(secret)[1:-1].encode())  # \uXXXX-escaped JSON
    return out


def _hits(blob: bytes, where: str) -> list[str]:
    return [f"{where}: {n!r}" for n in _needles() if n in blob]


def _everything(db: Path, store: Any, server: FakeLangSmith, logs: str) -> list[str]:
    hits = _hits(db.read_bytes(), "sqlite file")
    for wal in db.parent.glob(db.name + "-*"):
        hits += _hits(wal.read_bytes(), wal.name)
    with sqlite3.connect(db) as conn:
        tables = [r[0] for r in conn.execute("select name from sqlite_master where type='table'")]
        for table in tables:
            for row in conn.execute(f"select * from {table}"):
                for cell in row:
                    data = cell if isinstance(cell, bytes) else str(cell).encode()
                    hits += _hits(data, f"table {table}")
    for item in store.search((), limit=10_000):
        hits += _hits(json.dumps(item.value, ensure_ascii=False).encode(), f"store {item.key}")
    hits += _hits(server.payload(), "LangSmith payload")
    hits += _hits(logs.encode(), "logs")
    return hits


Check = Callable[[dict[str, Any], list[Any], Any], None]


def _run(
    tmp_path: Path,
    watch: tuple[FakeLangSmith, pytest.LogCaptureFixture],
    *,
    script: RoleScript,
    tools: list[BaseTool],
    policies: Policies,
    check: Check,
) -> None:
    """Run the scenario on SQLite (checkpoints and store), then grep everything."""
    from langchain_core.tracers.langchain import wait_for_all_tracers

    server, logs = watch
    before = len(server.posted)
    db = tmp_path / "run.sqlite"
    with open_persistence(str(db)) as (saver, store):
        graph = build_graph(
            script.model(), tools, policies=policies, checkpointer=saver, store=store
        )
        config = scenario_config(SCENARIO, "leak")
        state = graph.invoke({"messages": [("user", SCENARIO.message)]}, config)
        history = list(graph.get_state_history(config))
        wait_for_all_tracers()
        check(state, history, store)
        _check_channels(history)
        hits = _everything(db, store, server, logs.text)
    assert len(server.posted) > before, "the trace was exported"
    assert not hits, hits


def _check_channels(history: list[Any]) -> None:
    """Every channel of every checkpoint, as the graph reads it back."""
    assert len(history) > 10
    for snap in history:
        for channel, value in snap.values.items():
            text = repr(value) + json.dumps(value, default=repr, ensure_ascii=False)
            leaked = [s for s in SECRETS if s in text]
            assert not leaked, (snap.next, channel, leaked, text[:3000])


@pytest.fixture
def watch(
    fake_langsmith: FakeLangSmith, caplog: pytest.LogCaptureFixture
) -> tuple[FakeLangSmith, pytest.LogCaptureFixture]:
    caplog.set_level(logging.DEBUG)
    return fake_langsmith, caplog


Watch = tuple[FakeLangSmith, pytest.LogCaptureFixture]


def test_demo_scenario_leaks_nothing(tmp_path: Path, watch: Watch) -> None:
    def check(state: dict[str, Any], history: list[Any], store: Any) -> None:
        assert state["outcome"]["route"] == "answer", state["outcome"]
        assert state["outcome"]["cited"] == ["policy_2026"]

    _run(
        tmp_path,
        watch,
        script=SCENARIO.script(),
        tools=SCENARIO.tools(),
        policies=SCENARIO.policies,
        check=check,
    )


def test_an_echoing_model_has_nothing_to_echo(tmp_path: Path, watch: Watch) -> None:
    def check(state: dict[str, Any], history: list[Any], store: Any) -> None:
        # the model did echo its prompt: the visible documents are in what it said
        said = [
            str(m.content)
            for snap in history
            for m in snap.values.get("step_messages") or []
            if m.type == "ai"
        ]
        assert any("policy_2026" in text for text in said)

    _run(
        tmp_path,
        watch,
        script=_echoing_script(),
        tools=SCENARIO.tools(),
        policies=SCENARIO.policies,
        check=check,
    )


def test_a_long_result_is_archived_filtered_and_scoped(tmp_path: Path, watch: Watch) -> None:
    def check(state: dict[str, Any], history: list[Any], store: Any) -> None:
        archived = store.search(DEFAULT_NAMESPACE, limit=100)
        assert archived, "the long result was archived"
        config = scenario_config(SCENARIO, "leak")
        mine = archive_scope(DEFAULT_NAMESPACE, config)
        assert {tuple(item.namespace) for item in archived} == {mine}
        reader = create_archive_reader_tool(store)
        key = archived[0].key
        assert "policy_2024" in reader.invoke({"archive_id": key}, config)
        for other in (
            {**config["configurable"], "thread_id": "another-thread"},
            {**config["configurable"], "principal": "someone-else"},
            {},
        ):
            found = reader.invoke({"archive_id": key}, {"configurable": other})
            assert "No archived record" in found

    policies = Policies(max_context_tokens=3000, context=ContextPolicy(archive_over_tokens=200))
    _run(
        tmp_path,
        watch,
        script=SCENARIO.script(),
        tools=_long_tools(),
        policies=policies,
        check=check,
    )


def test_an_untraced_run_leaks_nothing_either(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Nothing traced and no callback handler: the filtered tool runs the wrapped tool
    without the contexts that keep a trace from seeing it, and withholds the same items."""
    from langsmith import tracing_context

    caplog.set_level(logging.DEBUG)
    db = tmp_path / "run.sqlite"
    with open_persistence(str(db)) as (saver, store), tracing_context(enabled=False):
        graph = build_graph(
            SCENARIO.script().model(),
            SCENARIO.tools(),
            policies=SCENARIO.policies,
            checkpointer=saver,
            store=store,
        )
        config = scenario_config(SCENARIO, "untraced")
        state = graph.invoke({"messages": [("user", SCENARIO.message)]}, config)
        _check_channels(list(graph.get_state_history(config)))
        hits = _hits(db.read_bytes(), "sqlite file") + _hits(caplog.text.encode(), "logs")
        for item in store.search((), limit=10_000):
            hits += _hits(json.dumps(item.value, ensure_ascii=False).encode(), item.key)
    assert state["outcome"]["cited"] == ["policy_2026"]
    assert not hits, hits
