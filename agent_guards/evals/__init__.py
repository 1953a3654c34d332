"""Evaluate the guards: slices of cases, the evaluation metrics, a case-level regression gate.

Cases are JSONL lines (:mod:`agent_guards.evals.cases`); each names a kind whose runner
(:mod:`agent_guards.evals.kinds`) feeds its input to a guard and observes what it decided.
:func:`run_cases` runs them, :func:`compute_metrics` scores them per slice, :func:`diff_runs`
compares a run with a saved baseline case by case. :func:`cases_from_thread` drafts cases
from a recorded thread, :func:`export_dataset` / :func:`run_experiment` use LangSmith,
:func:`run_ramdocs` replays RAMDocs, :func:`run_dated` replays questions whose answer
changed over time against newest-first and majority baselines, :func:`planning_health`
scores a batch of runs.
``agent-guards eval`` is the command (docs/evaluating.md).

Example:
    >>> run = run_cases(load_cases())
    >>> run.metrics["pass_rate"], len(run.by_slice()) >= 13
    (1.0, True)
"""

from agent_guards.evals.cases import SHIPPED_SLICES, Case, check, load_cases, shipped_case_files
from agent_guards.evals.dated import dated_questions, format_dated, run_dated
from agent_guards.evals.health import planning_health
from agent_guards.evals.kinds import (
    KINDS,
    KindRunner,
    policy_versions,
    register_kind,
    run_kind,
)
from agent_guards.evals.langsmith_io import (
    case_evaluator,
    case_target,
    export_dataset,
    run_experiment,
    to_examples,
)
from agent_guards.evals.metrics import METRICS, CaseResult, Metric, compute_metrics
from agent_guards.evals.policies import EvalPolicies
from agent_guards.evals.ramdocs import format_ramdocs, load_ramdocs, run_ramdocs
from agent_guards.evals.runner import (
    CaseChange,
    EvalRun,
    diff_runs,
    regressions,
    run_case,
    run_cases,
)
from agent_guards.evals.traces import cases_from_thread, draft_cases, open_checkpointer, write_cases

__all__ = [
    "KINDS",
    "METRICS",
    "SHIPPED_SLICES",
    "Case",
    "CaseChange",
    "CaseResult",
    "EvalPolicies",
    "EvalRun",
    "KindRunner",
    "Metric",
    "case_evaluator",
    "case_target",
    "cases_from_thread",
    "check",
    "compute_metrics",
    "dated_questions",
    "diff_runs",
    "draft_cases",
    "export_dataset",
    "format_dated",
    "format_ramdocs",
    "load_cases",
    "load_ramdocs",
    "open_checkpointer",
    "planning_health",
    "policy_versions",
    "register_kind",
    "regressions",
    "run_case",
    "run_cases",
    "run_dated",
    "run_experiment",
    "run_kind",
    "run_ramdocs",
    "shipped_case_files",
    "to_examples",
    "write_cases",
]
