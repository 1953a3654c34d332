"""The tools node :meth:`ToolCallGuard.tool_node` builds: LangGraph's ``ToolNode``, which a
helper wiring a route after it (``add_retry_router``, ``add_loop_check``) may ask to route
its own turn (:func:`agent_guards.graph.route_in_node` says why and how).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from langchain_core.runnables import Runnable, RunnableConfig
from langgraph.prebuilt import ToolNode
from langgraph.runtime import Runtime

__all__ = ["GuardedToolNode"]

Then = Callable[[Any, Any, RunnableConfig], Any]
AThen = Callable[[Any, Any, RunnableConfig], Awaitable[Any]]


class GuardedToolNode(ToolNode):
    """A ``ToolNode`` whose output passes through ``then(state, output, config)`` when a
    helper set one (:meth:`route_with`); without one it is LangGraph's ``ToolNode``."""

    _then: Then | None = None
    _athen: AThen | None = None
    route: Runnable[Any, Any] | None = None
    """The guard's conditional edge the node ends its turns with (None: it does not route)."""

    def route_with(self, route: Runnable[Any, Any], then: Then, athen: AThen) -> None:
        """End each turn with ``then``'s output (sync) or ``athen``'s (async), which take
        ``route``'s label. Set once: a tools node routes for the one graph it was added to."""
        if self.route is not None:
            raise ValueError(
                f"the tools node {self.name!r} already routes its turns for another graph: "
                "build one tools node per graph, ToolCallGuard(...).tool_node(tools)"
            )
        self._then, self._athen, self.route = then, athen, route

    def _func(self, input: Any, config: RunnableConfig, runtime: Runtime[Any]) -> Any:
        out = super()._func(input, config, runtime)
        return out if self._then is None else self._then(input, out, config)

    async def _afunc(self, input: Any, config: RunnableConfig, runtime: Runtime[Any]) -> Any:
        out = await super()._afunc(input, config, runtime)
        return out if self._athen is None else await self._athen(input, out, config)
