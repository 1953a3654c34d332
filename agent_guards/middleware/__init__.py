"""loop_check and retry_router for ``langchain.agents.create_agent`` (middleware adapters).

Needs the ``agents`` extra (``pip install 'agent-guards[agents]'``); importing this module
without langchain raises an ImportError that says so. Both middlewares run the same pure
cores as the graph adapters (:func:`~agent_guards.loop_check.detect_loop`,
:func:`~agent_guards.retry_router.route_failures`) and keep nothing on the instance: counts
come from the messages, decisions go to the ``guard_log`` channel, tool executions to
``usage["tool_calls"]`` (counted by :class:`RetryRouterMiddleware` only, retries included).

* :class:`LoopGuardMiddleware` - ``wrap_tool_call`` answers an identical call from the
  earlier result (REUSE); ``before_model`` adds one nudge; ``before_model`` /
  ``after_model`` stop the run (answering pending calls, ending with the partial result
  and the reason), raise :class:`~agent_guards.core.LoopDetected`, or ``interrupt``.
* :class:`RetryRouterMiddleware` - ``wrap_tool_call`` classifies failures, checks the
  circuit breaker and retries TRANSIENT / EMPTY_ERROR failures with backoff inside the
  call; ``before_model`` ends the run on refuse / clarify / abstain / fallback routes.
* :func:`model_retry_middleware` - LangChain's ``ModelRetryMiddleware`` retrying the model
  call by retry_router's taxonomy (429, 5xx, timeouts, retryable ``ModelError`` types), never a
  permission or unknown error; put ``ModelFallbackMiddleware`` before it to fall back.

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
    >>> from agent_guards.tool_guard import annotate_tool
    >>> search = annotate_tool(search, read_only=True)  # it only reads: safe to answer again
    >>> model = ScriptedChatModel(script=[tool_call_message("search", {"q": "rates"})],
    ...                           repeat_last=True)
    >>> agent = create_agent(model, tools=[search],
    ...                      middleware=[LoopGuardMiddleware(), RetryRouterMiddleware()])
    >>> out = agent.invoke({"messages": [HumanMessage("rates?")]})
    >>> [d.verdict.value for d in out["guard_log"]], out["usage"]["tool_calls"], len(model.calls)
    (['reuse', 'nudge', 'stop'], 1, 3)
"""

try:
    import langchain.agents  # noqa: F401  (the agents extra)
except ImportError as err:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "agent_guards.middleware needs langchain: pip install 'agent-guards[agents]'"
    ) from err

from agent_guards.middleware.context_guard import ContextGuardMiddleware
from agent_guards.middleware.evidence_resolve import EvidenceResolveMiddleware
from agent_guards.middleware.loop_check import LoopGuardMiddleware
from agent_guards.middleware.memory_resolve import MemoryAgentState, MemoryResolveMiddleware
from agent_guards.middleware.planner_gate import PlannerGateMiddleware
from agent_guards.middleware.retry_router import RetryRouterMiddleware, model_retry_middleware
from agent_guards.middleware.state import GuardAgentState

__all__ = [
    "ContextGuardMiddleware",
    "EvidenceResolveMiddleware",
    "GuardAgentState",
    "LoopGuardMiddleware",
    "MemoryAgentState",
    "MemoryResolveMiddleware",
    "PlannerGateMiddleware",
    "RetryRouterMiddleware",
    "model_retry_middleware",
]
