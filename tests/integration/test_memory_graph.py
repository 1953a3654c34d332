"""memory_resolve inside compiled graphs: store write-back, scopes, checkpoints, replay."""

from __future__ import annotations

import logging
import sqlite3
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import HumanMessage, SystemMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.serde.event_hooks import register_serde_event_listener
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.store.base import BaseStore
from langgraph.store.memory import InMemoryStore
from langgraph.store.sqlite import SqliteStore
from langgraph.types import Command, interrupt

from agent_guards.core import GuardDecision, Verdict
from agent_guards.memory_resolve import (
    LLMFactExtractor,
    MemoryPolicy,
    MemoryRecord,
    MemoryState,
    MemoryVerdict,
    create_memory_resolve,
    format_memories,
    load_memories,
    memory_namespace,
    save_memories,
)
from agent_guards.testing import ScriptedChatModel

NOW = "2026-04-01T00:00:00+00:00"
ALICE = "user:alice"
PDF = MemoryRecord("m_pdf", "report_format", "pdf", scope=ALICE, created_at="2026-01-01")


class State(MessagesState, MemoryState):
    pass


def build(model: ScriptedChatModel | None = None, **options: Any) -> StateGraph:
    model = model or ScriptedChatModel(script=["ok"], repeat_last=True)

    def respond(state: State) -> dict[str, Any]:
        memories = format_memories(state["memory_verdict"]) if state.get("memory_verdict") else ""
        return {
            "messages": [
                model.invoke([SystemMessage(f"Memories:\n{memories}"), *state["messages"]])
            ]
        }

    builder = StateGraph(State)
    builder.add_node("memory_resolve", create_memory_resolve(**options))
    builder.add_node("respond", respond)
    builder.add_edge(START, "memory_resolve")
    builder.add_edge("memory_resolve", "respond")
    builder.add_edge("respond", END)
    return builder


def cfg(thread: str, principal: Any = ALICE, **configurable: Any) -> RunnableConfig:
    extra = {"principal": principal} if principal is not None else {}
    return {"configurable": {"thread_id": thread, "agent_guards_now": NOW, **extra, **configurable}}


def sqlite_saver(path: Path) -> SqliteSaver:
    return SqliteSaver(sqlite3.connect(str(path), check_same_thread=False))


@pytest.fixture(params=["memory", "sqlite"])
def store(request: Any, tmp_path: Path) -> Iterator[BaseStore]:
    if request.param == "memory":
        yield InMemoryStore()
        return
    conn = sqlite3.connect(
        str(tmp_path / "store.sqlite"), check_same_thread=False, isolation_level=None
    )
    s = SqliteStore(conn)
    s.setup()
    yield s
    conn.close()


@pytest.fixture
def strict_serde(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    events: list[Any] = []
    unregister = register_serde_event_listener(events.append)
    with warnings.catch_warnings(), caplog.at_level(logging.WARNING):
        warnings.simplefilter("error")
        yield
    unregister()
    assert events == []
    assert [r.getMessage() for r in caplog.records if r.name.startswith("langgraph")] == []


NS = memory_namespace(ALICE)


def test_seed_markdown_this_time_then_pdf_again(
    tmp_path: Path, store: BaseStore, strict_serde: None
) -> None:
    save_memories(store, NS, [PDF])
    model = ScriptedChatModel(script=["here is markdown", "here is pdf"])
    graph = build(model).compile(checkpointer=sqlite_saver(tmp_path / "cp.sqlite"), store=store)
    config = cfg("seed")
    turn = graph.invoke(
        {
            "messages": [HumanMessage("这次请给 Markdown。")],
            "memory_facts": [{"key": "report_format", "value": "Markdown"}],
        },
        config,
    )
    v = turn["memory_verdict"]
    assert (v.facts, v.excluded, v.decision.reason) == (
        {"report_format": "Markdown"},
        {"m_pdf": "overridden_by:" + v.inject[0].id},
        "current_turn_override",
    )
    assert "Markdown" in model.calls[0][0].content and "pdf" not in model.calls[0][0].content
    assert load_memories(store, NS) == [PDF], "a one-off instruction writes nothing back"
    assert turn["memory_facts"] == [], "facts are consumed"
    nxt = graph.invoke({"messages": [HumanMessage("report again")]}, config)
    assert nxt["memory_verdict"].facts == {"report_format": "pdf"}
    restored = (
        build()
        .compile(checkpointer=sqlite_saver(tmp_path / "cp.sqlite"), store=store)
        .get_state(config)
        .values
    )
    assert (
        type(restored["memory_verdict"]) is MemoryVerdict
        and restored["memory_verdict"] == nxt["memory_verdict"]
    )
    assert (
        all(type(d) is GuardDecision for d in restored["guard_log"])
        and len(restored["guard_log"]) == 2
    )


def test_lasting_instruction_writes_a_supersede_chain(store: BaseStore, strict_serde: None) -> None:
    save_memories(store, NS, [PDF])
    graph = build().compile(checkpointer=InMemorySaver(), store=store)
    graph.invoke(
        {
            "messages": [],
            "memory_facts": [
                {"id": "f1", "key": "report_format", "value": "markdown", "persist": True}
            ],
        },
        cfg("t1"),
    )
    stored = {r.id: r for r in load_memories(store, NS)}
    assert (
        stored["m_pdf"].status,
        stored["f1"].status,
        stored["f1"].supersedes,
        stored["f1"].source,
    ) == ("superseded", "active", ("m_pdf",), "memory")
    later = graph.invoke({"messages": []}, cfg("another-thread"))
    assert later["memory_verdict"].facts == {"report_format": "markdown"}
    assert later["memory_verdict"].superseded_ids == ("m_pdf",)


def test_principal_picks_namespace_and_scopes(store: BaseStore) -> None:
    save_memories(store, NS, [PDF])
    save_memories(
        store,
        memory_namespace("user:bob"),
        [MemoryRecord("b1", "report_format", "html", scope="user:bob")],
    )
    graph = build().compile(checkpointer=InMemorySaver(), store=store)
    foreign = MemoryRecord("b2", "lang", "de", scope="user:bob")
    alice = graph.invoke({"messages": [], "memory_records": [foreign]}, cfg("a"))
    assert alice["memory_verdict"].facts == {"report_format": "pdf"}
    assert alice["memory_verdict"].excluded == {"b2": "out_of_scope"}
    bob = graph.invoke({"messages": []}, cfg("b", principal=["user:bob", "team:x"]))
    assert bob["memory_verdict"].facts == {"report_format": "html"}
    anonymous = graph.invoke(
        {"messages": [], "memory_records": [foreign]}, cfg("n", principal=None)
    )
    assert (anonymous["memory_verdict"].inject, anonymous["memory_verdict"].decision.reason) == (
        (),
        "no_memory",
    )


def test_a_bad_stored_record_is_left_out_with_its_reason_and_the_rest_is_used(
    store: BaseStore,
) -> None:
    """One malformed item never disables memory_resolve: it is reported (item and field)
    and left out; the turn's own instruction still overrides the stored preference."""
    save_memories(store, NS, [PDF])
    store.put(NS, "broken", {"key": "report_format", "value": "pdf", "confidence": 7})
    graph = build().compile(checkpointer=InMemorySaver(), store=store)
    out = graph.invoke(
        {
            "messages": [],
            "memory_facts": [{"key": "report_format", "value": "md", "persist": True}],
        },
        cfg("bad"),
    )
    skipped, resolved = out["guard_log"][-2:]
    assert (skipped.verdict, skipped.reason, skipped.data["item"], skipped.data["field"]) == (
        Verdict.CONTINUE,
        "invalid_input",
        "broken",
        "confidence",
    )
    assert resolved.reason == "current_turn_override"
    assert [r.value for r in out["memory_verdict"].inject] == ["md"]
    assert store.get(NS, "m_pdf").value["status"] == "superseded"


async def test_sync_and_async_agree() -> None:
    facts = [{"key": "report_format", "value": "md", "persist": True}]
    results = []
    for use_async in (False, True):
        store = InMemoryStore()
        save_memories(store, NS, [PDF])
        graph = build().compile(checkpointer=InMemorySaver(), store=store)
        inp = {"messages": [], "memory_facts": facts}
        out = await graph.ainvoke(inp, cfg("x")) if use_async else graph.invoke(inp, cfg("x"))
        results.append((out["memory_verdict"], out["guard_log"], load_memories(store, NS)))
    assert results[0] == results[1]
    assert results[0][1][0].at == results[1][1][0].at == NOW


@pytest.mark.parametrize("use_async", [False, True])
async def test_interrupt_in_the_extractor_passes_through(use_async: bool) -> None:
    def extractor(state: Any, config: RunnableConfig) -> list[dict[str, Any]]:
        value = interrupt({"ask": "which format?"})
        return [{"key": "report_format", "value": value}]

    graph = build(extractor=extractor).compile(checkpointer=InMemorySaver(), store=InMemoryStore())
    config = cfg(f"i{use_async}")
    first = (
        await graph.ainvoke({"messages": []}, config)
        if use_async
        else graph.invoke({"messages": []}, config)
    )
    assert first["__interrupt__"][0].value == {"ask": "which format?"}
    assert not first.get("guard_log")
    done = graph.invoke(Command(resume="html"), config)
    assert done["memory_verdict"].facts == {"report_format": "html"}


async def test_llm_extractor_in_a_graph() -> None:
    extract_model = ScriptedChatModel(
        script=[{"facts": [{"key": "report_format", "value": "markdown"}]}], repeat_last=True
    )
    store = InMemoryStore()
    save_memories(store, NS, [PDF])
    graph = build(extractor=LLMFactExtractor(extract_model)).compile(store=store)
    out = graph.invoke({"messages": [HumanMessage("Markdown this time")]}, cfg("llm"))
    assert out["memory_verdict"].facts == {"report_format": "markdown"}
    aout = await graph.ainvoke({"messages": [HumanMessage("Markdown this time")]}, cfg("llm"))
    assert aout["memory_verdict"] == out["memory_verdict"]
    assert load_memories(store, NS) == [PDF]


def test_replay_of_a_lasting_turn_gives_the_same_injection(tmp_path: Path) -> None:
    store = InMemoryStore()
    save_memories(store, NS, [PDF])
    graph = build().compile(checkpointer=sqlite_saver(tmp_path / "cp.sqlite"), store=store)
    config = cfg("replay")
    out = graph.invoke(
        {
            "messages": [],
            "memory_facts": [{"key": "report_format", "value": "md", "persist": True}],
        },
        config,
    )
    written = load_memories(store, NS)
    before = next(s for s in graph.get_state_history(config) if s.next == ("memory_resolve",))
    replayed = graph.invoke(
        None,
        {
            **before.config,
            "configurable": {
                **before.config["configurable"],
                "agent_guards_now": NOW,
                "principal": ALICE,
            },
        },
    )

    def injected(v: MemoryVerdict) -> list[tuple[str, Any, str]]:
        return [(r.id, r.value, r.source) for r in v.inject]

    assert injected(replayed["memory_verdict"]) == injected(out["memory_verdict"])
    assert load_memories(store, NS) == written, "the write-back is idempotent"


def test_explicit_store_option_and_custom_namespace() -> None:
    store = InMemoryStore()
    save_memories(store, ("tenant", "alice"), [PDF])
    node = create_memory_resolve(
        store=store,
        namespace=lambda p: ("tenant", p.split(":")[1]),
        policy=MemoryPolicy(write_back="never"),
    )
    out = node.invoke({"memory_facts": []}, cfg("n"))
    assert out["memory_verdict"].facts == {"report_format": "pdf"}
    assert out["memory_verdict"].verdict is Verdict.CONTINUE


@pytest.mark.parametrize(
    ("kwargs", "error", "text"),
    [
        ({"facts_key": ""}, ValueError, "facts_key"),
        ({"policy": "strict"}, TypeError, "MemoryPolicy"),
        ({"extractor": "llm"}, TypeError, "extractor"),
        ({"namespace": ("memories",)}, TypeError, "namespace"),
    ],
)
def test_factory_rejects_bad_options(kwargs: dict[str, Any], error: type, text: str) -> None:
    with pytest.raises(error, match=text):
        create_memory_resolve(**kwargs)


def test_docs_example_runs_and_prints_what_it_shows(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """docs/memory_resolve.md: the example imports public names from ``agent_guards``."""
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs" / "memory_resolve.md").read_text()
    blocks = re.findall(r"```(\w+)\n(.*?)```", text, re.S)
    [(code, shown)] = [
        (c, blocks[i + 1][1]) for i, (lang, c) in enumerate(blocks) if lang == "python"
    ]
    exec(compile(code, "memory_resolve.md", "exec"), {"__name__": "__doc_example__"})
    assert capsys.readouterr().out.strip() == shown.strip()


def test_memories_stored_the_langgraph_docs_way_are_read_and_a_bad_one_is_left_out(
    store: BaseStore,
) -> None:
    """``store.put(ns, key, {"data": ...})`` as LangGraph's memory docs write them: read as
    free-text memories; one malformed item is left out with its reason, the rest still used."""
    ns = memory_namespace(ALICE)
    save_memories(store, ns, [PDF])
    store.put(ns, "m_pizza", {"data": "User likes pizza"})
    store.put(ns, "m_bad", {"key": "tz"})  # no value: not a record
    out = build().compile(store=store).invoke({"messages": [HumanMessage("hi")]}, cfg("t-docs"))
    injected = {r.id: r.value for r in out["memory_verdict"].inject}
    assert injected == {"m_pdf": "pdf", "m_pizza": "User likes pizza"}
    skipped = [d for d in out["guard_log"] if d.reason == "invalid_input"]
    assert [(d.verdict, d.dropped_ids) for d in skipped] == [(Verdict.CONTINUE, ("m_bad",))]
    assert 'memory:m_pizza: "User likes pizza"' in format_memories(out["memory_verdict"])


def test_a_rejected_turn_still_leaves_a_verdict_to_read() -> None:
    """Bad facts abstain; ``state["memory_verdict"]`` is an empty verdict, never a KeyError."""
    graph = build().compile(store=InMemoryStore())
    state = {"messages": [HumanMessage("hi")], "memory_facts": ["not a fact"]}
    out = graph.invoke(state, cfg("t-bad"))
    assert out["memory_verdict"].decision.reason == "invalid_input"
    assert format_memories(out["memory_verdict"]) == ""


def test_a_malformed_fact_without_an_id_is_named_by_its_position() -> None:
    """A fact has no id of its own: the error names memory_facts[1], not the id the node
    made for it, and nothing is injected."""
    from agent_guards import MemoryState, create_memory_resolve

    graph = StateGraph(MemoryState).add_node("m", create_memory_resolve()).add_edge(START, "m")
    facts = [{"key": "lang", "value": "fr"}, {"value": "markdown"}]
    out = graph.compile(store=InMemoryStore()).invoke(
        {"memory_facts": facts}, {"configurable": {"principal": "ann"}}
    )
    decision = out["guard_log"][-1]
    assert decision.reason == "invalid_input"
    assert decision.detail == "item 'memory_facts[1]' field 'key': missing required key 'key'"
    assert out["memory_verdict"].inject == ()


def _one_turn(facts: list[dict[str, Any]]) -> dict[str, Any]:
    from agent_guards import MemoryState, create_memory_resolve

    graph = StateGraph(MemoryState).add_node("m", create_memory_resolve()).add_edge(START, "m")
    return graph.compile(store=InMemoryStore()).invoke(
        {"memory_facts": facts}, {"configurable": {"principal": "ann"}}
    )


def test_a_fact_stated_twice_in_a_turn_is_one_fact() -> None:
    lang = {"key": "lang", "value": "fr"}
    out = _one_turn([lang, {"key": "tz", "value": "CET"}, dict(lang)])
    assert out["guard_log"][-1].reason != "invalid_input"
    assert out["memory_verdict"].facts == {"lang": "fr", "tz": "CET"}


def test_two_different_facts_with_one_id_are_named_by_position_or_id() -> None:
    lang = {"key": "lang", "value": "fr"}
    decision = _one_turn([lang, {**lang, "persist": True}])["guard_log"][-1]
    assert decision.reason == "invalid_input"
    assert decision.detail.startswith("item 'memory_facts[1]' field 'key': ")
    assert "memory_facts[0]" in decision.detail and "turn-" not in decision.detail
    given = [{**lang, "id": "x"}, {"key": "lang", "value": "de", "id": "x"}]
    decision = _one_turn(given)["guard_log"][-1]
    assert decision.detail == "item 'x' field 'id': duplicate id"


@pytest.mark.parametrize(
    ("store", "configurable", "code", "fix"),
    [
        (None, {"principal": ALICE}, "no_store", "compile the graph with store="),
        (InMemoryStore(), {"user_id": ALICE}, "no_principal", "principal_key="),
    ],
)
def test_a_run_that_cannot_reach_long_term_memory_says_why_and_names_the_fix(
    store: BaseStore | None, configurable: dict[str, Any], code: str, fix: str
) -> None:
    """Without a store, or with one but no principal to keep memories under, nothing is read
    and the explicit instruction is not kept: the decision says so instead of "no memory"."""
    graph = build().compile(store=store)
    fact = {"key": "report_format", "value": "markdown", "source": "user_explicit",
            "persist": True}  # fmt: skip
    config = {"configurable": {"thread_id": "t", "agent_guards_now": NOW, **configurable}}
    out = graph.invoke({"messages": [HumanMessage("hi")], "memory_facts": [fact]}, config)
    decision = out["memory_verdict"].decision
    assert decision.data["long_term"] == code and fix in decision.detail
    assert out["memory_verdict"].facts == {"report_format": "markdown"}  # this turn still wins
    if store is not None:
        assert store.search(("memories",)) == []  # nothing written under no principal
    # with both, the store is used and the decision carries no such note
    both = (
        build()
        .compile(store=InMemoryStore())
        .invoke({"messages": [HumanMessage("hi")], "memory_facts": [fact]}, cfg("t2"))
    )
    assert "long_term" not in both["memory_verdict"].decision.data


@pytest.mark.parametrize("sqlite", [False, True])
def test_a_ttl_is_passed_where_the_store_has_ttl_and_left_out_where_not(sqlite: bool) -> None:
    import asyncio
    import sqlite3

    from langgraph.store.sqlite import SqliteStore

    from agent_guards import MemoryRecord
    from agent_guards.memory_resolve import (
        asave_memories,
        load_memories,
        memory_namespace,
        save_memories,
    )

    conn = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
    store: BaseStore = SqliteStore(conn) if sqlite else InMemoryStore()
    if isinstance(store, SqliteStore):
        store.setup()
    ns = memory_namespace("ann")
    save_memories(store, ns, [MemoryRecord("m1", "lang", "fr")], ttl_minutes=60)
    asyncio.run(asave_memories(store, ns, [MemoryRecord("m2", "tz", "CET")], ttl_minutes=60))
    assert sorted(r.id for r in load_memories(store, ns)) == ["m1", "m2"]
    if sqlite:
        expiring = conn.execute("select count(*) from store where expires_at is not null")
        assert expiring.fetchone() == (2,)
    with pytest.raises(ValueError, match="ttl_minutes must be a positive number"):
        save_memories(store, ns, [MemoryRecord("m3", "k", "v")], ttl_minutes=0)
