"""context_guard for ``langchain.agents.create_agent``: ContextGuardMiddleware."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

from langchain.agents.middleware import AgentMiddleware, ExtendedModelResponse
from langchain_core.messages import BaseMessage, SystemMessage
from langgraph.types import Command

from agent_guards import graph as _node
from agent_guards.context_guard.core import fit_context
from agent_guards.context_guard.policy import ContextPolicy
from agent_guards.context_guard.summary import stable_hash
from agent_guards.core.decision import GuardDecision, Verdict
from agent_guards.core.errors import InvalidInputError
from agent_guards.core.signatures import safe_str
from agent_guards.middleware.state import GuardAgentState

__all__ = ["ContextGuardMiddleware"]

_TALLY_KEY = "context_tally"


class ContextGuardMiddleware(AgentMiddleware[GuardAgentState, Any, Any]):
    """context_guard for ``create_agent``: fit what the model reads into its window.

    ``wrap_model_call`` runs :func:`~agent_guards.context_guard.fit_context` on the system
    prompt plus the history and sends the model the fitted messages; the state keeps the
    full history (nothing is deleted, so a later turn or a replay can fit it again). A
    decision other than "within budget" goes to ``guard_log``. Nothing is archived (there
    is no store write on this path): old tool results are summarized or truncated instead.

    Like the graph node, it keeps ``fit_context``'s tally in state (``context_tally``, with
    a hash of the system prompt it counted, which is not in the state's messages), so before
    each model call only the messages appended since are counted and scanned; the verdict
    is the one a count from scratch gives, and a replay reads the tally from its checkpoint.
    Only a fit that sends the history as it is moves the tally on: after one that changes
    what the model reads (a compression, a quoted tool result, pinned messages put in) the
    state still holds the history, not what was sent, so the tally before it is kept.

    Args:
        max_tokens: The model's context window in tokens.
        policy: Thresholds and sizes (default :class:`ContextPolicy`).
        pinned: Messages (or ids) that always survive verbatim, e.g. the task constraints.
        token_counter: The model (its own counter) or a ``messages -> int`` callable.

    Example:
        >>> from langchain.agents import create_agent
        >>> from langchain_core.messages import AIMessage, HumanMessage
        >>> from agent_guards.middleware import ContextGuardMiddleware
        >>> from agent_guards.testing import ScriptedChatModel
        >>> model = ScriptedChatModel(script=["ok"])
        >>> old = [m for i in range(30) for m in (HumanMessage(f"q{i} " + "x" * 300),
        ...                                       AIMessage(f"a{i} " + "y" * 300))]
        >>> agent = create_agent(model, middleware=[ContextGuardMiddleware(max_tokens=2000)])
        >>> out = agent.invoke({"messages": [*old, HumanMessage("last question")]})
        >>> len(out["messages"]), len(model.calls[0]) < 61, out["guard_log"][0].guard
        (62, True, 'context_guard')
        >>> ContextGuardMiddleware(max_tokens=0)
        Traceback (most recent call last):
        ...
        ValueError: ContextGuardMiddleware.max_tokens must be an int >= 1, got 0
    """

    state_schema = GuardAgentState

    def __init__(
        self,
        *,
        max_tokens: int,
        policy: ContextPolicy | None = None,
        pinned: Iterable[BaseMessage | str] = (),
        token_counter: Any = None,
    ) -> None:
        super().__init__()
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
            raise ValueError(
                f"ContextGuardMiddleware.max_tokens must be an int >= 1, got {max_tokens!r}"
            )
        if policy is not None and not isinstance(policy, ContextPolicy):
            raise TypeError(f"policy must be a ContextPolicy or None, got {type(policy).__name__}")
        self.max_tokens = max_tokens
        self.policy = policy
        self.pinned = tuple(pinned)
        self.token_counter = token_counter

    def _fit(self, request: Any) -> tuple[Any, GuardDecision | None, dict[str, Any]]:
        """The request to send (fitted when needed), the decision to log, if any, and the
        state update that moves the tally on (empty when there is nothing to keep)."""
        system = request.system_message
        history = [*([system] if system is not None else []), *request.messages]
        prompt = _prompt_hash(system)
        try:
            verdict = fit_context(
                history,
                max_tokens=self.max_tokens,
                policy=self.policy,
                pinned=self.pinned,
                tools=request.tools,
                token_counter=self.token_counter,
                archive=False,
                tally=_tally_for(request.state, prompt),
            )
        except InvalidInputError as err:  # e.g. the system prompt alone is over the budget
            label = self.policy.label if self.policy is not None else ""
            return request, _node.invalid_input("context_guard", err, policy=label), {}
        decision = verdict.decision
        if decision is not None and decision.verdict is Verdict.CONTINUE:
            decision = None
        if not verdict.changed:
            # the tally describes the history as the state holds it: the next call counts
            # only what is appended to it
            return request, decision, {_TALLY_KEY: {"system": prompt, "tally": verdict.tally}}
        # the tally describes what the model reads, which the state does not hold: keep
        # the one before (it still describes a prefix of the history)
        fitted = list(verdict.messages)
        if system is not None and fitted and isinstance(fitted[0], SystemMessage):
            system, fitted = fitted[0], fitted[1:]
        return request.override(messages=fitted, system_message=system), decision, {}

    def _answer(self, response: Any, decision: GuardDecision | None, update: dict[str, Any]) -> Any:
        if decision is not None:
            update = {**update, "guard_log": [_node.stamp(decision, None)]}
        if not update:
            return response
        return ExtendedModelResponse(model_response=response, command=Command(update=update))

    def wrap_model_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        """Send the model the fitted context; log the decision with the model's answer."""
        fitted, decision, update = self._fit(request)
        return self._answer(handler(fitted), decision, update)

    async def awrap_model_call(self, request: Any, handler: Callable[[Any], Awaitable[Any]]) -> Any:
        """Async :meth:`wrap_model_call`."""
        fitted, decision, update = self._fit(request)
        return self._answer(await handler(fitted), decision, update)


def _prompt_hash(system: SystemMessage | None) -> str:
    """What the tally cannot check itself: the system prompt it counted (it is not in the
    state's messages, and a dynamic prompt may change it between calls)."""
    if system is None:
        return ""
    return stable_hash(system.type, system.name or "", safe_str(system.content))


def _tally_for(state: Any, prompt: str) -> Mapping[str, Any] | None:
    """The tally in state when it was made under this system prompt (else count it all)."""
    kept = state.get(_TALLY_KEY) if isinstance(state, Mapping) else None
    if not isinstance(kept, Mapping) or kept.get("system") != prompt:
        return None
    tally = kept.get("tally")
    return tally if isinstance(tally, Mapping) else None
