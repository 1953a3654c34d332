"""Subprocess for the crash test: run LOOKUPS on a SQLite file until fetch_beta blocks.

``python -m tests.integration._crash_worker DB LOG_DIR``. ``fetch_beta`` touches
``LOG_DIR/beta.started`` and waits for ``LOG_DIR/beta.release``; the test kills this
process with SIGKILL while it waits, then resumes the thread itself.
"""

from __future__ import annotations

import sys
from pathlib import Path

from agent_guards.graphs.demo import open_persistence
from agent_guards.graphs.scenarios import scenario_config
from tests.integration._reference import graph_for, lookups_scenario

THREAD = "crash"


def main(db: str, log_dir: str) -> None:
    scenario = lookups_scenario(Path(log_dir), block_beta=True)
    with open_persistence(db) as (saver, store):
        graph = graph_for(scenario, saver, store)
        graph.invoke({"messages": [("user", scenario.message)]}, scenario_config(scenario, THREAD))


if __name__ == "__main__":
    main(*sys.argv[1:])
