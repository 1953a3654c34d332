"""A cancel after a crash: the calls it finds without a result are checked in the run ledger.

A kill after a tool returned and before the checkpoint leaves the call pending in state
while the ledger holds its outcome; a kill inside the tool leaves an intent with no
outcome. A cancel then must not record the first as "not executed" (it ran, and it is
undone), nor assume the second away (the reconcile hook or a human says whether it
happened). The crash is the state such a kill leaves: the run paused before its tools node,
the ledger entries the tool node writes.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from agent_guards.core.signatures import call_signature
from agent_guards.graphs.plan_execute import cancel_run
from agent_guards.graphs.scenarios import scenario_config
from agent_guards.tool_guard import RunLedger
from tests.integration._reference import calls_logged, graph_for, payment_scenario, persistence
from tests.integration.test_graph_cancel import Undo


@contextmanager
def crashed(
    tmp_path: Path, kind: str, ledger: RunLedger, undo: Undo, *, finished: bool
) -> Iterator[tuple[Any, Any, dict[str, Any]]]:
    """The graph, its config and the pending call, after a kill inside the step's
    create_draft (``finished=False``) or right after it returned."""
    scenario = payment_scenario(tmp_path, undo)
    with persistence(kind, tmp_path) as (saver, store):
        graph = graph_for(scenario, saver, store, ledger=ledger)
        config = scenario_config(scenario, "t")
        graph.invoke({"messages": [("user", scenario.message)]}, config, interrupt_before=["tools"])
        (turn,) = [m for m in graph.get_state(config).values["step_messages"] if m.type == "ai"]
        (call,) = turn.tool_calls
        sig = call_signature(call["name"], call["args"])
        started = ledger.start(store, "t", call["id"], tool=call["name"], signature=sig,
                               effect="unknown", args=call["args"])  # fmt: skip
        if finished:
            ledger.finish(store, "t", call["id"], content="draft d-7", ok=True, started=started)
        yield graph, config, call


def answers(done: dict[str, Any], call: dict[str, Any]) -> list[str]:
    messages = done["step_messages"]
    return [str(m.content) for m in messages if getattr(m, "tool_call_id", None) == call["id"]]


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
@pytest.mark.parametrize("how", ["user says stop", "cancel_run"])
def test_a_call_that_finished_before_the_crash_is_answered_from_the_ledger_and_undone(
    kind: str, how: str, tmp_path: Path
) -> None:
    undo = Undo()
    with crashed(tmp_path, kind, RunLedger(), undo, finished=True) as (graph, config, call):
        if how == "cancel_run":
            done = cancel_run(graph, config, "user cancelled")
        else:
            done = graph.invoke({"messages": [("user", "stop")]}, config)
    assert answers(done, call) == ["draft d-7"]  # what ran, not "[cancel] Not executed"
    assert done["outcome"]["route"] == "cancelled"
    assert len(undo.undone) == 1  # the draft it made is deleted
    assert calls_logged(tmp_path) == []  # and nothing ran again


@pytest.mark.parametrize("happened", [True, False])
def test_a_write_the_crash_left_unknown_is_asked_about_before_the_cancel_settles_it(
    happened: bool, tmp_path: Path
) -> None:
    asked: list[str] = []

    def reconcile(entry: Any) -> str | None:
        asked.append(entry["call_id"])
        return "draft d-7 (found in the drafts list)" if happened else None

    undo = Undo()
    ledger = RunLedger(reconcile=reconcile)
    with crashed(tmp_path, "sqlite", ledger, undo, finished=False) as (graph, config, call):
        done = graph.invoke({"messages": [("user", "stop")]}, config)
    assert asked == [call["id"]]
    answer = answers(done, call)
    if happened:
        assert answer == ["draft d-7 (found in the drafts list)"] and len(undo.undone) == 1
    else:
        assert answer[0].startswith("[cancel] Not executed") and undo.undone == []
    assert calls_logged(tmp_path) == []
