"""Who may supersede or override what: truth tables for evidence and memory.

The rule: a supersede, an override or an explicit instruction only takes effect from a
source entitled to it: no less credible than what it replaces, in the caller's scope, and
a user never overrides facts about the user's own authority. Cycles decide nothing and are
reported.
"""

from __future__ import annotations

from typing import Any

import pytest

from agent_guards import (
    Evidence,
    MemoryPolicy,
    MemoryRecord,
    Verdict,
    resolve_evidence,
    resolve_memory,
)


def ev(id: str, value: str, source: str, **kw: Any) -> Evidence:
    return Evidence(id, "limit", value, source_type=source, **kw)


OFFICIAL = ev("off", "50w", "official", updated_at="2025-01-01", confidence=0.9)

# fmt: off
# case | the other item || selected | value | reason | conflicting (id -> why)
EVIDENCE = [
    ("forum claims to supersede official", ev("post", "10w", "forum", updated_at="2026-05-01", supersedes=["off"], confidence=1.0),
     ("off",), "50w", "source_credibility", {"post": "less_credible_source"}),
    ("internal claims to supersede official", ev("wiki", "10w", "internal", updated_at="2026-05-01", supersedes=["off"]),
     ("off",), "50w", "source_credibility", {"wiki": "less_credible_source"}),
    ("memory claims to supersede official", ev("mem", "10w", "memory", supersedes=["off"]),
     ("off",), "50w", "source_credibility", {"mem": "less_credible_source"}),
    ("official supersedes official", ev("off2", "40w", "official", updated_at="2024-01-01", supersedes=["off"]),
     ("off2",), "40w", "superseded", {"off": "superseded_by:off2"}),
]
# fmt: on


@pytest.mark.parametrize("row", EVIDENCE, ids=[r[0] for r in EVIDENCE])
def test_evidence_supersede_needs_an_entitled_source(row: Any) -> None:
    _, other, selected, value, reason, conflicting = row
    v = resolve_evidence([OFFICIAL, other])
    assert (v.verdict, v.selected_ids, v.value, v.reason) == (
        Verdict.ANSWER,
        selected,
        value,
        reason,
    )
    assert v.decision.data["conflicting"] == conflicting


def test_an_official_document_supersedes_a_forum_post() -> None:
    post = ev("post", "10w", "forum", updated_at="2026-05-01")
    v = resolve_evidence([post, ev("off", "50w", "official", supersedes=["post"])])
    assert (v.value, v.reason, v.decision.data["conflicting"]) == (
        "50w",
        "superseded",
        {"post": "superseded_by:off"},
    )


def test_a_forum_superseding_a_forum_takes_effect() -> None:
    old = ev("p1", "1", "forum", updated_at="2026-01-01")
    new = ev("p2", "2", "forum", updated_at="2025-01-01", supersedes=["p1"])
    v = resolve_evidence([old, new])
    assert (v.value, v.reason) == ("2", "superseded")


def test_an_evidence_supersede_cycle_is_reported_and_decides_nothing() -> None:
    a = ev("a", "1", "official", updated_at="2026-01-01", supersedes=["b"])
    b = ev("b", "2", "official", updated_at="2024-01-01", supersedes=["a"])
    v = resolve_evidence([a, b])
    assert (v.verdict, v.value, v.reason) == (Verdict.ANSWER, "1", "newer_version")
    assert v.decision.data["caveats"] == ["supersedes_cycle"]


U = "user:alice"
NOW = "2026-06-01"


def rec(id: str, key: str, value: Any, source: str = "memory", **kw: Any) -> MemoryRecord:
    kw.setdefault("scope", U)
    return MemoryRecord(id, key, value, source=source, **kw)


TOOL_ROLE = rec("tool_role", "role", "viewer", "tool", created_at="2026-05-01")

# fmt: off
# case | records || injected (id, value) | excluded | superseded | reason
MEMORY = [
    ("a user cannot make themselves admin",
     [TOOL_ROLE, rec("said", "role", "admin", "user_explicit")],
     [("tool_role", "viewer")], {"said": "unentitled:authority"}, (), "resolved"),
    ("nor by a word of the key",
     [rec("t", "user_role", "viewer", "tool"), rec("said", "user_role", "admin", "user_explicit")],
     [("t", "viewer")], {"said": "unentitled:authority"}, (), "resolved"),
    ("nor with no tool fact at all",
     [rec("said", "permissions", "all", "user_explicit")],
     [], {"said": "unentitled:authority"}, (), "no_memory"),
    ("nor by a supersede link",
     [TOOL_ROLE, rec("said", "role", "admin", "user_explicit", supersedes=["tool_role"])],
     [("tool_role", "viewer")], {"said": "unentitled:authority"}, (), "resolved"),
    ("a user still overrides a preference",
     [rec("m", "report_format", "pdf"), rec("said", "report_format", "md", "user_explicit")],
     [("said", "md")], {"m": "overridden_by:said"}, (), "current_turn_override"),
    ("an out-of-scope record cannot supersede an in-scope one",
     [rec("mine", "fmt", "pdf"), rec("bobs", "fmt", "md", scope="user:bob", supersedes=["mine"])],
     [("mine", "pdf")], {"bobs": "out_of_scope"}, (), "resolved"),
    ("a memory cannot supersede a tool fact",
     [rec("t", "tz", "UTC", "tool"), rec("m", "tz", "UTC+8", supersedes=["t"])],
     [("t", "UTC")], {"m": "overridden_by:t"}, (), "resolved"),
    ("an inferred record cannot supersede a memory",
     [rec("m", "tz", "UTC"), rec("g", "tz", "UTC+8", "inferred", supersedes=["m"])],
     [("m", "UTC")], {"g": "unconfirmed_inferred"}, (), "resolved"),
    ("a memory supersedes a memory in scope",
     [rec("old", "tz", "UTC", created_at="2026-05-01"), rec("new", "tz", "UTC+8", created_at="2020-01-01", supersedes=["old"])],
     [("new", "UTC+8")], {}, ("old",), "resolved"),
    ("a global record supersedes a global one",
     [rec("old", "tz", "UTC", scope=None), rec("new", "tz", "UTC+8", scope=None, supersedes=["old"])],
     [("new", "UTC+8")], {}, ("old",), "resolved"),
]
# fmt: on


@pytest.mark.parametrize("row", MEMORY, ids=[r[0] for r in MEMORY])
def test_memory_override_needs_an_entitled_source(row: Any) -> None:
    _, records, inject, excluded, superseded, reason = row
    v = resolve_memory(records, now=NOW, scopes=[U])
    got = ([(r.id, r.value) for r in v.inject], v.excluded, v.superseded_ids, v.decision.reason)
    assert got == (inject, excluded, superseded, reason)


def test_a_refused_link_is_recorded() -> None:
    v = resolve_memory(
        [
            rec("mine", "fmt", "pdf"),
            rec("bobs", "fmt", "md", scope="user:bob", supersedes=["mine"]),
        ],
        now=NOW,
        scopes=[U],
    )
    assert v.decision.data["unentitled_supersedes"] == {"mine": "bobs"}


def test_a_memory_supersede_cycle_is_reported_not_silently_dropped() -> None:
    a = rec("a", "fmt", "pdf", created_at="2026-05-01", supersedes=["b"])
    b = rec("b", "fmt", "md", created_at="2026-01-01", supersedes=["a"])
    v = resolve_memory([a, b], now=NOW, scopes=[U])
    assert [r.id for r in v.inject] == ["a"]  # the two compete: the newer one
    assert v.decision.data["supersedes_cycles"] == [["a", "b"]]
    assert "cycle" in v.decision.detail


def test_authority_keys_are_a_policy() -> None:
    records = [TOOL_ROLE, rec("said", "role", "admin", "user_explicit")]
    open_policy = MemoryPolicy(authority_keys=frozenset())
    v = resolve_memory(records, now=NOW, scopes=[U], policy=open_policy)
    assert [r.value for r in v.inject] == ["admin"]
    with pytest.raises(ValueError, match="authority_keys"):
        MemoryPolicy(authority_keys="role")  # type: ignore[arg-type]


@pytest.mark.parametrize("key", ["isAdmin", "userRole", "accessLevel", "IsAdmin", "ACLEntry"])
def test_a_camel_case_authority_key_is_not_set_by_the_user(key: str) -> None:
    tool = rec("tool", key, "viewer", "tool")
    v = resolve_memory([tool, rec("said", key, "admin", "user_explicit")], now=NOW, scopes=[U])
    assert v.facts == {key: "viewer"}
    assert v.excluded == {"said": "unentitled:authority"}


@pytest.mark.parametrize("key", ["language", "reportFormat", "timeZone", "accessibilityMode"])
def test_a_camel_case_key_without_an_authority_word_is_the_users(key: str) -> None:
    tool = rec("tool", key, "old", "tool")
    v = resolve_memory([tool, rec("said", key, "new", "user_explicit")], now=NOW, scopes=[U])
    assert v.facts == {key: "new"}
