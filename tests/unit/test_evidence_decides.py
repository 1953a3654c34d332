"""resolve_evidence answers when the evidence allows, and only then: one reproduction per line.

Each row was a needless clarification, a needless abstention or a wrong commit before the
timeline / precision / entity / source-weight rules; the rule is: decide when the priorities
decide, flag what lost, clarify only when they do not.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from agent_guards.core import InvalidInputError
from agent_guards.evidence_resolve import Evidence, EvidencePolicy, resolve_evidence


def ev(id: str, value: Any, claim: str = "k", **kw: Any) -> Evidence:
    """One item; the claim defaults to ``k``."""
    return Evidence(id, claim, value, **kw)


def off(id: str, value: Any, **kw: Any) -> Evidence:
    """One item from an official source (so the source weight is not what a row tests)."""
    return Evidence(id, "k", value, source_type="official", **kw)


GROUP = {"policy": EvidencePolicy(group_entities=True)}
RISKY = {"policy": EvidencePolicy(high_risk=True)}
USA = {"policy": EvidencePolicy(aliases={"USA": "United States", "U.S.": "United States"})}

# fmt: off
# case | items | kwargs || verdict | value | selected | conflicting | dropped | reason | caveats
TABLE: list[tuple[str, list[Evidence], dict[str, Any], str, Any, tuple[str, ...], tuple[str, ...], tuple[str, ...], str, tuple[str, ...]]] = [
    # -- dates have a precision ----------------------------------------------------------
    ("a year-dated value is not in force before a precise one that came first",
     [off("z", "Z", effective_at="2017-05-01"), off("a", "A", effective_at="2019"), off("b", "B", effective_at="2019-04-07")],
     {"as_of": "2019-02-01"}, "clarify", None, (), ("a", "z"), ("b",), "close_call", ()),
    ("a year and a day inside it cannot be ordered at the year's precision",
     [off("a", "A", effective_at="2019"), off("b", "B", effective_at="2019-04-07")],
     {}, "clarify", None, (), ("a", "b"), (), "close_call", ()),
    ("a year after the day orders them",
     [off("a", "A", effective_at="2020"), off("b", "B", effective_at="2019-04-07")],
     {}, "answer", "A", ("a",), ("b",), (), "newer_version", ()),
    ("a month after the day orders them (24 days apart)",
     [off("a", "A", effective_at="2019-05"), off("b", "B", effective_at="2019-04-07")],
     {}, "answer", "A", ("a",), ("b",), (), "newer_version", ()),
    ("a year wholly before as_of is in force",
     [off("z", "Z", effective_at="2017-05-01"), off("a", "A", effective_at="2019")],
     {"as_of": "2020-02-01"}, "answer", "A", ("a",), ("z",), (), "newer_version", ()),
    ("a lone year-dated value that may not be in force yet says so",
     [off("a", "A", effective_at="2019")],
     {"as_of": "2019-06-01"}, "answer", "A", ("a",), (), (), "consistent", ("date_imprecise",)),
    ("a year is read with the finer date of its own value: not in force yet",
     [off("z", "Z", effective_at="2029-07-31"), off("e1", "E", effective_at="2032"), off("e2", "E", effective_at="2032-05-15")],
     {"as_of": "2032-04-13"}, "answer", "Z", ("z",), (), ("e1", "e2"), "consistent", ()),
    ("a year is read with the finer date of its own value: in force",
     [off("z", "Z", effective_at="2029-07-31"), off("e1", "E", effective_at="2032"), off("e2", "E", effective_at="2032-05-15")],
     {"as_of": "2032-06-01"}, "answer", "E", ("e1", "e2"), ("z",), (), "newer_version", ()),
    ("a day counts from its start: effective today is in force today",
     [off("z", "Z", effective_at="2017-05-01"), off("a", "A", effective_at="2026-06-01")],
     {"as_of": "2026-06-01T10:00:00Z"}, "answer", "A", ("a",), ("z",), (), "newer_version", ()),
    # -- the close-call rule is for documents whose order is unknown ----------------------
    ("effective dates 27 days apart are a timeline, not a close call",
     [off("a", "1", effective_at="2026-01-05", confidence=0.9), off("b", "2", effective_at="2026-02-01", confidence=0.9)],
     {}, "answer", "2", ("b",), ("a",), (), "newer_version", ()),
    ("as_of picks from the timeline",
     [off("a", "1", effective_at="2024-01-01"), off("b", "2", effective_at="2025-01-01"), off("c", "3", effective_at="2026-01-01")],
     {"as_of": "2025-06-30"}, "answer", "2", ("b",), ("a",), ("c",), "newer_version", ()),
    ("an undated value does not block the dated timeline (flagged undated)",
     [off("a", "1", effective_at="2015-01-01"), off("b", "2", effective_at="2016-01-01"), off("u", "3")],
     {}, "answer", "2", ("b",), ("a", "u"), (), "newer_version", ()),
    ("update dates within close_days still leave the order unknown",
     [off("a", "1", updated_at="2026-01-05", confidence=0.9), off("b", "2", updated_at="2026-02-01", confidence=0.9)],
     {}, "clarify", None, (), ("a", "b"), (), "close_call", ()),
    ("versions order values whose dates overlap",
     [off("a", "1", effective_at="2019", version="v2"), off("b", "2", effective_at="2019-04-07", version="v1")],
     {}, "answer", "1", ("a",), ("b",), (), "newer_version", ()),
    # -- superseded and as_of --------------------------------------------------------------
    ("what held on a date when a now-superseded version was still in force",
     [off("old", "30 days", status="superseded", effective_at="2020-01-01"), off("new", "14 days", effective_at="2024-01-01", supersedes=["old"])],
     {"as_of": "2022-06-01"}, "answer", "30 days", ("old",), (), ("new",), "consistent", ()),
    ("today the superseding version answers and the old one is recorded",
     [off("old", "30 days", status="superseded", effective_at="2020-01-01"), off("new", "14 days", effective_at="2024-01-01", supersedes=["old"])],
     {}, "answer", "14 days", ("new",), ("old",), (), "superseded", ()),
    ("a successor not in force yet does not supersede (link only)",
     [off("old", "30 days", effective_at="2020-01-01"), off("new", "14 days", effective_at="2024-01-01", supersedes=["old"])],
     {"as_of": "2022-06-01"}, "answer", "30 days", ("old",), (), ("new",), "consistent", ()),
    # -- spelling variants of one value -------------------------------------------------------
    ("en dash and hyphen are one value", [off("a", "2019–20"), off("b", "2019-20")], {}, "answer", "2019–20", ("a", "b"), (), (), "consistent", ()),
    ("full-width and ASCII digits are one value", [off("a", "２０１９年"), off("b", "2019年")], {}, "answer", "２０１９年", ("a", "b"), (), (), "consistent", ()),
    ("a full-width thousands separator is one value", [off("a", "1，000"), off("b", "1000")], {}, "answer", "1，000", ("a", "b"), (), (), "consistent", ()),
    ("aliases of one name are one value", [off("a", "USA"), off("b", "United States"), off("c", "U.S.")], USA, "answer", "USA", ("a", "b", "c"), (), (), "consistent", ()),
    ("without the alias map they are two values", [off("a", "USA"), off("b", "United States")], {}, "clarify", None, (), ("a", "b"), (), "close_call", ()),
    ("aliases of one entity are one entity", [off("a", "5", entity="USA"), off("b", "6", entity="United States", effective_at="2020")], USA, "answer", "6", ("b",), ("a",), (), "newer_version", ()),
    # -- entities --------------------------------------------------------------------------
    ("a named entity with no evidence of its own abstains",
     [ev("a", "10", entity="Apple Inc.", source_type="official"), ev("u", "3", source_type="official")],
     {"entity": "apple (fruit)"}, "abstain", None, (), (), ("a", "u"), "no_entity_evidence", ()),
    ("a named entity no item is about abstains: every item is about another",
     [ev("p9", "99", entity="Pixel 9"), ev("p9p", "129", entity="Pixel 9 Pro")],
     {"entity": "Pixel 10"}, "abstain", None, (), (), ("p9", "p9p"), "no_entity_evidence", ()),
    ("a named entity when nothing names entities: answered, and said so",
     [ev("u", "3", source_type="official")],
     {"entity": "Apple Inc."}, "answer", "3", ("u",), (), (), "consistent", ("entity_unconfirmed",)),
    ("an entity whose own values conflict keeps its options",
     [ev("i1", "1.4B", entity="India", source_type="official"), ev("i2", "1.3B", entity="India", source_type="official"), ev("c", "19M", entity="Chile", source_type="official")],
     {}, "clarify", None, (), ("c", "i1", "i2"), (), "ambiguous_entity", ()),
    ("grouped by entity when the policy says so",
     [ev("a", "10", entity="Apple Inc.", source_type="official"), ev("b", "3", entity="apple (fruit)", source_type="official")],
     GROUP, "answer", None, ("a", "b"), (), (), "per_entity", ()),
    ("grouping never hides an entity's own conflict",
     [ev("i1", "1.4B", entity="India", source_type="official"), ev("i2", "1.3B", entity="India", source_type="official"), ev("c", "19M", entity="Chile", source_type="official")],
     GROUP, "clarify", None, (), ("c", "i1", "i2"), (), "ambiguous_entity", ()),
    # -- a lone low-credibility claim ----------------------------------------------------------
    ("a single forum post is answered with a caveat", [ev("f", "42", source_type="forum")], {}, "answer", "42", ("f",), (), (), "consistent", ("weak_source",)),
    ("a single forum post under high risk: abstain", [ev("f", "42", source_type="forum")], RISKY, "abstain", None, (), (), ("f",), "weak_source", ()),
    ("many forum posts are no stronger than one", [ev("f1", "42", source_type="forum"), ev("f2", "42", source_type="forum")], RISKY, "abstain", None, (), (), ("f1", "f2"), "weak_source", ()),
    ("a forum post agreeing with an official source needs no caveat", [ev("f", "42", source_type="forum"), ev("o", "42", source_type="official")], {}, "answer", "42", ("f", "o"), (), (), "consistent", ()),
    ("an internal source answers plainly", [ev("w", "weekly", source_type="internal")], RISKY, "answer", "weekly", ("w",), (), (), "consistent", ()),
    ("a source type is matched ignoring case and spaces",
     [ev("p", "50w", source_type=" Official"), ev("f", "200w", source_type="forum")], {}, "answer", "50w", ("p",), ("f",), (), "source_credibility", ()),
    ("the forum outranks an unknown source, and is still weak", [ev("f", "1", source_type="forum"), ev("x", "2")], {}, "answer", "1", ("f",), ("x",), (), "source_credibility", ("weak_source",)),
    ("a source of unknown type is weak too", [ev("x", "2")], {}, "answer", "2", ("x",), (), (), "consistent", ("weak_source",)),
]
# fmt: on


@pytest.mark.parametrize("row", TABLE, ids=[row[0] for row in TABLE])
def test_truth_table(row: tuple[Any, ...]) -> None:
    _, items, kwargs, *expected = row
    v = resolve_evidence(items, **kwargs)
    got = [
        v.verdict.value,
        v.value,
        v.selected_ids,
        v.conflicting_ids,
        v.dropped_ids,
        v.reason,
        v.caveats,
    ]
    assert got == expected
    assert v.decision.data.get("caveats", []) == list(v.caveats)
    json.dumps(v.to_dict())


def test_precision_is_accepted_and_kept() -> None:
    year, month = ev("a", "1", effective_at="2019"), ev("b", "1", updated_at=" 2019-04 ")
    assert (year.effective_at, year.span.precision) == ("2019", "year")
    assert (month.updated_at, month.span.precision, month.dated_by) == (
        "2019-04",
        "month",
        "updated_at",
    )
    assert ev("c", "1", effective_at="2019-04-07").span.precision == "day"
    assert ev("d", "1", effective_at="2019-04-07T10:30:00Z").span.precision == "time"
    assert Evidence.from_dict(year.to_dict()) == year
    assert year.to_dict()["effective_at"] == "2019"


@pytest.mark.parametrize("bad", ["2019-13", "2019-00", "0000", "19", "2019-4"])
def test_bad_partial_dates_name_the_item_and_field(bad: str) -> None:
    with pytest.raises(InvalidInputError) as err:
        ev("a", "1", effective_at=bad)
    assert (err.value.item, err.value.field) == ("a", "effective_at")


def test_entity_options_are_listed_per_entity() -> None:
    rows = {row[0]: row for row in TABLE}
    items = rows["an entity whose own values conflict keeps its options"][1]
    v = resolve_evidence(items)
    assert v.values == {"Chile": "19M", "India": ["1.3B", "1.4B"]}
    assert v.decision.data["candidates"] == [
        {"entity": "Chile", "value": "19M", "ids": ["c"]},
        {"entity": "India", "value": "1.3B", "ids": ["i2"]},
        {"entity": "India", "value": "1.4B", "ids": ["i1"]},
    ]
    grouped = resolve_evidence(rows["grouped by entity when the policy says so"][1], **GROUP)
    assert grouped.values == {"Apple Inc.": "10", "apple (fruit)": "3"}


def test_close_call_lists_its_candidates_with_precision_in_the_detail() -> None:
    v = resolve_evidence(
        [ev("a", "A", effective_at="2019"), ev("b", "B", effective_at="2019-04-07")]
    )
    assert [c["value"] for c in v.decision.data["candidates"]] == ["A", "B"]
    assert "precision" in v.decision.detail


def test_weak_source_threshold_is_a_policy_choice() -> None:
    forum = [ev("f", "42", source_type="forum")]
    assert resolve_evidence(forum, policy=EvidencePolicy(min_answer_weight=0)).caveats == ()
    assert resolve_evidence(forum, policy=EvidencePolicy(min_answer_weight=1)).caveats == ()
    assert resolve_evidence(forum, policy=EvidencePolicy(min_answer_weight=1.5)).caveats == (
        "weak_source",
    )


@pytest.mark.parametrize(
    ("kwargs", "error", "text"),
    [
        ({"min_answer_weight": -1}, ValueError, "min_answer_weight"),
        ({"group_entities": "yes"}, TypeError, "group_entities"),
        ({"aliases": ["USA"]}, TypeError, "aliases"),
        ({"aliases": {"USA": ""}}, ValueError, "aliases"),
        ({"aliases": {"": "x"}}, ValueError, "aliases"),
    ],
)
def test_new_policy_fields_are_validated(kwargs: dict[str, Any], error: type, text: str) -> None:
    with pytest.raises(error, match=text):
        EvidencePolicy(**kwargs)


def test_the_order_is_said_one_way() -> None:
    """The docs page, the README and the core's docstring state the same arbitration order."""
    from pathlib import Path

    from agent_guards.evidence_resolve import core

    order = (
        "permission > entity > version (supersedes links and statuses) > source credibility "
        "> time (among sources of equal authority) > basis > relevance > (never) model summary"
    )
    root = Path(__file__).resolve().parents[2]
    for text in (
        (root / "docs" / "evidence_resolve.md").read_text(encoding="utf-8"),
        (root / "README.md").read_text(encoding="utf-8"),
        core.__doc__ or "",
    ):
        flat = " ".join(text.replace("`", "").split())
        assert order in flat
        assert "version/time > source credibility" not in flat
