"""Eval cases: the JSONL format, ``check`` semantics, and the shipped slices."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agent_guards.core import InvalidInputError
from agent_guards.evals import SHIPPED_SLICES, Case, check, load_cases, run_case


def case(expect: dict[str, Any]) -> Case:
    return Case.from_dict(
        {"id": "x", "slice": "s", "kind": "evidence", "input": {}, "expect": expect}
    )


OBSERVED = {
    "verdict": "answer",
    "reason": "newer_version",
    "value": "50w",
    "values": {"a": 1},
    "selected_ids": ["b", "a"],
    "conflicting_ids": [],
    "inject_ids": ["m1"],
    "tool_calls": 2,
    "verdicts": ["nudge", "stop"],
    "decision": {"detail": "mentions 'secret' in text only", "data": {"ids": ["shown"]}},
}

# one line per rule: expect -> passes?
CHECK_TABLE = [
    ({"verdict": "answer"}, True),
    ({"verdict": "clarify"}, False),
    ({"selected_ids": ["a", "b"]}, True),  # *_ids compare as sets
    ({"selected_ids": ["a"]}, False),
    ({"conflicting_ids": []}, True),
    ({"dropped_ids": []}, True),  # absent observed ids = empty set
    ({"inject_ids": ["m1"]}, True),  # any *_ids key is a set
    ({"selected_order": ["b", "a"]}, True),
    ({"selected_order": ["a", "b"]}, False),
    ({"absent_ids": ["hidden"]}, True),
    ({"absent_ids": ["shown"]}, False),  # anywhere in the output, nested too
    ({"max_tool_calls": 2}, True),
    ({"max_tool_calls": 1}, False),
    ({"max_model_calls": 3}, False),  # not observed: the bound cannot be shown
    ({"verdict_in": ["clarify", "answer"]}, True),
    ({"value_in": ["500000", "50w"]}, True),
    ({"value_in": ["1"]}, False),
    ({"values": {"a": 1}}, True),
    ({"verdicts": ["nudge", "stop"]}, True),
    ({"verdicts": ["stop"]}, False),
    ({"reason": "newer_version", "value": "50w"}, True),
    ({"missing_key": None}, True),  # None == not observed
    ({"missing_key": 0}, False),
]


@pytest.mark.parametrize(("expect", "passes"), CHECK_TABLE)
def test_check_truth_table(expect: dict[str, Any], passes: bool) -> None:
    assert (check(case(expect), OBSERVED) == []) is passes


def test_check_names_every_difference() -> None:
    failures = check(case({"verdict": "clarify", "value": "x"}), OBSERVED)
    assert failures == [
        "verdict: expected 'clarify', got 'answer'",
        "value: expected 'x', got '50w'",
    ]


def test_case_round_trip_and_validation() -> None:
    data = {
        "id": "c1",
        "slice": "noise",
        "kind": "evidence",
        "input": {"items": []},
        "expect": {"verdict": "abstain"},
        "note": "n",
    }
    assert Case.from_dict(data).to_dict() == data
    with pytest.raises(InvalidInputError, match="field 'kind'"):
        Case.from_dict({**data, "kind": ""})
    with pytest.raises(InvalidInputError, match="unknown keys"):
        Case.from_dict({**data, "expected": {}})


def test_load_cases_reports_file_and_line(tmp_path: Path) -> None:
    good = {"id": "a", "slice": "s", "kind": "evidence", "input": {}, "expect": {}}
    path = tmp_path / "mine.jsonl"
    path.write_text("// a comment\n\n" + json.dumps(good) + "\n{not json\n")
    with pytest.raises(InvalidInputError, match=r"mine.jsonl:4"):
        load_cases([path])
    path.write_text(json.dumps(good) + "\n" + json.dumps(good) + "\n")
    with pytest.raises(InvalidInputError, match="duplicate case id"):
        load_cases([tmp_path])  # a folder loads its *.jsonl files
    path.write_text("// only a comment\n" + json.dumps(good) + "\n")
    assert [c.id for c in load_cases([tmp_path])] == ["a"]


SHIPPED = load_cases()


def test_every_shipped_slice_has_ten_varied_cases() -> None:
    by_slice: dict[str, list[Case]] = {}
    for c in SHIPPED:
        by_slice.setdefault(c.slice, []).append(c)
    assert sorted(by_slice) == sorted(SHIPPED_SLICES)
    for name, cases in by_slice.items():
        assert len(cases) >= 10, name
        assert all(c.note for c in cases), name  # every case says why
        assert len({json.dumps(c.input, sort_keys=True) for c in cases}) == len(cases), name
    text = json.dumps([c.to_dict() for c in SHIPPED], ensure_ascii=False)
    assert any("\u4e00" <= ch <= "\u9fff" for ch in text)  # Chinese cases are in


@pytest.mark.parametrize("shipped", SHIPPED, ids=[c.id for c in SHIPPED])
def test_every_shipped_case_passes(shipped: Case) -> None:
    result = run_case(shipped)
    assert result.passed, result.failures
