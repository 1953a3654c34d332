"""The memory_resolve node's plumbing (store access, facts, update). Private.

Built by :func:`agent_guards.memory_resolve.create_memory_resolve`; holds only its options, never
run state (that lives in the graph state and the store).
"""

from __future__ import annotations

import hashlib
import inspect
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, NamedTuple, cast

from langchain_core.runnables import RunnableConfig

from agent_guards.core.clock import now_from_config
from agent_guards.core.decision import GuardDecision, Verdict
from agent_guards.core.errors import InvalidInputError
from agent_guards.core.fields import named, shown, to_identities
from agent_guards.core.signatures import safe_str
from agent_guards.graph import LOG_KEY, graph_store, invalid_input, stamp, state_value
from agent_guards.memory_resolve.core import (
    GUARD,
    coerce_record,
    resolve_memory,
    without_own_writes,
)
from agent_guards.memory_resolve.model import MemoryRecord, MemoryVerdict
from agent_guards.memory_resolve.policy import MemoryPolicy
from agent_guards.memory_resolve.store import (
    aload_memories,
    asave_memories,
    load_memories,
    save_memories,
)

__all__ = ["MemoryNode"]


def fact_record(fact: Any, *, now: datetime, scope: str | None, field: str) -> MemoryRecord:
    """A current-turn record from a fact dict (source user_explicit, created now, stable id)."""
    if isinstance(fact, MemoryRecord):
        return fact
    if not isinstance(fact, Mapping):
        raise InvalidInputError(f"a fact must be a mapping, got {shown(fact)}", field=field)
    data = dict(fact)
    data.setdefault("source", "user_explicit")
    data.setdefault("created_at", now)
    data.setdefault("scope", scope)
    if "id" not in data:
        seed = [data.get("key"), data.get("value"), data["scope"], str(data["created_at"])]
        try:
            text = json.dumps(seed, default=str)
        except (TypeError, ValueError, RecursionError):  # an int too long for str()
            text = json.dumps([safe_str(part) for part in seed])
        digest = hashlib.sha1(text.encode()).hexdigest()[:16]
        data["id"] = f"turn-{digest}"
        try:
            return coerce_record(data)
        except InvalidInputError as err:  # named by its position, not an id it never had
            if err.item != data["id"]:
                raise
            raise InvalidInputError(err.problem, field=err.field) from None
    return coerce_record(data)


def _each(items: Any, field: str, convert: Callable[[Any], MemoryRecord]) -> list[MemoryRecord]:
    """``convert`` applied to each item of a state list; an error that names no item names
    its position (``memory_facts[2]``)."""
    if isinstance(items, (str, bytes, Mapping)) or not isinstance(items, Iterable):
        raise InvalidInputError(f"must be a list, got {type(items).__name__}", field=field)
    out: list[MemoryRecord] = []
    for i, item in enumerate(items):
        out.append(named(convert, item, f"{field}[{i}]"))
    return out


class _Context(NamedTuple):
    identities: frozenset[str]
    first: str | None
    store: Any
    namespace: tuple[str, ...] | None


@dataclass(frozen=True)
class MemoryNode:
    """The node's options and its sync/async bodies."""

    policy: MemoryPolicy
    store: Any
    namespace: Callable[[str], Sequence[str]]
    principal_key: str
    facts_key: str
    records_key: str
    output_key: str
    extractor: Callable[[Any, RunnableConfig], Any] | None
    consume_facts: bool
    name: str

    def _context(self, config: RunnableConfig) -> _Context:
        raw = ((config or {}).get("configurable") or {}).get(self.principal_key)
        identities = to_identities(raw, field=self.principal_key)
        first: str | None = None
        if isinstance(raw, str):
            first = raw
        elif isinstance(raw, (set, frozenset)):  # unordered: pick deterministically
            first = min(identities)
        elif identities:  # a list: the first identity is the user, the rest are groups
            first = next(iter(cast(Iterable[str], raw)))
        store = self.store if self.store is not None else graph_store(config)
        ns = tuple(self.namespace(first)) if first is not None and store is not None else None
        return _Context(identities, first, store, ns)

    def _duplicate(self, facts: Any, position: int, first: int, fact_id: str) -> InvalidInputError:
        """Two different current facts with one id: named by id when the caller gave it,
        else by position (an id-less fact's id is made from its key and value, so the two
        state one value with different options)."""
        raw = facts[position] if isinstance(facts, Sequence) else None
        if (isinstance(raw, Mapping) and "id" in raw) or isinstance(raw, MemoryRecord):
            return InvalidInputError("duplicate id", item=fact_id, field="id")
        key = self.facts_key
        return InvalidInputError(
            f"the same key and value as {key}[{first}] with other fields",
            item=f"{key}[{position}]",
            field="key",
        )

    def _finish(
        self,
        state: Any,
        config: RunnableConfig,
        ctx: _Context,
        *,
        stored: list[MemoryRecord],
        facts: Iterable[Any],
    ) -> tuple[tuple[MemoryRecord, ...], dict[str, Any]]:
        now = now_from_config(config)
        current = _each(
            facts,
            self.facts_key,
            lambda f: fact_record(f, now=now, scope=ctx.first, field=self.facts_key),
        )
        # a replayed turn finds its own write-back in the store: read the store as before it
        merged = {r.id: r for r in without_own_writes(stored, current)}
        records = _each(state_value(state, self.records_key) or [], self.records_key, coerce_record)
        merged.update({r.id: r for r in records})
        seen: dict[str, int] = {}
        for position, fact in enumerate(current):
            if fact.id in seen:
                if fact == current[seen[fact.id]]:
                    continue  # the same fact stated twice in the turn
                raise self._duplicate(facts, position, seen[fact.id], fact.id)
            seen[fact.id] = position
            previous = merged.get(fact.id)
            # a replayed turn finds its own write-back in the store: keep its chain
            chain = {*fact.supersedes, *(previous.supersedes if previous else ())}
            merged[fact.id] = replace(fact, supersedes=tuple(sorted(chain)))
        verdict = resolve_memory(
            merged.values(), now=now, scopes=ctx.identities, policy=self.policy
        )
        decision = verdict.decision
        if self.name != GUARD:
            decision = replace(decision, guard=self.name)
        if ctx.namespace is None:
            decision = self._unread(decision, ctx)
        decision = stamp(decision, config)
        update: dict[str, Any] = {
            self.output_key: replace(verdict, decision=decision),
            LOG_KEY: [decision],
        }
        if self.consume_facts and self.extractor is None and state_value(state, self.facts_key):
            update[self.facts_key] = []
        writes = verdict.writes if ctx.namespace is not None else ()
        return writes, update

    def _unread(self, decision: GuardDecision, ctx: _Context) -> GuardDecision:
        """Say in the decision why long-term memory was neither read nor written: a run
        without a store, or one whose config names no principal to keep it under."""
        if ctx.store is None:
            code = "no_store"
            why = "the run has no store: compile the graph with store=..., or pass store="
        else:
            code = "no_principal"
            why = (
                f"the config has no configurable[{self.principal_key!r}]: set it, or pass "
                "principal_key= naming your key, e.g. 'user_id'"
            )
        detail = f"{decision.detail} Long-term memory not read nor written; {why}."
        return replace(decision, detail=detail.strip(), data={**decision.data, "long_term": code})

    def _rejected(self, err: InvalidInputError, config: RunnableConfig) -> dict[str, Any]:
        decision = stamp(invalid_input(self.name, err, policy=self.policy.label), config)
        # an empty verdict, so code reading ``state[output_key]`` finds one (nothing injected)
        return {self.output_key: MemoryVerdict(decision=decision), LOG_KEY: [decision]}

    def _skipped(self, invalid: list[InvalidInputError], config: RunnableConfig) -> list[Any]:
        """One decision per stored item that is no valid record (left out, the rest used)."""
        label = self.policy.label
        return [
            stamp(invalid_input(self.name, err, policy=label, verdict=Verdict.CONTINUE), config)
            for err in invalid
        ]

    def invoke(self, state: Any, config: RunnableConfig) -> dict[str, Any]:
        """The sync node body; bad input becomes an ``invalid_input`` decision."""
        try:
            ctx = self._context(config)
            invalid: list[InvalidInputError] = []
            stored = (
                load_memories(ctx.store, ctx.namespace, invalid=invalid) if ctx.namespace else []
            )
            if self.extractor is not None:
                facts = self.extractor(state, config)
            else:
                facts = state_value(state, self.facts_key) or []
            writes, update = self._finish(state, config, ctx, stored=stored, facts=facts)
        except InvalidInputError as err:  # GraphBubbleUp is no InvalidInputError: it passes
            return self._rejected(err, config)
        update[LOG_KEY] = [*self._skipped(invalid, config), *update[LOG_KEY]]
        if writes and ctx.namespace:
            save_memories(ctx.store, ctx.namespace, writes)
        return update

    async def ainvoke(self, state: Any, config: RunnableConfig) -> dict[str, Any]:
        """The async node body (async store API, ``extractor.acall`` when it has one)."""
        try:
            ctx = self._context(config)
            invalid: list[InvalidInputError] = []
            stored = (
                await aload_memories(ctx.store, ctx.namespace, invalid=invalid)
                if ctx.namespace
                else []
            )
            facts: Any
            if self.extractor is None:
                facts = state_value(state, self.facts_key) or []
            else:
                acall = getattr(self.extractor, "acall", None)
                facts = await acall(state, config) if acall else self.extractor(state, config)
                if inspect.isawaitable(facts):
                    facts = await facts
            writes, update = self._finish(state, config, ctx, stored=stored, facts=facts)
        except InvalidInputError as err:
            return self._rejected(err, config)
        update[LOG_KEY] = [*self._skipped(invalid, config), *update[LOG_KEY]]
        if writes and ctx.namespace:
            await asave_memories(ctx.store, ctx.namespace, writes)
        return update
