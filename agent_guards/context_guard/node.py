"""The context guard's node: state in, ``fit_context``, summarizer and store, update out.

Private; :func:`agent_guards.context_guard.create_context_guard` builds it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from langchain_core.language_models import BaseLanguageModel
from langchain_core.messages import BaseMessage, HumanMessage, RemoveMessage, get_buffer_string
from langchain_core.messages.utils import trim_messages
from langchain_core.runnables import Runnable, RunnableConfig, RunnableLambda
from langchain_core.runnables.config import merge_configs
from langgraph.constants import TAG_NOSTREAM
from langgraph.errors import GraphBubbleUp
from langgraph.graph.message import REMOVE_ALL_MESSAGES
from langgraph.store.base import BaseStore

from agent_guards.context_guard.archive import awrite_records, write_records
from agent_guards.context_guard.core import fit_context
from agent_guards.context_guard.model import ContextVerdict
from agent_guards.context_guard.policy import GUARD, ContextPolicy
from agent_guards.context_guard.steps import TokenCounter, make_counter
from agent_guards.context_guard.summary import SUMMARY_PROMPT, pin_message
from agent_guards.context_guard.verdict import with_summary_text
from agent_guards.core.decision import GuardDecision, Verdict
from agent_guards.core.errors import InvalidInputError
from agent_guards.graph import graph_store, guarded, invalid_input, stamp, state_value

__all__ = ["ContextGuardNode", "Pin", "Summarizer"]

Summarizer = BaseLanguageModel[Any] | Runnable[Any, Any] | Callable[[list[BaseMessage]], Any]
Pin = Callable[[Mapping[str, Any]], Iterable[str | BaseMessage]]


def _messages_update(before: Sequence[BaseMessage], after: Sequence[BaseMessage]) -> list[Any]:
    """Replacements by id when the order is unchanged; else remove all and write the fit."""
    if [m.id for m in before] == [m.id for m in after]:
        return [a for a, b in zip(after, before, strict=True) if a is not b]
    return [RemoveMessage(id=REMOVE_ALL_MESSAGES), *after]


@dataclass(frozen=True)
class ContextGuardNode:
    """The node's configuration (immutable; everything the node remembers is in state/store)."""

    max_tokens: int
    policy: ContextPolicy
    summarizer: Summarizer | None
    tools: list[Any] | None
    token_counter: TokenCounter | None
    store: BaseStore | None
    namespace: tuple[str, ...]
    pinned_keys: tuple[str, ...]
    pinned_ids_key: str | None
    pin: Pin | None
    summary_input_tokens: int
    messages_key: str

    def prepare(
        self, state: Any, config: RunnableConfig
    ) -> tuple[ContextVerdict, BaseStore | None]:
        messages = list(state_value(state, self.messages_key) or [])
        pins: list[str | BaseMessage] = [
            pin_message(k, v)
            for k in self.pinned_keys
            if (v := state_value(state, k)) not in _EMPTY
        ]
        if self.pinned_ids_key:
            pins.extend(str(i) for i in state_value(state, self.pinned_ids_key) or ())
        if self.pin is not None:
            pins.extend(self.pin(state))
        store = self.store if self.store is not None else graph_store(config)
        verdict = fit_context(
            messages,
            max_tokens=self.max_tokens,
            policy=self.policy,
            pinned=pins,
            tools=self.tools,
            token_counter=self.token_counter,
            archive=store is not None,
        )
        return verdict, store

    def on_invalid(self, err: InvalidInputError) -> GuardDecision:
        return invalid_input(GUARD, err, policy=self.policy.label, verdict=Verdict.STOP)

    def fit(
        self, state: Any, config: RunnableConfig
    ) -> tuple[ContextVerdict, BaseStore | None] | GuardDecision:
        """``prepare`` with bad input turned into a decision (interrupts pass through)."""
        run: Callable[..., tuple[ContextVerdict, BaseStore | None] | GuardDecision]
        run = guarded(self.prepare, self.on_invalid)
        return run(state, config)

    def summary_call(
        self, verdict: ContextVerdict, config: RunnableConfig
    ) -> tuple[Runnable[Any, Any], Any, RunnableConfig]:
        """The summarizer as a runnable, its input, and a child config that does not stream."""
        sm: Any = self.summarizer
        run = sm if isinstance(sm, Runnable) else RunnableLambda(sm)
        removed = list(verdict.summarized_messages)
        child = merge_configs(config, {"tags": [TAG_NOSTREAM], "run_name": "context_summary"})
        if not isinstance(sm, BaseLanguageModel):
            return run, removed, child
        count = make_counter(self.token_counter)
        excerpt = trim_messages(
            removed,
            max_tokens=self.summary_input_tokens,
            token_counter=lambda ms: sum(count(m) for m in ms),
            strategy="last",
        )
        prompt = SUMMARY_PROMPT.format(
            outline=next(str(m.content) for m in verdict.messages if m.id == verdict.summary_id),
            excerpt=get_buffer_string(excerpt),
            max_words=max(40, verdict.summary_room // 2),
        )
        return run, [HumanMessage(prompt)], child

    def summarized(self, verdict: ContextVerdict, result: Any) -> ContextVerdict:
        text = str(result.text) if isinstance(result, BaseMessage) else str(result)
        return with_summary_text(verdict, text, make_counter(self.token_counter))

    def finish(
        self, state: Any, verdict: ContextVerdict, store: BaseStore | None, config: RunnableConfig
    ) -> dict[str, Any]:
        decision = verdict.decision
        assert decision is not None
        if store is None:
            decision = replace(decision, data={**decision.data, "archive_available": False})
        update: dict[str, Any] = {"guard_log": [stamp(decision, config)]}
        if verdict.changed:
            before = list(state_value(state, self.messages_key) or [])
            update[self.messages_key] = _messages_update(before, verdict.messages)
        return update

    def node(self, state: Any, config: RunnableConfig) -> dict[str, Any]:
        result = self.fit(state, config)
        if isinstance(result, GuardDecision):
            return {"guard_log": [stamp(result, config)]}
        verdict, store = result
        if self.summarizer is not None and verdict.summarized_messages:
            try:
                run, arg, child = self.summary_call(verdict, config)
                verdict = self.summarized(verdict, run.invoke(arg, child))
            except GraphBubbleUp:
                raise
            except Exception as err:
                verdict = _summary_failed(verdict, err)
        if store is not None and verdict.archives:
            write_records(store, self.namespace, verdict.archives)
        return self.finish(state, verdict, store, config)

    async def anode(self, state: Any, config: RunnableConfig) -> dict[str, Any]:
        result = self.fit(state, config)
        if isinstance(result, GuardDecision):
            return {"guard_log": [stamp(result, config)]}
        verdict, store = result
        if self.summarizer is not None and verdict.summarized_messages:
            try:
                run, arg, child = self.summary_call(verdict, config)
                verdict = self.summarized(verdict, await run.ainvoke(arg, child))
            except GraphBubbleUp:
                raise
            except Exception as err:
                verdict = _summary_failed(verdict, err)
        if store is not None and verdict.archives:
            await awrite_records(store, self.namespace, verdict.archives)
        return self.finish(state, verdict, store, config)


_EMPTY: tuple[Any, ...] = (None, "", {}, [])


def _summary_failed(verdict: ContextVerdict, err: Exception) -> ContextVerdict:
    """Keep the outline summary and record why the summarizer's text was not used."""
    decision = verdict.decision
    if decision is None:  # pragma: no cover - fit_context always sets it
        return verdict
    data = {**decision.data, "summarizer_error": f"{type(err).__name__}: {err}"[:300]}
    return replace(verdict, decision=replace(decision, data=data))
