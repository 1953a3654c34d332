"""Planning health over a batch of runs (how often plans change, stall or are refused).

:func:`planning_health` reads the final state of each run (the output of ``graph.invoke``,
or ``graph.get_state(config).values`` plus its ``interrupts``): ``plans`` (the
:class:`~agent_guards.planner_gate.PlanVersion` list of
:class:`~agent_guards.planner_gate.PlanState`,
objects or their dicts), ``guard_log`` and ``__interrupt__``. Formulas, over the batch:

===========================  ===================================================================
metric                       formula
===========================  ===================================================================
start_rate                   runs in which a plan step started (some step is running, done or
                             failed)  /  runs                                   (规划启动率)
step_success_rate            step executions that succeeded (status done)  /  step executions
                             (done or failed); a finished step carried into a later version
                             counts once                                        (步骤成功率)
replan_rate                  plan versions proposed after the initial one  /  plan versions
                                                                                (重规划率)
replans_per_run              plan versions proposed after the initial one  /  runs
user_interruption_rate       runs the user interrupted (a planner_gate decision ``cancelled``
                             or ``approval_rejected``, or the run ended waiting on a human:
                             ``__interrupt__``)  /  runs                        (用户中断率)
===========================  ===================================================================

A metric with an empty denominator is ``None``. ``counts`` holds the numerators and
denominators, so batches can be merged by adding counts.

Example:
    >>> from agent_guards.planner_gate import PlanVersion, mark_step
    >>> v1 = PlanVersion.linear(1, ["search", "write"], status="accepted")
    >>> ran = {"plans": [mark_step(v1, "s1", "done")], "guard_log": []}
    >>> stuck = {"plans": [v1, PlanVersion.linear(2, ["a"], trigger="critique", parent=1)]}
    >>> h = planning_health([ran, stuck])
    >>> h["start_rate"], h["step_success_rate"], h["replan_rate"], h["user_interruption_rate"]
    (0.5, 1.0, 0.3333, 0.0)
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from agent_guards.planner_gate.model import PlanVersion

__all__ = ["planning_health"]

_STARTED = frozenset({"running", "done", "failed"})
_EXECUTED = frozenset({"done", "failed"})
_USER_STOPS = frozenset({"cancelled", "approval_rejected"})


def _get(entry: Any, key: str) -> Any:
    return entry.get(key) if isinstance(entry, Mapping) else getattr(entry, key, None)


def _value(x: Any) -> str:
    return str(getattr(x, "value", x))


def _interrupted(state: Mapping[str, Any]) -> tuple[bool, bool]:
    """(the user cancelled or rejected a step, the run ended waiting on a human)."""
    stopped = any(
        _get(d, "guard") == "planner_gate" and _get(d, "reason") in _USER_STOPS
        for d in state.get("guard_log") or ()
    )
    return stopped, bool(state.get("__interrupt__"))


def _ratio(num: int, den: int) -> float | None:
    return round(num / den, 4) if den else None


def planning_health(states: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Start rate, step success rate, replan rate and user-interruption rate of a batch.

    Args:
        states: Final states of the runs (dicts with ``plans``, ``guard_log``, and
            ``__interrupt__`` when a run paused for a human).

    Returns:
        ``{"runs", "start_rate", "step_success_rate", "replan_rate", "replans_per_run",
        "user_interruption_rate", "counts": {...}}`` (formulas in the module docstring).

    Raises:
        ValueError: a state is not a mapping, or a plan version is malformed.
    """
    counts = dict.fromkeys(
        (
            "runs",
            "started",
            "steps_done",
            "steps_executed",
            "versions",
            "replans",
            "user_stopped",
            "waiting_on_human",
            "interrupted",
        ),
        0,
    )
    for n, state in enumerate(states):
        if not isinstance(state, Mapping):
            raise ValueError(f"states[{n}] must be a mapping, got {type(state).__name__}")
        versions = [PlanVersion.from_dict(v) for v in state.get("plans") or ()]
        executions: set[tuple[str, str, str, str]] = set()
        started = False
        for v in versions:
            for s in v.steps:
                status = _value(s.status)
                started = started or status in _STARTED
                if status in _EXECUTED:
                    args = json.dumps(s.args, sort_keys=True, default=str)
                    executions.add((s.id, s.tool or "", args, status))
        stopped, waiting = _interrupted(state)
        counts["runs"] += 1
        counts["started"] += started
        counts["steps_executed"] += len(executions)
        counts["steps_done"] += sum(1 for e in executions if e[3] == "done")
        counts["versions"] += len(versions)
        counts["replans"] += sum(1 for v in versions if _value(v.trigger) != "initial")
        counts["user_stopped"] += stopped
        counts["waiting_on_human"] += waiting
        counts["interrupted"] += stopped or waiting
    return {
        "runs": counts["runs"],
        "start_rate": _ratio(counts["started"], counts["runs"]),
        "step_success_rate": _ratio(counts["steps_done"], counts["steps_executed"]),
        "replan_rate": _ratio(counts["replans"], counts["versions"]),
        "replans_per_run": _ratio(counts["replans"], counts["runs"]),
        "user_interruption_rate": _ratio(counts["interrupted"], counts["runs"]),
        "counts": counts,
    }
