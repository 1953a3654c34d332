"""The tools node :meth:`ToolCallGuard.tool_node` builds: LangGraph's ``ToolNode``, which a
helper wiring a route after it (``add_retry_router``, ``add_loop_check``) may ask to route
its own turn (:func:`agent_guards.graph.route_in_node` says why and how).

A turn of one tool call runs that call on the node's own thread, as Pregel runs a step of
one task: ``ToolNode`` starts a thread pool for every turn, and the guard's work on a
thread that was just started costs more than on a running one (its statements on a SQLite
store among it). Two calls or more still run in the pool, side by side; so does a lone
call when an event loop runs on this thread (a sync tool may start one of its own with
``asyncio.run``).
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Awaitable, Callable
from typing import Any

from langchain_core.runnables import Runnable, RunnableConfig, ensure_config
from langgraph.prebuilt import ToolNode
from langgraph.prebuilt.tool_node import ToolRuntime
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
        out = self._lone(input, config, runtime)
        if out is None:
            out = super()._func(input, config, runtime)
        return out if self._then is None else self._then(input, out, config)

    def _lone(self, input: Any, config: RunnableConfig, runtime: Runtime[Any]) -> Any:
        """``ToolNode._func`` for a turn of one call, run here in a copy of this context
        (what the pool's thread would run it in); None for any other turn."""
        calls, input_type = self._parse_input(input)
        if len(calls) != 1 or _loop_running():
            return None
        call, config = calls[0], ensure_config(config)  # as get_config_list gives it
        tool_runtime: ToolRuntime[Any, Any] = ToolRuntime(
            state=self._extract_state(input, config),
            tool_call_id=call["id"],
            config=config,
            context=runtime.context,
            store=runtime.store,
            stream_writer=runtime.stream_writer,
            tools=list(self.tools_by_name.values()),
            execution_info=runtime.execution_info,
            server_info=runtime.server_info,
        )
        out = contextvars.copy_context().run(self._run_one, call, input_type, tool_runtime)
        return self._combine_tool_outputs([out], input_type)

    async def _afunc(self, input: Any, config: RunnableConfig, runtime: Runtime[Any]) -> Any:
        out = await super()._afunc(input, config, runtime)
        return out if self._athen is None else await self._athen(input, out, config)


def _loop_running() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True
