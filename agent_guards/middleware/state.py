"""The agent state the guard middleware adds: the decision log, usage counters, context tally."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, NotRequired

from langchain.agents.middleware import AgentState
from langchain.agents.middleware.types import PrivateStateAttr

from agent_guards import graph as _node
from agent_guards.core.decision import GuardDecision, Verdict
from agent_guards.core.errors import InvalidInputError
from agent_guards.core.state import DEFAULT_KEYS, DEFAULT_LOG_SIZE, Usage, keep_last, merge_usage

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
    context_tally: NotRequired[Annotated[dict[str, Any] | None, PrivateStateAttr]]
    """:class:`ContextGuardMiddleware`'s running tally: ``tally`` (the last fit's
    ``ContextVerdict.tally``) and ``system`` (a hash of the system prompt it counted).
    Internal: not part of the agent's input or output, but checkpointed with the rest."""


def safe_decision(guard: str, policy: str, decide: Callable[[], GuardDecision]) -> GuardDecision:
    try:
        return decide()
    except InvalidInputError as err:
        return _node.invalid_input(guard, err, policy=policy, verdict=Verdict.CONTINUE)


def refuse_clash(state: Any, middleware: str) -> None:
    """Fail before the run does anything when ``guard_log`` or ``usage`` in the agent's
    state is a field of the user's own (create_agent merged a ``state_schema=`` over
    ours): the guards' decisions and counts would be mixed into it or replace it."""
    clash = DEFAULT_KEYS.clash(state)
    if clash is not None:
        raise ValueError(
            f"{middleware}: the agent state's {clash}: the create_agent middleware keep "
            f"their decisions in 'guard_log' and their counters in 'usage'; rename your "
            f"field in the state_schema you pass to create_agent"
        )
