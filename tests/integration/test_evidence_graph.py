"""evidence_resolve inside compiled graphs: routes, checkpoints, permissions, replay."""

from __future__ import annotations

import logging
import sqlite3
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.documents import Document
from langchain_core.messages import HumanMessage, SystemMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.serde.event_hooks import register_serde_event_listener
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.types import Command, interrupt

from agent_guards.core import GuardDecision, Verdict
from agent_guards.evidence_resolve import (
    Evidence,
    EvidencePolicy,
    EvidenceState,
    EvidenceVerdict,
    add_evidence_resolve,
    create_evidence_resolve,
    create_evidence_route,
)
from agent_guards.testing import ScriptedChatModel

NOW = "2026-06-01T00:00:00+00:00"


class State(MessagesState, EvidenceState):
    pass


def seed_docs() -> list[Document]:
    meta = {"claim_key": "approval_limit", "source_type": "official"}
    return [
        Document(
            "Contracts over 100w need review.",
            id="policy_2024",
            metadata={
                **meta,
                "value": "100w",
                "version": "2024",
                "updated_at": "2024-06-01",
                "confidence": 0.95,
            },
        ),
        Document(
            "Contracts over 50w need review.",
            id="policy_2026",
            metadata={
                **meta,
                "value": "50w",
                "version": "2026",
                "updated_at": "2026-01-01",
                "confidence": 0.93,
            },
        ),
        Document(
            "Important contracts need approval records.",
            id="faq",
            metadata={
                "claim_key": "approval_records",
                "value": "keep records",
                "source_type": "internal",
            },
        ),
    ]


def build(
    model: ScriptedChatModel | None = None, *, policy: EvidencePolicy | None = None
) -> StateGraph:
    model = model or ScriptedChatModel(script=["answer"], repeat_last=True)

    def answer(state: State) -> dict[str, Any]:
        v = state["evidence_verdict"]
        facts = f"Answer with {v.value!r}, cite {', '.join(v.selected_ids)}; conflicting: {v.conflicting_ids}"
        return {"messages": [model.invoke([SystemMessage(facts), *state["messages"]])]}

    def said(text: str) -> Any:
        def node(state: State) -> dict[str, Any]:
            return {"messages": [HumanMessage(text, name="system")]}

        return node

    builder = StateGraph(State)
    builder.add_node("answer", answer)
    builder.add_node("clarify", said("clarify"))
    builder.add_node("abstain", said("abstain"))
    builder.add_node("escalate", said("escalate"))
    add_evidence_resolve(builder, escalate="escalate", policy=policy)
    builder.add_edge(START, "evidence_resolve")
    for node in ("answer", "clarify", "abstain", "escalate"):
        builder.add_edge(node, END)
    return builder


def cfg(thread: str, **configurable: Any) -> RunnableConfig:
    return {"configurable": {"thread_id": thread, "agent_guards_now": NOW, **configurable}}


def sqlite(path: Path) -> SqliteSaver:
    return SqliteSaver(sqlite3.connect(str(path), check_same_thread=False))


@pytest.fixture
def strict_serde(caplog: pytest.LogCaptureFixture) -> Iterator[list[Any]]:
    """Warnings are errors; no serde event and no langgraph warning may be logged."""
    events: list[Any] = []
    unregister = register_serde_event_listener(events.append)
    with warnings.catch_warnings(), caplog.at_level(logging.WARNING):
        warnings.simplefilter("error")
        yield events
    unregister()
    assert events == []
    assert [r.getMessage() for r in caplog.records if r.name.startswith("langgraph")] == []


def test_seed_trace_answers_with_the_new_policy_and_round_trips_sqlite(
    tmp_path: Path, strict_serde: list[Any]
) -> None:
    model = ScriptedChatModel(script=["Over 50w needs review (policy_2026)."])
    db = tmp_path / "cp.sqlite"
    config = cfg("seed")
    question = HumanMessage("采购合同超过多少金额需要复核？")
    out = (
        build(model)
        .compile(checkpointer=sqlite(db))
        .invoke(
            {
                "messages": [question],
                "evidence": seed_docs(),
                "evidence_query": {"claim_key": "approval_limit"},
            },
            config,
        )
    )
    v = out["evidence_verdict"]
    assert (v.verdict, v.value, v.selected_ids, v.conflicting_ids, v.dropped_ids) == (
        Verdict.ANSWER,
        "50w",
        ("policy_2026",),
        ("policy_2024",),
        ("faq",),
    )
    prompt = model.calls[0][0].content
    assert "'50w'" in prompt and "100w" not in prompt.split("conflicting")[0]
    [decision] = out["guard_log"]
    assert (decision.guard, decision.reason, decision.at) == (
        "evidence_resolve",
        "newer_version",
        NOW,
    )
    assert isinstance(decision.step, int)
    # a fresh saver on the same file: nothing cached in memory
    restored = build().compile(checkpointer=sqlite(db)).get_state(config).values
    assert type(restored["evidence_verdict"]) is EvidenceVerdict
    assert restored["evidence_verdict"] == v and restored["evidence_verdict"].decision.at == NOW
    assert type(restored["guard_log"][0]) is GuardDecision and restored["guard_log"] == [decision]
    assert [type(d) for d in restored["evidence"]] == [Document] * 3


def test_multi_claim_and_evidence_objects_round_trip(
    tmp_path: Path, strict_serde: list[Any]
) -> None:
    items = [Evidence.from_document(d) for d in seed_docs()]
    db = tmp_path / "cp.sqlite"
    out = (
        build()
        .compile(checkpointer=sqlite(db))
        .invoke({"messages": [], "evidence": items}, cfg("multi"))
    )
    v = out["evidence_verdict"]
    assert (v.reason, set(v.claims)) == ("multiple_claims", {"approval_limit", "approval_records"})
    restored = build().compile(checkpointer=sqlite(db)).get_state(cfg("multi")).values
    assert restored["evidence_verdict"] == v and restored["evidence"] == items
    assert type(restored["evidence_verdict"].claims["approval_limit"]).__name__ == "ClaimVerdict"


CLOSE = [
    Evidence("a", "k", "1", source_type="official", updated_at="2026-01-01", confidence=0.9),
    Evidence("b", "k", "2", source_type="official", updated_at="2026-02-01", confidence=0.9),
]


@pytest.mark.parametrize(
    ("items", "policy", "route"),
    [
        (seed_docs()[:2], None, "answer"),
        (CLOSE, None, "clarify"),
        (CLOSE, EvidencePolicy(high_risk=True), "escalate"),
        ([], None, "abstain"),
        ([Evidence("x", "k", "1", flags=["injection"])], None, "abstain"),
        (
            [Evidence("a", "k", "1", entity="A"), Evidence("b", "k", "2", entity="B")],
            None,
            "clarify",
        ),
    ],
)
def test_routes(items: list[Any], policy: EvidencePolicy | None, route: str) -> None:
    out = build(policy=policy).compile().invoke({"messages": [], "evidence": items}, cfg("r"))
    assert out["evidence_verdict"].verdict.value == route
    last = out["messages"][-1].content if out["messages"] else "answer"
    assert last == route


def test_a_document_not_yet_effective_at_the_run_clock_is_set_aside() -> None:
    future = Document(
        "From July: 30w.",
        id="policy_2026b",
        metadata={
            "claim_key": "approval_limit",
            "value": "30w",
            "source_type": "official",
            "effective_at": "2026-07-01",
        },
    )
    out = (
        build().compile().invoke({"messages": [], "evidence": [*seed_docs()[:2], future]}, cfg("t"))
    )
    v = out["evidence_verdict"]
    assert (v.value, v.decision.data["dropped"]) == ("50w", {"policy_2026b": "not_yet_effective"})
    later = (
        build()
        .compile()
        .invoke(
            {"messages": [], "evidence": [*seed_docs()[:2], future]},
            cfg("t2", agent_guards_now="2026-08-01"),
        )
    )
    assert later["evidence_verdict"].value == "30w"


SECRET = Document(
    "Band C: 1.2M (confidential).",
    id="hr-band",
    metadata={
        "claim_key": "salary_band",
        "value": "SECRET-1.2M",
        "source_type": "official",
        "acl": ["hr"],
    },
)
PUBLIC = Document(
    "Bands are published yearly.",
    id="pub",
    metadata={"claim_key": "salary_band", "value": "see yearly bands", "source_type": "forum"},
)


def test_principal_comes_from_config_and_hidden_evidence_leaves_no_trace() -> None:
    graph = build().compile(checkpointer=InMemorySaver())
    updates = list(
        graph.stream(
            {"messages": [], "evidence": [SECRET, PUBLIC]},
            cfg("p1", principal="alice"),
            stream_mode="updates",
        )
    )
    [node_update] = [u["evidence_resolve"] for u in updates if "evidence_resolve" in u]
    dump = repr(node_update)
    assert "hr-band" not in dump and "SECRET" not in dump and "confidential" not in dump
    assert node_update["evidence_verdict"].value == "see yearly bands"
    hr = graph.invoke(
        {"messages": [], "evidence": [SECRET, PUBLIC]}, cfg("p2", principal=["bob", "hr"])
    )
    assert hr["evidence_verdict"].value == "SECRET-1.2M"
    nobody = graph.invoke({"messages": [], "evidence": [SECRET]}, cfg("p3"))
    assert (nobody["evidence_verdict"].reason, nobody["messages"][-1].content) == (
        "no_evidence",
        "abstain",
    )


def test_state_cannot_smuggle_a_principal() -> None:
    out = (
        build()
        .compile()
        .invoke(
            {"messages": [], "evidence": [SECRET], "evidence_query": {"principal": "hr"}}, cfg("s")
        )
    )
    assert out["guard_log"][-1].reason == "invalid_input"
    assert "evidence_verdict" not in out and out["messages"][-1].content == "abstain"


def test_bad_input_leaves_state_and_routes_abstain(tmp_path: Path) -> None:
    graph = build().compile(checkpointer=sqlite(tmp_path / "cp.sqlite"))
    config = cfg("bad")
    good = graph.invoke({"messages": [], "evidence": seed_docs()[:2]}, config)
    bad_doc = Document("?", id="broken", metadata={"claim_key": "approval_limit", "confidence": 2})
    out = graph.invoke({"messages": [], "evidence": [*seed_docs()[:2], bad_doc]}, config)
    last = out["guard_log"][-1]
    assert (last.reason, last.verdict, last.data["item"], last.data["field"]) == (
        "invalid_input",
        Verdict.ABSTAIN,
        "broken",
        "confidence",
    )
    assert out["evidence_verdict"] == good["evidence_verdict"], (
        "the previous verdict is left as it was"
    )
    assert out["messages"][-1].content == "abstain"


async def test_sync_and_async_agree() -> None:
    inp = {"messages": [], "evidence": [*seed_docs(), *CLOSE]}
    sync = build().compile().invoke(inp, cfg("a"))
    asyn = await build().compile().ainvoke(inp, cfg("a"))
    assert sync["evidence_verdict"] == asyn["evidence_verdict"]
    assert (
        sync["guard_log"] == asyn["guard_log"]
        and sync["guard_log"][0].at == asyn["guard_log"][0].at
    )
    node = create_evidence_resolve()
    state = {"evidence": seed_docs(), "evidence_query": {"claim_key": "approval_limit"}}
    assert node.invoke(state, cfg("n")) == await node.ainvoke(state, cfg("n"))


@pytest.mark.parametrize("use_async", [False, True])
async def test_interrupt_passes_through(use_async: bool) -> None:
    def ask(value: Any) -> str:
        return str(interrupt({"normalize": value}))

    graph = build(policy=EvidencePolicy(normalizer=ask)).compile(checkpointer=InMemorySaver())
    config = cfg(f"i{use_async}")
    inp = {"messages": [], "evidence": [Evidence("a", "k", "1")]}
    first = await graph.ainvoke(inp, config) if use_async else graph.invoke(inp, config)
    assert first["__interrupt__"][0].value == {"normalize": "1"}
    assert not first.get("guard_log"), "an interrupt is never turned into a decision"
    done = graph.invoke(Command(resume="one"), config)
    assert done["evidence_verdict"].verdict is Verdict.ANSWER


def test_route_labels_are_inferred_from_the_literal() -> None:
    builder = StateGraph(State)
    builder.add_node("evidence_resolve", create_evidence_resolve())
    for label in ("answer", "clarify", "abstain", "escalate"):
        builder.add_node(label, lambda s: {})
        builder.add_edge(label, END)
    builder.add_edge(START, "evidence_resolve")
    builder.add_conditional_edges("evidence_resolve", create_evidence_route())
    targets = {
        e.target for e in builder.compile().get_graph().edges if e.source == "evidence_resolve"
    }
    assert targets == {"answer", "clarify", "abstain", "escalate"}


def test_route_reads_dict_verdicts_and_custom_keys() -> None:
    route = create_evidence_route(output_key="v", name="ev2")
    assert route.invoke({"v": {"verdict": "clarify"}}) == "clarify"
    assert (
        route.invoke(
            {
                "v": {"verdict": "escalate"},
                "guard_log": [{"guard": "ev2", "reason": "invalid_input"}],
            }
        )
        == "abstain"
    )
    assert (
        route.invoke(
            {
                "v": {"verdict": "answer"},
                "guard_log": [{"guard": "other", "reason": "invalid_input"}],
            }
        )
        == "answer"
    )


def test_replay_from_a_checkpoint_gives_the_same_decision(tmp_path: Path) -> None:
    graph = build().compile(checkpointer=sqlite(tmp_path / "cp.sqlite"))
    config = cfg("replay")
    out = graph.invoke({"messages": [], "evidence": [*seed_docs(), *CLOSE]}, config)
    before = next(s for s in graph.get_state_history(config) if s.next == ("evidence_resolve",))
    replayed = graph.invoke(
        None,
        {
            **before.config,
            "configurable": {**before.config["configurable"], "agent_guards_now": NOW},
        },
    )
    assert replayed["evidence_verdict"] == out["evidence_verdict"]
    assert replayed["guard_log"][-1] == out["guard_log"][-1]


@pytest.mark.parametrize(
    ("kwargs", "error", "text"),
    [
        ({"evidence_key": ""}, ValueError, "evidence_key"),
        ({"principal_key": None}, ValueError, "principal_key"),
        ({"policy": {"high_risk": True}}, TypeError, "EvidencePolicy"),
        ({"use_clock": "yes"}, TypeError, "use_clock"),
    ],
)
def test_factory_rejects_bad_options(kwargs: dict[str, Any], error: type, text: str) -> None:
    with pytest.raises(error, match=text):
        create_evidence_resolve(**kwargs)


def test_add_evidence_resolve_rejects_bad_targets() -> None:
    with pytest.raises(ValueError, match="clarify"):
        add_evidence_resolve(StateGraph(State), clarify="")


def test_docs_example_runs_and_prints_what_it_shows(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """docs/evidence_resolve.md: the example imports public names from ``agent_guards``."""
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs" / "evidence_resolve.md").read_text()
    blocks = re.findall(r"```(\w+)\n(.*?)```", text, re.S)
    examples = [(c, blocks[i + 1][1]) for i, (lang, c) in enumerate(blocks) if lang == "python"]
    assert len(examples) >= 2  # the claim extractor and the graph
    namespace = {"__name__": "__doc_example__"}
    for n, (code, shown) in enumerate(examples):
        exec(compile(code, f"evidence_resolve.md block {n}", "exec"), namespace)
        assert capsys.readouterr().out.strip() == shown.strip()
