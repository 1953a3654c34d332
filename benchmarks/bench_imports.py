"""What ``import agent_guards`` costs, next to importing LangGraph itself.

Each sample is a fresh interpreter timing its own import (interpreter start-up excluded);
the two commands alternate so a drifting machine affects both alike.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
from typing import Any

BASELINE = "import langgraph.graph, langchain_core.messages"
CASES = {
    "import agent_guards": "import agent_guards",
    "first use of two guards": ("from agent_guards import create_loop_check, ToolCallGuard"),
}


def _seconds(statement: str) -> float:
    code = f"import time\nt = time.perf_counter()\n{statement}\nprint(time.perf_counter() - t)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return float(out.stdout)


def run(quick: bool = False) -> list[dict[str, Any]]:
    samples = 3 if quick else 9
    rows: list[dict[str, Any]] = []
    for label, statement in CASES.items():
        ours, base = [], []
        for _ in range(samples):
            ours.append(_seconds(statement))
            base.append(_seconds(BASELINE))
        ratio = statistics.median(o / b for o, b in zip(ours, base, strict=True))
        rows.append(
            {
                "name": f"{label} / import langgraph.graph, messages",
                "value": round(ratio, 2),
                "unit": "x",
                "note": f"median of {samples} fresh interpreters, "
                f"{statistics.median(ours) * 1e3:.1f} ms vs {statistics.median(base) * 1e3:.1f} ms",
            }
        )
    return rows
