"""ClaimExtractor: Documents to Evidence with a scripted chat model (no network).

The model here is a tiny ``BaseChatModel`` that implements ``bind_tools`` and answers with a
tool call, so ``with_structured_output`` is langchain-core's own (tool calling + parser).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from typing import Any

import pytest
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.documents import Document
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langgraph.graph import END, START, StateGraph
from langgraph.store.memory import InMemoryStore
from pydantic import PrivateAttr

from agent_guards.core import InvalidInputError
from agent_guards.evidence_resolve import (
    ClaimExtractor,
    EvidenceState,
    create_evidence_resolve,
    resolve_evidence,
)

CHUNK = re.compile(r'<chunk id="([^"]+)">\n(.*?)\n</chunk>', re.S)
LIMIT = re.compile(r"over (\S+) need", re.I)


def read_limits(messages: list[BaseMessage]) -> dict[str, Any]:
    """A deterministic 'extraction': the approval limit each chunk states, if any."""
    claims = []
    for doc, text in CHUNK.findall(str(messages[-1].content)):
        found = LIMIT.search(text)
        if found:
            claims.append({"doc": doc, "claim_key": "approval_limit", "value": found.group(1)})
    return {"claims": claims}


class ToolModel(BaseChatModel):
    """Answers every call with one ``ExtractedClaims`` tool call built by ``respond``."""

    respond: Callable[[list[BaseMessage]], dict[str, Any]] = read_limits
    fail_on: frozenset[int] = frozenset()
    _calls: list[list[BaseMessage]] = PrivateAttr(default_factory=list)
    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)

    @property
    def _llm_type(self) -> str:
        return "tool-model"

    @property
    def calls(self) -> list[list[BaseMessage]]:
        return self._calls

    def bind_tools(self, tools: Any, **kwargs: Any) -> ToolModel:
        return self

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        with self._lock:
            self._calls.append(list(messages))
            n = len(self._calls)
        if n in self.fail_on:
            raise TimeoutError("the model timed out")
        call = {"name": "ExtractedClaims", "args": self.respond(messages), "id": f"call_{n}"}
        return ChatResult(generations=[ChatGeneration(message=AIMessage("", tool_calls=[call]))])


def doc(id: str, text: str, **metadata: Any) -> Document:
    return Document(text, id=id, metadata=metadata)


DOCS = [
    doc("p24", "Contracts over 100w need review.", source_type="official", updated_at="2024-06-01"),
    doc("p26", "Contracts over 50w need review.", source_type="official", updated_at="2026-01-01"),
    doc("faq", "Keep approval records.", source_type="internal"),
]


def test_documents_become_evidence_with_provenance_from_metadata() -> None:
    model = ToolModel()
    out = ClaimExtractor(model).extract(DOCS, claims=["approval_limit"])
    assert [(e.id, e.value, e.source_type, e.updated_at.year) for e in out.evidence] == [
        ("p24", "100w", "official", 2024),
        ("p26", "50w", "official", 2026),
    ]
    assert (out.calls, out.cached, out.empty, out.rejected) == (1, 0, ("faq",), {})
    assert out.evidence[0].text == DOCS[0].page_content
    v = resolve_evidence(out.evidence)  # the resolver decides, as for any evidence
    assert (v.value, v.reason, v.conflicting_ids) == ("50w", "newer_version", ("p24",))


def two_claims(messages: list[BaseMessage]) -> dict[str, Any]:
    """Each chunk states a limit and a currency (its last word)."""
    claims = []
    for doc_id, text in CHUNK.findall(str(messages[-1].content)):
        limit, currency = LIMIT.search(text), text.split()[-1].rstrip(".")
        claims += [
            {
                "doc": doc_id,
                "claim_key": "approval_limit",
                "value": limit.group(1) if limit else "",
            },
            {"doc": doc_id, "claim_key": "currency", "value": currency},
        ]
    return {"claims": claims}


def test_a_supersedes_link_to_a_document_names_each_of_its_claims() -> None:
    old = doc("p24", "Over 100w need review, in CNY.", source_type="official")
    new = doc(
        "p26", "Over 50w need review, in USD.", source_type="official", supersedes=["p24", "p26"]
    )
    out = ClaimExtractor(ToolModel(respond=two_claims)).extract(
        [old, new], claims=["approval_limit", "currency"]
    )
    by_id = {e.id: e for e in out.evidence}
    assert sorted(by_id) == ["p24#1", "p24#2", "p26#1", "p26#2"]
    assert by_id["p26#1"].supersedes == ("p24#1", "p24#2")  # never its own document's claims
    v = resolve_evidence(out.evidence, claim_key="approval_limit")
    assert (v.verdict.value, v.reason, v.value) == ("answer", "superseded", "50w")


def test_the_model_fills_entity_basis_and_date_only_where_metadata_is_silent() -> None:
    def respond(messages: list[BaseMessage]) -> dict[str, Any]:
        claim = {"claim_key": "limit", "value": "50w", "entity": "Acme", "effective_at": "2026"}
        return {"claims": [{"doc": "a", **claim}, {"doc": "b", **claim}]}

    docs = [doc("a", "..."), doc("b", "...", entity="Globex", effective_at="2025-03-01")]
    out = ClaimExtractor(ToolModel(respond=respond)).extract(docs, claims=["limit"])
    a, b = out.evidence
    assert (a.entity, a.effective_at) == ("Acme", "2026")
    assert (b.entity, b.effective_at.isoformat()) == ("Globex", "2025-03-01T00:00:00+00:00")


def test_batched_by_count_and_token_budget_in_id_order() -> None:
    docs = [doc(f"d{i:02d}", f"Contracts over {i}w need review.") for i in range(25)]
    model = ToolModel()
    out = ClaimExtractor(model, max_batch_docs=10).extract(docs, claims=["approval_limit"])
    assert (out.calls, len(model.calls), len(out.evidence)) == (3, 3, 25)
    long = [doc(f"L{i}", "x " * 4000) for i in range(3)]  # ~2,000 tokens each
    assert [len(b) for b in ClaimExtractor(ToolModel(), max_batch_tokens=3000).batches(long)] == [
        1,
        1,
        1,
    ]
    shuffled = ClaimExtractor(ToolModel(), max_batch_docs=10).extract(
        list(reversed(docs)), claims=["approval_limit"]
    )
    assert shuffled.evidence == out.evidence


def test_cached_by_document_id_content_and_question() -> None:
    cache: dict[str, Any] = {}
    model = ToolModel()
    first = ClaimExtractor(model, cache=cache).extract(DOCS, claims=["approval_limit"])
    again = ClaimExtractor(model, cache=cache).extract(DOCS, claims=["approval_limit"])
    assert (again.calls, again.cached, again.evidence) == (0, 3, first.evidence)
    edited = [DOCS[0], doc("p26", "Contracts over 40w need review.", source_type="official")]
    out = ClaimExtractor(model, cache=cache).extract(edited, claims=["approval_limit"])
    assert (out.calls, out.cached, [e.value for e in out.evidence]) == (1, 1, ["100w", "40w"])
    other = ClaimExtractor(model, cache=cache).extract(DOCS, claims=["currency"])
    assert other.calls == 1  # another question is not answered from this cache
    assert len(model.calls) == 3


def test_a_store_is_the_cache_and_the_extractor_holds_none() -> None:
    store = InMemoryStore()
    model = ToolModel()
    ClaimExtractor(model).extract(DOCS, claims=["approval_limit"], store=store)
    out = ClaimExtractor(ToolModel()).extract(DOCS, claims=["approval_limit"], store=store)
    assert (out.calls, out.cached) == (0, 3)
    bare = ClaimExtractor(model)
    bare.extract(DOCS, claims=["approval_limit"])
    bare.extract(DOCS, claims=["approval_limit"])
    assert len(model.calls) == 3  # no store, no cache: asked again (nothing kept on `bare`)
    assert not [k for k in vars(bare) if "cache" in k and vars(bare)[k]]


def test_model_failures_raise_unchanged_and_cache_nothing_of_the_failed_call() -> None:
    docs = [doc(f"d{i}", f"Contracts over {i}w need review.") for i in range(4)]
    cache: dict[str, Any] = {}
    failing = ToolModel(fail_on=frozenset({2}))
    with pytest.raises(TimeoutError, match="timed out"):
        ClaimExtractor(failing, cache=cache, max_batch_docs=2).extract(
            docs, claims=["approval_limit"]
        )
    assert len(cache) == 2  # the call that succeeded is kept, the failed one is not
    out = ClaimExtractor(ToolModel(), cache=cache, max_batch_docs=2).extract(
        docs, claims=["approval_limit"]
    )
    assert (out.calls, out.cached, len(out.evidence)) == (1, 2, 4)


def test_a_reply_that_is_not_the_schema_is_a_model_failure() -> None:
    broken = ToolModel(respond=lambda m: {"claims": [{"doc": "p24"}]})  # no claim_key, no value
    with pytest.raises(ValueError):
        ClaimExtractor(broken).extract(DOCS, claims=["approval_limit"])


def test_output_is_validated_before_arbitration() -> None:
    def respond(messages: list[BaseMessage]) -> dict[str, Any]:
        return {
            "claims": [
                {"doc": "p24", "claim_key": "approval_limit", "value": "100w"},
                {"doc": "p24", "claim_key": "approval_limit", "value": "100w", "entity": "x"},
                {"doc": "p26", "claim_key": "approval_limit", "value": "unknown"},
                {"doc": "p26", "claim_key": "headcount", "value": "12"},
                {"doc": "ghost", "claim_key": "approval_limit", "value": "1w"},
                {
                    "doc": "faq",
                    "claim_key": "approval_limit",
                    "value": "9w",
                    "effective_at": "soon",
                },
            ]
        }

    out = ClaimExtractor(ToolModel(respond=respond)).extract(DOCS, claims=["approval_limit"])
    assert [(e.id, e.value, e.entity) for e in out.evidence] == [
        ("p24#1", "100w", None),
        ("p24#2", "100w", "x"),
    ]
    assert out.rejected == {
        "faq/approval_limit": "item 'faq' field 'effective_at': not an ISO-8601 date/time: 'soon'",
        "ghost/approval_limit": "unknown chunk id 'ghost'",
        "p26/approval_limit": "no value stated",
        "p26/headcount": "claim key 'headcount' was not asked for",
    }
    assert out.empty == ("faq", "p26")


@pytest.mark.parametrize(
    ("make", "field"),
    [
        (lambda x: x.extract([Document("no id")], claims=["k"]), "id"),
        (lambda x: x.extract([DOCS[0], DOCS[0]], claims=["k"]), "id"),
        (lambda x: x.extract(DOCS), "claim_key"),
    ],
)
def test_bad_input_names_the_field(make: Any, field: str) -> None:
    with pytest.raises(InvalidInputError) as err:
        make(ClaimExtractor(ToolModel()))
    assert err.value.field == field


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"max_batch_tokens": 0}, ValueError),
        ({"max_batch_docs": True}, ValueError),
        ({"claims": [""]}, ValueError),
    ],
)
def test_options_are_validated(kwargs: dict[str, Any], error: type) -> None:
    with pytest.raises(error):
        ClaimExtractor(ToolModel(), **kwargs)
    with pytest.raises(TypeError, match="with_structured_output"):
        ClaimExtractor(object())


# -- in a graph ------------------------------------------------------------------------------


def graph(model: ToolModel, store: Any = None) -> Any:
    node = create_evidence_resolve(extractor=ClaimExtractor(model), use_clock=False)
    builder = StateGraph(EvidenceState).add_node("evidence_resolve", node)
    builder.add_edge(START, "evidence_resolve").add_edge("evidence_resolve", END)
    return builder.compile(store=store)


SECRET = doc(
    "board", "Contracts over 10w need review. SECRET", allowed=["board"], source_type="official"
)
QUERY = {"claim_key": "approval_limit"}


def test_the_node_extracts_raw_documents_and_the_resolver_decides() -> None:
    model, store = ToolModel(), InMemoryStore()
    app = graph(model, store)
    out = app.invoke({"evidence": [*DOCS, SECRET], "evidence_query": QUERY})
    v = out["evidence_verdict"]
    assert (v.verdict.value, v.value, v.selected_ids, v.conflicting_ids) == (
        "answer",
        "50w",
        ("p26",),
        ("p24",),
    )
    assert v.decision.data["extraction"] == {
        "documents": 3,
        "evidence": 2,
        "calls": 1,
        "cached": 0,
        "empty": ["faq"],
        "rejected": {},
    }
    sent = " ".join(str(m.content) for call in model.calls for m in call)
    assert "SECRET" not in sent and "board" not in sent  # hidden documents never reach the model
    again = app.invoke({"evidence": [*DOCS, SECRET], "evidence_query": QUERY})
    replayed = again["evidence_verdict"]
    assert (replayed.value, replayed.selected_ids, replayed.conflicting_ids) == (
        v.value,
        v.selected_ids,
        v.conflicting_ids,
    )
    assert replayed.decision.data["extraction"]["cached"] == 3
    assert len(model.calls) == 1  # replay reads the claims back from the store


def test_the_board_member_gets_the_hidden_document_extracted() -> None:
    model = ToolModel()
    out = graph(model, InMemoryStore()).invoke(
        {"evidence": [*DOCS, SECRET], "evidence_query": QUERY},
        {"configurable": {"principal": "board"}},
    )
    assert out["evidence_verdict"].decision.data["extraction"]["documents"] == 4


async def test_the_async_path_agrees() -> None:
    store = InMemoryStore()
    sync = graph(ToolModel(), store).invoke({"evidence": DOCS, "evidence_query": QUERY})
    model = ToolModel()
    done = await graph(model, InMemoryStore()).ainvoke({"evidence": DOCS, "evidence_query": QUERY})
    assert done["evidence_verdict"].value == sync["evidence_verdict"].value == "50w"
    assert len(model.calls) == 1


def test_no_claim_key_is_invalid_input_and_a_model_failure_raises() -> None:
    out = graph(ToolModel()).invoke({"evidence": DOCS})
    (decision,) = out["guard_log"]
    assert (decision.reason, decision.data["field"]) == ("invalid_input", "claim_key")
    with pytest.raises(TimeoutError):
        graph(ToolModel(fail_on=frozenset({1}))).invoke({"evidence": DOCS, "evidence_query": QUERY})


def test_without_an_extractor_raw_documents_are_invalid_input() -> None:
    out = create_evidence_resolve().invoke({"evidence": DOCS})
    assert (out["guard_log"][0].reason, out["guard_log"][0].data["field"]) == (
        "invalid_input",
        "claim_key",
    )
    with pytest.raises(TypeError, match="ClaimExtractor"):
        create_evidence_resolve(extractor=lambda docs: docs)  # type: ignore[arg-type]
