"""scan_injection on the labelled corpus: recall and false-positive rate, and its cost."""

from __future__ import annotations

from typing import Any

from agent_guards.context_guard import scan_injection
from agent_guards.context_guard.injection import InjectionPolicy
from agent_guards.evals.injection import load_injection_corpus, score_injection
from benchmarks._timing import median_us


def run(quick: bool = False) -> list[dict[str, Any]]:
    rows = load_injection_corpus()
    score = score_injection(rows)
    texts = [r["text"] for r in rows]
    cold = InjectionPolicy()  # the default patterns, not the default object: no memo, a full scan
    cost = median_us(
        lambda: [scan_injection(t, cold) for t in texts], calls=1, repeats=3 if quick else 7
    )
    out: list[dict[str, Any]] = []
    for group, label in (("all", "corpus"), ("split=holdout", "held-out split")):
        s = score[group]
        out.append(
            {
                "name": f"injection recall, {label}",
                "value": s["recall"],
                "unit": "ratio",
                "note": f"{s['payloads']} payloads; target >= 0.9 on the corpus",
            }
        )
        out.append(
            {
                "name": f"injection false-positive rate, {label}",
                "value": s["false_positive_rate"],
                "unit": "ratio",
                "note": f"{s['benign']} benign texts; target <= 0.05 on the corpus",
            }
        )
    out.append(
        {
            "name": "scan_injection cost per text",
            "value": round(cost / len(texts), 1),
            "unit": "us",
            "note": f"mean over the {len(texts)} corpus texts, each scanned in full (no memo)",
        }
    )
    return out
