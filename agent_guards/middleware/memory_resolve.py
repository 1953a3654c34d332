"""memory_resolve for ``langchain.agents.create_agent``: MemoryResolveMiddleware."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, NotRequired

from langchain.agents.middleware import AgentMiddleware
from langchain_core.messages import SystemMessage
from langchain_core.runnables import RunnableConfig
from langgraph.config import get_config
from langgraph.runtime import Runtime

from agent_guards.core.signatures import content_text
from agent_guards.memory_resolve.graph import MemoryFact, create_memory_resolve, format_memories
from agent_guards.memory_resolve.model import MemoryRecord, MemoryVerdict
from agent_guards.memory_resolve.policy import MemoryPolicy
from agent_guards.memory_resolve.store import memory_namespace
from agent_guards.middleware.state import GuardAgentState

__all__ = ["MemoryAgentState", "MemoryResolveMiddleware"]

HEADER = "What you know about the user (checked memories; the user's words today win):"


class MemoryAgentState(GuardAgentState):
    """``create_agent`` state with memory_resolve's channels (see ``MemoryState``)."""

    memory_facts: NotRequired[list[MemoryFact]]
    memory_records: NotRequired[list[MemoryRecord]]
    memory_verdict: NotRequired[MemoryVerdict]


def _config() -> RunnableConfig:
    try:
        return get_config()
    except RuntimeError:  # called outside a graph (a direct call in a test)
        return {}


class MemoryResolveMiddleware(AgentMiddleware[MemoryAgentState, Any, Any]):
    """memory_resolve for ``create_agent``: arbitrate memories once, before the agent runs.

    ``before_agent`` runs the memory_resolve node (the store the agent was compiled with,
    the principal from ``config["configurable"][principal_key]``, this turn's facts from
    ``memory_facts``) and writes ``memory_verdict`` and its decision; ``wrap_model_call``
    adds the injected records to the system prompt of every model call of the run.

    Args:
        policy: Ranking and write-back (default :class:`MemoryPolicy`).
        store: A ``BaseStore``; default: the agent's store.
        namespace: Maps the principal to its namespace (default ``("memories", <id>)``).
        principal_key: The ``configurable`` key with the caller's identities.

    Example:
        >>> from langchain.agents import create_agent
        >>> from langgraph.store.memory import InMemoryStore
        >>> from agent_guards import MemoryRecord
        >>> from agent_guards.memory_resolve import memory_namespace, save_memories
        >>> from agent_guards.middleware import MemoryResolveMiddleware
        >>> from agent_guards.testing import ScriptedChatModel
        >>> store = InMemoryStore()
        >>> save_memories(store, memory_namespace("alice"), [MemoryRecord("m1", "lang", "fr")])
        >>> model = ScriptedChatModel(script=["ok"])
        >>> agent = create_agent(model, system_prompt="Be brief.", store=store,
        ...                      middleware=[MemoryResolveMiddleware()])
        >>> out = agent.invoke({"messages": [("user", "hi")]},
        ...                    {"configurable": {"principal": "alice"}})
        >>> out["memory_verdict"].facts, out["guard_log"][0].guard
        ({'lang': 'fr'}, 'memory_resolve')
        >>> print(model.calls[0][0].content)
        Be brief.
        <BLANKLINE>
        What you know about the user (checked memories; the user's words today win):
        - lang: "fr" (memory, m1)
    """

    state_schema = MemoryAgentState

    def __init__(
        self,
        *,
        policy: MemoryPolicy | None = None,
        store: Any = None,
        namespace: Callable[[str], Sequence[str]] = memory_namespace,
        principal_key: str = "principal",
    ) -> None:
        super().__init__()
        self._node = create_memory_resolve(
            policy=policy, store=store, namespace=namespace, principal_key=principal_key
        )

    def before_agent(self, state: MemoryAgentState, runtime: Runtime[Any]) -> dict[str, Any]:
        """Load, arbitrate and write back memories (decision in ``guard_log``)."""
        return self._node.invoke(state, _config())  # type: ignore[no-any-return]

    async def abefore_agent(self, state: MemoryAgentState, runtime: Runtime[Any]) -> dict[str, Any]:
        """Async :meth:`before_agent`."""
        return await self._node.ainvoke(state, _config())  # type: ignore[no-any-return]

    def _with_memories(self, request: Any) -> Any:
        verdict = (request.state or {}).get("memory_verdict")
        if not isinstance(verdict, MemoryVerdict) or not verdict.inject:
            return request
        block = f"{HEADER}\n{format_memories(verdict)}"
        system = request.system_message
        text = f"{content_text(system.content)}\n\n{block}" if system is not None else block
        return request.override(system_message=SystemMessage(text))

    def wrap_model_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        """Add the injected memories to the system prompt."""
        return handler(self._with_memories(request))

    async def awrap_model_call(self, request: Any, handler: Callable[[Any], Awaitable[Any]]) -> Any:
        """Async :meth:`wrap_model_call`."""
        return await handler(self._with_memories(request))
