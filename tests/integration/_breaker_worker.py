"""Subprocess for the two-writer breaker test: record failures into one shared store.

``python -m tests.integration._breaker_worker DB GO_FILE COUNT``: opens the database (SQLite
path or ``postgresql://`` URL), waits for ``GO_FILE`` so both writers start together, then
records ``COUNT`` failures of tool ``svc`` as fast as it can and prints ``done``.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from agent_guards.persistence import open_persistence
from agent_guards.retry_router import CircuitBreaker

# a threshold no test reaches: every recorded failure must show in the count
BREAKER = CircuitBreaker(failure_threshold=100_000, cooldown=30, max_events=10_000)


def main(db: str, go: Path, count: int) -> None:
    with open_persistence(db) as (_, store):
        while not go.exists():
            time.sleep(0.005)
        for _ in range(count):
            BREAKER.record(store, "svc", ok=False)
    print("done")


if __name__ == "__main__":
    main(sys.argv[1], Path(sys.argv[2]), int(sys.argv[3]))
