"""ToolCallGuard: the ``ToolNode(wrap_tool_call=...)`` helper for loop_check and retry_router.

Import ``ToolCallGuard`` from ``agent_guards`` or ``agent_guards.tool_guard``.
Per tool call it (1) answers an identical earlier call from its result (REUSE: the tool
is not executed again), (2) checks the tool's circuit breaker in the store, (3) executes,
turning exceptions into classified error ToolMessages, (4) on a ``retry`` route re-entry,
waits the backoff and re-executes only the failed calls, replacing their messages in place.
It counts every execution in ``usage["tool_calls"]`` (reused and blocked calls are not
executions) and logs its decisions to ``guard_log``. It keeps no state of its own.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from functools import cached_property
from typing import TYPE_CHECKING, Any, TypeVar, cast

from langchain_core.messages import ToolMessage
from langgraph.errors import GraphBubbleUp
from langgraph.types import Command

from agent_guards import graph as _node
from agent_guards.budget import Budget
from agent_guards.core.decision import GuardDecision, Verdict
from agent_guards.core.effects import EFFECT_KEY, Effect, ToolEffects
from agent_guards.core.errors import InvalidInputError
from agent_guards.core.signatures import content_text
from agent_guards.core.state import DEFAULT_KEYS, StateKeys
from agent_guards.loop_check.policy import LoopPolicy
from agent_guards.retry_router.breaker import CircuitBreaker, RetryBudget
from agent_guards.retry_router.classify import describe_failure, failure_message, failure_of
from agent_guards.retry_router.core import decide_failure, may_repeat_a_write
from agent_guards.retry_router.model import Failure, FailureKind
from agent_guards.retry_router.policy import RetryRouterPolicy
from agent_guards.tool_guard.claims import in_process
from agent_guards.tool_guard.deadline import ToolTimeoutError, arun_within, run_within
from agent_guards.tool_guard.ledger import CANCEL_KEY, RunLedger, Turn, grant, granted
from agent_guards.tool_guard.node import GuardedToolNode
from agent_guards.tool_guard.plan import (
    Plan,
    cancelled,
    earlier_attempts,
    from_ledger,
    missing_id,
    over_budget,
    plan_call,
    replaced,
    retry_signature,
    signature_of,
)
from agent_guards.tool_guard.state_ledger import StateLedger

if TYPE_CHECKING:
    from langchain_core.runnables import RunnableConfig
    from langgraph.prebuilt.tool_node import ToolCallRequest
    from langgraph.store.base import BaseStore

__all__ = ["Outcome", "ToolCallGuard", "record_effect"]

T = TypeVar("T")
_LOG = logging.getLogger("agent_guards.tool_guard")
_LATE_FAILURE = Failure(FailureKind.UNKNOWN, message="failed after its time limit")
Execute = Callable[["ToolCallRequest"], "ToolMessage | Command[Any]"]
AExecute = Callable[["ToolCallRequest"], Awaitable["ToolMessage | Command[Any]"]]


@dataclass(frozen=True)
class Outcome:
    """The result of one guarded execution (or reuse, or breaker block)."""

    result: Any
    failure: Failure | None
    decisions: tuple[GuardDecision, ...]
    executions: int
    route: str | None = None
    delay: float | None = None
    ledger: Mapping[str, Any] = field(default_factory=dict)
    """The entries written to the run ledger kept in state (empty with a store)."""


@dataclass(frozen=True, kw_only=True)
class ToolCallGuard:
    """Wrap every tool call of a ``ToolNode``: reuse repeats, breaker, classified failures.

    Use it as ``ToolNode(tools, wrap_tool_call=guard, awrap_tool_call=guard.awrap)``, or
    ``guard.tool_node(tools)``. The graph's state needs the ``guard_log`` and ``usage``
    channels (:class:`~agent_guards.core.GuardState`) unless ``log_decisions`` and
    ``count_usage`` are off.

    >>> from langchain_core.tools import tool
    >>> @tool
    ... def search(q: str) -> str:
    ...     '''Search.'''
    ...     return "found " + q
    >>> from langgraph.prebuilt import ToolNode
    >>> node = ToolCallGuard().tool_node([search])
    >>> isinstance(node, ToolNode), type(node).__name__
    (True, 'GuardedToolNode')
    """

    loop: LoopPolicy | None = field(default_factory=LoopPolicy)
    """Reuse identical calls' results (None: always execute)."""
    retry: RetryRouterPolicy | None = field(default_factory=RetryRouterPolicy)
    """Classify failures and serve ``retry`` routes (None: exceptions propagate)."""
    breaker: CircuitBreaker | None = None
    """Per-tool circuit breaker (needs a store: ``store=`` or the graph's store)."""
    retry_budget: RetryBudget | None = None
    """Cap on retries per tool shared through the store (needs a store): a retry without a
    token is not made and routes ``fallback`` (reason ``retry_budget_exhausted``)."""
    store: BaseStore | None = None
    """Store for the breaker; defaults to the store the graph was compiled with."""
    sleep: Callable[[float], Any] = time.sleep
    """How to wait a backoff delay (inject a fake in tests)."""
    asleep: Callable[[float], Awaitable[Any]] = asyncio.sleep
    """Async wait."""
    count_usage: bool = True
    """Add 1 to ``usage["tool_calls"]`` per execution (retries included, reuses not)."""
    log_decisions: bool = True
    """Append REUSE / failure decisions to ``guard_log``."""
    messages_key: str = "messages"
    """State key of the message list."""
    ledger: RunLedger | None = None
    """Record every execution's intent and outcome in the graph's store (per thread): a call
    whose outcome is recorded is answered from it instead of running again (reads may run
    again), a write that started but never reported back is reconciled or escalated, and
    the tool budget counts the ledger's executions, so forks and resumes share one account.
    Without a store the ledger is kept in the state's ``run_ledger`` channel
    (:mod:`~agent_guards.tool_guard.state_ledger` says what that cannot promise)."""
    budget: Budget | None = None
    """The thread's budget; ``max_tool_calls`` is checked per call, before each execution,
    so a turn asking for more calls than remain runs only what is left and every other
    call is answered with a budget message."""
    timeout: float | Mapping[str, float] | Callable[[ToolCallRequest], float | None] | None = None
    """Seconds one execution may take (wall clock), for every tool, per tool name, or from
    the request (None: no limit). Held even when the tool blocks: a sync tool runs in a
    worker thread and the call stops waiting at the limit; an async tool is cancelled. The
    call fails with a ``TimeoutError`` (transient, and possibly run: a write is not retried
    blindly); a sync tool that finishes later still records its outcome in the ledger."""
    keys: StateKeys = DEFAULT_KEYS
    """Where the graph keeps the guard channels (``guard_log``, ``usage``): pass the same
    :class:`~agent_guards.core.StateKeys` to every guard of a graph that renames them."""
    effects: ToolEffects | None = None
    """The tools' effect classes for a guard without a loop policy (``loop=None``, as in
    ``RetryRouterMiddleware``); with one, they are ``loop.effects`` and this stays None."""
    retry_in_place: bool = False
    """Serve a ``retry`` route inside the tool call, after its backoff, instead of leaving
    it to the graph's retry edge (:func:`~agent_guards.add_retry_router`, where each
    attempt is a checkpointed super-step). For graphs without that edge:
    ``create_react_agent`` (the react hooks set it), ``add_loop_check`` alone, your own
    tools loop."""

    def __post_init__(self) -> None:
        for name, kind in (
            ("loop", LoopPolicy),
            ("retry", RetryRouterPolicy),
            ("breaker", CircuitBreaker),
            ("retry_budget", RetryBudget),
            ("budget", Budget),
            ("ledger", RunLedger),
            ("effects", ToolEffects),
        ):
            value = getattr(self, name)
            if value is not None and not isinstance(value, kind):
                raise TypeError(
                    f"ToolCallGuard.{name} must be a {kind.__name__} or None, "
                    f"got {type(value).__name__}"
                )
        if self.effects is not None and self.loop is not None and self.effects != self.loop.effects:
            raise ValueError(
                "ToolCallGuard: effects given twice, differently; declare them once, "
                "on the loop policy: LoopPolicy(effects=...)"
            )
        if not callable(self.sleep) or not callable(self.asleep):
            raise TypeError("ToolCallGuard.sleep and .asleep must be callables")
        _check_timeout(self.timeout)
        if not isinstance(self.keys, StateKeys):
            raise TypeError(
                f"ToolCallGuard.keys must be a StateKeys, got {type(self.keys).__name__}"
            )

    def tool_node(self, tools: Sequence[Any], **kwargs: Any) -> GuardedToolNode:
        """A ``ToolNode`` using this guard. Validation errors reach the guard as exceptions
        (``handle_tool_errors=False`` unless given) so field errors stay structured.
        ``add_retry_router(..., route_in_node=True)`` wired after it routes from inside it
        (``Command(goto=...)``) rather than with a conditional edge. A turn of one call runs
        on the node's own thread, not in a thread pool started for it (``ToolNode`` starts
        one every turn); two calls or more run in the pool, side by side, as in ``ToolNode``."""
        if self.retry is not None:
            kwargs.setdefault("handle_tool_errors", False)
        key = kwargs.setdefault("messages_key", self.messages_key)
        if key != self.messages_key:
            raise ValueError(
                f"tool_node(messages_key={key!r}) differs from ToolCallGuard.messages_key="
                f"{self.messages_key!r}; set it on the guard: ToolCallGuard(messages_key=...)"
            )
        return GuardedToolNode(tools, wrap_tool_call=self, awrap_tool_call=self.awrap, **kwargs)

    # execution ------------------------------------------------------------------------

    def _store(self, request: ToolCallRequest, needs: str = "breaker") -> BaseStore:
        store = self.store or getattr(request.runtime, "store", None)
        if store is None:
            raise ValueError(
                f"ToolCallGuard.{needs} needs a BaseStore: compile the graph with "
                "store=... or pass ToolCallGuard(store=...)"
            )
        return store

    def _blocked(self, request: ToolCallRequest, state: str, plan: Plan) -> tuple[Any, Failure]:
        tool = request.tool_call["name"]
        failure = Failure(
            FailureKind.TRANSIENT,
            circuit_open=True,
            message=f"the circuit breaker for {tool} is {state}",
            error_type="agent_guards.core.errors.CircuitOpen",
        )
        return self._failed(request, failure, plan), failure

    def _failed(self, request: ToolCallRequest, failure: Failure, plan: Plan) -> ToolMessage:
        call = request.tool_call
        return failure_message(
            failure,
            tool=call["name"],
            tool_call_id=str(call["id"]),
            id=plan.replace_id,
            attempt=plan.attempt,
        )

    def _after(
        self, request: ToolCallRequest, result: Any, plan: Plan, execution: int | None = None
    ) -> tuple[Any, Failure | None, list[GuardDecision]]:
        """The executed result classified, with its attempt (and effect, and ``execution``:
        :func:`record_effect`'s fields, in the same copy) in its metadata."""
        extra: list[GuardDecision] = []
        if not isinstance(result, ToolMessage):
            return result, None, extra
        try:
            failure = self.retry.failure_of(result) if self.retry else failure_of(result)
        except InvalidInputError as err:
            policy = self.retry.label if self.retry is not None else ""
            extra.append(
                _node.invalid_input("retry_router", err, policy=policy, verdict=Verdict.CONTINUE)
            )
            failure = None
        fields: dict[str, Any] = {"attempt": plan.attempt}
        if plan.effect is not None:
            fields.update(_effect_fields(plan.effect, execution))
        update: dict[str, Any] = {"response_metadata": _ours(result, **fields)}
        if plan.replace_id is not None:
            update["id"] = plan.replace_id
        if failure is not None and not isinstance(result.artifact, Mapping):
            update["artifact"] = failure.to_artifact()
        return result.model_copy(update=update), failure, extra

    def _exception(
        self, request: ToolCallRequest, err: Exception, plan: Plan
    ) -> tuple[ToolMessage, Failure]:
        if self.retry is None:
            raise err
        # the real clock: an HTTP-date Retry-After is the server's time, not the run's
        failure = describe_failure(err, now=datetime.now(UTC))
        return self._failed(request, failure, plan), failure

    def _decide(self, request: ToolCallRequest, failure: Failure, plan: Plan) -> GuardDecision:
        assert self.retry is not None
        call = request.tool_call
        prior = plan.prior  # read here when the call's first execution failed
        if prior is None:
            prior = earlier_attempts(request, self.retry, self.messages_key)
        return decide_failure(
            failure,
            call_id=str(call["id"]),
            tool=call["name"],
            signature=signature_of(call, plan),
            attempt=plan.attempt,
            prior=prior,
            policy=self.retry,
            effect=plan.effect,
        )

    def _outcome(
        self,
        request: ToolCallRequest,
        result: Any,
        plan: Plan,
        *,
        failure: Failure | None,
        executions: int,
        extra: Sequence[GuardDecision] = (),
        execution: int | None = None,
    ) -> Outcome:
        """``execution``: the number the ledger gave this execution of the call, if any."""
        decisions = [*plan.decisions, *extra]
        if executions and plan.effect is not None and isinstance(result, ToolMessage):
            result = record_effect(result, plan.effect, execution)
        route, delay = None, None
        if failure is not None and self.retry is not None:
            try:
                decision = self._decide(request, failure, plan)
            except InvalidInputError as err:  # a malformed failure earlier in the history
                decision = _node.invalid_input(
                    "retry_router", err, policy=self.retry.label, verdict=Verdict.CONTINUE
                )
            decisions.append(decision)
            route, delay = decision.data.get("route"), decision.data.get("delay")
        view = plan.ledger[0] if plan.ledger is not None else None
        written = dict(view.writes) if isinstance(view, StateLedger) else {}
        return Outcome(result, failure, tuple(decisions), executions, route, delay, written)

    def finish(self, request: ToolCallRequest, outcome: Outcome) -> Any:
        """What the wrapper returns: the message, plus ``guard_log`` / ``usage`` updates."""
        config = getattr(request.runtime, "config", None)
        update: dict[str, Any] = {}
        if self.log_decisions and outcome.decisions:
            update[self.keys.log] = [_node.stamp(d, config) for d in outcome.decisions]
        if self.count_usage and outcome.executions:
            update[self.keys.usage] = {"tool_calls": outcome.executions}
        if outcome.ledger:
            update[self.keys.ledger] = dict(outcome.ledger)
        result = outcome.result
        if isinstance(result, Command):
            if update and isinstance(result.update, dict) and not set(update) & set(result.update):
                return Command(
                    graph=result.graph,
                    goto=result.goto,
                    resume=result.resume,
                    update={**result.update, **update},
                )
            return result
        if not update:
            return result
        return Command(update={self.messages_key: [result], **update})

    @staticmethod
    def _decision_key(request: ToolCallRequest, plan: Plan) -> str | None:
        """Where the breaker records refusing this attempt of this call in this thread (a
        replay repeats the recorded refusal); None without a thread."""
        config = getattr(request.runtime, "config", None) or {}
        thread = (config.get("configurable") or {}).get("thread_id")
        if thread is None:
            return None
        return f"{thread}|{request.tool_call['id']}|{plan.attempt}"

    def _token(self, request: ToolCallRequest) -> bool:
        """A retry token from the shared budget (always, without one)."""
        if self.retry_budget is None:
            return True
        store = self._store(request, "retry_budget")
        return self.retry_budget.acquire(store, request.tool_call["name"])

    async def _atoken(self, request: ToolCallRequest) -> bool:
        if self.retry_budget is None:
            return True
        store = self._store(request, "retry_budget")
        return await self.retry_budget.aacquire(store, request.tool_call["name"])

    def _no_token(self, request: ToolCallRequest, plan: Plan) -> tuple[Any, Failure]:
        assert self.retry_budget is not None
        tool, budget = request.tool_call["name"], self.retry_budget
        failure = Failure(
            FailureKind.TRANSIENT,
            circuit_open=True,
            message=f"the retry budget for {tool} is spent ({budget.max_retries} per "
            f"{budget.per}s for all callers)",
            error_type="agent_guards.retry_router.RetryBudget",
        )
        return self._failed(request, failure, plan), failure

    def _breaker(self, request: ToolCallRequest) -> CircuitBreaker | None:
        """The circuit breaker this call goes through (a subclass may leave it out for a run
        without a store)."""
        return self.breaker

    @staticmethod
    def _record(breaker: CircuitBreaker | None, failure: Failure | None) -> bool:
        return breaker is not None and (failure is None or failure.kind in breaker.counted_kinds)

    def run_once(self, request: ToolCallRequest, execute: Execute, plan: Plan) -> Outcome:
        """One execution per ``plan`` (breaker check, backoff wait, classification)."""
        if plan.kind == "reuse":
            return self._answered(request, plan)
        tool, breaker = request.tool_call["name"], self._breaker(request)
        if breaker is not None:  # the real clock (never the run's): shared state
            allowed, state = breaker.admit(self._store(request), tool,
                                           key=self._decision_key(request, plan))  # fmt: skip
            if not allowed:
                message, blocked = self._blocked(request, state, plan)
                return self._outcome(request, message, plan, failure=blocked, executions=0)
        if plan.kind == "retry" and plan.delay > 0:
            self.sleep(plan.delay)
        # the retry's token is taken when it is about to reach the tool, after the backoff:
        # the cap holds on the retries the tool sees per slot, whatever each one waited
        if plan.kind == "retry" and not self._token(request):
            message, blocked = self._no_token(request, plan)
            return self._outcome(request, message, plan, failure=blocked, executions=0)
        plan, where = self._where(request, plan)
        started = self._claim(request, plan, where)
        if isinstance(started, Plan):  # the ledger knows this call: answered, not run
            return self._answered(request, replace(started, ledger=where))
        late = self._late(request, plan, started)
        try:
            done = run_within(execute, request, self._time_limit(request), late)
            result, failure, extra = self._after(request, done, plan, _execution(started))
        except GraphBubbleUp:  # the tool asked a human: on resume it runs again from the top
            self._give_back(request, started, where)
            raise
        except Exception as err:
            (result, failure), extra = self._exception(request, err, plan), []
        if not _timed_out(failure):  # else the late finish records it (or it stays open)
            self._ledger_finish(request, result, failure, started, where)
        if breaker is not None and self._record(breaker, failure):
            breaker.record(self._store(request), tool, ok=failure is None)
        return self._outcome(request, result, plan, failure=failure, executions=1, extra=extra,
                             execution=_execution(started))  # fmt: skip

    async def arun_once(self, request: ToolCallRequest, execute: AExecute, plan: Plan) -> Outcome:
        """Async :meth:`run_once`."""
        if plan.kind == "reuse":
            return self._answered(request, plan)
        tool, breaker = request.tool_call["name"], self._breaker(request)
        if breaker is not None:  # the real clock (never the run's): shared state
            key = self._decision_key(request, plan)
            allowed, state = await breaker.aadmit(self._store(request), tool, key=key)
            if not allowed:
                message, blocked = self._blocked(request, state, plan)
                return self._outcome(request, message, plan, failure=blocked, executions=0)
        if plan.kind == "retry" and plan.delay > 0:
            await self.asleep(plan.delay)
        if plan.kind == "retry" and not await self._atoken(request):  # after the backoff
            message, blocked = self._no_token(request, plan)
            return self._outcome(request, message, plan, failure=blocked, executions=0)
        plan, where = self._where(request, plan)
        started = await self._aclaim(request, plan, where)
        if isinstance(started, Plan):  # the ledger knows this call: answered, not run
            return self._answered(request, replace(started, ledger=where))
        try:
            done = await arun_within(execute, request, self._time_limit(request))
            result, failure, extra = self._after(request, done, plan, _execution(started))
        except GraphBubbleUp:  # as in run_once
            await self._off_loop(self._give_back, request, started, where)
            raise
        except Exception as err:
            (result, failure), extra = self._exception(request, err, plan), []
        if not _timed_out(failure):  # cancelled at the limit: what it did is unknown
            await self._aledger_finish(request, result, failure, started, where)
        if breaker is not None and self._record(breaker, failure):
            await breaker.arecord(self._store(request), tool, ok=failure is None)
        return self._outcome(request, result, plan, failure=failure, executions=1, extra=extra,
                             execution=_execution(started))  # fmt: skip

    def _time_limit(self, request: ToolCallRequest) -> float | None:
        """This execution's time limit in seconds (None: none)."""
        limit = self.timeout
        if callable(limit):
            limit = limit(request)
        elif isinstance(limit, Mapping):
            limit = limit.get(str(request.tool_call["name"]))
        return None if limit is None else float(limit)

    def _late(
        self, request: ToolCallRequest, plan: Plan, started: dict[str, Any] | None
    ) -> Callable[[Future[Any]], None] | None:
        """What to do when a sync tool past its limit finishes after all: record its
        outcome in the ledger (the entry was left open), so a reconcile finds it."""
        if started is None or plan.ledger is None or isinstance(plan.ledger[0], StateLedger):
            return None  # in state, the entry the step returns stays started

        def record(future: Future[Any]) -> None:
            try:
                result, failure, _ = self._after(request, future.result(), plan)
            except Exception as err:  # the tool's own exception, raised by result()
                try:
                    result, failure = self._exception(request, err, plan)
                except Exception:  # no retry policy: the error itself
                    result, failure = str(err), _LATE_FAILURE
            try:
                self._ledger_finish(request, result, failure, started, plan.ledger)
            except Exception:  # a worker thread: nothing may escape it
                _LOG.exception("recording a late tool outcome failed")

        return record

    def _answered(self, request: ToolCallRequest, plan: Plan) -> Outcome:
        """The outcome of a call answered without running it here (a reuse; an answer from
        the ledger counts as this history's execution of the call)."""
        return self._outcome(request, plan.message, plan, failure=None,
                             executions=int(plan.counted))  # fmt: skip

    def plan(self, request: ToolCallRequest) -> Plan:
        """Plan one call from the request's state (execute, reuse, retry or skip)."""
        clash = self.keys.clash(request.state)
        if clash is not None:  # before anything runs: the counts and decisions would be lost
            raise ValueError(
                f"ToolCallGuard: the state's {clash}; give the guards other names with "
                f"keys=StateKeys(log=..., usage=...) (the same on every guard of the graph), "
                f"or rename your field"
            )
        self._require_channels(request)
        unpaired = missing_id(request, messages_key=self.messages_key)
        if unpaired is not None:  # no id: not executed, answered with its position
            return unpaired
        plan = plan_call(request, loop=self.loop, retry=self.retry, messages_key=self.messages_key,
                         effects=self.effects)  # fmt: skip
        if plan.kind not in ("execute", "retry"):
            return plan
        config = getattr(request.runtime, "config", None) or {}
        cancel = (config.get("configurable") or {}).get(CANCEL_KEY)
        where = self._ledger_at(request)
        plan = replaced(plan, ledger=where)
        if cancel:  # unless it ran already (a crash, a fork): then its outcome stands
            known = self._recorded(request, plan, *where) if where is not None else None
            if known is not None and known.kind == "reuse":
                return known
            return cancelled(request.tool_call, str(cancel), replace_id=plan.replace_id)
        limit = self.budget.max_tool_calls if self.budget is not None else None
        if limit is None:
            return plan
        extra, why = grant(config)
        # below the limit the ledger's size stands for its count: the same decisions
        spent = self.ledger.executions(*where, under=limit) if self.ledger and where else 0
        refused = over_budget(
            request,
            plan,
            limit + extra,
            messages_key=self.messages_key,
            spent=spent,
            usage_key=self.keys.usage,
            loop=self.loop,
        )
        if refused is not None:  # unless it already ran: then its outcome costs nothing
            known = self._recorded(request, plan, *where) if where is not None else None
            answer = known if known is not None and known.kind == "reuse" else refused
            return replace(answer, ledger=where)
        if extra and over_budget(
            request, plan, limit, messages_key=self.messages_key, spent=spent,
            usage_key=self.keys.usage, loop=self.loop,
        ):  # fmt: skip
            return replace(
                plan, decisions=(*plan.decisions, granted(request.tool_call, limit, extra, why))
            )
        return plan

    def _require_channels(self, request: ToolCallRequest) -> None:
        """Raise before anything runs when the graph's state has no channel for the guard's
        decisions or its tool count: LangGraph would drop them silently, and a tool budget
        counted there would never be spent."""
        config = cast("RunnableConfig", getattr(request.runtime, "config", None) or {})
        missing = _node.missing_channels(config, self._channels)
        if missing:
            raise ValueError(
                f"ToolCallGuard: the graph's state has no {', '.join(map(repr, missing))} "
                f"channel, so the guard's decisions and tool counts would be dropped (and a "
                f"tool budget never spent); add GuardState to your state schema (class "
                f"State(MessagesState, GuardState); in create_react_agent, "
                f"state_schema=GuardedReactState from agent_guards.prebuilt, or "
                f"guarded_react_agent), or keys.schema() when the guards use other names, or "
                f"ToolCallGuard(log_decisions=False, count_usage=False)"
            )

    @cached_property
    def _channels(self) -> tuple[str, ...]:
        """The state channels the guard writes (made once: the guard is frozen)."""
        wanted = ((self.keys.log, self.log_decisions), (self.keys.usage, self.count_usage))
        return tuple(key for key, on in wanted if on)

    # the run ledger ----------------------------------------------------------------------

    def _ledger_at(self, request: ToolCallRequest) -> tuple[BaseStore, str] | None:
        """(store, thread id) when the ledger is on: the graph's store when the run has a
        thread, else a view of the ledger kept in state (whose writes the call returns)."""
        if self.ledger is None:
            return None
        config = getattr(request.runtime, "config", None) or {}
        thread = (config.get("configurable") or {}).get("thread_id")
        store = self.store or getattr(request.runtime, "store", None)
        if store is not None:
            return (store, str(thread)) if thread is not None else None
        entries = _node.state_value(request.state, self.keys.ledger)
        if entries is None:  # an unwritten channel reads as {}: this state has none
            raise ValueError(
                f"ToolCallGuard.ledger without a store keeps the ledger in state, and the "
                f"state has no {self.keys.ledger!r} channel: subclass GuardState (or "
                f"keys.schema()), or compile the graph with store=..."
            )
        return StateLedger(entries), "state" if thread is None else str(thread)

    def _where(self, request: ToolCallRequest, plan: Plan) -> tuple[Plan, Any]:
        """The plan with the ledger it was planned on (one read of the state per call)."""
        if plan.ledger is None and self.ledger is not None:
            plan = replace(plan, ledger=self._ledger_at(request))
        return plan, plan.ledger

    def _recorded(
        self, request: ToolCallRequest, plan: Plan, store: BaseStore, thread: str
    ) -> Plan:
        """An answer from the ledger for a call it already knows; else ``plan``, carrying the
        entry it read (so recording the run needs no second read)."""
        assert self.ledger is not None
        entry = self.ledger.entry(store, thread, str(request.tool_call["id"]))
        if entry is None:
            return replace(plan, recorded={})
        settled = self._settle(request, store, thread, entry, plan.effect)
        return settled if isinstance(settled, Plan) else replace(plan, recorded=settled)

    def _claim(
        self, request: ToolCallRequest, plan: Plan, where: tuple[BaseStore, str] | None
    ) -> dict[str, Any] | Plan | None:
        """Claim the call's next execution before it runs: the entry written (run it), or
        the answer when the ledger already knows the call (it ran before a crash, on another
        branch, or in another worker right now); None without a ledger.

        The claim comes first and the ledger is read only when it fails: a call running for
        the first time costs one insert."""
        if where is None or self.ledger is None:
            return None
        store, thread = where
        call = request.tool_call
        previous = plan.recorded if plan.recorded is not None else {}
        for _ in range(3):  # a claim lost to a concurrent execution of the same call
            started = self._ledger_start(request, plan, store, thread, previous)
            if started is not None:
                return self._counted_again(request, plan, store, thread, started)
            known = self.ledger.entry(store, thread, str(call["id"])) or {"status": "started"}
            settled = self._settle(request, store, thread, known, plan.effect)
            if isinstance(settled, Plan):
                return settled
            previous = settled  # it failed, did not happen, or only read: run it again
        content = f"{call['name']} was claimed by another worker and not run here."
        return from_ledger(call, content, "ran_elsewhere", policy=self._policy_label(), failed=True)

    def _counted_again(
        self,
        request: ToolCallRequest,
        plan: Plan,
        store: BaseStore,
        thread: str,
        started: dict[str, Any],
    ) -> dict[str, Any] | Plan:
        """The claim, checked against the budget once more: another worker on the thread
        may have spent its last units between this call's budget check and its claim.

        Counted after claiming, a claim past the limit is given back (``not_run``) and
        answered as over budget. So workers racing for the last units never run more
        than the budget: of the calls that run, the one counting last saw every one of
        them claimed. They may run fewer (both may give back)."""
        assert self.ledger is not None
        limit = self._ledger_limit
        if limit is None:
            return started
        limit += grant(getattr(request.runtime, "config", None))[0]
        spent = self.ledger.executions(store, thread, under=limit + 1)
        if spent <= limit:
            return started
        self.ledger.void(store, thread, started)
        refused = over_budget(request, plan, limit, messages_key=self.messages_key,
                              spent=spent - 1, usage_key=self.keys.usage,
                              loop=self.loop)  # fmt: skip
        return refused if refused is not None else started

    def _settle(
        self,
        request: ToolCallRequest,
        store: BaseStore,
        thread: str,
        entry: Mapping[str, Any],
        effect: Effect | None,
    ) -> Plan | dict[str, Any]:
        """What a recorded execution of a call says: its outcome as the answer (done, or
        reconciled after it never reported back), or the entry when the call may run (it
        failed, did not happen, or only reads: a read may simply run again)."""
        assert self.ledger is not None
        call = request.tool_call
        if not (effect or Effect.UNKNOWN).changes_world:
            return dict(entry)
        latest, earlier = dict(entry), False
        turn = Turn.of(request.state)
        if turn is not None and not turn.served(entry):
            # a fork of an earlier turn finds that turn's execution; none: the id came back
            # for a later user message, a new request (it runs, after the latest execution)
            own = self.ledger.entry(store, thread, str(call["id"]), where=turn.served)
            if own is None:
                return latest
            entry, earlier = own, True
        if entry.get("signature", "") not in ("", retry_signature(call, effect)[:500]):
            return latest  # the id came back with other arguments (a fork that edited them)
        if entry["status"] == "started" and not earlier:  # running elsewhere, or it was lost
            entry = self.ledger.outcome(store, thread, str(call["id"]), sleep=self._wait) or {}
        answer = settle(self.ledger, store, thread, call, entry, policy=self._policy_label())
        # an earlier turn's execution that may run again runs as the call's next execution
        return latest if earlier and not isinstance(answer, Plan) else answer

    async def _off_loop(self, func: Callable[..., T], request: ToolCallRequest, *args: Any) -> T:
        """Run a step that reads or writes the ledger, ``func(request, *args)``, off the
        event loop when the ledger's store does I/O: async stores (``AsyncSqliteStore``,
        ``AsyncPostgresStore``) serve their sync API from worker threads only, and a sync
        store's I/O would block the loop.

        Without the ledger, with the ledger in state or in an ``InMemoryStore``, the step
        does no I/O and runs here, unless it has to wait for a call another task is
        running: blocking the loop would keep that task from finishing, so the step starts
        over in a worker thread (it has written nothing before it waits)."""
        store = self.store or getattr(request.runtime, "store", None)
        if self.ledger is None or store is None or in_process(store):
            token = _ON_LOOP.set(True)
            try:
                return func(request, *args)
            except _WouldBlock:
                pass
            finally:
                _ON_LOOP.reset(token)
        return await asyncio.to_thread(func, request, *args)

    def _wait(self, seconds: float) -> None:
        """``sleep`` while the ledger waits for another worker's outcome; on the event loop
        it must not block (see :meth:`_off_loop`)."""
        if _ON_LOOP.get():
            raise _WouldBlock
        self.sleep(seconds)

    @property
    def _ledger_limit(self) -> int | None:
        """``max_tool_calls`` when the ledger counts the thread's executions against it."""
        if self.ledger is None or self.budget is None:
            return None
        return self.budget.max_tool_calls

    def _policy_label(self) -> str:
        return self.loop.label if self.loop is not None else ""

    def _ledger_start(
        self,
        request: ToolCallRequest,
        plan: Plan,
        store: BaseStore,
        thread: str,
        previous: Mapping[str, Any],
    ) -> dict[str, Any] | None:
        """Claim the execution after ``previous`` and record the intent: the entry written,
        or None when that execution is already claimed."""
        assert self.ledger is not None
        call_id, intent = _intent(request, plan)
        return self.ledger.start(store, thread, call_id, previous=previous, **intent)

    async def _aclaim(
        self, request: ToolCallRequest, plan: Plan, where: tuple[BaseStore, str] | None
    ) -> dict[str, Any] | Plan | None:
        """:meth:`_claim` from the event loop. A call running for the first time is one
        awaited insert; a claim that fails or a budget to count again take the sync steps
        (off the loop when they do I/O)."""
        if where is None or self.ledger is None or self._ledger_limit is not None:
            return await self._off_loop(self._claim, request, plan, where)
        call_id, intent = _intent(request, plan)
        previous = plan.recorded if plan.recorded is not None else {}
        started = await self.ledger.astart(*where, call_id, previous=previous, **intent)
        if started is not None:
            return started
        return await self._off_loop(self._claim, request, plan, where)

    def _ledger_finish(
        self,
        request: ToolCallRequest,
        result: Any,
        failure: Failure | None,
        started: dict[str, Any] | None,
        where: tuple[BaseStore, str] | None,
    ) -> None:
        """Record the outcome after the tool ran."""
        if where is None or self.ledger is None or started is None:
            return
        call_id = str(request.tool_call["id"])
        self.ledger.finish(
            *where,
            call_id,
            started=started,
            **_outcome(result, failure, call_id, _effect_of(started)),
        )

    def _give_back(
        self,
        request: ToolCallRequest,
        started: dict[str, Any] | None,
        where: tuple[BaseStore, str] | None,
    ) -> None:
        """Give back the claim of an execution the tool interrupted (``interrupt()`` inside
        the tool): LangGraph runs the tool again on resume, and that run is the execution.
        Left ``started``, the resume would be taken for a write that never reported back,
        and the human's answer for the ledger's own question about it."""
        if where is not None and self.ledger is not None and started is not None:
            self.ledger.void(*where, started)

    async def _aledger_finish(
        self,
        request: ToolCallRequest,
        result: Any,
        failure: Failure | None,
        started: dict[str, Any] | None,
        where: tuple[BaseStore, str] | None,
    ) -> None:
        """:meth:`_ledger_finish` from the event loop."""
        if where is None or self.ledger is None or started is None:
            return
        call_id = str(request.tool_call["id"])
        outcome = _outcome(result, failure, call_id, _effect_of(started))
        await self.ledger.afinish(*where, call_id, started=started, **outcome)

    def run_retrying(self, request: ToolCallRequest, execute: Execute, plan: Plan) -> Outcome:
        """:meth:`run_once`, again after each backoff for as long as the route is ``retry``:
        one outcome with every attempt's decisions and executions."""
        decisions: list[GuardDecision] = []
        count = 0
        while True:
            out = self.run_once(request, execute, plan)
            if out.route != "retry":
                return _merged(decisions, count, out)
            decisions.extend(out.decisions)
            count += out.executions
            plan = _next_attempt(plan, out)

    async def arun_retrying(
        self, request: ToolCallRequest, execute: AExecute, plan: Plan
    ) -> Outcome:
        """Async :meth:`run_retrying`."""
        decisions: list[GuardDecision] = []
        count = 0
        while True:
            out = await self.arun_once(request, execute, plan)
            if out.route != "retry":
                return _merged(decisions, count, out)
            decisions.extend(out.decisions)
            count += out.executions
            plan = _next_attempt(plan, out)

    def __call__(self, request: ToolCallRequest, execute: Execute) -> Any:
        """Sync ``wrap_tool_call``."""
        plan = self.plan(request)
        if plan.kind == "skip":
            return Command(update={})
        run = self.run_retrying if self.retry_in_place else self.run_once
        return self.finish(request, run(request, execute, plan))

    async def awrap(self, request: ToolCallRequest, execute: AExecute) -> Any:
        """Async ``awrap_tool_call`` (same decisions as the sync path)."""
        # planning reads the ledger only to count the tool budget or to check a cancelled call
        config = getattr(request.runtime, "config", None) or {}
        reads = self._ledger_limit is not None or bool(
            (config.get("configurable") or {}).get(CANCEL_KEY)
        )
        plan = await self._off_loop(self.plan, request) if reads else self.plan(request)
        if plan.kind == "skip":
            return Command(update={})
        run = self.arun_retrying if self.retry_in_place else self.arun_once
        return self.finish(request, await run(request, execute, plan))


def _next_attempt(plan: Plan, out: Outcome) -> Plan:
    """The plan of the next attempt in place: same call, same effect (a read stays a read)."""
    return replace(plan, kind="retry", attempt=plan.attempt + 1, delay=out.delay or 0.0,
                   decisions=(), recorded=None)  # fmt: skip


def _merged(decisions: list[GuardDecision], count: int, out: Outcome) -> Outcome:
    return replace(out, decisions=(*decisions, *out.decisions), executions=count + out.executions)


_ON_LOOP: ContextVar[bool] = ContextVar("agent_guards_ledger_on_loop", default=False)


class _WouldBlock(Exception):
    """A ledger step running on the event loop would have to wait."""


def settle(
    ledger: RunLedger,
    store: BaseStore,
    thread: str,
    call: Mapping[str, Any],
    entry: Mapping[str, Any],
    *,
    policy: str = "",
) -> Plan | dict[str, Any]:
    """What a call's recorded execution says, once nothing runs it any more: its outcome as
    the answer (done, or confirmed by :meth:`RunLedger.ask` after it never reported back),
    or the entry when the call may run (it failed, or it did not happen: then not counted)."""
    if entry.get("status") == "done":
        content, artifact = entry.get("content", ""), entry.get("artifact")
        return from_ledger(call, content, "recorded_outcome", policy=policy, artifact=artifact)
    if entry.get("status") not in ("started", "unknown"):  # failed, or never happened
        return dict(entry)
    answer = ledger.ask(entry)
    if answer is None:  # it did not happen: not counted, and the call may run
        ledger.void(store, thread, entry)
        return {**entry, "status": "not_run"}
    content, artifact = answer if isinstance(answer, tuple) else (answer, None)
    ledger.finish(store, thread, str(call["id"]), content=str(content), ok=True, started=entry,
                  artifact=artifact)  # fmt: skip
    return from_ledger(call, str(content), "reconciled", policy=policy, artifact=artifact)


def _intent(request: ToolCallRequest, plan: Plan) -> tuple[str, dict[str, Any]]:
    """The call's id, and what the ledger records of it before it runs."""
    call = request.tool_call
    args = call.get("args")
    return str(call["id"]), {
        "tool": call["name"],
        "signature": signature_of(call, plan),
        "effect": plan.effect or Effect.UNKNOWN,
        "attempt": plan.attempt,
        "args": args if isinstance(args, Mapping) else None,
        "turn": Turn.of(request.state),
    }


def _outcome(result: Any, failure: Failure | None, call_id: str, effect: Effect) -> dict[str, Any]:
    """What the ledger records of a call's result after it ran: the answer's text and
    artifact (a ``Command``'s answer is the ToolMessage its update carries for the call)."""
    if isinstance(result, Command):
        message = _command_answer(result, call_id)
        bare = "[state update] the tool answered with a Command and no message"
    elif isinstance(result, ToolMessage):
        message, bare = result, ""  # never str(): a message's repr costs more than the rest
    else:
        message, bare = None, str(result)
    return {
        "content": content_text(message.content) if message is not None else bare,
        "ok": failure is None,
        # a write that may have done its work (a timeout) is asked about, never re-run; an
        # idempotent write may simply run again
        "unknown": failure is not None and may_repeat_a_write(failure, effect),
        "artifact": message.artifact if message is not None and failure is None else None,
    }


def _effect_of(entry: Mapping[str, Any]) -> Effect:
    """The effect an execution was recorded with (unknown when it says none)."""
    try:
        return Effect(entry.get("effect", Effect.UNKNOWN.value))
    except ValueError:
        return Effect.UNKNOWN


def _command_answer(command: Command[Any], call_id: str) -> ToolMessage | None:
    """The ToolMessage answering ``call_id`` in a Command's update, if it carries one."""
    update = command.update
    if isinstance(update, Mapping):
        values: Iterable[Any] = update.values()
    elif isinstance(update, list | tuple):  # (channel, value) pairs
        values = (pair[1] for pair in update if isinstance(pair, tuple) and len(pair) == 2)
    else:
        values = vars(update).values() if hasattr(update, "__dict__") else ()
    for value in values:
        for item in value if isinstance(value, list | tuple) else (value,):
            if isinstance(item, ToolMessage) and item.tool_call_id == call_id:
                return item
    return None


def record_effect(
    message: ToolMessage, effect: Effect, execution: int | None = None
) -> ToolMessage:
    """Record an executed call's effect on its result, for guards that read only messages,
    and which execution of the call it was when the ledger numbered it (``execution``: a
    call id a model repeats for a later request runs again, as execution 2, 3, ...)."""
    fields = _effect_fields(effect, execution)
    ours = (message.response_metadata or {}).get("agent_guards")
    if isinstance(ours, Mapping) and all(_same(ours.get(k), v) for k, v in fields.items()):
        return message  # recorded already (the wrapper does it as it records the attempt)
    meta = _ours(message, **fields)
    return message.model_copy(update={"response_metadata": meta})


def _effect_fields(effect: Effect, execution: int | None) -> dict[str, Any]:
    fields: dict[str, Any] = {EFFECT_KEY: effect.value}
    if execution is not None:
        fields["execution"] = execution
    return fields


def _same(value: Any, wanted: Any) -> bool:
    return type(value) is type(wanted) and value == wanted


def _execution(started: Any) -> int | None:
    """The ledger's number of the execution ``started`` (its entry), None without one."""
    number = started.get("executions") if isinstance(started, Mapping) else None
    return number if isinstance(number, int) else None


def _ours(message: ToolMessage, **fields: Any) -> dict[str, Any]:
    """The message's ``response_metadata`` with ``fields`` added under ``agent_guards``."""
    meta = dict(message.response_metadata or {})
    ours = meta.get("agent_guards")
    meta["agent_guards"] = {**(ours if isinstance(ours, Mapping) else {}), **fields}
    return meta


def _timed_out(failure: Failure | None) -> bool:
    return failure is not None and isinstance(failure.original, ToolTimeoutError)


def _check_timeout(timeout: Any) -> None:
    """A time limit is seconds > 0: one number, one per tool name, or a callable."""
    if timeout is None or callable(timeout):
        return
    limits = timeout.items() if isinstance(timeout, Mapping) else [("", timeout)]
    for tool, value in limits:
        ok = not isinstance(value, bool) and isinstance(value, int | float) and value > 0
        if not ok:
            where = f"[{tool!r}]" if tool else ""
            raise ValueError(f"ToolCallGuard.timeout{where} must be seconds > 0, got {value!r}")
