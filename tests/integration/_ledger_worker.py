"""Subprocess for the two-worker test: serve one thread's pending tool turn.

``python -m tests.integration._ledger_worker DB THREAD LOG_DIR NAME``: opens the database
(SQLite path or ``postgresql://`` URL), waits for ``LOG_DIR/go``, then resumes the thread
(``invoke(None, config)``), which runs its pending tools node. Each tool appends one line
to ``LOG_DIR/calls.log`` per real execution; ``slow`` touches ``LOG_DIR/slow.started`` and
waits for ``LOG_DIR/slow.release``. The worker prints the reasons of the ledger's
decisions in the state it ends with, and each call's answer, as JSON on stdout.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.tools import tool
from langgraph.graph import START, StateGraph
from langgraph.prebuilt import tools_condition

from agent_guards import LoopState, ToolCallGuard, add_loop_check
from agent_guards.persistence import open_persistence
from agent_guards.testing import ScriptedChatModel
from agent_guards.tool_guard import RunLedger, annotate_tool

CALLS = 20  # parallel calls in the one tool turn (ids call-0 ... call-19, then "slow")


def _wait(path: Path) -> None:
    while not path.exists():  # the test process always creates it
        time.sleep(0.01)


def tools(log_dir: Path) -> list[Any]:
    def log(line: str) -> None:
        fd = os.open(log_dir / "calls.log", os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        os.write(fd, f"{line}\n".encode())
        os.close(fd)

    @tool
    def charge(i: int) -> str:
        """Charge invoice i (a write)."""
        log(f"charge {i}")
        return f"charged invoice {i}"

    @tool
    def slow(i: int) -> str:
        """A write that blocks until the test releases it."""
        (log_dir / "slow.started").touch()
        _wait(log_dir / "slow.release")
        log(f"slow {i}")
        return f"slow write {i} done"

    return [annotate_tool(charge), annotate_tool(slow)]


def turn(with_slow: bool) -> AIMessage:
    calls = [{"name": "charge", "args": {"i": i}, "id": f"call-{i}"} for i in range(CALLS)]
    if with_slow:
        calls.append({"name": "slow", "args": {"i": 0}, "id": "slow"})
    return AIMessage("", tool_calls=calls)


def graph(saver: Any, store: Any, log_dir: Path, with_slow: bool) -> Any:
    def model(messages: list[BaseMessage]) -> AIMessage:
        return AIMessage("done") if len(messages) > 1 else turn(with_slow)

    scripted = ScriptedChatModel(script=[model], repeat_last=True)
    builder = StateGraph(LoopState)
    builder.add_node("model", lambda s: {"messages": [scripted.invoke(s["messages"])]})

    def sleep(seconds: float) -> None:  # the guard waits for the other worker's outcome
        (log_dir / "waiting").touch()
        time.sleep(seconds)

    guard = ToolCallGuard(ledger=RunLedger(wait=120), sleep=sleep)
    builder.add_node("tools", guard.tool_node(tools(log_dir)))
    builder.add_edge(START, "model")
    builder.add_conditional_edges("model", tools_condition)
    add_loop_check(builder, "tools", continue_to="model")
    return builder.compile(checkpointer=saver, store=store)


def main(db: str, thread: str, log_dir: str, with_slow: str) -> None:
    logs = Path(log_dir)
    with open_persistence(db) as (saver, store):
        app = graph(saver, store, logs, with_slow == "slow")
        _wait(logs / "go")
        out = app.invoke(None, {"configurable": {"thread_id": thread}})
    reasons = [d.reason for d in out["guard_log"] if d.guard == "loop_check"]
    answers = {m.tool_call_id: m.content for m in out["messages"] if m.type == "tool"}
    print(json.dumps({"reasons": reasons, "answers": answers}))


if __name__ == "__main__":
    main(*sys.argv[1:])
