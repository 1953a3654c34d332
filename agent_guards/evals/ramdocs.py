"""RAMDocs replay: ``resolve_evidence`` on conflicting, ambiguous and noisy retrieval.

RAMDocs (Wang et al., 2025, "Retrieval-Augmented Generation with Conflicting Evidence",
arXiv:2504.13079; MIT licence, copied to ``data/ramdocs/``) has 500 questions, each with
documents labelled ``correct`` / ``misinfo`` / ``noise`` and the answer each document gives,
plus the gold answers (several when the question is ambiguous) and the wrong answers.

:func:`run_ramdocs` turns each question into one claim: ``claim_key`` = the question,
``value`` = a document's answer, **no other metadata** (no source type, date, entity,
confidence or relevance: RAMDocs has none), and reports what the verdict does:

=============================  ==================================================================
rate (over questions)          meaning
=============================  ==================================================================
strict_correct_rate            ANSWER listing every gold answer and no other value (a per-entity
                               answer counts when it lists every entity's gold value)
correct_answer_rate            lenient: ANSWER with a gold value (one of several counts)
wrong_commit_rate              ANSWER with a value not among the gold answers
                               (``wrong_answer_rate``: one of the dataset's wrong answers)
caveat_rate                    ANSWER carrying the caveat ``weak_source``
clarify_rate                   CLARIFY (the candidates are in the decision)
abstain_rate                   ABSTAIN (no document gave an answer, or only weak ones under
                               ``high_risk``)
clarify_on_ambiguous           CLARIFY among questions with several gold answers
correct_on_unambiguous         ANSWER with the gold value among questions with one gold answer
clarify_lists_gold             among CLARIFY verdicts: the options include every gold answer
clarify_lists_misinfo          among CLARIFY verdicts: the options include a misinformation
                               value (a misinfo document's answer or a listed wrong answer)
=============================  ==================================================================

Documents whose answer is ``"unknown"`` (the noise documents: they state no answer) give no
claim unless ``keep_unknown=True``. ``labels="oracle"`` is an upper bound, not the resolver
on RAMDocs: it uses the dataset's own labels as the metadata an extractor would have to
find (correct -> ``official``, misinfo -> ``forum``, noise dropped); ``"oracle_entities"``
adds the entity of each correct document (the gold answer it gives names its entity in
``disambig_entity``). ``majority`` in the report is a majority vote over the documents, for
comparison (the guard never votes), scored leniently.

Example:
    >>> row = {"question": "Who directed X?", "gold_answers": ["A"], "wrong_answers": ["B"],
    ...        "documents": [{"answer": "A", "type": "correct", "text": ""},
    ...                      {"answer": "B", "type": "misinfo", "text": ""},
    ...                      {"answer": "unknown", "type": "noise", "text": ""}]}
    >>> r = run_ramdocs([row])
    >>> r["verdicts"], r["clarify_lists_gold"], r["clarify_lists_misinfo"]
    ({'clarify': 1}, 1.0, 1.0)
    >>> run_ramdocs([row], labels="oracle")["strict_correct_rate"]
    1.0
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Literal

from agent_guards.core.errors import check_choice
from agent_guards.evidence_resolve.core import resolve_evidence
from agent_guards.evidence_resolve.model import EvidenceVerdict
from agent_guards.evidence_resolve.policy import EvidencePolicy, normalize_value

__all__ = [
    "DEFAULT_PATH",
    "LABELS",
    "answered_values",
    "format_ramdocs",
    "load_ramdocs",
    "ramdocs_items",
    "run_ramdocs",
]

DEFAULT_PATH = Path("data") / "ramdocs" / "RAMDocs_test.jsonl"
"""Where the data set lives in a source checkout (relative to the repository root)."""
Labels = Literal["none", "oracle", "oracle_entities"]
LABELS: tuple[str, ...] = ("none", "oracle", "oracle_entities")
_ORACLE_SOURCE = {"correct": "official", "misinfo": "forum"}


def _default_path() -> Path:
    here = Path(__file__).resolve().parents[2] / DEFAULT_PATH
    return DEFAULT_PATH if DEFAULT_PATH.is_file() else here


def load_ramdocs(
    path: str | Path | None = None, *, limit: int | None = None
) -> list[dict[str, Any]]:
    """The questions of a RAMDocs JSONL file (default: ``data/ramdocs/RAMDocs_test.jsonl``).

    Raises:
        FileNotFoundError: the file does not exist.
        ValueError: a line is not a RAMDocs question (the message names the line and field).
    """
    file = Path(path) if path is not None else _default_path()
    if not file.is_file():
        raise FileNotFoundError(f"no RAMDocs file at {str(file)!r}")
    rows = []
    for n, line in enumerate(file.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        row = json.loads(line)
        for key in ("question", "documents", "gold_answers", "wrong_answers"):
            if key not in row:
                raise ValueError(f"{file.name}:{n}: missing field {key!r}")
        rows.append(row)
        if limit is not None and len(rows) >= limit:
            break
    return rows


def ramdocs_items(
    row: Mapping[str, Any], *, keep_unknown: bool = False, labels: Labels = "none"
) -> list[dict[str, Any]]:
    """The evidence dicts of one question: one item per document that states an answer."""
    entities = _gold_entities(row) if labels == "oracle_entities" else {}
    items = []
    for i, doc in enumerate(row["documents"]):
        answer = str(doc.get("answer", "")).strip()
        if not answer or (answer.lower() == "unknown" and not keep_unknown):
            continue
        item: dict[str, Any] = {"id": f"doc{i}", "claim_key": row["question"], "value": answer}
        if labels != "none":
            if doc.get("type") not in _ORACLE_SOURCE:
                continue
            item["source_type"] = _ORACLE_SOURCE[doc["type"]]
            entity = entities.get(normalize_value(answer)) if doc["type"] == "correct" else None
            if entity:
                item["entity"] = entity
        items.append(item)
    return items


def _gold_entities(row: Mapping[str, Any]) -> dict[str, str]:
    """Normalized gold answer -> the entity it is about (``disambig_entity`` is in gold order)."""
    gold, names = row.get("gold_answers") or [], row.get("disambig_entity") or []
    if len(gold) != len(names) or len(gold) < 2:
        return {}
    return {normalize_value(g): str(n) for g, n in zip(gold, names, strict=True)}


def _majority(values: list[str]) -> str | None:
    counts = Counter(values).most_common(2)
    if not counts or (len(counts) == 2 and counts[0][1] == counts[1][1]):
        return None
    return counts[0][0]


def _rate(num: int, den: int) -> float | None:
    return round(num / den, 4) if den else None


def answered_values(verdict: EvidenceVerdict) -> list[Any]:
    """The values an ANSWER states: ``value``, or every value listed in ``values``.

    >>> from agent_guards import Evidence, EvidencePolicy, resolve_evidence
    >>> items = [Evidence("a", "k", "1", entity="x"), Evidence("b", "k", "2", entity="y")]
    >>> v = resolve_evidence(items, policy=EvidencePolicy(group_entities=True))
    >>> v.reason, answered_values(v)
    ('per_entity', ['1', '2'])
    """
    if verdict.value is not None:
        return [verdict.value]
    out: list[Any] = []
    for value in verdict.values.values():
        out.extend(value.values() if isinstance(value, Mapping) else [value])
    return out


def _score(
    c: Counter[str], v: EvidenceVerdict, row: Mapping[str, Any], norm: Any, items: list[Any]
) -> None:
    """Count one question's verdict into ``c`` (the module table's numerators)."""
    gold = {norm(g) for g in row["gold_answers"]}
    wrong = {norm(w) for w in row["wrong_answers"]} - gold
    misinfo = wrong | {
        norm(d.get("answer", "")) for d in row["documents"] if d.get("type") == "misinfo"
    }
    ambiguous = len(gold) > 1
    verdict = v.verdict.value
    if verdict == "answer":
        said = {norm(x) for x in answered_values(v)}
        c["correct" if said & gold and said <= gold else "wrong"] += 1
        c["strict"] += said == gold
        c["wrong_listed"] += bool(said & wrong)
        c["caveat"] += "weak_source" in v.caveats
        if not ambiguous:
            c["correct_unambiguous"] += said == gold
    elif verdict == "clarify":
        c["clarify_ambiguous"] += ambiguous
        shown = {norm(x["value"]) for x in v.decision.data.get("candidates", [])}
        c["clarify_lists_gold"] += gold <= shown
        c["clarify_lists_misinfo"] += bool(shown & (misinfo - gold))
    vote = _majority([norm(i["value"]) for i in items])
    c["majority_correct"] += vote is not None and vote in gold
    c["majority_wrong"] += vote is not None and vote not in gold


def run_ramdocs(
    rows: Iterable[Mapping[str, Any]] | str | Path | None = None,
    *,
    policy: EvidencePolicy | None = None,
    keep_unknown: bool = False,
    labels: Labels = "none",
    limit: int | None = None,
) -> dict[str, Any]:
    """Replay RAMDocs through ``resolve_evidence`` and report the rates in the module table.

    Args:
        rows: Questions, or a path to a RAMDocs JSONL file (default: the copy in ``data/``).
        policy: The evidence policy (default ``EvidencePolicy()``).
        keep_unknown: Count ``"unknown"`` answers as claims too.
        labels: ``"none"`` (the honest replay), ``"oracle"`` (dataset labels as source
            types) or ``"oracle_entities"`` (and the entity of each correct document).
        limit: Use only the first ``limit`` questions.
    """
    check_choice("labels", labels, LABELS)
    policy = policy or EvidencePolicy()
    if rows is None or isinstance(rows, (str, Path)):
        rows = load_ramdocs(rows, limit=limit)
    elif limit is not None:
        rows = list(rows)[:limit]
    c: Counter[str] = Counter()
    verdicts: Counter[str] = Counter()
    for row in rows:
        items = ramdocs_items(row, keep_unknown=keep_unknown, labels=labels)
        v = resolve_evidence(items, policy=policy)
        verdicts[v.verdict.value] += 1
        c["questions"] += 1
        c["ambiguous"] += len({policy.normalize(g) for g in row["gold_answers"]}) > 1
        _score(c, v, row, policy.normalize, items)
    return _report(c, verdicts, labels=labels, keep_unknown=keep_unknown, policy=policy)


def _report(
    c: Counter[str],
    verdicts: Counter[str],
    *,
    labels: str,
    keep_unknown: bool,
    policy: EvidencePolicy,
) -> dict[str, Any]:
    n, amb = c["questions"], c["ambiguous"]
    return {
        "questions": n,
        "ambiguous": amb,
        "labels": labels,
        "keep_unknown": keep_unknown,
        "group_entities": policy.group_entities,
        "verdicts": dict(sorted(verdicts.items())),
        "strict_correct_rate": _rate(c["strict"], n),
        "correct_answer_rate": _rate(c["correct"], n),
        "wrong_commit_rate": _rate(c["wrong"], n),
        "wrong_commits": c["wrong"],
        "wrong_answer_rate": _rate(c["wrong_listed"], n),
        "caveat_rate": _rate(c["caveat"], n),
        "clarify_rate": _rate(verdicts["clarify"], n),
        "abstain_rate": _rate(verdicts["abstain"], n),
        "clarify_on_ambiguous": _rate(c["clarify_ambiguous"], amb),
        "correct_on_unambiguous": _rate(c["correct_unambiguous"], n - amb),
        "clarify_lists_gold": _rate(c["clarify_lists_gold"], verdicts["clarify"]),
        "clarify_lists_misinfo": _rate(c["clarify_lists_misinfo"], verdicts["clarify"]),
        "majority": {
            "correct_rate": _rate(c["majority_correct"], n),
            "wrong_rate": _rate(c["majority_wrong"], n),
        },
        "policy": policy.label,
    }


def format_ramdocs(report: Mapping[str, Any]) -> str:
    """The report as a small text table."""

    def pct(x: Any) -> str:
        return "-" if x is None else f"{100 * x:5.1f}%"

    rows = [
        ("questions", str(report["questions"])),
        ("ambiguous (several gold answers)", str(report["ambiguous"])),
        ("verdicts", ", ".join(f"{k} {v}" for k, v in report["verdicts"].items())),
        ("answers correctly, strict (every gold answer)", pct(report["strict_correct_rate"])),
        ("answers correctly, lenient (any gold answer)", pct(report["correct_answer_rate"])),
        (
            "commits to a wrong answer",
            f"{pct(report['wrong_commit_rate'])} ({report['wrong_commits']})",
        ),
        ("  ... one of the listed wrong answers", pct(report["wrong_answer_rate"])),
        ("answers with the weak_source caveat", pct(report["caveat_rate"])),
        ("clarifies", pct(report["clarify_rate"])),
        ("abstains", pct(report["abstain_rate"])),
        ("clarifies when ambiguous", pct(report["clarify_on_ambiguous"])),
        ("answers correctly when unambiguous", pct(report["correct_on_unambiguous"])),
        ("clarify lists every gold answer", pct(report["clarify_lists_gold"])),
        ("clarify lists a misinformation value", pct(report["clarify_lists_misinfo"])),
        (
            "majority vote (lenient): correct / wrong",
            f"{pct(report['majority']['correct_rate'])} / {pct(report['majority']['wrong_rate'])}",
        ),
    ]
    grouped = ", group_entities" if report.get("group_entities") else ""
    title = f"RAMDocs replay (labels={report['labels']}{grouped}, {report['policy']})"
    width = max(len(r[0]) for r in rows)
    return "\n".join([title, *(f"  {k:<{width}}  {v}" for k, v in rows)])
