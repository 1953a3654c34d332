"""The agent state the guard middleware adds: the decision log and usage counters."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

from langchain.agents.middleware import AgentState
from typing_extensions import NotRequired

from agent_guards import graph as _node
from agent_guards.core.decision import GuardDecision, Verdict
from agent_guards.core.errors import InvalidInputError
from agent_guards.core.state import DEFAULT_LOG_SIZE, Usage, keep_last, merge_usage

__all__ = ["GuardAgentState"]


class GuardAgentState(AgentState[Any]):
    """``create_agent`` state with the guard channels (``guard_log``, ``usage``).

    Example:
        >>> from agent_guards.middleware import GuardAgentState
        >>> from agent_guards import LoopGuardMiddleware, RetryRouterMiddleware
        >>> middlewares = (LoopGuardMiddleware(), RetryRouterMiddleware())
        >>> all(m.state_schema is GuardAgentState for m in middlewares)
        True
        >>> {"messages", "guard_log", "usage"} <= set(GuardAgentState.__annotations__)
        True
    """

    guard_log: NotRequired[Annotated[list[GuardDecision], keep_last(DEFAULT_LOG_SIZE)]]
    usage: NotRequired[Annotated[Usage, merge_usage]]


def safe_decision(guard: str, policy: str, decide: Callable[[], GuardDecision]) -> GuardDecision:
    try:
        return decide()
    except InvalidInputError as err:
        return _node.invalid_input(guard, err, policy=policy, verdict=Verdict.CONTINUE)
