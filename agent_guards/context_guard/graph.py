"""context_guard: keep what the model sees within its window, constraints and evidence intact.

:func:`fit_context` is the pure core (no LangGraph import); :func:`create_context_guard`
is the node that runs before the model node, writes the fitted messages back through the
``add_messages`` reducer, archives long content in the graph's ``BaseStore``, and records
a :class:`~agent_guards.core.GuardDecision` in ``guard_log``.

Thresholds, as a share of the input budget (``max_tokens`` minus the answer
reserve; the usage counts messages and tool schemas): 70% NUDGE ``warning``, 85% NUDGE
``critical``, 90% REPAIR (long tool results archived, the middle summarized back to 50%,
truncation last). The system prompt, pinned content and the current question always survive;
an AIMessage's tool calls never lose their ToolMessages. Tool results that address the
model (``scan_injection``) are flagged in the decision and quoted as data.

Example:
    >>> from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
    >>> from agent_guards import fit_context
    >>> history = [SystemMessage("You answer from documents.", id="sys"),
    ...            HumanMessage("Summarize all requirement changes.", id="q")]
    >>> for i in range(30):
    ...     call = {"name": "read_doc", "args": {"doc": i}, "id": f"c{i}"}
    ...     text = f"REQ-{i}: " + "detail " * 60
    ...     history += [AIMessage("", id=f"a{i}", tool_calls=[call]),
    ...                 ToolMessage(text, tool_call_id=f"c{i}", id=f"t{i}")]
    >>> v = fit_context(history, max_tokens=2500)
    >>> v.verdict, v.reason, v.usage_before > 0.9 > 0.5 >= v.usage
    (<Verdict.REPAIR: 'repair'>, 'compressed', True)
    >>> v.messages[0].id, v.messages[1].id, v.messages[2].id.startswith("agent_guards-summary")
    ('sys', 'q', True)
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Any, NamedTuple

from langchain_core.language_models import BaseLanguageModel
from langchain_core.messages import BaseMessage, HumanMessage, RemoveMessage, get_buffer_string
from langchain_core.messages.utils import trim_messages
from langchain_core.runnables import Runnable, RunnableConfig, RunnableLambda
from langchain_core.runnables.config import merge_configs
from langgraph.constants import TAG_NOSTREAM
from langgraph.errors import GraphBubbleUp
from langgraph.graph.message import REMOVE_ALL_MESSAGES
from langgraph.store.base import BaseStore, PutOp

from agent_guards.context_guard.archive import (
    DEFAULT_NAMESPACE,
    archive_ops,
    archive_scope,
    check_namespace,
)
from agent_guards.context_guard.core import FitBudget, budget_of, fit_context, fit_unchanged
from agent_guards.context_guard.model import ContextVerdict
from agent_guards.context_guard.policy import GUARD, ContextPolicy
from agent_guards.context_guard.steps import TokenCounter, make_counter
from agent_guards.context_guard.summary import SUMMARY_PROMPT, pin_message
from agent_guards.context_guard.verdict import unchanged_decision, with_summary_text
from agent_guards.core.clock import now_iso_from_config, step_from_config
from agent_guards.core.decision import GuardDecision, Verdict
from agent_guards.core.errors import InvalidInputError
from agent_guards.core.signatures import safe_str
from agent_guards.core.state import GuardState, StateKeys
from agent_guards.graph import (
    graph_store,
    invalid_input,
    runnable,
    stamp,
    state_reader,
    state_value,
)
from agent_guards.tracing import attach_decision

__all__ = [
    "ContextState",
    "create_context_guard",
]


class ContextState(GuardState, total=False):
    """State mixin for the context guard: ``class State(MessagesState, ContextState)``.

    ``context_pins`` (structured task constraints, the current step, evidence in use) is
    rendered as a pinned system message that is kept verbatim and never summarized;
    ``context_pinned_ids`` lists message or tool-call ids that must stay in the context.

    Example:
        >>> from langgraph.graph import START, MessagesState, StateGraph
        >>> from agent_guards import ContextState, create_context_guard
        >>> class State(MessagesState, ContextState):
        ...     pass
        >>> g = StateGraph(State).add_node("guard", create_context_guard(8000))
        >>> app = g.add_edge(START, "guard").compile()
        >>> out = app.invoke({"messages": [("user", "hi")], "context_pins": {"due": "Friday"}})
        >>> [m.type for m in out["messages"]], "Friday" in out["messages"][0].content
        (['system', 'human'], True)
    """

    context_pins: dict[str, Any]
    context_pinned_ids: list[str]
    context_tally: dict[str, Any] | None
    """Where the last fit left the history (``ContextVerdict.tally``): the next fit counts
    only what was appended since. A few numbers and ids, whatever the history's length."""


def create_context_guard(
    max_tokens: int,
    *,
    policy: ContextPolicy | None = None,
    summarizer: Summarizer | None = None,
    tools: Sequence[Any] | None = None,
    token_counter: TokenCounter | None = None,
    store: BaseStore | None = None,
    namespace: Sequence[str] = DEFAULT_NAMESPACE,
    pinned_keys: Sequence[str] = ("context_pins",),
    pinned_ids_key: str | None = "context_pinned_ids",
    pin: Pin | None = None,
    summary_input_tokens: int = 4000,
    messages_key: str = "messages",
    tally_key: str | None = "context_tally",
    name: str = GUARD,
    keys: StateKeys | None = None,
) -> RunnableLambda[Any, Any]:
    """A node to run before the model node: fit ``messages`` into ``max_tokens``.

    Args:
        max_tokens: The model's context window, in tokens.
        policy: Thresholds, reserve, archive and summary sizes; the defaults when omitted.
        summarizer: Optional model (or runnable/callable ``messages -> str``) that writes the
            summary body. Without one, or when it fails, the structure-keeping outline is used.
        tools: The tools bound to the model: their schemas count against the budget.
        token_counter: The model (its own counter) or a ``messages -> int`` callable;
            ``count_tokens_cjk`` (CJK-aware, o200k-like) when omitted.
        store: Where long content is archived; ``None`` uses the graph's store. Without any
            store nothing is archived (compression still summarizes).
        namespace: Store namespace for archived content (the reader tool's default too).
        pinned_keys: State keys whose values are pinned as system messages (missing or empty
            values are skipped).
        pinned_ids_key: State key listing message / tool-call ids that must stay.
        pin: ``state -> ids or messages`` to pin, for anything else.
        summary_input_tokens: How much of the removed history a summarizer model sees verbatim
            (it always gets the complete outline).
        messages_key: The messages channel.
        tally_key: State key where the node keeps the running tally (``ContextState`` has
            it), so each fit counts only the messages appended since the last one; None (or
            a state without the key) counts the whole history every time.
        name: The node's name.
        keys: Where the graph keeps ``guard_log`` when it has a field of that name of its
            own (:class:`~agent_guards.core.StateKeys`).

    Bad runtime input (an unknown pinned id, pinned content larger than the budget) is
    recorded as a STOP decision with reason ``invalid_input`` and the messages are left as
    they are. Interrupts raised inside (``pin``, the summarizer) pass through.

    Example:
        >>> from langgraph.graph import START, StateGraph, MessagesState
        >>> class State(MessagesState, ContextState):
        ...     pass
        >>> g = StateGraph(State)
        >>> _ = g.add_node("context_guard", create_context_guard(8000))
        >>> _ = g.add_edge(START, "context_guard")
        >>> out = g.compile().invoke({"messages": [("user", "hi")]})
        >>> out["guard_log"][-1].verdict
        <Verdict.CONTINUE: 'continue'>
    """
    if not isinstance(name, str) or not name:
        raise ValueError(f"name must be a non-empty string, got {name!r}")
    guard = context_guard_node(
        max_tokens,
        policy=policy,
        summarizer=summarizer,
        tools=tools,
        token_counter=token_counter,
        store=store,
        namespace=namespace,
        pinned_keys=pinned_keys,
        pinned_ids_key=pinned_ids_key,
        pin=pin,
        summary_input_tokens=summary_input_tokens,
        messages_key=messages_key,
        tally_key=tally_key,
    )
    return runnable(name, guard.node, guard.anode, keys=keys, mixin="ContextState",
                    channels=(messages_key,))  # fmt: skip


def context_guard_node(
    max_tokens: int,
    *,
    policy: ContextPolicy | None = None,
    summarizer: Summarizer | None = None,
    tools: Sequence[Any] | None = None,
    token_counter: TokenCounter | None = None,
    store: BaseStore | None = None,
    namespace: Sequence[str] = DEFAULT_NAMESPACE,
    pinned_keys: Sequence[str] = ("context_pins",),
    pinned_ids_key: str | None = "context_pinned_ids",
    pin: Pin | None = None,
    summary_input_tokens: int = 4000,
    messages_key: str = "messages",
    tally_key: str | None = "context_tally",
) -> ContextGuardNode:
    """The guard :func:`create_context_guard` wraps as a node, checked the same way, for a
    node that fits its context itself right before its model call (:meth:`ContextGuardNode.run`),
    one super-step instead of two. The arguments are those of :func:`create_context_guard`.
    """
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
        raise ValueError(f"max_tokens must be an int >= 1, got {max_tokens!r}")
    pol = ContextPolicy.coerce(policy)
    if pol.reserve_for(max_tokens) >= max_tokens:
        raise ValueError(
            f"reserve_tokens={pol.reserve_tokens} leaves no input room in max_tokens={max_tokens}"
        )
    for arg, value in (("summarizer", summarizer), ("pin", pin)):
        if value is not None and not (isinstance(value, Runnable) or callable(value)):
            raise TypeError(
                f"{arg} must be callable (a model, Runnable or function), got {value!r}"
            )
    if store is not None and not isinstance(store, BaseStore):
        raise TypeError(f"store must be a langgraph BaseStore, got {type(store).__name__}")
    if isinstance(pinned_keys, str) or not all(isinstance(k, str) and k for k in pinned_keys):
        raise ValueError(f"pinned_keys must be a sequence of state keys, got {pinned_keys!r}")
    if not isinstance(messages_key, str) or not messages_key:
        raise ValueError(f"messages_key must be a non-empty string, got {messages_key!r}")
    if tally_key is not None and (not isinstance(tally_key, str) or not tally_key):
        raise ValueError(f"tally_key must be a non-empty string or None, got {tally_key!r}")
    if (
        isinstance(summary_input_tokens, bool)
        or not isinstance(summary_input_tokens, int)
        or summary_input_tokens < 1
    ):
        raise ValueError(f"summary_input_tokens must be an int >= 1, got {summary_input_tokens!r}")
    make_counter(token_counter)  # rejects a bad counter now, not at run time
    return ContextGuardNode(
        max_tokens=max_tokens,
        policy=pol,
        summarizer=summarizer,
        tools=list(tools) if tools else None,
        token_counter=token_counter,
        store=store,
        namespace=check_namespace(namespace),
        pinned_keys=tuple(pinned_keys),
        pinned_ids_key=pinned_ids_key,
        pin=pin,
        summary_input_tokens=summary_input_tokens,
        messages_key=messages_key,
        tally_key=tally_key,
    )


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
    tally_key: str | None = None

    def state_pins(self, state: Any) -> list[BaseMessage]:
        """The pinned messages of ``state``'s ``pinned_keys``, as this node places them right
        after the leading system messages. A node that writes a new history can put them
        there itself: the fit then finds them in place and rewrites nothing."""
        read = state_reader(state)
        return [pin_message(k, v) for k in self.pinned_keys if (v := read(k)) not in _EMPTY]

    def prepare(
        self, state: Any, config: RunnableConfig
    ) -> tuple[ContextVerdict, BaseStore | None]:
        read = state_reader(state)
        messages = read(self.messages_key) or []
        if not isinstance(messages, (list, tuple)):
            messages = list(messages)
        pins: list[str | BaseMessage] = [*self.state_pins(state)]
        if self.pinned_ids_key:
            ids = read(self.pinned_ids_key) or ()
            if type(ids) is not list and (
                isinstance(ids, (str, bytes, Mapping)) or not isinstance(ids, Iterable)
            ):
                raise InvalidInputError(
                    f"must be a list of message or tool-call ids, got {type(ids).__name__}",
                    field=self.pinned_ids_key,
                )
            pins.extend(safe_str(i) for i in ids)
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
            tally=read(self.tally_key) if self.tally_key else None,
        )
        return verdict, store

    def on_invalid(self, err: InvalidInputError) -> GuardDecision:
        return invalid_input(GUARD, err, policy=self.policy.label, verdict=Verdict.STOP)

    def fit(
        self, state: Any, config: RunnableConfig
    ) -> tuple[ContextVerdict, BaseStore | None] | GuardDecision:
        """``prepare`` with bad input turned into a decision (interrupts pass through: they
        are not InvalidInputError)."""
        try:
            return self.prepare(state, config)
        except InvalidInputError as err:
            return self.on_invalid(err)

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

    @cached_property
    def budgets(self) -> tuple[FitBudget, FitBudget]:
        """The fit's numbers without a store and with one: the node's window, policy,
        counter and tools give them, and those do not change (checked when it was built)."""
        args = (self.policy, self.max_tokens, self.token_counter, self.tools)
        return budget_of(*args, archive=False), budget_of(*args, archive=True)

    def unchanged(self, state: Any, config: RunnableConfig) -> dict[str, Any] | None:
        """The update of a fit that leaves the history as it is, the usual one before a
        model call, made without a verdict (:func:`~.core.fit_unchanged`); None when the
        fit may do more, or the state holds pins other than message ids (the general path
        decides those, the same way)."""
        if type(state) is not dict or self.pin is not None or self.tally_key is None:
            return None
        messages = state.get(self.messages_key)
        ids = (state.get(self.pinned_ids_key) if self.pinned_ids_key else None) or []
        if type(messages) is not list or type(ids) is not list:
            return None
        if any(type(i) is not str for i in ids) or any(
            state.get(k) not in _EMPTY for k in self.pinned_keys
        ):
            return None
        store = self.store if self.store is not None else graph_store(config)
        b = self.budgets[store is not None]
        fit = fit_unchanged(messages, ids, state.get(self.tally_key), b)
        if fit is None:
            return None
        tokens, kept, tally = fit
        decision = unchanged_decision(
            self.policy,
            tokens=tokens,
            tokens_before=tokens,
            budget=b.budget,
            max_tokens=self.max_tokens,
            tool_tokens=b.tool_tokens,
            kept=kept,
            pin_labels=sorted(set(ids)),
            step=step_from_config(config),
            at=now_iso_from_config(config),
            **_archive_note(store),
        )
        attach_decision(decision)
        return {"guard_log": [decision], self.tally_key: tally}

    def finish(
        self, state: Any, verdict: ContextVerdict, store: BaseStore | None, config: RunnableConfig
    ) -> dict[str, Any]:
        decision = verdict.decision
        assert decision is not None
        update: dict[str, Any] = {"guard_log": [stamp(decision, config, **_archive_note(store))]}
        if self.tally_key:
            update[self.tally_key] = verdict.tally
        if verdict.changed:
            before = list(state_value(state, self.messages_key) or [])
            update[self.messages_key] = _messages_update(before, verdict.messages)
        return update

    def begin(self, state: Any, config: RunnableConfig) -> _Plan:
        """Everything before the I/O: the fit, the summarizer call to make, the store writes."""
        result = self.fit(state, config)
        if isinstance(result, GuardDecision):
            return _Plan(rejected=stamp(result, config))
        verdict, store = result
        summary = None
        if self.summarizer is not None and verdict.summarized_messages:
            try:
                summary = self.summary_call(verdict, config)
            except GraphBubbleUp:
                raise
            except Exception as err:
                verdict = _summary_failed(verdict, err)
        return _Plan(
            verdict=verdict,
            store=store,
            summary=summary,
            # scoped to the run's principal and thread: only they may read it back
            writes=archive_ops(archive_scope(self.namespace, config), verdict.archives)
            if store is not None
            else [],
        )

    def end(
        self, state: Any, config: RunnableConfig, plan: _Plan, summaries: Sequence[Any]
    ) -> dict[str, Any]:
        """Everything after the I/O: the summarizer's text (or why it was not used), the update."""
        verdict = self.settle(plan, summaries)
        if verdict is None:
            return {"guard_log": [plan.rejected]}
        return self.finish(state, verdict, plan.store, config)

    def settle(self, plan: _Plan, summaries: Sequence[Any]) -> ContextVerdict | None:
        """The verdict with the summarizer's text in (None when the input was rejected)."""
        if plan.rejected is not None:
            return None
        assert plan.verdict is not None
        verdict = plan.verdict
        for result in summaries:  # batch(..., return_exceptions=True): at most one
            if isinstance(result, GraphBubbleUp):
                raise result
            if isinstance(result, Exception):
                verdict = _summary_failed(verdict, result)
            else:
                verdict = self.summarized(verdict, result)
        return verdict

    def run(
        self, state: Any, config: RunnableConfig
    ) -> tuple[dict[str, Any], Sequence[BaseMessage]]:
        """Fit inside another node: the update this guard's node would write, and the
        messages to send to the model (the fitted ones; the history as it is when the
        input was rejected). The decision is recorded in the update's ``guard_log``.

        When the fit changed nothing the messages are the state's own sequence, not a
        copy (a fit under the threshold costs what the new messages cost): read it, do not
        modify it."""
        if (update := self.unchanged(state, config)) is not None:
            return update, state[self.messages_key]
        plan = self.begin(state, config)
        if plan.store is not None and plan.writes:
            plan.store.batch(plan.writes)
        run, arg, child = plan.summary or (None, None, None)
        done = run.batch([arg], child, return_exceptions=True) if run is not None else []
        verdict = self.settle(plan, done)
        if verdict is None:
            return {"guard_log": [plan.rejected]}, list(state_value(state, self.messages_key) or [])
        history = state_value(state, self.messages_key)
        unchanged = not verdict.changed and isinstance(history, (list, tuple))
        return self.finish(state, verdict, plan.store, config), (
            history if unchanged else list(verdict.messages)
        )

    def node(self, state: Any, config: RunnableConfig) -> dict[str, Any]:
        if (update := self.unchanged(state, config)) is not None:
            return update
        plan = self.begin(state, config)
        if plan.store is not None and plan.writes:
            plan.store.batch(plan.writes)
        run, arg, child = plan.summary or (None, None, None)
        done = run.batch([arg], child, return_exceptions=True) if run is not None else []
        return self.end(state, config, plan, done)

    async def anode(self, state: Any, config: RunnableConfig) -> dict[str, Any]:
        if (update := self.unchanged(state, config)) is not None:
            return update
        plan = self.begin(state, config)
        if plan.store is not None and plan.writes:
            await plan.store.abatch(plan.writes)
        run, arg, child = plan.summary or (None, None, None)
        done = await run.abatch([arg], child, return_exceptions=True) if run is not None else []
        return self.end(state, config, plan, done)


class _Plan(NamedTuple):
    """What a node run will do, decided before any I/O (so sync and async share it)."""

    rejected: GuardDecision | None = None
    verdict: ContextVerdict | None = None
    store: BaseStore | None = None
    summary: tuple[Runnable[Any, Any], Any, RunnableConfig] | None = None
    writes: Sequence[PutOp] = ()


_EMPTY: tuple[Any, ...] = (None, "", {}, [])


def _archive_note(store: BaseStore | None) -> dict[str, Any]:
    """What a fit's decision says of the archive: that there was none, without a store."""
    return {} if store is not None else {"archive_available": False}


def _summary_failed(verdict: ContextVerdict, err: Exception) -> ContextVerdict:
    """Keep the outline summary and record why the summarizer's text was not used."""
    decision = verdict.decision
    if decision is None:  # pragma: no cover - fit_context always sets it
        return verdict
    data = {**decision.data, "summarizer_error": f"{type(err).__name__}: {err}"[:300]}
    return replace(verdict, decision=replace(decision, data=data))
