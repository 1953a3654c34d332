"""RAMDocs replay: documents' own answers as claims, no metadata; what the verdicts do."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agent_guards.evals.ramdocs import format_ramdocs, load_ramdocs, ramdocs_items, run_ramdocs
from agent_guards.evidence_resolve import EvidencePolicy

DATA = Path(__file__).resolve().parents[2] / "data" / "ramdocs"


def row(
    gold: list[str],
    docs: list[tuple[str, str]],
    wrong: list[str] = (),  # type: ignore[assignment]
    entities: list[str] = (),  # type: ignore[assignment]
) -> dict[str, Any]:
    return {
        "question": "q?",
        "gold_answers": gold,
        "wrong_answers": list(wrong),
        "disambig_entity": list(entities),
        "documents": [{"text": "", "type": t, "answer": a} for t, a in docs],
    }


AGREE = row(["A"], [("correct", "A"), ("correct", "a"), ("noise", "unknown")])
MISINFO = row(["A"], [("correct", "A"), ("misinfo", "B")], wrong=["B"])
ONLY_MISINFO = row(["A"], [("misinfo", "B"), ("noise", "unknown")], wrong=["B"])
AMBIGUOUS = row(["A", "C"], [("correct", "A"), ("correct", "C"), ("misinfo", "B")], wrong=["B"])
NOTHING = row(["A"], [("noise", "unknown")])

# one question -> the verdict the metadata-free resolver gives
TABLE = [
    (AGREE, "answer"),  # all answering documents agree (case differs): answer
    (MISINFO, "clarify"),  # cannot tell the misinformation apart without metadata: ask
    (ONLY_MISINFO, "answer"),  # the only claim is wrong: a wrong commit nothing here can catch
    (AMBIGUOUS, "clarify"),
    (NOTHING, "abstain"),
]


@pytest.mark.parametrize(("question", "verdict"), TABLE)
def test_verdict_per_question(question: dict[str, Any], verdict: str) -> None:
    assert run_ramdocs([question])["verdicts"] == {verdict: 1}


def test_rates() -> None:
    r = run_ramdocs([AGREE, MISINFO, ONLY_MISINFO, AMBIGUOUS, NOTHING])
    assert (r["questions"], r["ambiguous"]) == (5, 1)
    assert r["correct_answer_rate"] == 0.2 and r["wrong_commit_rate"] == 0.2
    assert (r["strict_correct_rate"], r["wrong_commits"]) == (0.2, 1)
    assert r["wrong_answer_rate"] == 0.2  # "B" is a listed wrong answer
    assert r["caveat_rate"] == 0.4  # no provenance: both answers say their source is weak
    assert (r["clarify_rate"], r["abstain_rate"], r["clarify_on_ambiguous"]) == (0.4, 0.2, 1.0)
    assert r["correct_on_unambiguous"] == 0.25
    assert r["clarify_lists_gold"] == 1.0  # both clarifications list every gold answer
    assert r["clarify_lists_misinfo"] == 1.0  # ... and both offer "B" as an option
    assert r["majority"] == {"correct_rate": 0.2, "wrong_rate": 0.2}  # ties are no vote


TWO_ENTITIES = row(
    ["A", "C"],
    [("correct", "A"), ("correct", "C"), ("misinfo", "B")],
    wrong=["B"],
    entities=["A Corp", "C Corp"],
)
ONE_OF_TWO = row(
    ["A", "C"], [("correct", "A"), ("noise", "unknown")], entities=["A Corp", "C Corp"]
)


def test_strict_needs_every_gold_answer_and_nothing_else() -> None:
    lenient_only = run_ramdocs([ONE_OF_TWO])  # one gold answer of two: lenient, not strict
    assert (lenient_only["correct_answer_rate"], lenient_only["strict_correct_rate"]) == (1.0, 0.0)


def test_oracle_entities_and_grouped_answers() -> None:
    items = ramdocs_items(TWO_ENTITIES, labels="oracle_entities")
    assert [(i["value"], i.get("entity")) for i in items] == [
        ("A", "A Corp"),
        ("C", "C Corp"),
        ("B", None),
    ]
    asked = run_ramdocs([TWO_ENTITIES], labels="oracle_entities")
    assert asked["verdicts"] == {"clarify": 1}  # ambiguous_entity: which one is meant?
    grouped = run_ramdocs(
        [TWO_ENTITIES], labels="oracle_entities", policy=EvidencePolicy(group_entities=True)
    )
    assert (grouped["verdicts"], grouped["strict_correct_rate"]) == ({"answer": 1}, 1.0)
    assert grouped["group_entities"] is True
    assert "group_entities" in format_ramdocs(grouped)


def test_oracle_labels_are_an_upper_bound() -> None:
    r = run_ramdocs([MISINFO, ONLY_MISINFO, AMBIGUOUS], labels="oracle")
    assert r["verdicts"] == {"answer": 2, "clarify": 1}
    assert r["correct_on_unambiguous"] == 0.5  # credibility labels settle MISINFO
    # a lone misinformation document is still answered: "forum" is the best there is
    assert r["wrong_commit_rate"] == 0.3333
    with pytest.raises(ValueError, match="labels='gold'"):
        run_ramdocs([AGREE], labels="gold")  # type: ignore[arg-type]


def test_unknown_answers_are_no_claim_unless_kept() -> None:
    assert [i["value"] for i in ramdocs_items(AGREE)] == ["A", "a"]
    assert len(ramdocs_items(AGREE, keep_unknown=True)) == 3
    assert run_ramdocs([AGREE], keep_unknown=True)["verdicts"] == {"clarify": 1}


def test_on_a_subset_of_the_shipped_file() -> None:
    rows = load_ramdocs(DATA / "RAMDocs_test.jsonl", limit=40)
    assert len(rows) == 40
    r = run_ramdocs(rows)
    assert sum(r["verdicts"].values()) == 40
    # the documented property of a metadata-free resolver: it almost never commits wrongly
    assert r["wrong_commit_rate"] <= 0.05


def test_without_metadata_wrong_commits_stay_at_most_two_of_500() -> None:
    r = run_ramdocs(load_ramdocs(DATA / "RAMDocs_test.jsonl"))
    assert r["questions"] == 500 and r["wrong_commits"] <= 2
    assert r["strict_correct_rate"] <= r["correct_answer_rate"]
    text = format_ramdocs(r)
    assert "commits to a wrong answer" in text and "labels=none" in text
    assert (DATA / "LICENSE").read_text().startswith("MIT License")


def test_load_errors(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        load_ramdocs(tmp_path / "missing.jsonl")
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"question": "q", "documents": []}) + "\n")
    with pytest.raises(ValueError, match=r"bad\.jsonl:1: missing field 'gold_answers'"):
        load_ramdocs(bad)
