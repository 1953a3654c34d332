"""Subprocess for the crash tests: a reference-graph run killed with SIGKILL mid-way.

Two modes:

* ``python -m tests.integration._crash_worker DB LOG_DIR``: run LOOKUPS on a SQLite file
  until ``fetch_beta`` blocks. ``fetch_beta`` touches ``LOG_DIR/beta.started`` and waits
  for ``LOG_DIR/beta.release``; the test kills this process with SIGKILL while it waits,
  then resumes the thread itself (``test_graph_crash_resume``).
* ``python -m tests.integration._crash_worker --kill-at ROOT``: for each kill point in
  ``ROOT/points.txt`` (one a line, see :class:`KillPoint`), fork a child that runs
  DRAFTING on ``ROOT/<point.slug>/graph.sqlite`` (tools logging to ``calls.log`` there)
  and kills itself with ``os.kill(os.getpid(), SIGKILL)`` when the run reaches the point
  (``test_graph_kill_every_node``). The child's wait status goes to ``status`` in its
  directory. The point is found by a callback handler, so the kill is deterministic: it
  depends on what the run did, never on timing. Forking after the imports makes one
  child cheap; each child still runs from scratch, alone, on its own files.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler

from agent_guards.graphs.scenarios import scenario_config
from agent_guards.persistence import open_persistence
from tests.integration._reference import drafting_scenario, graph_for, lookups_scenario

THREAD = "crash"
EVENTS = ("start", "end", "tool_start", "tool_end")
NOT_REACHED = 3  # a child's exit code when its run ended without reaching the kill point


@dataclass(frozen=True)
class KillPoint:
    """Where to kill: the ``k``-th ``event`` of node or tool ``name`` in the run.

    ``start`` / ``end``: a node's task starts (before it does anything) / returns (its
    writes not yet checkpointed). ``tool_start`` / ``tool_end``: inside the tools node, a
    tool is about to run (its ledger intent recorded) / has just returned (its outcome
    not yet recorded). Written ``event:name:k``.
    """

    event: str
    name: str
    k: int = 1

    def __post_init__(self) -> None:
        if self.event not in EVENTS or self.k < 1:
            raise ValueError(f"bad kill point {self}")

    @classmethod
    def parse(cls, text: str) -> KillPoint:
        event, name, k = text.split(":")
        return cls(event, name, int(k))

    def __str__(self) -> str:
        return f"{self.event}:{self.name}:{self.k}"

    @property
    def slug(self) -> str:
        return str(self).replace(":", "-")


class KillAt(BaseCallbackHandler):
    """SIGKILL this process when the run reaches ``point``.

    A node's own run is the chain whose name is its ``langgraph_node`` and that carries a
    ``graph:step:N`` tag (the chains nested in a node carry the node's metadata too).
    """

    def __init__(self, point: KillPoint) -> None:
        self.point = point
        self.seen = 0
        self.nodes: dict[UUID, str] = {}

    def _reached(self, event: str, name: Any) -> None:
        if (event, name) != (self.point.event, self.point.name):
            return
        self.seen += 1
        if self.seen == self.point.k:
            os.kill(os.getpid(), signal.SIGKILL)

    def on_chain_start(
        self,
        serialized: dict[str, Any] | None,
        inputs: Any,
        *,
        run_id: UUID,
        tags: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        node = (metadata or {}).get("langgraph_node")
        if node is None or kwargs.get("name") != node:
            return
        if any(tag.startswith("graph:step:") for tag in tags or ()):
            self.nodes[run_id] = node
            self._reached("start", node)

    def on_chain_end(self, outputs: Any, *, run_id: UUID, **kwargs: Any) -> None:
        node = self.nodes.pop(run_id, None)
        if node is not None:
            self._reached("end", node)

    def on_tool_start(
        self, serialized: dict[str, Any] | None, input_str: str, **kwargs: Any
    ) -> None:
        self._reached("tool_start", kwargs.get("name") or (serialized or {}).get("name"))

    def on_tool_end(self, output: Any, **kwargs: Any) -> None:
        self._reached("tool_end", kwargs.get("name"))


def run_until_killed(run_dir: Path, point: KillPoint) -> None:
    """Run DRAFTING on ``run_dir`` with the default durability; SIGKILL at ``point``."""
    scenario = drafting_scenario(run_dir)
    config = scenario_config(scenario, THREAD)
    config["callbacks"] = [KillAt(point)]
    with open_persistence(str(run_dir / "graph.sqlite")) as (saver, store):
        graph = graph_for(scenario, saver, store)
        graph.invoke({"messages": [("user", scenario.message)]}, config)


def _child(run_dir: Path, point: KillPoint) -> None:
    """The forked child: it never returns (killed, or exits without running atexit)."""
    code = NOT_REACHED
    try:
        run_until_killed(run_dir, point)
    except BaseException:  # reported in the run's directory, then exit
        (run_dir / "error.txt").write_text(traceback.format_exc())
        code = 4
    os._exit(code)


def kill_at_each(root: Path) -> None:
    """One forked child per kill point, one after the other."""
    for line in (root / "points.txt").read_text().split():
        point = KillPoint.parse(line)
        run_dir = root / point.slug
        run_dir.mkdir()
        if threading.active_count() != 1:  # forking a process with threads is unsafe
            raise RuntimeError(f"threads before fork: {threading.enumerate()}")
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            _child(run_dir, point)
        _, status = os.waitpid(pid, 0)
        (run_dir / "status").write_text(str(status))


def main(db: str, log_dir: str) -> None:
    scenario = lookups_scenario(Path(log_dir), block_beta=True)
    with open_persistence(db) as (saver, store):
        graph = graph_for(scenario, saver, store)
        graph.invoke({"messages": [("user", scenario.message)]}, scenario_config(scenario, THREAD))


if __name__ == "__main__":
    if sys.argv[1] == "--kill-at":
        kill_at_each(Path(sys.argv[2]))
    else:
        main(*sys.argv[1:])
