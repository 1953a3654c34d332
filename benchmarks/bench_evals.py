"""The eval harness: cost of the shipped slices, growth with the number of cases, RAMDocs."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from agent_guards.evals import load_cases, run_cases
from agent_guards.evals.ramdocs import load_ramdocs, run_ramdocs
from benchmarks._timing import median_us


def run(quick: bool = False) -> list[dict[str, Any]]:
    cases = load_cases()
    repeats = 3 if quick else 7
    total = median_us(lambda: run_cases(cases), calls=1, repeats=repeats)
    times = 2 if quick else 10
    many = [replace(c, id=f"{c.id}-{i}") for i in range(times) for c in cases]
    grown = median_us(lambda: run_cases(many), calls=1, repeats=repeats)
    questions = load_ramdocs(limit=50 if quick else None)
    ramdocs = median_us(lambda: run_ramdocs(questions), calls=1, repeats=repeats)
    return [
        {
            "name": "eval: all shipped slices",
            "value": round(total, 1),
            "unit": "us",
            "note": f"{len(cases)} cases, run_cases, default policies",
        },
        {
            "name": "eval: cost per case",
            "value": round(total / len(cases), 1),
            "unit": "us",
            "note": "mean over the shipped cases",
        },
        {
            "name": f"eval growth, {times}x cases / 1x",
            "value": round(grown / total, 2),
            "unit": "x",
            "note": f"linear would be {times}x: no per-run state, no cross-case work",
        },
        {
            "name": "RAMDocs replay per question",
            "value": round(ramdocs / len(questions), 1),
            "unit": "us",
            "note": f"{len(questions)} questions, resolve_evidence without metadata",
        },
    ]
