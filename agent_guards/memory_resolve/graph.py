"""memory_resolve: keep old, expired or foreign memories from overriding the current turn.

The pure core :func:`resolve_memory` (no LangGraph import) ranks records by source
(user_explicit > tool > official > memory > inferred), drops deleted, out-of-scope,
superseded, expired and pending ones with a reason, and plans the supersede chain a lasting
instruction writes back. The node from :func:`create_memory_resolve` loads the principal's
records from the graph's ``BaseStore``, takes the current turn's facts from an extractor
(default: the ``memory_facts`` state key), writes the verdict and a ``guard_log`` decision,
and applies the write-back to the store.

Example:
    >>> from agent_guards import MemoryRecord, resolve_memory
    >>> stored = MemoryRecord("m1", "report_format", "pdf", scope="user:alice",
    ...                       created_at="2026-01-02")
    >>> current = MemoryRecord("t1", "report_format", "markdown", source="user_explicit",
    ...                        scope="user:alice", persist=True)
    >>> v = resolve_memory([stored, current], now="2026-04-01", scopes=["user:alice"])
    >>> v.facts, v.excluded
    ({'report_format': 'markdown'}, {'m1': 'overridden_by:t1'})
    >>> [(w.id, w.status, w.source, w.supersedes) for w in v.writes]
    [('m1', 'superseded', 'memory', ()), ('t1', 'active', 'memory', ('m1',))]
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from langchain_core.runnables import RunnableConfig, RunnableLambda
from pydantic import BaseModel, Field
from typing_extensions import TypedDict

from agent_guards.core.state import GuardState, StateKeys
from agent_guards.graph import runnable, state_value
from agent_guards.memory_resolve.core import GUARD
from agent_guards.memory_resolve.model import (
    MemoryRecord,
    MemoryVerdict,
)
from agent_guards.memory_resolve.node import MemoryNode
from agent_guards.memory_resolve.policy import MemoryPolicy
from agent_guards.memory_resolve.store import memory_namespace

__all__ = [
    "LLMFactExtractor",
    "MemoryFact",
    "MemoryState",
    "create_memory_resolve",
    "format_memories",
]

Extractor = Callable[[Any, RunnableConfig], Iterable[Any]]


class MemoryFact(TypedDict, total=False):
    """A fact the user stated in the current turn (``key`` and ``value`` are required).

    Example:
        >>> from agent_guards.memory_resolve import MemoryFact
        >>> from agent_guards import MemoryRecord, create_memory_resolve
        >>> fact: MemoryFact = {"id": "t1", "key": "report_format", "value": "markdown"}
        >>> stored = [MemoryRecord("m1", "report_format", "pdf")]
        >>> out = create_memory_resolve().invoke({"memory_facts": [fact], "memory_records": stored})
        >>> out["memory_verdict"].facts, out["memory_verdict"].excluded, out["memory_facts"]
        ({'report_format': 'markdown'}, {'m1': 'overridden_by:t1'}, [])
    """

    key: str
    value: Any
    persist: bool
    id: str
    scope: str
    source: str
    confidence: float
    valid_until: str


class MemoryState(GuardState, total=False):
    """State mixin with the default channels of the memory_resolve node.

    Example:
        >>> from langgraph.graph import START, StateGraph
        >>> from langgraph.store.memory import InMemoryStore
        >>> from agent_guards import MemoryRecord, MemoryState, create_memory_resolve
        >>> from agent_guards.memory_resolve import memory_namespace, save_memories
        >>> store = InMemoryStore()
        >>> save_memories(store, memory_namespace("alice"), [MemoryRecord("m1", "lang", "fr")])
        >>> g = StateGraph(MemoryState).add_node("memory", create_memory_resolve())
        >>> app = g.add_edge(START, "memory").compile(store=store)
        >>> app.invoke({}, {"configurable": {"principal": "alice"}})["memory_verdict"].facts
        {'lang': 'fr'}
    """

    memory_facts: list[MemoryFact]
    memory_records: list[MemoryRecord]
    memory_verdict: MemoryVerdict


def format_memories(verdict: MemoryVerdict) -> str:
    """The injected records as lines for a system prompt (one per record).

    >>> from agent_guards import MemoryRecord, resolve_memory
    >>> v = resolve_memory([MemoryRecord("m1", "lang", "fr")], now="2026-01-01")
    >>> format_memories(v)
    '- lang: "fr" (memory, m1)'
    """
    return "\n".join(
        f"- {r.key}: {json.dumps(r.value, ensure_ascii=False)} ({r.source}, {r.id})"
        for r in verdict.inject
    )


_PROMPT = (
    "Extract the facts and preferences the user states explicitly in their last message "
    "(for example the output format they want). Do not infer anything not said. Set "
    "persist=true only when the user asks for it to apply from now on, not just this time. "
    "Return an empty list when there are none."
)


class _Fact(BaseModel):
    key: str = Field(description="snake_case name of the fact, e.g. report_format")
    value: str = Field(description="the value the user stated")
    persist: bool = Field(default=False, description="the user wants this from now on")


class _Facts(BaseModel):
    facts: list[_Fact] = Field(default_factory=list)


class LLMFactExtractor:
    """Extract the current turn's explicit facts with a chat model's structured output.

    The model only extracts; ``resolve_memory`` decides. Pass it as ``extractor=``.

    Example:
        >>> from langchain_core.messages import HumanMessage
        >>> from langchain_core.runnables import RunnableLambda
        >>> from agent_guards.memory_resolve import LLMFactExtractor
        >>> class StubModel:  # stands in for a chat model (offline)
        ...     def with_structured_output(self, schema):
        ...         fact = {"key": "report_format", "value": "markdown", "persist": True}
        ...         return RunnableLambda(lambda messages: schema(facts=[fact]))
        >>> extract = LLMFactExtractor(StubModel())
        >>> extract({"messages": [HumanMessage("Markdown from now on, please.")]}, {})
        [{'key': 'report_format', 'value': 'markdown', 'persist': True}]
        >>> extract({"messages": []}, {})  # no human message: the model is not called
        []
    """

    def __init__(self, model: Any, *, messages_key: str = "messages", prompt: str = _PROMPT):
        if not hasattr(model, "with_structured_output"):
            raise TypeError(f"model must support with_structured_output, got {model!r}")
        self._chain = model.with_structured_output(_Facts)
        self.messages_key = messages_key
        self.prompt = prompt

    def _input(self, state: Any) -> list[BaseMessage] | None:
        messages = state_value(state, self.messages_key) or []
        last = next((m for m in reversed(messages) if isinstance(m, HumanMessage)), None)
        return None if last is None else [SystemMessage(self.prompt), last]

    @staticmethod
    def _facts(result: Any) -> list[dict[str, Any]]:
        facts = result.facts if isinstance(result, _Facts) else _Facts.model_validate(result).facts
        return [f.model_dump() for f in facts]

    def __call__(self, state: Any, config: RunnableConfig) -> list[dict[str, Any]]:
        prompt = self._input(state)
        return [] if prompt is None else self._facts(self._chain.invoke(prompt, config))

    async def acall(self, state: Any, config: RunnableConfig) -> list[dict[str, Any]]:
        prompt = self._input(state)
        return [] if prompt is None else self._facts(await self._chain.ainvoke(prompt, config))


def create_memory_resolve(
    *,
    policy: MemoryPolicy | None = None,
    store: Any = None,
    namespace: Callable[[str], Sequence[str]] = memory_namespace,
    principal_key: str = "principal",
    facts_key: str = "memory_facts",
    records_key: str = "memory_records",
    output_key: str = "memory_verdict",
    extractor: Extractor | None = None,
    consume_facts: bool = True,
    name: str = GUARD,
    keys: StateKeys | None = None,
) -> RunnableLambda[Any, Any]:
    """Build the memory_resolve node (sync and async).

    Args:
        policy: Ranking and write-back policy; ``MemoryPolicy()`` when omitted.
        store: A ``BaseStore``; default: the store the graph was compiled with, if any.
        namespace: Maps the principal's first identity to its store namespace.
        principal_key: ``config["configurable"]`` key with the caller's identities (a
            string or a list: user id, groups). They are the readable scopes and pick the
            namespace. Read from the run's config only, never from state or model output.
        facts_key: State key with the current turn's facts (:class:`MemoryFact` dicts).
        records_key: State key with extra records (optional).
        output_key: State key the :class:`MemoryVerdict` is written to.
        extractor: ``(state, config) -> facts`` replacing the ``facts_key`` reader (an
            ``acall`` method is awaited on the async path), e.g. :class:`LLMFactExtractor`.
        consume_facts: Clear ``facts_key`` after use so the next turn does not re-apply them.
        name: Node name, also the ``guard`` of its decisions.

    Returns:
        A runnable node. Bad input (a malformed record or fact, duplicate ids) gives only
        ``{"guard_log": [decision]}`` with reason ``invalid_input`` and writes nothing.

    Raises:
        ValueError: An option is invalid (the message names it).
        TypeError: ``policy`` or ``extractor`` has the wrong type.

    Example:
        >>> from langgraph.store.memory import InMemoryStore
        >>> from agent_guards import MemoryRecord, create_memory_resolve
        >>> from agent_guards.memory_resolve import load_memories, memory_namespace, save_memories
        >>> store, ns = InMemoryStore(), memory_namespace("alice")
        >>> save_memories(store, ns, [MemoryRecord("m1", "report_format", "pdf")])
        >>> fact = {"id": "t1", "key": "report_format", "value": "markdown", "persist": True}
        >>> alice = {"configurable": {"principal": "alice"}}
        >>> out = create_memory_resolve(store=store).invoke({"memory_facts": [fact]}, alice)
        >>> out["memory_verdict"].facts, [(r.id, r.status) for r in load_memories(store, ns)]
        ({'report_format': 'markdown'}, [('m1', 'superseded'), ('t1', 'active')])
    """
    policy = MemoryPolicy.coerce(policy)
    for option, value in (
        ("principal_key", principal_key),
        ("facts_key", facts_key),
        ("records_key", records_key),
        ("output_key", output_key),
        ("name", name),
    ):
        if not isinstance(value, str) or not value:
            raise ValueError(f"{option} must be a non-empty string, got {value!r}")
    if extractor is not None and not callable(extractor):
        raise TypeError(f"extractor must be callable, got {extractor!r}")
    if not callable(namespace):
        raise TypeError(f"namespace must be callable, got {namespace!r}")

    node = MemoryNode(
        policy=policy,
        store=store,
        namespace=namespace,
        principal_key=principal_key,
        facts_key=facts_key,
        records_key=records_key,
        output_key=output_key,
        extractor=extractor,
        consume_facts=consume_facts,
        name=name,
    )
    own = (output_key,) if extractor is not None else (facts_key, output_key)
    return runnable(name, node.invoke, node.ainvoke, keys=keys, mixin="MemoryState", channels=own)
