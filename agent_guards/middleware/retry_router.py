"""retry_router for ``langchain.agents.create_agent``: RetryRouterMiddleware."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from typing import Any

from langchain.agents.middleware import AgentMiddleware, ModelRetryMiddleware, hook_config
from langgraph.runtime import Runtime
from langgraph.store.base import BaseStore

from agent_guards import graph as _node
from agent_guards.core.decision import GuardDecision
from agent_guards.core.effects import ToolEffects
from agent_guards.middleware.state import GuardAgentState, refuse_clash, safe_decision
from agent_guards.retry_router.breaker import CircuitBreaker, RetryBudget
from agent_guards.retry_router.classify import describe_failure
from agent_guards.retry_router.core import retryable, route_failures
from agent_guards.retry_router.graph import finish_messages
from agent_guards.retry_router.policy import RetryRouterPolicy
from agent_guards.tool_guard.wrapper import ToolCallGuard

__all__ = ["RetryRouterMiddleware", "model_retry_middleware"]


class RetryRouterMiddleware(AgentMiddleware[GuardAgentState, Any, Any]):
    """retry_router for ``create_agent``: classify, retry with backoff, break circuits, end well.

    Args:
        policy: Routes, backoff and repair limits (default :class:`RetryRouterPolicy`).
        breaker: Optional per-tool :class:`CircuitBreaker` (state in ``store`` or the
            agent's store).
        retry_budget: Optional cap on retries per tool shared through the store
            (:class:`~agent_guards.retry_router.RetryBudget`).
        store: Store for the breaker and the budget (default: the agent's store).
        sleep: How to wait a backoff delay (inject a fake in tests); ``asleep`` for async.
        count_usage: Count each execution in ``usage["tool_calls"]``.
        effects: The tools' effect classes, when the tools' own annotations do not say:
            the same :class:`~agent_guards.core.ToolEffects` you give
            ``LoopGuardMiddleware(policy=LoopPolicy(effects=...))``. A read that timed
            out is retried; a write that may have run is not (``on_unknown_outcome``).

    Example:
        >>> from agent_guards import RetryRouterMiddleware
        >>> from langchain_core.messages import AIMessage, ToolMessage
        >>> from agent_guards.retry_router import describe_failure, failure_message
        >>> call = AIMessage("", tool_calls=[{"name": "pay", "args": {}, "id": "c1"}])
        >>> error = failure_message(describe_failure(403), tool="pay", tool_call_id="c1")
        >>> update = RetryRouterMiddleware().before_model({"messages": [call, error]}, runtime=None)
        >>> update["jump_to"], update["guard_log"][0].verdict.value, update["messages"][-1].content
        ('end', 'refuse', "I can't do that: pay refused the request (...). I won't retry it ...")
    """

    state_schema = GuardAgentState

    def __init__(
        self,
        *,
        policy: RetryRouterPolicy | None = None,
        breaker: CircuitBreaker | None = None,
        retry_budget: RetryBudget | None = None,
        store: BaseStore | None = None,
        sleep: Callable[[float], Any] = time.sleep,
        asleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
        count_usage: bool = True,
        effects: ToolEffects | None = None,
    ) -> None:
        super().__init__()
        policy = RetryRouterPolicy.coerce(policy)
        self.policy = policy
        self._guard = ToolCallGuard(
            loop=None,
            effects=effects,
            retry=policy,
            breaker=breaker,
            retry_budget=retry_budget,
            store=store,
            sleep=sleep,
            asleep=asleep,
            count_usage=count_usage,
        )

    def wrap_tool_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        """Execute with classification; retry TRANSIENT / EMPTY_ERROR in place with backoff."""
        plan = replace(self._guard.plan(request), kind="execute")
        return self._guard.finish(request, self._guard.run_retrying(request, handler, plan))

    async def awrap_tool_call(self, request: Any, handler: Callable[[Any], Awaitable[Any]]) -> Any:
        """Async :meth:`wrap_tool_call`."""
        plan = replace(self._guard.plan(request), kind="execute")
        out = await self._guard.arun_retrying(request, handler, plan)
        return self._guard.finish(request, out)

    @hook_config(can_jump_to=["end"])
    def before_model(self, state: GuardAgentState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        """End the run on refuse / clarify / abstain / fallback; otherwise let the model go on."""
        refuse_clash(state, type(self).__name__)
        messages = list(state.get("messages") or ())
        if not _node.ends_with_tool_results(messages):  # a new user turn: nothing to judge
            return None
        decision = safe_decision(
            "retry_router", self.policy.label, lambda: route_failures(messages, policy=self.policy)
        )
        if decision.data.get("route") not in ("refuse", "clarify", "abstain", "fallback"):
            return None
        update: dict[str, Any] = {
            "messages": finish_messages(decision, messages, texts=self.policy.texts),
            "jump_to": "end",
        }
        if not _logged(state.get("guard_log") or (), decision):  # the tool call's own, once
            update["guard_log"] = [_node.stamp(decision, getattr(runtime, "config", None))]
        return update


def _logged(log: Sequence[Any], decision: GuardDecision) -> bool:
    """Whether the tool wrapper already logged this decision (same verdict, reason and
    calls) in the recent log: the ending it leads to is not a second decision."""
    same = (decision.guard, decision.verdict, decision.reason, decision.selected_ids)
    return any(
        (getattr(d, "guard", None), getattr(d, "verdict", None), getattr(d, "reason", None),
         getattr(d, "selected_ids", None)) == same
        for d in list(log)[-20:]
    )  # fmt: skip


def _model_unavailable(error: Exception) -> str:
    failure = describe_failure(error)
    detail = failure.message[:200] or failure.error_type
    return f"The model is unavailable ({failure.kind.value}): {detail}. Stopped; please try later."


def model_retry_middleware(
    policy: RetryRouterPolicy | None = None,
    *,
    on_failure: Any = _model_unavailable,
) -> ModelRetryMiddleware:
    """LangChain's ``ModelRetryMiddleware`` with retry_router's taxonomy and backoff.

    ``retry_on`` is :func:`~agent_guards.retry_router.retryable`: a 429, a 5xx, a timeout
    or a ``ModelError`` whose ``is_retryable`` is True is retried (``max_attempts``,
    ``base_delay``, ``factor``, ``max_delay`` of ``policy.backoff``); a permission, refusal,
    invalid-request or unknown error propagates at once (LangChain's default retries
    unknown errors). Once the attempts run out, ``on_failure`` decides: by default the run
    ends with one message giving the kind and the reason; ``"error"`` re-raises, so a
    ``ModelFallbackMiddleware`` placed *before* this one in ``middleware=[...]`` switches
    to the next model.

    Example:
        >>> from agent_guards.retry_router import Backoff, RetryRouterPolicy
        >>> mw = model_retry_middleware(RetryRouterPolicy(backoff=Backoff(max_attempts=4)))
        >>> type(mw).__name__, mw.max_retries, mw.initial_delay
        ('ModelRetryMiddleware', 3, 1.0)
    """
    policy = RetryRouterPolicy.coerce(policy)
    backoff = policy.backoff

    def retry_on(error: Exception) -> bool:
        return retryable(error, policy=policy)

    return ModelRetryMiddleware(
        max_retries=backoff.max_attempts - 1,
        retry_on=retry_on,
        on_failure=on_failure,
        backoff_factor=float(backoff.factor),
        initial_delay=float(backoff.base_delay),  # type: ignore[arg-type]
        max_delay=float(backoff.max_delay),  # type: ignore[arg-type]
        jitter=backoff.jitter != "none",
    )
