"""loop_check and retry_router for ``langchain.agents.create_agent`` (middleware adapters).

Needs the ``agents`` extra (``pip install 'agent-guards[agents]'``); importing this module
without langchain raises an ImportError that says so. Both middlewares run the same pure
cores as the graph adapters (:func:`~agent_guards.loops.detect_loop`,
:func:`~agent_guards.failures.route_failures`) and keep nothing on the instance: counts
come from the messages, decisions go to the ``guard_log`` channel, tool executions to
``usage["tool_calls"]`` (counted by :class:`RetryRouterMiddleware` only, retries included).

* :class:`LoopGuardMiddleware` - ``wrap_tool_call`` answers an identical call from the
  earlier result (REUSE); ``before_model`` adds one nudge; ``before_model`` /
  ``after_model`` stop the run (answering pending calls, ending with the partial result
  and the reason), raise :class:`~agent_guards.errors.LoopDetected`, or ``interrupt``.
* :class:`RetryRouterMiddleware` - ``wrap_tool_call`` classifies failures, checks the
  circuit breaker and retries TRANSIENT / EMPTY_ERROR failures with backoff inside the
  call; ``before_model`` ends the run on refuse / clarify / abstain / fallback routes.

Unlike the graph adapter, a retry here happens inside one tool-node run: the attempts of
that run are not checkpointed one by one (a crash mid-retry repeats them), while earlier
failed calls of the same signature still count against ``max_attempts``.

Example:
    >>> from langchain.agents import create_agent
    >>> from langchain_core.messages import HumanMessage
    >>> from langchain_core.tools import tool
    >>> from agent_guards.testing import ScriptedChatModel, tool_call_message
    >>> @tool
    ... def search(q: str) -> str:
    ...     '''Search.'''
    ...     return "rates are 4%"
    >>> model = ScriptedChatModel(script=[tool_call_message("search", {"q": "rates"})],
    ...                           repeat_last=True)
    >>> agent = create_agent(model, tools=[search],
    ...                      middleware=[LoopGuardMiddleware(), RetryRouterMiddleware()])
    >>> out = agent.invoke({"messages": [HumanMessage("rates?")]})
    >>> [d.verdict.value for d in out["guard_log"]], out["usage"]["tool_calls"], len(model.calls)
    (['reuse', 'nudge', 'stop'], 1, 3)
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Annotated, Any, Literal

try:
    from langchain.agents.middleware import AgentMiddleware, AgentState, hook_config
except ImportError as err:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "agent_guards.middleware needs langchain: pip install 'agent-guards[agents]'"
    ) from err
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.runtime import Runtime
from langgraph.store.base import BaseStore
from langgraph.types import interrupt
from typing_extensions import NotRequired

from . import _node
from ._breaker import CircuitBreaker
from ._loop_core import detect_loop
from ._loop_policy import LoopPolicy
from ._retry_core import RetryRouterPolicy, route_failures
from ._stopping import answer_pending, final_message
from ._tool_guard import Outcome, ToolCallGuard
from ._tool_plan import Plan
from .errors import InvalidInputError, LoopDetected, check_choice
from .failures import finish_messages
from .loops import nudge_text
from .types import DEFAULT_LOG_SIZE, GuardDecision, Usage, Verdict, keep_last, merge_usage

__all__ = ["GuardAgentState", "LoopGuardMiddleware", "RetryRouterMiddleware"]


class GuardAgentState(AgentState[Any]):
    """``create_agent`` state with the guard channels (``guard_log``, ``usage``).

    Example:
        >>> from agent_guards import GuardAgentState, LoopGuardMiddleware, RetryRouterMiddleware
        >>> middlewares = (LoopGuardMiddleware(), RetryRouterMiddleware())
        >>> all(m.state_schema is GuardAgentState for m in middlewares)
        True
        >>> {"messages", "guard_log", "usage"} <= set(GuardAgentState.__annotations__)
        True
    """

    guard_log: NotRequired[Annotated[list[GuardDecision], keep_last(DEFAULT_LOG_SIZE)]]
    usage: NotRequired[Annotated[Usage, merge_usage]]


def _safe(guard: str, policy: str, decide: Callable[[], GuardDecision]) -> GuardDecision:
    try:
        return decide()
    except InvalidInputError as err:
        return _node.invalid_input(guard, err, policy=policy, verdict=Verdict.CONTINUE)


class LoopGuardMiddleware(AgentMiddleware[GuardAgentState, Any, Any]):
    """loop_check for ``create_agent``: reuse repeats, nudge once, then stop.

    Args:
        policy: Thresholds and what counts as the same call (default :class:`LoopPolicy`).
        exit_behavior: ``"end"`` finishes the run with the partial result and the reason;
            ``"error"`` raises :class:`~agent_guards.errors.LoopDetected` instead.

    Example:
        >>> from langchain_core.messages import ToolMessage
        >>> from agent_guards import LoopGuardMiddleware
        >>> def turn(call_id):
        ...     call = AIMessage("", tool_calls=[{"name": "fx", "args": {}, "id": call_id}])
        ...     return [call, ToolMessage("1.08", tool_call_id=call_id)]
        >>> history = [*turn("c1"), *turn("c2")]
        >>> update = LoopGuardMiddleware().before_model({"messages": history}, runtime=None)
        >>> update["guard_log"][0].verdict.value, update["messages"][0].content
        ('nudge', '[loop_check] fx was called 2 times with the same arguments. ...')
    """

    state_schema = GuardAgentState

    def __init__(
        self, *, policy: LoopPolicy | None = None, exit_behavior: Literal["end", "error"] = "end"
    ) -> None:
        super().__init__()
        policy = LoopPolicy() if policy is None else policy
        if not isinstance(policy, LoopPolicy):
            raise TypeError(f"policy must be a LoopPolicy, got {type(policy).__name__}")
        self.policy = policy
        self.exit_behavior = check_choice("exit_behavior", exit_behavior, ("end", "error"))
        self._guard = ToolCallGuard(loop=policy, retry=None, count_usage=False)

    def _decide(self, state: Any, runtime: Runtime[Any]) -> GuardDecision:
        messages = list(state.get("messages") or ())
        decision = _safe(
            "loop_check", self.policy.label, lambda: detect_loop(messages, policy=self.policy)
        )
        return _node.stamp(decision, getattr(runtime, "config", None))

    def _stop(self, decision: GuardDecision, state: Any) -> dict[str, Any]:
        decision = replace(decision, verdict=Verdict.STOP)
        if self.exit_behavior == "error":
            raise LoopDetected(
                guard="loop_check",
                reason=decision.reason,
                limit=decision.data.get("stop_at"),
                value=decision.data.get("count"),
                detail=decision.detail,
            )
        messages = list(state.get("messages") or ())
        pending = answer_pending(
            messages, f"Not executed: loop_check stopped the run ({decision.reason})."
        )
        final = final_message(decision, [*messages, *pending])
        return {"messages": [*pending, final], "guard_log": [decision], "jump_to": "end"}

    def _escalate(self, decision: GuardDecision, state: Any) -> dict[str, Any] | None:
        answer = interrupt(
            {
                "guard": "loop_check",
                "decision": decision.to_dict(),
                "question": f"The agent seems stuck: {decision.detail}. Stop or continue?",
            }
        )
        text = answer.get("message") if isinstance(answer, dict) else answer
        action = answer.get("action") if isinstance(answer, dict) else answer
        if action == "stop" or action is False:
            return self._stop(decision, state)
        if isinstance(text, str) and text.strip() and text.strip().lower() != "continue":
            return {"messages": [HumanMessage(text.strip())], "guard_log": [decision]}
        return {"guard_log": [decision]}

    def _handle(self, state: Any, runtime: Runtime[Any], *, nudge: bool) -> dict[str, Any] | None:
        decision = self._decide(state, runtime)
        if decision.verdict is Verdict.STOP:
            return self._stop(decision, state)
        if decision.verdict is Verdict.ESCALATE:
            return self._escalate(decision, state)
        if decision.verdict is Verdict.NUDGE and nudge:
            note = HumanMessage(nudge_text(decision), name="loop_check")
            return {"messages": [note], "guard_log": [decision]}
        return None

    @hook_config(can_jump_to=["end"])
    def before_model(self, state: GuardAgentState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Nudge once, or stop, from the history as it stands before the model is called."""
        return self._handle(state, runtime, nudge=True)

    @hook_config(can_jump_to=["end"])
    def after_model(self, state: GuardAgentState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Stop before executing a call that reaches ``stop_at`` (its pending calls answered)."""
        last = (state.get("messages") or [None])[-1]
        if not isinstance(last, AIMessage) or not last.tool_calls:
            return None
        return self._handle(state, runtime, nudge=False)

    def wrap_tool_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        """Answer an identical earlier call from its result (verdict REUSE)."""
        plan = self._guard.plan(request)
        if plan.kind == "reuse":
            return self._guard.finish(request, self._guard.run_once(request, handler, plan))
        return handler(request)

    async def awrap_tool_call(self, request: Any, handler: Callable[[Any], Awaitable[Any]]) -> Any:
        """Async :meth:`wrap_tool_call`."""
        plan = self._guard.plan(request)
        if plan.kind == "reuse":
            return self._guard.finish(request, await self._guard.arun_once(request, handler, plan))
        return await handler(request)


class RetryRouterMiddleware(AgentMiddleware[GuardAgentState, Any, Any]):
    """retry_router for ``create_agent``: classify, retry with backoff, break circuits, end well.

    Args:
        policy: Routes, backoff and repair limits (default :class:`RetryRouterPolicy`).
        breaker: Optional per-tool :class:`CircuitBreaker` (state in ``store`` or the
            agent's store).
        store: Store for the breaker (default: the store ``create_agent`` was given).
        sleep: How to wait a backoff delay (inject a fake in tests); ``asleep`` for async.
        count_usage: Count each execution in ``usage["tool_calls"]``.

    Example:
        >>> from agent_guards import RetryRouterMiddleware, describe_failure, failure_message
        >>> call = AIMessage("", tool_calls=[{"name": "pay", "args": {}, "id": "c1"}])
        >>> error = failure_message(describe_failure(403), tool="pay", tool_call_id="c1")
        >>> update = RetryRouterMiddleware().before_model({"messages": [call, error]}, runtime=None)
        >>> update["jump_to"], update["guard_log"][0].verdict.value, update["messages"][-1].content
        ('end', 'refuse', "I can't do that: pay refused the request (permission). ...")
    """

    state_schema = GuardAgentState

    def __init__(
        self,
        *,
        policy: RetryRouterPolicy | None = None,
        breaker: CircuitBreaker | None = None,
        store: BaseStore | None = None,
        sleep: Callable[[float], Any] = time.sleep,
        asleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
        count_usage: bool = True,
    ) -> None:
        super().__init__()
        policy = RetryRouterPolicy() if policy is None else policy
        if not isinstance(policy, RetryRouterPolicy):
            raise TypeError(f"policy must be a RetryRouterPolicy, got {type(policy).__name__}")
        self.policy = policy
        self._guard = ToolCallGuard(
            loop=None,
            retry=policy,
            breaker=breaker,
            store=store,
            sleep=sleep,
            asleep=asleep,
            count_usage=count_usage,
        )

    @staticmethod
    def _merge(total: list[GuardDecision], count: int, out: Outcome) -> Outcome:
        return replace(out, decisions=(*total, *out.decisions), executions=count + out.executions)

    def wrap_tool_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        """Execute with classification; retry TRANSIENT / EMPTY_ERROR in place with backoff."""
        plan = replace(self._guard.plan(request), kind="execute")
        decisions: list[GuardDecision] = []
        count = 0
        while True:
            out = self._guard.run_once(request, handler, plan)
            if out.route != "retry":
                return self._guard.finish(request, self._merge(decisions, count, out))
            decisions.extend(out.decisions)
            count += out.executions
            plan = Plan("retry", attempt=plan.attempt + 1, delay=out.delay or 0.0, prior=plan.prior)

    async def awrap_tool_call(self, request: Any, handler: Callable[[Any], Awaitable[Any]]) -> Any:
        """Async :meth:`wrap_tool_call`."""
        plan = replace(self._guard.plan(request), kind="execute")
        decisions: list[GuardDecision] = []
        count = 0
        while True:
            out = await self._guard.arun_once(request, handler, plan)
            if out.route != "retry":
                return self._guard.finish(request, self._merge(decisions, count, out))
            decisions.extend(out.decisions)
            count += out.executions
            plan = Plan("retry", attempt=plan.attempt + 1, delay=out.delay or 0.0, prior=plan.prior)

    @hook_config(can_jump_to=["end"])
    def before_model(self, state: GuardAgentState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        """End the run on refuse / clarify / abstain / fallback; otherwise let the model go on."""
        messages = list(state.get("messages") or ())
        decision = _safe(
            "retry_router", self.policy.label, lambda: route_failures(messages, policy=self.policy)
        )
        if decision.data.get("route") not in ("refuse", "clarify", "abstain", "fallback"):
            return None
        decision = _node.stamp(decision, getattr(runtime, "config", None))
        return {
            "messages": finish_messages(decision, messages),
            "guard_log": [decision],
            "jump_to": "end",
        }
