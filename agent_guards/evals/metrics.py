"""The evaluation metrics, computed from case results. Each has one written formula.

Notation, over the cases a metric applies to: ``exp`` is what the case expects, ``obs``
what the guard did. A metric with an empty denominator is ``None`` (not applicable), never 0.

=============================  ==================================================================
metric                         formula
=============================  ==================================================================
conflict_detection_recall      evidence and memory cases with a conflict (exp has conflicting ids,
                               an ``overridden_by:``/``ambiguous:`` exclusion, or exp verdict
                               clarify/escalate) where obs flagged one (conflicting ids, or verdict
                               clarify/escalate)  /  those cases
wrong_arbitration_rate         arbitrations that picked wrong: evidence cases where obs answered
                               but exp did not, or with other selected ids or another value (or
                               other ``values``: a per-entity answer lists every entity's); memory
                               cases whose exp names ``inject_ids`` where obs injected other records
                               /  evidence cases where obs answered + those memory cases
abstain_precision              cases with obs abstain and exp abstain  /  cases with obs abstain
clarify_precision              cases with obs clarify and exp clarify  /  cases with obs clarify
human_escalation_precision     cases with obs escalate and exp escalate  /  cases with obs escalate
replan_rate                    replans accepted (obs ``replans``)  /  planner and graph cases
no_progress_abort_rate         cases the guard stopped for lack of progress (obs ``aborted``)
                               /  loop, planner and graph cases
tool_calls_saved               sum of (obs ``unguarded_tool_calls`` - obs ``tool_calls``) over
                               cases that report both (a count, not a ratio)
pass_rate                      passing cases  /  all cases
regression_pass_rate           cases passing now that passed in the baseline  /  cases that
                               passed in the baseline (``pass_rate`` when there is no baseline)
=============================  ==================================================================
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["METRICS", "CaseResult", "Metric", "compute_metrics"]


@dataclass(frozen=True)
class CaseResult:
    """The outcome of one case: what was observed, and whether it matched."""

    case_id: str
    slice: str
    kind: str
    passed: bool
    failures: tuple[str, ...]
    observed: dict[str, Any]
    expected: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {
            "case_id": self.case_id,
            "slice": self.slice,
            "kind": self.kind,
            "passed": self.passed,
            "failures": list(self.failures),
            "observed": self.observed,
            "expected": self.expected,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CaseResult:
        return cls(
            case_id=data["case_id"],
            slice=data["slice"],
            kind=data["kind"],
            passed=bool(data["passed"]),
            failures=tuple(data.get("failures", ())),
            observed=dict(data.get("observed", {})),
            expected=dict(data.get("expected", {})),
        )


Ratio = tuple[int, int]


def _exp_verdict(r: CaseResult) -> Any:
    """The verdict a case expects: ``verdict``, else the first of ``verdict_in``, else the
    last of ``verdicts`` (the final verdict of a planner or loop replay)."""
    exp = r.expected
    return (
        exp.get("verdict")
        or (exp.get("verdict_in") or [None])[0]
        or exp.get("route")
        or (exp.get("verdicts") or [None])[-1]
    )


def _has_conflict(r: CaseResult) -> bool:
    exp = r.expected
    overridden = any(
        str(why).startswith(("overridden_by:", "ambiguous:"))
        for why in (exp.get("excluded") or {}).values()
    )
    return bool(exp.get("conflicting_ids")) or overridden or _exp_verdict(r) in _FLAGS


_FLAGS = ("clarify", "escalate")


def _flagged(r: CaseResult) -> bool:
    obs = r.observed
    return bool(obs.get("conflicting_ids")) or obs.get("verdict") in _FLAGS


def _conflict_recall(rs: Sequence[CaseResult]) -> Ratio:
    pool = [r for r in rs if r.kind in ("evidence", "memory") and _has_conflict(r)]
    return sum(_flagged(r) for r in pool), len(pool)


def _wrong_arbitration(rs: Sequence[CaseResult]) -> Ratio:
    pool = [r for r in rs if r.kind == "evidence" and r.observed.get("verdict") == "answer"]
    pool += [
        r
        for r in rs
        if r.kind == "memory" and "inject_ids" in r.expected and r.observed.get("inject_ids")
    ]

    def wrong(r: CaseResult) -> bool:
        exp, obs = r.expected, r.observed
        if r.kind == "memory":
            return set(map(str, exp["inject_ids"])) != set(map(str, obs["inject_ids"]))
        if _exp_verdict(r) not in (None, "answer"):
            return True
        if "selected_ids" in exp and set(exp["selected_ids"]) != set(obs.get("selected_ids", ())):
            return True
        if "values" in exp and exp["values"] != obs.get("values"):
            return True
        return "value" in exp and exp["value"] != obs.get("value")

    return sum(wrong(r) for r in pool), len(pool)


def _precision(verdict: str) -> Callable[[Sequence[CaseResult]], Ratio]:
    def compute(rs: Sequence[CaseResult]) -> Ratio:
        pool = [r for r in rs if r.observed.get("verdict") == verdict]
        return sum(_exp_verdict(r) == verdict for r in pool), len(pool)

    return compute


def _replan_rate(rs: Sequence[CaseResult]) -> tuple[float, int]:
    pool = [r for r in rs if r.kind in ("planner", "graph")]
    return sum(int(r.observed.get("replans", 0)) for r in pool), len(pool)


def _abort_rate(rs: Sequence[CaseResult]) -> Ratio:
    pool = [r for r in rs if r.kind in ("loop", "planner", "graph")]
    return sum(bool(r.observed.get("aborted")) for r in pool), len(pool)


def _pass_rate(rs: Sequence[CaseResult]) -> Ratio:
    return sum(r.passed for r in rs), len(rs)


@dataclass(frozen=True)
class Metric:
    """A named metric: ``compute(results) -> (numerator, denominator)``."""

    name: str
    compute: Callable[[Sequence[CaseResult]], tuple[float, int]]
    higher_is_better: bool = True


METRICS: tuple[Metric, ...] = (
    Metric("conflict_detection_recall", _conflict_recall),
    Metric("wrong_arbitration_rate", _wrong_arbitration, higher_is_better=False),
    Metric("abstain_precision", _precision("abstain")),
    Metric("clarify_precision", _precision("clarify")),
    Metric("human_escalation_precision", _precision("escalate")),
    Metric("replan_rate", _replan_rate, higher_is_better=False),
    Metric("no_progress_abort_rate", _abort_rate),
    Metric("pass_rate", _pass_rate),
)


def tool_calls_saved(results: Iterable[CaseResult]) -> int:
    """Tool calls the guards saved against the unguarded run, over cases that report both."""
    return sum(
        int(r.observed["unguarded_tool_calls"]) - int(r.observed["tool_calls"])
        for r in results
        if "unguarded_tool_calls" in r.observed and "tool_calls" in r.observed
    )


def compute_metrics(
    results: Sequence[CaseResult], *, baseline: Mapping[str, bool] | None = None
) -> dict[str, float | int | None]:
    """Every metric over ``results``; ``baseline`` maps case id -> passed before."""
    out: dict[str, float | int | None] = {}
    for metric in METRICS:
        num, den = metric.compute(results)
        out[metric.name] = round(num / den, 4) if den else None
    out["tool_calls_saved"] = tool_calls_saved(results)
    if baseline is None:
        out["regression_pass_rate"] = out["pass_rate"]
    else:
        before = [r for r in results if baseline.get(r.case_id)]
        out["regression_pass_rate"] = (
            round(sum(r.passed for r in before) / len(before), 4) if before else None
        )
    return out
