"""resolve_memory, MemoryPolicy and the store helpers: truth tables, bad input, laws."""

from __future__ import annotations

import json
import math
import sqlite3
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, date, datetime, timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.store.base import BaseStore
from langgraph.store.memory import InMemoryStore
from langgraph.store.sqlite import SqliteStore

from agent_guards.core import InvalidInputError, Verdict
from agent_guards.memory_resolve import (
    LLMFactExtractor,
    MemoryPolicy,
    MemoryRecord,
    MemoryVerdict,
    aconfirm_memory,
    aload_memories,
    asave_memories,
    confirm_memory,
    format_memories,
    load_memories,
    memory_namespace,
    namespace_label,
    resolve_memory,
    save_memories,
)
from agent_guards.testing import ScriptedChatModel

NOW = "2026-04-01T00:00:00+00:00"
U = "user:alice"


def rec(id: str, value: Any, key: str = "fmt", **kw: Any) -> MemoryRecord:
    """One record in alice's scope; the key defaults to ``fmt``."""
    kw.setdefault("scope", U)
    return MemoryRecord(id, key, value, **kw)


PDF = rec("m_pdf", "pdf", created_at="2026-01-01")  # stored three months ago
MD_NOW = rec("t_md", "markdown", source="user_explicit", created_at=NOW)  # "Markdown this time"

INFERRED_OK = {"policy": MemoryPolicy(inject_inferred=True)}
HISTORY = {"policy": MemoryPolicy(keep_history=True)}

# fmt: off
# case | records | kwargs || injected (id, value) | superseded | expired | excluded | clarify | reason
TABLE: list[tuple[Any, ...]] = [
    ("seed: the current explicit instruction overrides the stored preference", [PDF, MD_NOW], {}, [("t_md", "markdown")], (), (), {"m_pdf": "overridden_by:t_md"}, (), "current_turn_override"),
    ("stored preference alone is injected", [PDF], {}, [("m_pdf", "pdf")], (), (), {}, (), "resolved"),
    ("tool (live fact) beats official", [rec("o", "a", source="official"), rec("t", "b", source="tool")], {}, [("t", "b")], (), (), {"o": "overridden_by:t"}, (), "resolved"),
    ("official beats long-term memory", [rec("m", "a", created_at=NOW), rec("o", "b", source="official", created_at="2020-01-01")], {}, [("o", "b")], (), (), {"m": "overridden_by:o"}, (), "resolved"),
    ("user_explicit beats a live tool fact", [rec("t", "a", source="tool"), rec("u", "b", source="user_explicit")], {}, [("u", "b")], (), (), {"t": "overridden_by:u"}, (), "resolved"),
    ("inferred is pending until confirmed", [rec("i", "html", source="inferred", created_at=NOW, confidence=0.99)], {}, [], (), (), {"i": "unconfirmed_inferred"}, (), "no_memory"),
    ("inferred never overrides explicit memory, even newer and surer", [PDF, rec("i", "html", source="inferred", created_at=NOW, confidence=0.99)], INFERRED_OK, [("m_pdf", "pdf")], (), (), {"i": "overridden_by:m_pdf"}, (), "resolved"),
    ("inferred injected as last resort when the policy allows", [rec("i", "html", source="inferred")], INFERRED_OK, [("i", "html")], (), (), {}, (), "resolved"),
    ("expired by valid_until, whatever its status says", [rec("e", "pdf", valid_until="2026-03-31")], {}, [], (), ("e",), {}, (), "no_memory"),
    ("valid_until equal to now is still valid", [rec("e", "pdf", valid_until=NOW)], {}, [("e", "pdf")], (), (), {}, (), "resolved"),
    ("status expired", [rec("e", "pdf", status="expired")], {}, [], (), ("e",), {}, (), "no_memory"),
    ("status superseded", [rec("s", "pdf", status="superseded"), rec("n", "md")], {}, [("n", "md")], ("s",), (), {}, (), "resolved"),
    ("a supersedes link beats dates", [rec("old", "pdf", created_at=NOW), rec("new", "md", created_at="2020-01-01", supersedes=["old"])], {}, [("new", "md")], ("old",), (), {}, (), "resolved"),
    ("a pending record does not supersede", [rec("old", "pdf"), rec("new", "md", status="pending", supersedes=["old"])], {}, [("old", "pdf")], (), (), {"new": "pending"}, (), "resolved"),
    ("deleted", [rec("d", "pdf", status="deleted")], {}, [], (), (), {"d": "deleted"}, (), "no_memory"),
    ("pending", [rec("p", "pdf", status="pending")], {}, [], (), (), {"p": "pending"}, (), "no_memory"),
    ("another user's record is out of scope", [rec("b", "pdf", scope="user:bob")], {}, [], (), (), {"b": "out_of_scope"}, (), "no_memory"),
    ("global records are in every scope", [rec("g", "pdf", scope=None)], {}, [("g", "pdf")], (), (), {}, (), "resolved"),
    ("two equal actives, same time: clarify, inject neither", [rec("a", "pdf", created_at=NOW), rec("b", "md", created_at=NOW)], {}, [], (), (), {"a": "ambiguous:fmt", "b": "ambiguous:fmt"}, ("fmt",), "ambiguous_memory"),
    ("two equal actives, no dates: clarify", [rec("a", "pdf"), rec("b", "md")], {}, [], (), (), {"a": "ambiguous:fmt", "b": "ambiguous:fmt"}, ("fmt",), "ambiguous_memory"),
    ("two actives: the newer statement wins", [rec("a", "pdf", created_at="2026-01-01"), rec("b", "md", created_at="2026-02-01")], {}, [("b", "md")], (), (), {"a": "overridden_by:b"}, (), "resolved"),
    ("same time: the surer one wins", [rec("a", "pdf", created_at=NOW, confidence=0.9), rec("b", "md", created_at=NOW, confidence=0.6)], {}, [("a", "pdf")], (), (), {"b": "overridden_by:a"}, (), "resolved"),
    ("same value twice: one is injected", [rec("a", "pdf", created_at="2026-01-01"), rec("b", " PDF ", created_at="2026-02-01")], {}, [("b", " PDF ")], (), (), {"a": "same_as:b"}, (), "resolved"),
    ("keep_history injects the overridden record after the winner", [PDF, MD_NOW], HISTORY, [("t_md", "markdown"), ("m_pdf", "pdf")], (), (), {}, (), "resolved"),
    ("keys are independent", [PDF, rec("l", "fr", key="lang")], {}, [("m_pdf", "pdf"), ("l", "fr")], (), (), {}, (), "resolved"),
    ("nothing", [], {}, [], (), (), {}, (), "no_memory"),
]
# fmt: on


@pytest.mark.parametrize("row", TABLE, ids=[row[0] for row in TABLE])
def test_truth_table(row: tuple[Any, ...]) -> None:
    _, records, kwargs, inject, superseded, expired, excluded, clarify, reason = row
    v = resolve_memory(records, now=NOW, scopes=[U], **kwargs)
    got = ([(r.id, r.value) for r in v.inject], v.superseded_ids, v.expired_ids, v.excluded)
    assert got == (inject, superseded, expired, excluded)
    assert (v.clarify_keys, v.decision.reason) == (clarify, reason)
    assert v.verdict is (Verdict.CLARIFY if clarify else Verdict.CONTINUE)
    d = v.decision
    assert (d.guard, d.policy) == ("memory_resolve", "MemoryPolicy@1")
    assert d.selected_ids == tuple(i for i, _ in inject)
    every = {r.id for r in records}
    assert set(d.data["reasons"]) == every - set(d.selected_ids)
    json.dumps(d.to_dict())


def test_scopes_none_reads_global_records_only() -> None:
    v = resolve_memory([rec("a", "pdf"), rec("g", "md", key="lang", scope=None)], now=NOW)
    assert ([r.id for r in v.inject], v.excluded) == (["g"], {"a": "out_of_scope"})


@pytest.mark.parametrize(
    ("write_back", "persist", "writes"),
    [
        ("when_asked", False, []),
        (
            "when_asked",
            True,
            [("m_pdf", "superseded", "memory", ()), ("t_md", "active", "memory", ("i", "m_pdf"))],
        ),
        (
            "always",
            False,
            [("m_pdf", "superseded", "memory", ()), ("t_md", "active", "memory", ("i", "m_pdf"))],
        ),
        ("never", True, []),
    ],
)
def test_write_back_builds_a_supersede_chain(
    write_back: str, persist: bool, writes: list[Any]
) -> None:
    current = replace(MD_NOW, persist=persist)
    pending = rec("i", "html", source="inferred", status="pending")
    policy = MemoryPolicy(write_back=write_back)  # type: ignore[arg-type]
    v = resolve_memory([PDF, current, pending], now=NOW, scopes=[U], policy=policy)
    got = [(w.id, w.status, w.source, w.supersedes) for w in v.writes if w.id != "i"]
    assert got == writes
    if writes:
        assert [w.status for w in v.writes if w.id == "i"] == ["superseded"]
        assert v.decision.data["writes"] == [w.id for w in v.writes]
        new = v.writes[-1]
        assert (new.persist, new.value, new.created) == (
            False,
            "markdown",
            datetime(2026, 4, 1, tzinfo=UTC),
        )
        # nothing is deleted: replaying the writes over the old records resolves to the new one
        after = resolve_memory([*v.writes], now=NOW, scopes=[U])
        assert [r.id for r in after.inject] == ["t_md"]
        assert set(after.superseded_ids) == {"m_pdf", "i"}


def test_write_back_leaves_foreign_tool_and_expired_records_alone() -> None:
    records = [
        rec("b", "pdf", scope="user:bob"),
        rec("t", "pdf", source="tool"),
        rec("e", "pdf", valid_until="2026-01-01"),
        replace(MD_NOW, persist=True),
    ]
    v = resolve_memory(records, now=NOW, scopes=[U])
    assert [w.id for w in v.writes] == ["t_md"]


def test_facts_property_and_format() -> None:
    v = resolve_memory([PDF, rec("l", {"primary": "fr"}, key="lang")], now=NOW, scopes=[U])
    assert v.facts == {"fmt": "pdf", "lang": {"primary": "fr"}}
    assert (
        format_memories(v) == '- fmt: "pdf" (memory, m_pdf)\n- lang: {"primary": "fr"} (memory, l)'
    )


@pytest.mark.parametrize(
    ("make", "item", "field"),
    [
        (
            lambda: resolve_memory([{"key": "k", "value": 1}], now=NOW),
            "#0",
            "id",
        ),  # named by its position
        (lambda: resolve_memory([rec("a", 1), rec("a", 2)], now=NOW), "a", "id"),
        (lambda: rec("a", 1, created_at="last week"), "a", "created_at"),
        (lambda: rec("a", 1, valid_until="2026-02-30"), "a", "valid_until"),
        (lambda: rec("a", 1, confidence=2.0), "a", "confidence"),
        (lambda: rec("a", 1, confidence=math.nan), "a", "confidence"),
        (lambda: rec("a", 1, source="gossip"), "a", "source"),
        (lambda: rec("a", 1, status="archived"), "a", "status"),
        (lambda: rec("a", object()), "a", "value"),
        (lambda: rec("a", math.nan), "a", "value"),
        (lambda: MemoryRecord("a", "", 1), "a", "key"),
        (lambda: rec("a", 1, scope=""), "a", "scope"),
        (lambda: rec("a", 1, persist="yes"), "a", "persist"),
        (lambda: MemoryRecord.from_dict({"id": "a", "key": "k"}), "a", "value"),
        (lambda: MemoryRecord.from_dict({"id": "a", "key": "k", "value": 1, "ttl": 3}), "a", "ttl"),
        (lambda: resolve_memory([3], now=NOW), "#0", "records"),
        (lambda: resolve_memory([], now=None), None, "now"),
        (lambda: resolve_memory([], now="tomorrow"), None, "now"),
        (lambda: resolve_memory([], now=NOW, scopes=[None]), None, "scopes"),
    ],
)
def test_bad_input_names_item_and_field(make: Any, item: str | None, field: str) -> None:
    with pytest.raises(InvalidInputError) as err:
        make()
    assert (err.value.item, err.value.field) == (item, field)


@pytest.mark.parametrize(
    ("kwargs", "error", "text"),
    [
        ({"write_back": "sometimes"}, ValueError, "write_back='sometimes'"),
        ({"source_ranks": {"memory": 1}}, ValueError, "source_ranks"),
        (
            {
                "source_ranks": {
                    **dict.fromkeys(("user_explicit", "tool", "official", "memory", "inferred"), 1),
                    "rumour": 0,
                }
            },
            ValueError,
            "rumour",
        ),
        (
            {
                "source_ranks": {
                    **dict.fromkeys(("user_explicit", "tool", "official", "memory"), 1),
                    "inferred": 0.5,
                }
            },
            TypeError,
            "inferred",
        ),
        ({"inject_inferred": 1}, TypeError, "inject_inferred"),
        ({"keep_history": "no"}, TypeError, "keep_history"),
        ({"version": 0}, ValueError, "version"),
    ],
)
def test_policy_is_validated_at_construction(
    kwargs: dict[str, Any], error: type, text: str
) -> None:
    with pytest.raises(error, match=text):
        MemoryPolicy(**kwargs)


def test_source_ranks_are_configurable() -> None:
    ranks = {"user_explicit": 5, "tool": 1, "official": 3, "memory": 2, "inferred": 0}
    v = resolve_memory(
        [rec("t", "a", source="tool"), rec("m", "b")],
        now=NOW,
        scopes=[U],
        policy=MemoryPolicy(source_ranks=ranks),
    )
    assert [r.id for r in v.inject] == ["m"]


# -- laws ------------------------------------------------------------------------------------

DAY0 = datetime(2026, 1, 1, tzinfo=UTC)


@st.composite
def record_lists(draw: Any, max_size: int = 8) -> list[MemoryRecord]:
    out = []
    for i in range(draw(st.integers(0, max_size))):
        out.append(
            MemoryRecord(
                f"r{i}",
                draw(st.sampled_from(["fmt", "fmt", "lang"])),
                draw(st.sampled_from(["pdf", "md", "PDF", "html"])),
                source=draw(
                    st.sampled_from(
                        ["user_explicit", "tool", "official", "memory", "memory", "inferred"]
                    )
                ),
                scope=draw(st.sampled_from([U, U, None, "user:bob"])),
                confidence=draw(st.none() | st.sampled_from([0.2, 0.5, 0.9])),
                created_at=draw(
                    st.none() | st.integers(0, 120).map(lambda d: DAY0 + timedelta(days=d))
                ),
                valid_until=draw(
                    st.none() | st.integers(0, 120).map(lambda d: DAY0 + timedelta(days=d))
                ),
                status=draw(
                    st.sampled_from(
                        [
                            "active",
                            "active",
                            "active",
                            "pending",
                            "superseded",
                            "expired",
                            "deleted",
                        ]
                    )
                ),
                supersedes=draw(
                    st.lists(st.sampled_from([f"r{j}" for j in range(max_size)]), max_size=1)
                ),
                persist=draw(st.booleans()),
            )
        )
    return out


LAWS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
POLICIES = st.sampled_from(
    [
        MemoryPolicy(),
        MemoryPolicy(inject_inferred=True, write_back="always"),
        MemoryPolicy(keep_history=True),
    ]
)


@LAWS
@given(records=record_lists(), policy=POLICIES, data=st.data())
def test_law_order_invariance_and_determinism(
    records: list[MemoryRecord], policy: MemoryPolicy, data: Any
) -> None:
    now = DAY0 + timedelta(days=60)
    first = resolve_memory(records, now=now, scopes=[U], policy=policy)
    shuffled = data.draw(st.permutations(records))
    assert resolve_memory(shuffled, now=now, scopes=[U], policy=policy) == first


@LAWS
@given(records=record_lists(), policy=POLICIES)
def test_law_every_record_is_injected_or_listed_once(
    records: list[MemoryRecord], policy: MemoryPolicy
) -> None:
    v = resolve_memory(records, now=DAY0 + timedelta(days=60), scopes=[U], policy=policy)
    parts = [
        [r.id for r in v.inject],
        list(v.superseded_ids),
        list(v.expired_ids),
        list(v.excluded),
    ]
    flat = [i for part in parts for i in part]
    assert len(flat) == len(set(flat)) and set(flat) == {r.id for r in records}
    for r in v.inject:
        assert r.scope in (U, None) and r.status == "active"
        assert r.until is None or r.until >= DAY0 + timedelta(days=60)
    assert len({r.key for r in v.inject}) == len(v.inject) or policy.keep_history


@LAWS
@given(records=record_lists(), value=st.sampled_from(["pdf", "md", "txt"]))
def test_law_a_current_explicit_instruction_wins_its_key(
    records: list[MemoryRecord], value: str
) -> None:
    current = [r for r in records if not (r.source == "user_explicit" and r.key == "fmt")]
    now = MemoryRecord(
        "now", "fmt", value, source="user_explicit", scope=U, created_at=DAY0 + timedelta(days=200)
    )
    v = resolve_memory([*current, now], now=DAY0 + timedelta(days=60), scopes=[U])
    assert v.facts.get("fmt") == value and "fmt" not in v.clarify_keys


# -- store helpers --------------------------------------------------------------------------


@pytest.fixture(params=["memory", "sqlite"])
def store(request: Any, tmp_path: Any) -> Iterator[BaseStore]:
    if request.param == "memory":
        yield InMemoryStore()
    else:
        conn = sqlite3.connect(
            str(tmp_path / "store.sqlite"), check_same_thread=False, isolation_level=None
        )
        s = SqliteStore(conn)
        s.setup()
        yield s
        conn.close()


def test_store_round_trip_and_namespaces(store: BaseStore) -> None:
    ns = memory_namespace("alice@example.com")
    records = [
        replace(PDF, valid_until="2027-01-01", supersedes=("x",)),
        rec("l", ["fr", "en"], key="lang"),
    ]
    records += [rec(f"bulk{i:03}", i, key=f"k{i}") for i in range(150)]  # more than a page
    save_memories(store, ns, records)
    save_memories(store, (*ns, "archive"), [rec("sub", "x")])  # a sub-namespace is not read
    save_memories(store, memory_namespace("alice@example2com"), [rec("other", "x")])
    loaded = load_memories(store, ns)
    assert loaded == sorted(records, key=lambda r: r.id)
    save_memories(store, ns, records)  # idempotent
    assert len(load_memories(store, ns)) == len(records)


def test_confirm_pending_inferred_record(store: BaseStore) -> None:
    ns = memory_namespace("alice")
    save_memories(store, ns, [rec("i", "html", source="inferred", status="pending")])
    assert resolve_memory(load_memories(store, ns), now=NOW, scopes=[U]).inject == ()
    assert confirm_memory(store, ns, "missing") is None
    confirmed = confirm_memory(store, ns, "i")
    assert confirmed is not None and (confirmed.status, confirmed.source) == ("active", "memory")
    assert resolve_memory(load_memories(store, ns), now=NOW, scopes=[U]).facts == {"fmt": "html"}


def test_bad_stored_value_names_the_key(store: BaseStore) -> None:
    ns = memory_namespace("alice")
    store.put(ns, "broken", {"key": "fmt", "value": "pdf", "created_at": "someday"})
    with pytest.raises(InvalidInputError) as err:
        load_memories(store, ns)
    assert (err.value.item, err.value.field) == ("broken", "created_at")
    store.put(ns, "broken", {"id": "other", "key": "fmt", "value": "pdf"})
    with pytest.raises(InvalidInputError, match="differs from the store key"):
        load_memories(store, ns)


async def test_async_helpers(store: BaseStore) -> None:
    """Async API where the store has one; SqliteStore (sync only) falls back to sync calls."""
    ns = memory_namespace("alice")
    await asave_memories(store, ns, [PDF, rec("i", "html", source="inferred", status="pending")])
    assert [r.id for r in await aload_memories(store, ns)] == ["i", "m_pdf"]
    confirmed = await aconfirm_memory(store, ns, "i")
    assert confirmed is not None and confirmed.status == "active"
    assert await aconfirm_memory(store, ns, "nope") is None


@pytest.mark.parametrize("bad", [("a.b",), (), ("",), ("ok", 3)])
def test_namespace_is_validated(bad: Any) -> None:
    with pytest.raises(ValueError, match="namespace"):
        load_memories(InMemoryStore(), bad)


def test_namespace_label_is_injective() -> None:
    labels = {namespace_label(s) for s in ["a.b", "a%2Eb", "a%b", "a%25b", "ab"]}
    assert len(labels) == 5 and not any("." in label for label in labels)


@pytest.mark.postgres
def test_postgres_store_round_trip(postgres_url: str) -> None:
    from langgraph.store.postgres import PostgresStore

    with PostgresStore.from_conn_string(postgres_url) as pg:
        pg.setup()
        ns = memory_namespace("alice@example.com", prefix=("agent_guards_test", "memories"))
        records = [
            PDF,
            replace(MD_NOW, persist=True),
            rec("i", "html", source="inferred", status="pending"),
        ]
        save_memories(pg, ns, records)
        assert load_memories(pg, ns) == sorted(records, key=lambda r: r.id)
        v = resolve_memory(load_memories(pg, ns), now=NOW, scopes=[U])
        save_memories(pg, ns, v.writes)
        after = resolve_memory(load_memories(pg, ns), now=NOW, scopes=[U])
        assert after.facts == {"fmt": "markdown"} and "m_pdf" in after.superseded_ids
        assert confirm_memory(pg, ns, "i") is not None


# -- LLM extractor -----------------------------------------------------------------------------


def test_llm_extractor_only_extracts() -> None:
    model = ScriptedChatModel(
        script=[{"facts": [{"key": "report_format", "value": "markdown", "persist": False}]}]
    )
    extract = LLMFactExtractor(model)
    state = {"messages": [HumanMessage("Markdown this time please"), AIMessage("ok")]}
    assert extract(state, {}) == [{"key": "report_format", "value": "markdown", "persist": False}]
    sent = model.calls[0]
    assert sent[-1].content == "Markdown this time please" and "explicitly" in sent[0].content
    assert extract({"messages": [AIMessage("no user turn")]}, {}) == []
    assert len(model.calls) == 1


async def test_llm_extractor_async() -> None:
    model = ScriptedChatModel(script=[{"facts": []}])
    assert await LLMFactExtractor(model).acall({"messages": [HumanMessage("hi")]}, {}) == []


def test_llm_extractor_needs_structured_output() -> None:
    with pytest.raises(TypeError, match="with_structured_output"):
        LLMFactExtractor(object())


def test_verdict_type() -> None:
    assert isinstance(resolve_memory([], now=NOW), MemoryVerdict)


@pytest.mark.parametrize("until", ["2026-06-30", date(2026, 6, 30)])
def test_a_date_alone_in_valid_until_covers_that_whole_day(until: Any) -> None:
    record = MemoryRecord("m", "tz", "CET", valid_until=until)
    for now, facts in (
        ("2026-06-30T00:00:01", {"tz": "CET"}),
        ("2026-06-30T23:59:00", {"tz": "CET"}),
        ("2026-07-01T00:00:00", {}),
    ):
        assert resolve_memory([record], now=now).facts == facts, now
    timed = MemoryRecord("m", "tz", "CET", valid_until="2026-06-30T00:00:00")
    assert resolve_memory([timed], now="2026-06-30T00:00:01").facts == {}  # a time is exact


@pytest.mark.parametrize(("field", "value"), [("created_at", "2024"), ("valid_until", "2024-05")])
def test_a_date_without_a_day_is_refused_naming_the_record_and_field(
    field: str, value: str
) -> None:
    # a year or a month alone cannot order two records (docs/memory_resolve.md says so)
    with pytest.raises(InvalidInputError) as err:
        MemoryRecord("m1", "report_format", "pdf", **{field: value})
    assert (err.value.item, err.value.field) == ("m1", field)
