"""resolve_evidence: truth tables (one decision per line), bad input, policy validation, laws."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from datetime import UTC, date, datetime, timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.documents import Document

from agent_guards.core import InvalidInputError, Verdict
from agent_guards.evidence_resolve import (
    Evidence,
    EvidencePolicy,
    EvidenceVerdict,
    normalize_value,
    resolve_evidence,
)

E = Evidence


def ev(id: str, value: Any, claim: str = "k", **kw: Any) -> Evidence:
    """One evidence item; the claim defaults to ``k``."""
    return Evidence(id, claim, value, **kw)


# fmt: off
SEED = [  # procurement approval limit 2024 vs 2026, with the FAQ as the different claim it is
    ev("policy_2024", "100w", "approval_limit", source_type="official", version="2024", updated_at="2024-06-01", confidence=0.95),
    ev("policy_2026", "50w", "approval_limit", source_type="official", version="2026", updated_at="2026-01-01", confidence=0.93),
    ev("faq", "important contracts need approval records", "approval_records", source_type="internal", version="2025", updated_at="2025-08-01", confidence=0.70),
]
CLOSE = [
    ev("a", "1", source_type="official", updated_at="2026-01-01", confidence=0.90),
    ev("b", "2", source_type="official", updated_at="2026-02-01", confidence=0.88),
]
HIGH_RISK = {"policy": EvidencePolicy(high_risk=True)}
FLOOR = {"policy": EvidencePolicy(min_relevance=0.3)}

# case | items | kwargs || verdict | value | selected | conflicting | dropped | reason
TABLE: list[tuple[str, list[Evidence], dict[str, Any], str, Any, tuple[str, ...], tuple[str, ...], tuple[str, ...], str]] = [
    ("seed: newest official version wins, FAQ is another claim", SEED, {"claim_key": "approval_limit"}, "answer", "50w", ("policy_2026",), ("policy_2024",), ("faq",), "newer_version"),
    ("seed as in the article (FAQ on the same key): flagged, not merged", [*SEED[:2], replace(SEED[2], claim_key="approval_limit")], {}, "answer", "50w", ("policy_2026",), ("faq", "policy_2024"), (), "newer_version"),
    ("as_of answers with the version effective then", SEED, {"claim_key": "approval_limit", "as_of": "2025-01-01"}, "answer", "100w", ("policy_2024",), (), ("faq", "policy_2026"), "consistent"),
    ("supersedes link beats dates", [ev("new", "1", updated_at="2020-01-01", supersedes=["old"]), ev("old", "2", updated_at="2026-01-01")], {}, "answer", "1", ("new",), ("old",), (), "superseded"),
    ("status superseded never wins over active", [ev("a", "1", status="superseded", updated_at="2026-01-01"), ev("b", "2", updated_at="2020-01-01")], {}, "answer", "2", ("b",), ("a",), (), "superseded"),
    ("a newer official draft never wins over the active version", [ev("d", "9", status="draft", source_type="official", updated_at="2026-05-01"), ev("a", "1", source_type="official", updated_at="2024-01-01")], {}, "answer", "1", ("a",), ("d",), (), "consistent"),
    ("a retracted agreeing item is set aside, not cited", [ev("r", "1", status="retracted"), ev("a", "1")], {}, "answer", "1", ("a",), (), ("r",), "consistent"),
    ("only drafts: abstain, never an answer", [ev("d1", "1", status="draft"), ev("d2", "2", status="retracted")], {}, "abstain", None, (), (), ("d1", "d2"), "no_usable_evidence"),
    ("official beats a newer forum", [ev("o", "1", source_type="official", updated_at="2020-01-01"), ev("f", "2", source_type="forum", updated_at="2026-01-01")], {}, "answer", "1", ("o",), ("f",), (), "source_credibility"),
    ("a stale forum majority does not win by count", [ev("o", "1", source_type="official"), *[ev(f"f{i}", "2", source_type="forum", updated_at="2026-01-01") for i in range(4)]], {}, "answer", "1", ("o",), ("f0", "f1", "f2", "f3"), (), "source_credibility"),
    ("agreeing lower sources are cited with the winner", [ev("o", "1", source_type="official"), ev("f", "1", source_type="forum"), ev("m", "3", source_type="memory")], {}, "answer", "1", ("f", "o"), ("m",), (), "source_credibility"),
    ("entity ambiguity: clarify, never pick one", [ev("a", "10", entity="Apple Inc."), ev("b", "3", entity="apple (fruit)")], {}, "clarify", None, (), ("a", "b"), (), "ambiguous_entity"),
    ("entity named by the caller: answer for it", [ev("a", "10", entity="Apple Inc."), ev("b", "3", entity="apple (fruit)")], {"entity": "apple inc."}, "answer", "10", ("a",), (), ("b",), "consistent"),
    ("different entities that agree are no ambiguity", [ev("a", "10", entity="x"), ev("b", "10", entity="y")], {}, "answer", "10", ("a", "b"), (), (), "consistent"),
    ("bases are listed side by side, not merged", [ev("a", "10", basis="finance", source_type="official"), ev("b", "12", basis="ops", source_type="official")], {}, "answer", None, ("a", "b"), (), (), "per_basis"),
    ("basis named by the caller resolves it", [ev("a", "10", basis="finance"), ev("b", "12", basis="ops")], {"basis": "Finance"}, "answer", "10", ("a",), (), ("b",), "consistent"),
    ("credibility outranks basis: a forum cannot open a basis column", [ev("a", "10", basis="finance", source_type="official"), ev("b", "12", basis="ops", source_type="forum")], {}, "answer", "10", ("a",), ("b",), (), "source_credibility"),
    ("close call: equal authority, close dates and confidence", CLOSE, {}, "clarify", None, (), ("a", "b"), (), "close_call"),
    ("close call under a high-risk policy escalates", CLOSE, HIGH_RISK, "escalate", None, (), ("a", "b"), (), "close_call"),
    ("close dates but a clear confidence gap", [CLOSE[0], replace(CLOSE[1], confidence=0.5)], {}, "answer", "1", ("a",), ("b",), (), "higher_confidence"),
    ("far-apart dates: the newer wins even with lower confidence", [CLOSE[0], replace(CLOSE[1], updated_at="2027-01-01", confidence=0.5)], {}, "answer", "2", ("b",), ("a",), (), "newer_version"),
    ("unknown dates and confidence cannot be ordered", [ev("a", "1"), ev("b", "2")], {}, "clarify", None, (), ("a", "b"), (), "close_call"),
    ("versions order undated items", [ev("a", "1", version="v1.9"), ev("b", "2", version="v1.10")], {}, "answer", "2", ("b",), ("a",), (), "newer_version"),
    ("relevance never beats version", [ev("old", "1", updated_at="2020-01-01", relevance=0.99), ev("new", "2", updated_at="2026-01-01", relevance=0.31)], FLOOR, "answer", "2", ("new",), ("old",), (), "newer_version"),
    ("noise under the relevance floor is dropped, not a conflict", [ev("a", "1", relevance=0.9), ev("n", "2", relevance=0.1)], FLOOR, "answer", "1", ("a",), (), ("n",), "consistent"),
    ("no evidence: abstain", [], {}, "abstain", None, (), (), (), "no_evidence"),
    ("nothing left after filtering: abstain", [ev("n", "1", relevance=0.0)], FLOOR, "abstain", None, (), (), ("n",), "no_usable_evidence"),
    ("spellings of one value are one group", [ev("a", "1,000,000"), ev("b", " 1000000 "), ev("c", 1e6), ev("d", "1 000 000")], {}, "answer", "1,000,000", ("a", "b", "c", "d"), (), (), "consistent"),
    ("case and whitespace are one group", [ev("a", "Fifty  Thousand"), ev("b", "fifty thousand")], {}, "answer", "Fifty  Thousand", ("a", "b"), (), (), "consistent"),
    ("injection-flagged items are never selected", [ev("x", "2", source_type="official", flags=["injection"]), ev("y", "1", source_type="forum")], {}, "answer", "1", ("y",), (), ("x",), "consistent"),
    ("injection-flagged only: abstain", [ev("x", "2", flags=["injection"])], {}, "abstain", None, (), (), ("x",), "no_usable_evidence"),
    ("a flagged item cannot supersede the real one", [ev("x", "2", flags=["injection"], supersedes=["y"]), ev("y", "1")], {}, "answer", "1", ("y",), (), ("x",), "consistent"),
    ("selected ids are ordered by relevance (citations)", [ev("a", "1", relevance=0.2), ev("b", "1", relevance=0.9), ev("c", "1")], {}, "answer", "1", ("b", "a", "c"), (), (), "consistent"),
]
# fmt: on


@pytest.mark.parametrize("row", TABLE, ids=[row[0] for row in TABLE])
def test_truth_table(row: tuple[Any, ...]) -> None:
    _, items, kwargs, *expected = row
    v = resolve_evidence(items, **kwargs)
    got = [v.verdict.value, v.value, v.selected_ids, v.conflicting_ids, v.dropped_ids, v.reason]
    assert got == expected
    d = v.decision
    assert (d.guard, d.verdict, d.reason) == ("evidence_resolve", v.verdict, v.reason)
    assert d.policy == "EvidencePolicy@1"
    assert (d.selected_ids, d.conflicting_ids, d.dropped_ids) == tuple(expected[2:5])
    assert d.detail
    json.dumps(d.to_dict())  # JSON-ready for traces and evals


def test_reasons_for_each_conflict_and_drop_are_recorded() -> None:
    v = resolve_evidence(
        [
            *SEED[:2],
            ev("f", "1w", "approval_limit", source_type="forum", updated_at="2026-06-01"),
            ev("x", "0w", "approval_limit", flags=["injection"]),
            ev("n", "7w", "approval_limit", relevance=0.0),
        ],
        policy=EvidencePolicy(min_relevance=0.1),
    )
    assert v.decision.data["conflicting"] == {
        "f": "less_credible_source",
        "policy_2024": "older_version",
    }
    assert v.decision.data["dropped"] == {"n": "low_relevance", "x": "injection"}
    assert v.decision.data["value"] == "50w"


def test_seed_without_claim_key_resolves_each_claim_separately() -> None:
    v = resolve_evidence(SEED)
    assert (v.verdict, v.reason, v.value) == (Verdict.ANSWER, "multiple_claims", None)
    limit = v.claims["approval_limit"]
    assert (limit.value, limit.selected_ids, limit.conflicting_ids) == (
        "50w",
        ("policy_2026",),
        ("policy_2024",),
    )
    assert v.claims["approval_records"].selected_ids == ("faq",)
    assert "faq" not in limit.selected_ids + limit.conflicting_ids


def test_multiple_claims_take_the_most_cautious_verdict() -> None:
    v = resolve_evidence(SEED[:2] + [replace(c, claim_key="other") for c in CLOSE])
    assert (v.verdict, v.reason) == (Verdict.CLARIFY, "close_call")
    assert v.claims["approval_limit"].verdict is Verdict.ANSWER


def test_values_side_by_side_and_by_entity() -> None:
    per_basis = resolve_evidence([ev("a", "10", basis="finance"), ev("b", "12", basis="ops")])
    assert per_basis.values == {"finance": "10", "ops": "12"}
    by_entity = resolve_evidence(
        [ev("a", "10", entity="Apple Inc."), ev("b", "3", entity="apple (fruit)")]
    )
    assert by_entity.values == {"Apple Inc.": "10", "apple (fruit)": "3"}


def test_close_call_lists_the_candidates() -> None:
    v = resolve_evidence(CLOSE)
    assert v.decision.data["candidates"] == [
        {"value": "1", "ids": ["a"]},
        {"value": "2", "ids": ["b"]},
    ]


@pytest.mark.parametrize(
    ("close_days", "close_confidence", "verdict"),
    [
        (90, 0.08, "clarify"),
        (30, 0.08, "answer"),
        (timedelta(days=31), 0.08, "answer"),
        (timedelta(days=32), 0.08, "clarify"),
        (90, 0.01, "answer"),
        (0, 0.08, "answer"),
    ],
)
def test_close_call_thresholds(close_days: Any, close_confidence: float, verdict: str) -> None:
    policy = EvidencePolicy(close_days=close_days, close_confidence=close_confidence)
    assert resolve_evidence(CLOSE, policy=policy).verdict.value == verdict


def test_source_weights_are_configurable() -> None:
    items = [ev("o", "1", source_type="official"), ev("w", "2", source_type="wiki")]
    assert resolve_evidence(items).value == "1"
    policy = EvidencePolicy(source_weights={"official": 1, "wiki": 5})
    assert resolve_evidence(items, policy=policy).value == "2"


def test_disqualifying_flags_are_configurable() -> None:
    items = [ev("x", "2", source_type="official", flags=["unverified"]), ev("y", "1")]
    assert resolve_evidence(items).value == "2"
    v = resolve_evidence(
        items, policy=EvidencePolicy(disqualifying_flags={"unverified", "injection"})
    )
    assert (v.value, v.decision.data["dropped"]) == ("1", {"x": "unverified"})


def test_normalizer_hook() -> None:
    items = [ev("a", "50w"), ev("b", "500,000")]
    assert resolve_evidence(items).verdict is Verdict.CLARIFY

    def wan(value: Any) -> str:
        text = normalize_value(value)
        return str(int(text[:-1]) * 10_000) if text.endswith("w") else text

    v = resolve_evidence(items, policy=EvidencePolicy(normalizer=wan))
    assert (v.verdict, v.selected_ids) == (Verdict.ANSWER, ("a", "b"))


# -- permission ------------------------------------------------------------------------

SECRET = ev(
    "hr-salary-band",
    "SECRET-VALUE-77",
    source_type="official",
    allowed=["hr"],
    text="SECRET-TEXT",
    entity="SECRET-ENTITY",
    basis="SECRET-BASIS",
)


@pytest.mark.parametrize(
    ("principal", "sees_secret"),
    [
        (None, False),
        ("alice", False),
        (["alice", "staff"], False),
        ("hr", True),
        (("alice", "hr"), True),
    ],
)
def test_permission_filter_removes_items_from_every_output(
    principal: Any, sees_secret: bool
) -> None:
    items = [SECRET, ev("pub", "public value", source_type="forum")]
    v = resolve_evidence(items, principal=principal)
    dump = json.dumps(v.to_dict()) + repr(v)
    assert ("SECRET" in dump or "hr-salary-band" in dump) is sees_secret
    assert v.value == ("SECRET-VALUE-77" if sees_secret else "public value")


def test_hidden_items_are_not_validated_or_reported() -> None:
    hidden = {
        "id": "h1",
        "claim_key": "k",
        "value": "v",
        "updated_at": "not a date",
        "allowed": ["hr"],
    }
    v = resolve_evidence([hidden, ev("pub", "1")], principal="alice")
    assert "h1" not in json.dumps(v.to_dict())
    with pytest.raises(InvalidInputError) as err:
        resolve_evidence([hidden], principal="hr")
    assert (err.value.item, err.value.field) == ("h1", "updated_at")


def test_only_hidden_items_abstain_like_no_evidence() -> None:
    v = resolve_evidence([SECRET], principal="alice")
    assert (v.verdict, v.reason, v.dropped_ids) == (Verdict.ABSTAIN, "no_evidence", ())
    assert v.decision.data == {}


def test_hidden_supersessor_does_not_leak_through_the_chain() -> None:
    new = ev("new", "2", allowed=["hr"], supersedes=["old"])
    v = resolve_evidence([new, ev("old", "1")], principal="alice")
    assert (v.value, v.reason, v.conflicting_ids) == ("1", "consistent", ())


# -- inputs ------------------------------------------------------------------------------


def test_documents_and_dicts_are_converted() -> None:
    doc = Document(
        "Over 50w needs review.",
        id="p26",
        metadata={
            "claim_key": "approval_limit",
            "value": "50w",
            "source_type": "official",
            "last_modified": "2026-01-01",
            "score": 0.8,
            "acl": ["staff"],
        },
    )
    item = {
        "id": "p24",
        "claim_key": "approval_limit",
        "value": "100w",
        "source_type": "official",
        "updated_at": "2024-06-01",
    }
    v = resolve_evidence([doc, item], principal="staff")
    assert (v.value, v.selected_ids, v.conflicting_ids) == ("50w", ("p26",), ("p24",))
    assert resolve_evidence([doc, item], principal="bob").value == "100w"


def test_from_document_reads_metadata_and_defaults_value_to_content() -> None:
    doc = Document(
        " 42 ",
        metadata={
            "id": "d",
            "claim": "answer",
            "relevance_score": 0.5,
            "effective_date": date(2025, 1, 2),
            "flags": ["injection"],
        },
    )
    e = Evidence.from_document(doc, entity="x")
    assert (e.id, e.claim_key, e.value, e.relevance, e.entity, e.flags, e.text) == (
        "d",
        "answer",
        "42",
        0.5,
        "x",
        ("injection",),
        " 42 ",
    )
    assert e.effective_at == datetime(2025, 1, 2, tzinfo=UTC)


def test_round_trip_to_dict() -> None:
    e = replace(
        SEED[1],
        supersedes=("policy_2024",),
        allowed=("staff",),
        flags=("x",),
        effective_at="2026-02-01T08:00:00+08:00",
    )
    assert Evidence.from_dict(e.to_dict()) == e
    assert Evidence.from_dict(json.loads(json.dumps(e.to_dict()))) == e
    v = resolve_evidence(SEED)
    assert isinstance(v, EvidenceVerdict)
    json.dumps(v.to_dict())


@pytest.mark.parametrize(
    ("make", "item", "field"),
    [
        (
            lambda: resolve_evidence([{"claim_key": "k", "value": "1"}]),
            "#0",
            "id",
        ),  # named by its position
        (lambda: ev("", "1"), None, "id"),
        (lambda: resolve_evidence([ev("a", "1"), ev("a", "2")]), "a", "id"),
        (lambda: ev("a", "1", updated_at="yesterday"), "a", "updated_at"),
        (lambda: ev("a", "1", effective_at="2026-13-01"), "a", "effective_at"),
        (lambda: ev("a", "1", updated_at=1700000000), "a", "updated_at"),
        (lambda: ev("a", "1", confidence=1.5), "a", "confidence"),
        (lambda: ev("a", "1", confidence=-0.1), "a", "confidence"),
        (lambda: ev("a", "1", confidence=math.nan), "a", "confidence"),
        (lambda: ev("a", "1", confidence=True), "a", "confidence"),
        (lambda: ev("a", "1", relevance=math.nan), "a", "relevance"),
        (lambda: ev("a", None), "a", "value"),
        (lambda: ev("a", math.inf), "a", "value"),
        (lambda: ev("a", "1", status="archived"), "a", "status"),
        (lambda: Evidence("a", "", "1"), "a", "claim_key"),
        (lambda: ev("a", "1", supersedes=[""]), "a", "supersedes"),
        # a malformed access list: nobody can tell who may see the item, so it is not named
        (lambda: ev("a", "1", allowed=[3]), None, "allowed"),
        (lambda: resolve_evidence([{"id": "a", "claim_key": "k"}]), "a", "value"),
        (
            lambda: resolve_evidence([{"id": "a", "claim_key": "k", "value": 1, "colour": "red"}]),
            "a",
            "colour",
        ),
        # an item with no id is named by its position
        (lambda: resolve_evidence([Document("x", metadata={"claim_key": "k"})]), "#0", "id"),
        (lambda: resolve_evidence([Document("x", id="d")]), "d", "claim_key"),
        (lambda: resolve_evidence([42]), "#0", "items"),
        (lambda: resolve_evidence([ev("a", "1")], as_of="soon"), None, "as_of"),
        (lambda: resolve_evidence([ev("a", "1")], principal=[1]), None, "principal"),
        (lambda: resolve_evidence([ev("a", "1")], entity=""), None, "entity"),
    ],
)
def test_bad_input_names_item_and_field(make: Any, item: str | None, field: str) -> None:
    with pytest.raises(InvalidInputError) as err:
        make()
    assert (err.value.item, err.value.field) == (item, field)
    assert field in str(err.value)


@pytest.mark.parametrize(
    ("kwargs", "error", "text"),
    [
        ({"close_confidence": 1.5}, ValueError, "close_confidence"),
        ({"close_confidence": math.nan}, ValueError, "close_confidence"),
        ({"close_days": -1}, ValueError, "close_days"),
        ({"close_days": "90"}, TypeError, "close_days"),
        ({"min_relevance": math.inf}, ValueError, "min_relevance"),
        ({"source_weights": {}}, TypeError, "source_weights"),
        ({"source_weights": {"official": -1}}, ValueError, "source_weights['official']"),
        ({"source_weights": {"official": "high"}}, TypeError, "source_weights['official']"),
        ({"unknown_source_weight": -2}, ValueError, "unknown_source_weight"),
        ({"high_risk": "yes"}, TypeError, "high_risk"),
        ({"disqualifying_flags": "injection"}, TypeError, "disqualifying_flags"),
        ({"normalizer": "lower"}, TypeError, "normalizer"),
        ({"version": 0}, ValueError, "version"),
        ({"name": ""}, ValueError, "name"),
    ],
)
def test_policy_is_validated_at_construction(
    kwargs: dict[str, Any], error: type, text: str
) -> None:
    with pytest.raises(error, match=text.replace("[", r"\[")):
        EvidencePolicy(**kwargs)


def test_policy_is_frozen_and_keyword_only() -> None:
    policy = EvidencePolicy()
    with pytest.raises(AttributeError):
        policy.high_risk = True  # type: ignore[misc]
    with pytest.raises(TypeError):
        EvidencePolicy({"official": 1})  # type: ignore[misc]
    assert replace(policy, name="Strict", version=3).label == "Strict@3"


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        ("1,000", "1000", True),
        ("1,000.50", 1000.5, True),
        ("  A  b ", "a b", True),
        (True, "true", True),
        ("1.000", "1000", False),
        ("50w", "50 w", False),
        ("10%", "10", False),
        ("0.0", 0, True),
        ("1_000", 1000, True),
    ],
)
def test_default_normalizer(a: Any, b: Any, same: bool) -> None:
    assert (normalize_value(a) == normalize_value(b)) is same


# -- laws (hypothesis) ---------------------------------------------------------------------

SOURCES = ["official", "internal", "memory", "forum", None]
DAY0 = datetime(2024, 1, 1, tzinfo=UTC)
# effective dates at every precision: a year, a month, a day, an instant
PARTIAL_DATES = st.one_of(
    st.integers(2023, 2026).map(str),
    st.tuples(st.integers(2023, 2026), st.integers(1, 12)).map(lambda ym: f"{ym[0]}-{ym[1]:02d}"),
    st.integers(0, 1200).map(lambda d: (DAY0 + timedelta(days=d)).date()),
    st.integers(0, 1200 * 24).map(lambda h: DAY0 + timedelta(hours=h, minutes=7)),
)
AS_OF = st.none() | st.integers(0, 1200).map(lambda d: DAY0 + timedelta(days=d, hours=12))


@st.composite
def evidence_lists(draw: Any, *, with_partitions: bool = True, max_size: int = 8) -> list[Evidence]:
    n = draw(st.integers(0, max_size))
    out = []
    for i in range(n):
        out.append(
            Evidence(
                f"e{i}",
                draw(st.sampled_from(["k", "k", "k2"])),
                draw(st.sampled_from(["1", "2", "3", "1,0", "10"])),
                source_type=draw(st.sampled_from(SOURCES)),
                updated_at=draw(
                    st.none() | st.integers(0, 800).map(lambda d: DAY0 + timedelta(days=d))
                ),
                effective_at=draw(st.none() | st.none() | PARTIAL_DATES),
                version=draw(st.none() | st.integers(1, 5)),
                confidence=draw(st.none() | st.floats(0, 1)),
                relevance=draw(st.none() | st.floats(0, 1)),
                status=draw(
                    st.sampled_from(
                        ["active", "active", "active", "draft", "superseded", "retracted"]
                    )
                ),
                supersedes=draw(
                    st.lists(st.sampled_from([f"e{j}" for j in range(max_size)]), max_size=1)
                ),
                entity=draw(st.sampled_from([None, None, "x", "y"])) if with_partitions else None,
                basis=draw(st.sampled_from([None, None, "fin", "ops"]))
                if with_partitions
                else None,
                flags=draw(st.sampled_from([(), (), ("injection",)])),
                allowed=draw(st.sampled_from([None, None, ("hr",), ("staff", "hr")])),
            )
        )
    return out


POLICY = EvidencePolicy(min_relevance=0.1)
LAWS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@LAWS
@given(items=evidence_lists(), data=st.data())
def test_law_order_invariance_and_determinism(items: list[Evidence], data: Any) -> None:
    principal = data.draw(st.sampled_from([None, "staff", ["hr"]]))
    policy = data.draw(st.sampled_from([POLICY, replace(POLICY, group_entities=True)]))
    kw = {"policy": policy, "principal": principal, "as_of": data.draw(AS_OF)}
    kw["entity"] = data.draw(st.sampled_from([None, None, "x"]))
    shuffled = data.draw(st.permutations(items))
    first = resolve_evidence(items, **kw)
    assert resolve_evidence(shuffled, **kw) == first
    assert resolve_evidence(items, **kw).to_dict() == first.to_dict()


@LAWS
@given(items=evidence_lists(with_partitions=False), data=st.data())
def test_law_a_newer_more_authoritative_item_wins(items: list[Evidence], data: Any) -> None:
    """Adding a newer, more authoritative active item never makes an older one win.

    "Newer" needs dates on both sides: an undated item of equal authority has no known age;
    and it means after every other date at that date's precision (a year ends on Dec 31).
    """
    others = [replace(e, updated_at=e.updated_at or DAY0) for e in items if e.claim_key == "k"]
    value = data.draw(st.sampled_from(["1", "2", "3", "9"]))
    newest = max((e.span.last for e in others if e.span), default=DAY0)
    field = data.draw(st.sampled_from(["updated_at", "effective_at"]))
    new = Evidence(
        "new",
        "k",
        value,
        **{field: newest + timedelta(days=365)},
        confidence=1.0,
        source_type=data.draw(st.sampled_from(["official", "super"])),
    )
    policy = EvidencePolicy(
        source_weights={"super": 9, "official": 4, "internal": 3, "memory": 2, "forum": 1}
    )
    v = resolve_evidence([*others, new], policy=policy, principal="hr")
    assert (v.verdict, policy.normalize(v.value)) == (Verdict.ANSWER, policy.normalize(value))
    assert "new" in v.selected_ids
    assert all(
        policy.normalize(e.value) == policy.normalize(value)
        for e in others
        if e.id in v.selected_ids
    )


@LAWS
@given(items=evidence_lists(with_partitions=False))
def test_law_superseding_everything_wins(items: list[Evidence]) -> None:
    # from a source entitled to it: no less credible than anything it replaces (this
    # law changed: an unsourced item used to win by saying it supersedes officials)
    ids = [e.id for e in items if e.claim_key == "k"]
    new = Evidence("new", "k", "fresh", supersedes=ids, updated_at=DAY0, source_type="official")
    v = resolve_evidence([*[e for e in items if e.claim_key == "k"], new], principal="hr")
    assert (v.verdict, v.value) == (Verdict.ANSWER, "fresh")


@LAWS
@given(items=evidence_lists(with_partitions=False))
def test_law_a_weaker_source_never_wins_by_claiming_to_supersede(items: list[Evidence]) -> None:
    claim = [e for e in items if e.claim_key == "k"]
    weak = Evidence("weak", "k", "forged", supersedes=[e.id for e in claim], source_type="forum",
                    updated_at=DAY0 + timedelta(days=3650), confidence=1.0)  # fmt: skip
    without = resolve_evidence(claim, principal="hr")
    v = resolve_evidence([*claim, weak], principal="hr")
    by_id = {e.id: e for e in claim}
    if any(by_id[i].source_type == "official" for i in without.selected_ids):
        # an answer the official source gave is never replaced by the forum's say-so
        assert v.value != "forged" and "weak" not in v.selected_ids


@LAWS
@given(items=evidence_lists(), data=st.data())
def test_law_hidden_content_never_appears(items: list[Evidence], data: Any) -> None:
    hidden = [
        Evidence(
            f"HIDDEN-{i}",
            data.draw(st.sampled_from(["k", "k2"])),
            f"HIDDEN-VALUE-{i}",
            allowed=["root"],
            entity=data.draw(st.sampled_from([None, "HIDDEN-ENTITY"])),
            text="HIDDEN-TEXT",
            source_type="official",
            supersedes=[e.id for e in items[:2]],
        )
        for i in range(data.draw(st.integers(1, 3)))
    ]
    mixed = data.draw(st.permutations(items + hidden))
    v = resolve_evidence(
        mixed, policy=POLICY, principal=data.draw(st.sampled_from([None, "staff", "hr"]))
    )
    assert "HIDDEN" not in json.dumps(v.to_dict()) + repr(v)


@LAWS
@given(items=evidence_lists(), data=st.data())
def test_law_hidden_items_change_nothing(items: list[Evidence], data: Any) -> None:
    principal = data.draw(st.sampled_from([None, "staff", "hr"]))
    hidden = Evidence(
        "zz-hidden",
        "k",
        "HIDDEN",
        allowed=["root"],
        source_type="official",
        supersedes=[e.id for e in items],
    )
    assert resolve_evidence([*items, hidden], principal=principal) == resolve_evidence(
        items, principal=principal
    )


@LAWS
@given(items=evidence_lists(), data=st.data())
def test_law_every_visible_id_is_accounted_for_once(items: list[Evidence], data: Any) -> None:
    policy = data.draw(
        st.sampled_from(
            [POLICY, replace(POLICY, group_entities=True), replace(POLICY, high_risk=True)]
        )
    )
    as_of = data.draw(AS_OF)
    v = resolve_evidence(
        items,
        policy=policy,
        principal="hr",
        as_of=as_of,
        entity=data.draw(st.sampled_from([None, None, "y"])),
    )
    if as_of is not None:  # nothing answers before it takes effect
        by_id = {e.id: e for e in items}
        assert all(by_id[i].span is None or by_id[i].span.start <= as_of for i in v.selected_ids)
    ids = [*v.selected_ids, *v.conflicting_ids, *v.dropped_ids]
    assert len(ids) == len(set(ids))
    if v.verdict is not Verdict.ABSTAIN or v.reason != "no_evidence":
        assert set(ids) == {e.id for e in items}
    if v.verdict is Verdict.ANSWER:
        assert v.selected_ids
        # a superseded item answers only for a date before its successors took effect
        never = {e.id for e in items if e.status in ("draft", "retracted") or e.flags}
        if as_of is None:
            never |= {e.id for e in items if e.status == "superseded"}
        assert not set(v.selected_ids) & never
    elif not v.claims:
        assert v.selected_ids == ()


@pytest.mark.parametrize(
    "module",
    [
        "core/fields",
        "evidence_resolve/model",
        "evidence_resolve/policy",
        "evidence_resolve/arbiter",
        "evidence_resolve/timeline",
        "evidence_resolve/core",
        "memory_resolve/model",
        "memory_resolve/core",
    ],
)
def test_pure_cores_import_nothing_from_langgraph(module: str) -> None:
    import ast
    from pathlib import Path

    import agent_guards

    source = (Path(agent_guards.__file__).parent / f"{module}.py").read_text()
    imported = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            imported.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            imported.add("." * node.level + (node.module or ""))
    assert not [name for name in imported if name.startswith("langgraph")]
    local = {name for name in imported if name.startswith("agent_guards")}
    assert local <= {
        "agent_guards.core.decision",
        "agent_guards.core.errors",
        "agent_guards.core.fields",
        "agent_guards.core.policy",
        "agent_guards.evidence_resolve.model",
        "agent_guards.evidence_resolve.boundary",
        "agent_guards.evidence_resolve.policy",
        "agent_guards.evidence_resolve.arbiter",
        "agent_guards.evidence_resolve.timeline",
        "agent_guards.memory_resolve.model",
        "agent_guards.memory_resolve.policy",
    }
