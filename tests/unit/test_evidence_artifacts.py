"""Evidence read from tool artifacts: extra keys ignored, malformed items left out and named."""

from __future__ import annotations

import logging

import pytest
from langchain_core.documents import Document
from langchain_core.messages import ToolMessage

from agent_guards.core.errors import InvalidInputError
from agent_guards.evidence_resolve import (
    Evidence,
    artifact_evidence,
    evidence_from_messages,
    resolve_evidence,
)

GOOD = {"id": "c-17", "claim_key": "renewal_date", "value": "2026-09-30"}


def _result(*items: object, call_id: str = "c1") -> ToolMessage:
    return ToolMessage("result", tool_call_id=call_id, artifact=list(items))


def test_a_retrievers_extra_keys_are_ignored() -> None:
    item = {**GOOD, "url": "https://intranet/contracts/17", "title": "Acme", "chunk": 3}
    read = artifact_evidence([_result(item)])
    assert [e.id for e in read.evidence] == ["c-17"]
    assert read.rejected == []
    assert read.evidence == [Evidence("c-17", "renewal_date", "2026-09-30")]


def test_a_dict_given_directly_is_still_checked_by_name() -> None:
    with pytest.raises(InvalidInputError, match="unknown key"):
        Evidence.from_dict({**GOOD, "url": "https://x"})
    with pytest.raises(InvalidInputError, match="unknown key"):
        resolve_evidence([{**GOOD, "udpated_at": "2026-01-01"}])


def test_an_access_list_under_another_spelling_is_still_read() -> None:
    item = {**GOOD, "acl": ["legal"], "url": "https://x"}
    [read] = artifact_evidence([_result(item)]).evidence
    assert read.allowed == ("legal",)
    assert artifact_evidence([_result(item)], visible_to={"ops"}).evidence == []


def test_malformed_items_are_left_out_and_named_by_id_or_place() -> None:
    bad_value = {"id": "c-18", "claim_key": "renewal_date", "value": [1]}
    read = artifact_evidence([_result(GOOD, {"no_id": 1}, "str", 5, bad_value)])
    assert [e.id for e in read.evidence] == ["c-17"]
    named = [(d.data["item"], d.data["field"]) for d in read.rejected]
    assert named == [
        ("c1.artifact[1]", "id"),
        ("c1.artifact[2]", "items"),
        ("c1.artifact[3]", "items"),
        ("c-18", "value"),
    ]
    for decision in read.rejected:
        assert decision.guard == "evidence_artifact"
        assert decision.reason == "invalid_input"
        assert decision.verdict.value == "continue"
        assert decision.dropped_ids == (decision.data["item"],)


def test_an_item_that_cannot_be_read_is_left_out() -> None:
    class Broken:
        page_content = "x"

        @property
        def metadata(self) -> dict[str, object]:
            raise ValueError("boom")

    read = artifact_evidence([_result(Broken(), GOOD)])
    assert [e.id for e in read.evidence] == ["c-17"]
    assert [d.data["item"] for d in read.rejected] == ["c1.artifact[0]"]
    # nobody can tell who may see it: with a principal it is skipped, unnamed
    read = artifact_evidence([_result(Broken(), GOOD)], visible_to={"ops"})
    assert [e.id for e in read.evidence] == ["c-17"] and read.rejected == []


def test_evidence_from_messages_logs_what_it_leaves_out(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="agent_guards.evidence_resolve"):
        found = evidence_from_messages([_result({"no_id": 1}, GOOD)])
    assert [e.id for e in found] == ["c-17"]
    assert "c1.artifact[0]" in caplog.text and "'id'" in caplog.text


def test_an_item_the_caller_may_not_see_is_never_read_nor_named() -> None:
    secret = {"id": "SECRET-9", "claim_key": "k", "value": {"x": "hush"}, "allowed": ["legal"]}
    unreadable_acl = {"id": "SECRET-8", "claim_key": "k", "value": [2], "acl": [["legal"]]}
    doc = Document("hush", id="SECRET-7", metadata={"claim_key": "k", "allowed": ["legal"]})
    read = artifact_evidence(
        [_result(GOOD, secret, unreadable_acl, doc)], visible_to=frozenset({"ops"})
    )
    assert [e.id for e in read.evidence] == ["c-17"]
    assert read.rejected == []
    seen = artifact_evidence([_result(secret)], visible_to={"legal"})
    assert [d.data["item"] for d in seen.rejected] == ["SECRET-9"]


def test_a_malformed_access_list_is_named_by_place_only() -> None:
    item = {"id": "SECRET-8", "claim_key": "k", "value": 1, "allowed": [["legal"]]}
    read = artifact_evidence([_result(item)])
    assert read.evidence == []
    [decision] = read.rejected
    assert decision.data["item"] == "c1.artifact[0]" and decision.data["field"] == "allowed"
    assert "SECRET" not in repr(decision)
