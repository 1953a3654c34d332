"""The injection corpus: labelled payloads and benign texts, and how ``scan_injection`` scores.

``injection_corpus.jsonl`` (shipped with the package) has one JSON object a line: ``id``,
``label`` (``injection`` or ``benign``), ``lang``, ``technique`` (``ignore``, ``role_play``,
``zero_width``, ``base64``, ``hard`` for a benign text that looks like an attack, ...),
``text`` and ``split``. The ``dev`` split is what the default patterns were written
against; the ``holdout`` split was written after they were frozen and is never tuned on,
so its numbers are the honest estimate of how the heuristic does on text it has not seen.

Example:
    >>> score = score_injection(load_injection_corpus())
    >>> score["all"]["payloads"] >= 100 and score["all"]["benign"] >= 100
    True
    >>> score["all"]["recall"] >= 0.9 and score["all"]["false_positive_rate"] <= 0.05
    True
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from agent_guards.context_guard.injection import InjectionPolicy, scan_injection

__all__ = ["CORPUS_PATH", "format_injection", "load_injection_corpus", "score_injection"]

CORPUS_PATH = Path(__file__).with_name("injection_corpus.jsonl")


def load_injection_corpus(path: str | Path = CORPUS_PATH) -> list[dict[str, Any]]:
    """The corpus rows (see the module docstring); a malformed line raises naming it."""
    rows: list[dict[str, Any]] = []
    for number, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        row = json.loads(line)
        if row.get("label") not in ("injection", "benign") or not isinstance(row.get("text"), str):
            raise ValueError(f"{path}:{number}: needs label injection/benign and a text")
        rows.append(row)
    return rows


def _score(rows: list[Mapping[str, Any]], policy: InjectionPolicy | None) -> dict[str, Any]:
    payloads = [r for r in rows if r["label"] == "injection"]
    benign = [r for r in rows if r["label"] == "benign"]
    missed = [r["id"] for r in payloads if not scan_injection(r["text"], policy)]
    flagged = [r["id"] for r in benign if scan_injection(r["text"], policy)]
    return {
        "payloads": len(payloads),
        "benign": len(benign),
        "recall": round(1 - len(missed) / len(payloads), 3) if payloads else None,
        "false_positive_rate": round(len(flagged) / len(benign), 3) if benign else None,
        "missed": missed,
        "false_positives": flagged,
    }


def score_injection(
    rows: Iterable[Mapping[str, Any]], policy: InjectionPolicy | None = None
) -> dict[str, dict[str, Any]]:
    """Recall and false-positive rate of ``scan_injection``: overall, per split, per language."""
    items = list(rows)
    out = {"all": _score(items, policy)}
    for key in ("split", "lang"):
        for value in sorted({str(r.get(key)) for r in items}):
            out[f"{key}={value}"] = _score([r for r in items if str(r.get(key)) == value], policy)
    return out


def format_injection(score: Mapping[str, Mapping[str, Any]]) -> str:
    """One line per group: payloads, recall, benign texts, false-positive rate."""
    lines = [f"{'group':<14} {'payloads':>8} {'recall':>7} {'benign':>7} {'FP rate':>8}"]
    for group, s in score.items():
        recall = "-" if s["recall"] is None else f"{s['recall']:.3f}"
        fp = "-" if s["false_positive_rate"] is None else f"{s['false_positive_rate']:.3f}"
        lines.append(f"{group:<14} {s['payloads']:>8} {recall:>7} {s['benign']:>7} {fp:>8}")
    return "\n".join(lines)
