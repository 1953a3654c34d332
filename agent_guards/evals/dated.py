"""Dated replay: questions whose answer changed over time, documents with effective dates.

No public time-scoped QA data set is available offline, so :func:`dated_questions` builds
one, deterministically from a seed. Each question is about one attribute of one subject
(a club's head coach, a city's population, a plan's monthly price, ...) whose value changed
2 to 5 times, each value lasting 1 to 8 years. Retrieval found 0 to 3 documents per value
(always at least one dated document for the value asked about); each states its value with
the date it took effect, at the precision a source would give: the day (50%), the month
(25%) or the year (25%); 5% of the documents carry no date, and 15% spell the value
differently (thousands separators, full-width digits, an en dash, case). Half of the
questions ask what holds now, half what held on a day of the timeline (``as_of``).

:func:`run_dated` answers every question three ways, in one run, on the same documents:

* the **resolver**: ``resolve_evidence(items, as_of=...)``, all documents of one
  (official) source type, dates given at their precision;
* **newest-first**: the document with the latest date (a year read as January 1, a month as
  its first day, as users write them) that is not after ``as_of``; undated ones last;
* **majority**: the most frequent value among the documents not dated after ``as_of``
  (a tie is no answer).

and reports, for each, the share of questions answered correctly, answered wrongly,
clarified (a close call: the dates, at their precision, do not say which value was in
force) and abstained on.

Example:
    >>> qs = dated_questions(20, seed=1)
    >>> len(qs), sorted(qs[0])
    (20, ['as_of', 'attribute', 'documents', 'gold', 'id', 'subject', 'timeline'])
    >>> r = run_dated(qs)
    >>> sorted(r["methods"]), r["methods"]["resolver"]["questions"]
    (['majority', 'newest_first', 'resolver'], 20)
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from datetime import date, datetime, timedelta
from typing import Any

from agent_guards.evidence_resolve.core import resolve_evidence
from agent_guards.evidence_resolve.policy import EvidencePolicy
from agent_guards.evidence_resolve.timeline import Span

__all__ = [
    "dated_items",
    "dated_questions",
    "format_dated",
    "majority_answer",
    "newest_first_answer",
    "run_dated",
]

DEFAULT_SEED = 2025
_PRECISION = (("day", 0.50), ("month", 0.25), ("year", 0.25))
_ATTRIBUTES: tuple[tuple[str, str], ...] = (
    ("head coach", "name"),
    ("chief executive", "name"),
    ("population", "count"),
    ("monthly price", "price"),
    ("season ticket range", "range"),
    ("headquarters city", "city"),
)
_FIRST = ("Ana", "Bo", "Chen", "Dara", "Emil", "Fatima", "Goran", "Hana", "Ivo", "Jun", "Kofi")
_LAST = ("Alves", "Berg", "Costa", "Dietz", "Eze", "Fujita", "Gray", "Haddad", "Ivanova")
_CITIES = ("Lyon", "Porto", "Graz", "Turku", "Aarhus", "Brno", "Cork", "Ghent", "Malmo", "Split")
_SUBJECTS = ("Club", "City", "Company", "Service", "League", "Museum")


def _value(kind: str, rng: random.Random) -> str:
    if kind == "name":
        return f"{rng.choice(_FIRST)} {rng.choice(_LAST)}"
    if kind == "count":
        return f"{rng.randrange(1_000, 900_000):,}"
    if kind == "price":
        return f"{rng.randrange(5, 60)}.{rng.choice(('00', '50', '99'))} EUR"
    if kind == "range":
        low = rng.randrange(100, 900)
        return f"{low}-{low + rng.randrange(50, 400)} EUR"
    return rng.choice(_CITIES)


def _variant(value: str, rng: random.Random) -> str:
    """Another spelling of ``value`` (what a second source might print)."""
    choice = rng.randrange(4)
    if choice == 0 and "," in value:
        return value.replace(",", "")
    if choice == 1 and any(ch.isdigit() for ch in value):
        return "".join(chr(ord(ch) + 0xFEE0) if ch.isdigit() else ch for ch in value)
    if choice == 2 and "-" in value:
        return value.replace("-", "\u2013")
    return value.upper()


def _written(day: date, precision: str) -> str:
    if precision == "year":
        return f"{day.year:04d}"
    if precision == "month":
        return f"{day.year:04d}-{day.month:02d}"
    return day.isoformat()


def _timeline(kind: str, rng: random.Random) -> list[tuple[date, str]]:
    start = date(1995, 1, 1) + timedelta(days=rng.randrange(20 * 365))
    values: list[str] = []
    count = rng.randint(3, 6)
    while len(values) < count:
        value = _value(kind, rng)
        if value not in values:
            values.append(value)
    out = []
    for value in values:
        out.append((start, value))
        start += timedelta(days=rng.randint(365, 8 * 365))
    return out


def _documents(
    q: int, timeline: list[tuple[date, str]], gold: int, rng: random.Random
) -> list[dict[str, Any]]:
    weights = [w for _, w in _PRECISION]
    docs: list[dict[str, Any]] = []
    for j, (start, value) in enumerate(timeline):
        count = rng.choice((0, 1, 1, 2, 2, 3)) if j != gold else rng.choice((1, 2, 2, 3))
        for k in range(count):
            precision = rng.choices([p for p, _ in _PRECISION], weights)[0]
            undated = rng.random() < 0.05 and not (j == gold and k == 0)
            spelled = _variant(value, rng) if rng.random() < 0.15 else value
            docs.append(
                {
                    "id": f"q{q}-v{j}-d{k}",
                    "value": spelled,
                    "effective_at": None if undated else _written(start, precision),
                }
            )
    rng.shuffle(docs)  # retrieval order says nothing about time
    return docs


def dated_questions(n: int = 1000, *, seed: int = DEFAULT_SEED) -> list[dict[str, Any]]:
    """``n`` questions with their true timeline, gold answer and retrieved documents."""
    rng = random.Random(seed)
    out = []
    for q in range(n):
        attribute, kind = _ATTRIBUTES[rng.randrange(len(_ATTRIBUTES))]
        timeline = _timeline(kind, rng)
        as_of: date | None = None
        gold = len(timeline) - 1
        if rng.random() < 0.5:
            span = (timeline[-1][0] - timeline[0][0]).days + 2 * 365
            as_of = timeline[0][0] + timedelta(days=rng.randrange(span))
            gold = max(j for j, (start, _) in enumerate(timeline) if start <= as_of)
        out.append(
            {
                "id": f"q{q}",
                "subject": f"{rng.choice(_SUBJECTS)} {q}",
                "attribute": attribute,
                "as_of": as_of.isoformat() if as_of else None,
                "gold": timeline[gold][1],
                "timeline": [(start.isoformat(), value) for start, value in timeline],
                "documents": _documents(q, timeline, gold, rng),
            }
        )
    return out


def dated_items(question: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The evidence dicts of one question (one claim; every document an official source)."""
    claim = f"{question['attribute']} of {question['subject']}"
    return [
        {
            "id": d["id"],
            "claim_key": claim,
            "value": d["value"],
            "source_type": "official",
            "effective_at": d["effective_at"],
        }
        for d in question["documents"]
    ]


def _as_of(question: Mapping[str, Any]) -> datetime | None:
    day = question.get("as_of")
    return Span.parse(day).start if day else None


def _start(doc: Mapping[str, Any]) -> datetime | None:
    return Span.parse(doc["effective_at"]).start if doc.get("effective_at") else None


def _known(question: Mapping[str, Any]) -> list[tuple[datetime | None, Mapping[str, Any]]]:
    """The documents not dated after ``as_of`` (a year read as Jan 1), with that date."""
    as_of = _as_of(question)
    dated = [(_start(d), d) for d in question["documents"]]
    return [(s, d) for s, d in dated if as_of is None or s is None or s <= as_of]


def newest_first_answer(question: Mapping[str, Any]) -> str | None:
    """The newest-first baseline: the value of the latest document not after ``as_of``."""
    known = _known(question)
    dated = [(s, i, d) for i, (s, d) in enumerate(known) if s is not None]
    if dated:
        return str(max(dated, key=lambda t: (t[0], -t[1]))[2]["value"])
    return str(known[0][1]["value"]) if known else None


def majority_answer(question: Mapping[str, Any], policy: EvidencePolicy) -> str | None:
    """The majority baseline: the most frequent value not dated after ``as_of`` (tie: None)."""
    counts = Counter(policy.normalize(d["value"]) for _, d in _known(question)).most_common(2)
    if not counts or (len(counts) == 2 and counts[0][1] == counts[1][1]):
        return None
    return counts[0][0]


def _outcome(value: Any, gold: str, policy: EvidencePolicy) -> str:
    if value is None:
        return "abstain"
    return "correct" if policy.normalize(value) == policy.normalize(gold) else "wrong"


def _rates(counts: Counter[str], n: int) -> dict[str, Any]:
    out: dict[str, Any] = {"questions": n}
    for key in ("correct", "wrong", "clarify", "abstain"):
        out[key] = counts[key]
        out[f"{key}_rate"] = round(counts[key] / n, 4) if n else None
    return out


def run_dated(
    questions: Iterable[Mapping[str, Any]] | None = None,
    *,
    policy: EvidencePolicy | None = None,
    n: int = 1000,
    seed: int = DEFAULT_SEED,
) -> dict[str, Any]:
    """Answer every question with the resolver and both baselines; report their rates.

    Args:
        questions: From :func:`dated_questions` (default: ``dated_questions(n, seed=seed)``).
        policy: The evidence policy of the resolver (and the normalizer of every method).
        n: Number of questions to build when ``questions`` is None.
        seed: Seed of the built questions.
    """
    policy = policy or EvidencePolicy()
    rows: Sequence[Mapping[str, Any]] = (
        list(questions) if questions is not None else dated_questions(n, seed=seed)
    )
    counts: dict[str, Counter[str]] = {
        m: Counter() for m in ("resolver", "newest_first", "majority")
    }
    for q in rows:
        v = resolve_evidence(dated_items(q), policy=policy, as_of=q.get("as_of"))
        verdict = v.verdict.value
        if verdict in ("clarify", "escalate"):
            counts["resolver"]["clarify"] += 1
        else:
            counts["resolver"][_outcome(v.value, q["gold"], policy)] += 1
        counts["newest_first"][_outcome(newest_first_answer(q), q["gold"], policy)] += 1
        counts["majority"][_outcome(majority_answer(q, policy), q["gold"], policy)] += 1
    return {
        "questions": len(rows),
        "as_of_questions": sum(1 for q in rows if q.get("as_of")),
        "documents": sum(len(q["documents"]) for q in rows),
        "seed": seed if questions is None else None,
        "policy": policy.label,
        "methods": {m: _rates(c, len(rows)) for m, c in counts.items()},
    }


def format_dated(report: Mapping[str, Any]) -> str:
    """The report as a small text table, one row per method."""

    def pct(x: Any) -> str:
        return "    -" if x is None else f"{100 * x:5.1f}%"

    seed = f", seed {report['seed']}" if report.get("seed") is not None else ""
    lines = [
        f"Dated replay ({report['questions']} questions, {report['as_of_questions']} as_of, "
        f"{report['documents']} documents{seed}, {report['policy']})",
        f"  {'method':<14}{'correct':>9}{'wrong':>9}{'clarify':>9}{'abstain':>9}",
    ]
    for name, m in report["methods"].items():
        cells = "".join(
            f"{pct(m[f'{k}_rate']):>9}" for k in ("correct", "wrong", "clarify", "abstain")
        )
        lines.append(f"  {name:<14}{cells}")
    return "\n".join(lines)
