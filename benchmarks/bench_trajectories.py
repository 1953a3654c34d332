"""Real recorded agent runs (tau-bench, gpt-4o) replayed through the tool wrapper.

Every tool-call step of every recorded trajectory goes through ``ToolCallGuard`` and the
``loop_check`` edge in a compiled graph, fed the recorded history (see
:mod:`benchmarks.trajectories.replay`). Reported per configuration: stale answers (a reuse
whose content differs from what the real tool returned; target 0), executions saved
(correct reuses), and stops on successful runs (target 0). ``--quick`` replays every
10th trajectory.

Usage: ``python -m benchmarks.bench_trajectories [--quick]`` prints the table and each
stale answer or stop; ``python -m benchmarks.run --only trajectories`` gives the rows.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from benchmarks.trajectories.replay import (
    Tally,
    Trajectory,
    configurations,
    load,
    replay_corpus,
    tool_names,
)

COLUMNS = (
    ("trajectories", "trajectories"),
    ("successful runs", "successful"),
    ("tool calls", "calls"),
    ("executed", "executed"),
    ("reused", "reused"),
    ("saved (correct reuses)", "saved"),
    ("stale answers", "stale"),
    ("refused writes", "refused"),
    ("nudges", "nudges"),
    ("nudges on successful runs", "success_nudges"),
    ("false stops (successful runs)", "false_stops"),
    ("stops on failed runs", "failed_run_stops"),
    ("loops stopped (failed runs)", "loops_stopped"),
    ("mean steps before the end", "mean_steps_before_end"),
)
SHORT = {"effects declared": "declared", "no effects": "undeclared",
         "effects declared, headless": "headless"}  # fmt: skip


def corpus(quick: bool = False) -> list[Trajectory]:
    trajectories = load()
    return trajectories[::10] if quick else trajectories


def tallies(quick: bool = False) -> list[Tally]:
    trajectories = corpus(quick)
    return replay_corpus(trajectories, configurations(tool_names(trajectories), headless=True))


def run(quick: bool = False) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for tally in tallies(quick):
        runs = f"{tally.trajectories} runs ({tally.successful} successful), {tally.calls} calls"
        for name, value, note in (
            ("stale answers", tally.stale, "target 0"),
            ("executions saved", tally.saved, f"{tally.reused} reused; {runs}"),
            ("false stops on successful runs", tally.false_stops, "target 0"),
            ("stops on failed runs", tally.failed_run_stops, f"{tally.refused} refused writes"),
            ("nudges on successful runs", tally.success_nudges, "target 0"),
            (
                "loops stopped",
                tally.loops_stopped,
                f"failed runs; mean {tally.mean_steps_before_end} recorded steps before the end",
            ),
        ):
            label = f"tau-bench, {SHORT.get(tally.config, tally.config)}: {name}"
            rows.append({"name": label, "value": value, "unit": "count", "note": note})
    return rows


def table(results: list[Tally]) -> str:
    width = max(len(t.config) for t in results) + 2
    header = f"{'':<31}" + "".join(f"{t.config:>{width}}" for t in results)
    lines = [header, "-" * len(header)]
    for label, attr in COLUMNS:
        values = "".join(f"{getattr(t, attr):>{width},}" for t in results)
        lines.append(f"{label:<31}{values}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_trajectories")
    parser.add_argument("--quick", action="store_true", help="every 10th trajectory")
    args = parser.parse_args(argv)
    results = tallies(args.quick)
    print(table(results))
    for tally in results:
        print(f"\n{tally.config}: {len(tally.cases)} stale answers, refusals or stops")
        for case in tally.cases:
            outcome = "successful" if case.success else "failed"
            print(f"  {case.trajectory} ({outcome}) step {case.step} {case.tool}: {case.kind}")
            print(f"    {case.why}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
