"""The dated replay: questions whose answer changed over time, against two baselines."""

from __future__ import annotations

from agent_guards.evals.dated import (
    dated_items,
    dated_questions,
    format_dated,
    majority_answer,
    newest_first_answer,
    run_dated,
)
from agent_guards.evidence_resolve import EvidencePolicy, resolve_evidence


def question(docs: list[tuple[str, str | None]], gold: str, as_of: str | None = None) -> dict:
    return {
        "id": "q",
        "subject": "Club 1",
        "attribute": "head coach",
        "as_of": as_of,
        "gold": gold,
        "timeline": [],
        "documents": [
            {"id": f"d{i}", "value": v, "effective_at": d} for i, (v, d) in enumerate(docs)
        ],
    }


# the failure: a year read as January 1 is "in force" too early
TOO_EARLY = question([("Old", "2015-03-01"), ("New", "2019")], gold="Old", as_of="2019-02-01")


def test_newest_first_reads_a_year_as_january_first_and_the_resolver_does_not() -> None:
    assert newest_first_answer(TOO_EARLY) == "New"  # wrong: "New" may start in December
    v = resolve_evidence(dated_items(TOO_EARLY), as_of=TOO_EARLY["as_of"])
    assert (v.verdict.value, v.reason) == ("clarify", "close_call")


def test_baselines() -> None:
    q = question([("A", "2010"), ("B", "2012-05-01"), ("B", None), ("A", "2011")], gold="B")
    assert newest_first_answer(q) == "B"
    assert majority_answer(q, EvidencePolicy()) is None  # 2 against 2: no vote


def test_the_questions_are_deterministic() -> None:
    assert dated_questions(30, seed=7) == dated_questions(30, seed=7)
    assert dated_questions(30, seed=7) != dated_questions(30, seed=8)
    precisions = {
        len(d["effective_at"] or "") for q in dated_questions(200) for d in q["documents"]
    }
    assert precisions == {0, 4, 7, 10}  # undated, year, month, day


def test_targets_on_the_default_replay() -> None:
    """correct >= 95%, wrong <= 1%, never more wrong commits than newest-first."""
    r = run_dated()
    resolver, newest = r["methods"]["resolver"], r["methods"]["newest_first"]
    assert r["questions"] == 1000
    assert resolver["correct_rate"] >= 0.95
    assert resolver["wrong_rate"] <= 0.01
    assert resolver["wrong"] <= newest["wrong"]
    text = format_dated(r)
    assert "resolver" in text and "newest_first" in text and "majority" in text
