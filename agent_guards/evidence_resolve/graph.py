"""evidence_resolve: arbitrate retrieved evidence before the model writes an answer.

The pure core :func:`resolve_evidence` (no LangGraph import) decides ANSWER, CLARIFY,
ABSTAIN or ESCALATE from ids, versions, dates, sources, entities and bases, in the order
permission > entity > version (supersedes links and statuses) > source credibility > time
(among sources of equal authority) > basis > relevance. The node from
:func:`create_evidence_resolve` reads the evidence from state, the principal from the run's
config, writes the :class:`EvidenceVerdict` and a decision to ``guard_log``;
:func:`create_evidence_route` turns the stored verdict into an :data:`EvidenceRoute` label.

Example:
    >>> docs = [
    ...     Evidence("policy_2024", "approval_limit", "100w", source_type="official",
    ...              version="2024", updated_at="2024-06-01", confidence=0.95),
    ...     Evidence("policy_2026", "approval_limit", "50w", source_type="official",
    ...              version="2026", updated_at="2026-01-01", confidence=0.93),
    ...     Evidence("faq", "approval_records", "keep approval records", source_type="internal"),
    ... ]
    >>> v = resolve_evidence(docs, claim_key="approval_limit")
    >>> v.verdict.value, v.value, v.selected_ids, v.conflicting_ids, v.dropped_ids
    ('answer', '50w', ('policy_2026',), ('policy_2024',), ('faq',))
    >>> v.decision.policy, v.decision.data["dropped"]
    ('EvidencePolicy@1', {'faq': 'other_claim'})
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from langchain_core.documents import Document
from langchain_core.runnables import RunnableConfig, RunnableLambda
from langgraph.errors import GraphBubbleUp
from typing_extensions import TypedDict

from agent_guards.core.clock import now_from_config
from agent_guards.core.decision import EvidenceRoute, GuardDecision, Verdict
from agent_guards.core.errors import InvalidInputError
from agent_guards.core.fields import shown, to_identities
from agent_guards.core.state import GuardState, StateKeys
from agent_guards.evidence_resolve.core import GUARD, is_visible, resolve_evidence
from agent_guards.evidence_resolve.extract import ClaimExtractor, Extraction
from agent_guards.evidence_resolve.model import (
    Evidence,
    EvidenceVerdict,
)
from agent_guards.evidence_resolve.policy import EvidencePolicy
from agent_guards.graph import (
    LOG_KEY,
    graph_store,
    invalid_input,
    require_channels,
    runnable,
    stamp,
    state_value,
)

__all__ = [
    "EvidenceQuery",
    "EvidenceState",
    "add_evidence_resolve",
    "create_evidence_resolve",
    "create_evidence_route",
]

_QUERY_KEYS = ("claim_key", "entity", "basis", "as_of")
_ROUTES: dict[str, EvidenceRoute] = {
    "answer": "answer",
    "clarify": "clarify",
    "abstain": "abstain",
    "escalate": "escalate",
}


class EvidenceQuery(TypedDict, total=False):
    """What the question is about (written by your graph, e.g. a parse-goal node).

    Example:
        >>> from agent_guards import Evidence, create_evidence_resolve
        >>> from agent_guards.evidence_resolve import EvidenceQuery
        >>> query: EvidenceQuery = {"claim_key": "limit", "entity": "acme"}
        >>> docs = [Evidence("a", "limit", "50w", entity="acme"),
        ...         Evidence("b", "limit", "80w", entity="globex")]
        >>> v = create_evidence_resolve().invoke({"evidence": docs, "evidence_query": query})
        >>> v["evidence_verdict"].value, v["evidence_verdict"].decision.data["dropped"]
        ('50w', {'b': 'other_entity'})
    """

    claim_key: str
    entity: str
    basis: str
    as_of: str | datetime


class EvidenceState(GuardState, total=False):
    """State mixin with the default channels of the evidence_resolve node.

    >>> from langgraph.graph import MessagesState
    >>> class State(MessagesState, EvidenceState):
    ...     pass
    """

    evidence: list[Evidence | Document]
    evidence_query: EvidenceQuery
    evidence_verdict: EvidenceVerdict


def _key(name: str, value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError(f"{name} must be a non-empty string, got {value!r}")
    return value


@dataclass(frozen=True)
class _Inputs:
    """What one evidence_resolve call reads from state and config."""

    items: list[Any]
    query: Mapping[str, Any]
    principal: Any
    as_of: Any


def _needs_claims(raw: Any) -> bool:
    """A retriever ``Document`` whose metadata names no claim (the extractor's input)."""
    metadata = getattr(raw, "metadata", None)
    return (
        hasattr(raw, "page_content")
        and isinstance(metadata, Mapping)
        and metadata.get("claim_key") is None
        and metadata.get("claim") is None
    )


@dataclass(frozen=True)
class _EvidenceNode:
    """The node body: read state and config, extract claims if asked, resolve, record."""

    policy: EvidencePolicy
    evidence_key: str
    query_key: str
    output_key: str
    principal_key: str
    use_clock: bool
    name: str
    extractor: ClaimExtractor | None

    def read(self, state: Any, config: RunnableConfig) -> _Inputs:
        query = state_value(state, self.query_key) or {}
        if not isinstance(query, Mapping):
            raise InvalidInputError(f"must be a mapping, got {shown(query)}", field=self.query_key)
        unknown = sorted(set(query) - set(_QUERY_KEYS))
        if unknown:
            raise InvalidInputError(
                f"unknown key(s) {unknown}; allowed: {list(_QUERY_KEYS)}", field=self.query_key
            )
        items = state_value(state, self.evidence_key) or []
        if isinstance(items, (str, bytes, Mapping)) or not isinstance(items, Iterable):
            raise InvalidInputError("must be a list of evidence", field=self.evidence_key)
        as_of = query.get("as_of")
        if as_of is None and self.use_clock:
            as_of = now_from_config(config)
        principal = ((config or {}).get("configurable") or {}).get(self.principal_key)
        return _Inputs(list(items), query, principal, as_of)

    def pending(self, inputs: _Inputs) -> list[Any]:
        """The documents to extract claims from: only those the caller may see."""
        if self.extractor is None:
            return []
        identities = to_identities(inputs.principal)
        return [r for r in inputs.items if _needs_claims(r) and is_visible(r, identities)]

    def decide(
        self, inputs: _Inputs, config: RunnableConfig, extraction: Extraction | None = None
    ) -> dict[str, Any]:
        items = inputs.items
        if extraction is not None:
            extracted = {id(r) for r in self.pending(inputs)}
            items = [r for r in items if id(r) not in extracted] + list(extraction.evidence)
        query = inputs.query
        verdict = resolve_evidence(
            items,
            policy=self.policy,
            principal=inputs.principal,
            entity=query.get("entity"),
            basis=query.get("basis"),
            as_of=inputs.as_of,
            claim_key=query.get("claim_key"),
        )
        decision = verdict.decision
        if extraction is not None:
            decision = replace(decision, data={**decision.data, "extraction": extraction.summary()})
        if self.name != GUARD:
            decision = replace(decision, guard=self.name)
        decision = stamp(decision, config)
        return {self.output_key: replace(verdict, decision=decision), LOG_KEY: [decision]}

    def rejected(self, err: InvalidInputError, config: RunnableConfig) -> dict[str, Any]:
        return {LOG_KEY: [stamp(invalid_input(self.name, err, policy=self.policy.label), config)]}

    def invoke(self, state: Any, config: RunnableConfig) -> dict[str, Any]:
        try:
            inputs = self.read(state, config)
            docs = self.pending(inputs)
            extraction = None
            if self.extractor is not None and docs:
                claims = _asked(inputs.query)
                store = graph_store(config)
                extraction = self.extractor.extract(docs, claims=claims, store=store, config=config)
            return self.decide(inputs, config, extraction)
        except GraphBubbleUp:
            raise
        except InvalidInputError as err:
            return self.rejected(err, config)

    async def ainvoke(self, state: Any, config: RunnableConfig) -> dict[str, Any]:
        try:
            inputs = self.read(state, config)
            docs = self.pending(inputs)
            extraction = None
            if self.extractor is not None and docs:
                claims, store = _asked(inputs.query), graph_store(config)
                extraction = await self.extractor.aextract(
                    docs, claims=claims, store=store, config=config
                )
            return self.decide(inputs, config, extraction)
        except GraphBubbleUp:
            raise
        except InvalidInputError as err:
            return self.rejected(err, config)


def _asked(query: Mapping[str, Any]) -> list[str] | None:
    key = query.get("claim_key")
    return [key] if isinstance(key, str) and key.strip() else None


def create_evidence_resolve(
    *,
    policy: EvidencePolicy | None = None,
    evidence_key: str = "evidence",
    query_key: str = "evidence_query",
    output_key: str = "evidence_verdict",
    principal_key: str = "principal",
    use_clock: bool = True,
    extractor: ClaimExtractor | None = None,
    name: str = GUARD,
    keys: StateKeys | None = None,
) -> RunnableLambda[Any, Any]:
    """Build the evidence_resolve node (sync and async).

    Args:
        policy: Arbitration policy; ``EvidencePolicy()`` when omitted.
        evidence_key: State key holding ``Evidence`` items, dicts or LangChain ``Document``s.
        query_key: State key holding an :class:`EvidenceQuery` (optional in state).
        output_key: State key the :class:`EvidenceVerdict` is written to.
        principal_key: ``config["configurable"]`` key holding the caller's identities. The
            principal is read from the run's config only, never from state or model output.
        use_clock: When the query has no ``as_of``, set aside evidence not yet effective at
            the run's clock (``now_from_config``).
        extractor: A :class:`~agent_guards.evidence_resolve.ClaimExtractor` for retriever
            ``Document``s whose metadata names no claim: it extracts the query's
            ``claim_key`` (else its own ``claims``) from the documents the caller may see,
            cached in the graph's store, and ``decision.data["extraction"]`` records what
            it did. A model failure raises out of the node (the graph's retry policy applies).
        name: Node name, also the ``guard`` of its decisions.

    Returns:
        A runnable node returning ``{output_key: verdict, "guard_log": [decision]}``. Bad
        input (no id, duplicate ids, bad dates or confidences, an unknown query key) gives
        only ``{"guard_log": [decision]}`` with reason ``invalid_input``: the verdict in
        state is left as it was, and :func:`create_evidence_route` routes to ``abstain``.

    Raises:
        ValueError: An option is invalid (the message names it).
        TypeError: ``policy`` is not an ``EvidencePolicy``, or ``extractor`` not a
            ``ClaimExtractor``.

    Example:
        >>> from agent_guards import Evidence, create_evidence_resolve
        >>> node = create_evidence_resolve()
        >>> docs = [Evidence("pub", "limit", "80w"),
        ...         Evidence("hr", "limit", "50w", source_type="official", allowed=["hr"])]
        >>> hr = {"configurable": {"principal": "hr"}}  # the principal comes from config only
        >>> node.invoke({"evidence": docs}, hr)["evidence_verdict"].value
        '50w'
        >>> node.invoke({"evidence": docs})["evidence_verdict"].value
        '80w'
    """
    policy = EvidencePolicy.coerce(policy)
    for option, value in (
        ("evidence_key", evidence_key),
        ("query_key", query_key),
        ("output_key", output_key),
        ("principal_key", principal_key),
        ("name", name),
    ):
        _key(option, value)
    if not isinstance(use_clock, bool):
        raise TypeError(f"use_clock must be a bool, got {use_clock!r}")
    if extractor is not None and not isinstance(extractor, ClaimExtractor):
        raise TypeError(f"extractor must be a ClaimExtractor, got {type(extractor).__name__}")
    node = _EvidenceNode(
        policy, evidence_key, query_key, output_key, principal_key, use_clock, name, extractor
    )
    return runnable(name, node.invoke, node.ainvoke, keys=keys, mixin="EvidenceState",
                    channels=(evidence_key, output_key))  # fmt: skip


def _latest(log: Any, guard: str) -> tuple[str, str] | None:
    """(verdict, reason) of the newest decision of ``guard`` in ``guard_log``."""
    for entry in reversed(list(log or ())):
        if isinstance(entry, GuardDecision):
            if entry.guard == guard:
                return entry.verdict.value, entry.reason
        elif isinstance(entry, Mapping) and entry.get("guard") == guard:
            return str(entry.get("verdict")), str(entry.get("reason"))
    return None


def create_evidence_route(
    *, output_key: str = "evidence_verdict", name: str = GUARD, keys: StateKeys | None = None
) -> RunnableLambda[Any, Any]:
    """Build the conditional edge that maps the stored verdict to an :data:`EvidenceRoute`.

    Routes ``abstain`` when there is no verdict, or when the node's newest decision in
    ``guard_log`` rejected its input (the stored verdict is then stale). Never ``answer``
    by default.

    >>> route = create_evidence_route()
    >>> route.invoke({})
    'abstain'
    """
    _key("output_key", output_key)
    _key("name", name)

    def route(state: Any, config: RunnableConfig) -> EvidenceRoute:
        latest = _latest(state_value(state, LOG_KEY), name)
        if latest is not None and latest[1] == "invalid_input":
            return "abstain"
        stored = state_value(state, output_key)
        if isinstance(stored, EvidenceVerdict):
            label = stored.verdict.value
        elif isinstance(stored, Mapping) and stored.get("verdict") is not None:
            label = str(Verdict(stored["verdict"]).value)
        else:
            return "abstain"
        return _ROUTES.get(label, "abstain")

    wiring = f"add_evidence_resolve(builder, name={name!r})"
    return runnable(f"{name}_route", route, keys=keys, wiring=wiring)


def add_evidence_resolve(
    builder: Any,
    *,
    name: str = GUARD,
    answer: str = "answer",
    clarify: str = "clarify",
    abstain: str = "abstain",
    escalate: str | None = None,
    output_key: str = "evidence_verdict",
    **node_options: Any,
) -> Any:
    """Add the evidence_resolve node and its conditional edge to a ``StateGraph`` builder.

    Args:
        builder: The ``StateGraph`` being built.
        name: Node name.
        answer: Node to go to on ANSWER (also ``END``).
        clarify: Node to go to on CLARIFY.
        abstain: Node to go to on ABSTAIN.
        escalate: Node to go to on ESCALATE; defaults to ``clarify``.
        output_key: State key of the verdict.
        **node_options: Passed to :func:`create_evidence_resolve`.

    Returns:
        The builder (edges into ``name`` are yours to add).

    Example:
        >>> from langgraph.graph import END, START, StateGraph
        >>> from agent_guards import Evidence, EvidenceState, add_evidence_resolve
        >>> g = StateGraph(EvidenceState).add_edge(START, "evidence_resolve")
        >>> app = add_evidence_resolve(g, answer=END, clarify=END, abstain=END).compile()
        >>> out = app.invoke({"evidence": [Evidence("a", "limit", "50w")]})
        >>> out["evidence_verdict"].value, out["guard_log"][-1].reason
        ('50w', 'consistent')
    """
    targets = {"answer": answer, "clarify": clarify, "abstain": abstain}
    targets["escalate"] = escalate if escalate is not None else clarify
    for label, target in targets.items():
        _key(label, target)
    keys = node_options.get("keys")
    own = (node_options.get("evidence_key", "evidence"), output_key)
    require_channels(builder, "add_evidence_resolve", "EvidenceState", ("guard_log",), keys,
                     own=own)  # fmt: skip
    builder.add_node(
        name, create_evidence_resolve(name=name, output_key=output_key, **node_options)
    )
    builder.add_conditional_edges(
        name, create_evidence_route(output_key=output_key, name=name, keys=keys), targets
    )
    return builder
