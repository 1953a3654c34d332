"""Run eval cases through the guards, save the run, and diff it against a baseline.

Example:
    >>> from agent_guards.evals import load_cases, run_cases
    >>> run = run_cases(load_cases())
    >>> run.metrics["pass_rate"]
    1.0
"""

from __future__ import annotations

import json
import time
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent_guards.evals.cases import Case, check
from agent_guards.evals.kinds import KINDS, policy_versions, run_kind
from agent_guards.evals.metrics import CaseResult, compute_metrics
from agent_guards.evals.policies import EvalPolicies

__all__ = ["CaseChange", "EvalRun", "diff_runs", "regressions", "run_case", "run_cases"]


def run_case(case: Case, *, policies: EvalPolicies | None = None) -> CaseResult:
    """Run one case under ``policies`` (default: every guard's default policy).

    A malformed case (unknown kind, unknown input key), or a guard that raises, fails with
    the error as its reason instead of stopping the run.
    """
    observed: dict[str, Any]
    if case.kind not in KINDS:
        observed = {"error": f"unknown kind {case.kind!r}; registered: {sorted(KINDS)}"}
        failures = [observed["error"]]
    else:
        try:
            observed = run_kind(case.kind, case.input, policies=policies)
        except Exception as err:  # a crash is a failing case, not a crashed eval
            observed = {"error": f"{type(err).__name__}: {err}"}
        failures = [observed["error"]] if "error" in observed else check(case, observed)
    return CaseResult(
        case_id=case.id,
        slice=case.slice,
        kind=case.kind,
        passed=not failures,
        failures=tuple(failures),
        observed=observed,
        expected=case.expect,
    )


@dataclass
class EvalRun:
    """The results of one eval run, with the policy versions it ran under."""

    results: list[CaseResult]
    policies: dict[str, str] = field(default_factory=policy_versions)
    seconds: float = 0.0
    baseline: dict[str, bool] | None = None

    @property
    def metrics(self) -> dict[str, float | int | None]:
        return compute_metrics(self.results, baseline=self.baseline)

    def by_slice(self) -> dict[str, dict[str, float | int | None]]:
        groups: dict[str, list[CaseResult]] = defaultdict(list)
        for r in self.results:
            groups[r.slice].append(r)
        return {
            name: compute_metrics(rs, baseline=self.baseline) | {"cases": len(rs)}
            for name, rs in sorted(groups.items())
        }

    @property
    def failed(self) -> list[CaseResult]:
        return [r for r in self.results if not r.passed]

    def to_dict(self) -> dict[str, Any]:
        return {
            "policies": self.policies,
            "seconds": round(self.seconds, 3),
            "metrics": self.metrics,
            "results": [r.to_dict() for r in self.results],
        }

    def save(self, path: str | Path) -> None:
        Path(path).write_text(
            json.dumps(self.to_dict(), indent=1, ensure_ascii=False, default=str) + "\n"
        )

    @classmethod
    def load(cls, path: str | Path) -> EvalRun:
        data = json.loads(Path(path).read_text())
        return cls(
            results=[CaseResult.from_dict(r) for r in data["results"]],
            policies=dict(data.get("policies", {})),
            seconds=float(data.get("seconds", 0.0)),
        )


def run_cases(
    cases: Iterable[Case],
    *,
    baseline: EvalRun | None = None,
    policies: EvalPolicies | None = None,
) -> EvalRun:
    """Run every case (in order) under ``policies`` and return the run.

    ``baseline`` feeds ``regression_pass_rate``; compare the runs case by case with
    :func:`diff_runs`.
    """
    started = time.perf_counter()
    results = [run_case(c, policies=policies) for c in cases]
    before = {r.case_id: r.passed for r in baseline.results} if baseline else None
    return EvalRun(
        results=results,
        policies=policy_versions(policies),
        seconds=time.perf_counter() - started,
        baseline=before,
    )


@dataclass(frozen=True)
class CaseChange:
    """How one case changed between a baseline and a new run."""

    case_id: str
    slice: str
    change: str  # "fixed" | "broke" | "changed_verdict" | "new" | "removed"
    before: str | None
    after: str | None
    failures: tuple[str, ...] = ()

    def __str__(self) -> str:
        detail = f"; {'; '.join(self.failures)}" if self.failures else ""
        return (
            f"{self.change:<15} {self.slice}/{self.case_id}: {self.before} -> {self.after}{detail}"
        )


def _verdict(r: CaseResult | None) -> str | None:
    return None if r is None else str(r.observed.get("verdict", r.observed.get("error", "?")))


def diff_runs(baseline: EvalRun, current: EvalRun) -> list[CaseChange]:
    """Case-level diff. A ``broke`` entry (passed before, fails now) fails the regression gate."""
    before: Mapping[str, CaseResult] = {r.case_id: r for r in baseline.results}
    after: Mapping[str, CaseResult] = {r.case_id: r for r in current.results}
    changes: list[CaseChange] = []
    for case_id in sorted(set(before) | set(after)):
        b, a = before.get(case_id), after.get(case_id)
        slice_ = (a or b).slice  # type: ignore[union-attr]
        if a is None:
            changes.append(CaseChange(case_id, slice_, "removed", _verdict(b), None))
        elif b is None:
            changes.append(CaseChange(case_id, slice_, "new", None, _verdict(a), a.failures))
        elif b.passed and not a.passed:
            changes.append(
                CaseChange(case_id, slice_, "broke", _verdict(b), _verdict(a), a.failures)
            )
        elif a.passed and not b.passed:
            changes.append(CaseChange(case_id, slice_, "fixed", _verdict(b), _verdict(a)))
        elif _verdict(a) != _verdict(b):
            changes.append(CaseChange(case_id, slice_, "changed_verdict", _verdict(b), _verdict(a)))
    return changes


def regressions(changes: Sequence[CaseChange]) -> list[CaseChange]:
    """The changes that fail the gate: cases that passed in the baseline and fail now."""
    return [c for c in changes if c.change == "broke"]
