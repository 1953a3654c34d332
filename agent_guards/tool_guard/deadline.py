"""A time limit on one tool execution that holds even when the tool blocks. Private.

A check after the tool returns cannot stop a tool that never returns: a sync tool stuck on
a socket holds the step (and the run) for as long as it likes. Here a sync tool runs in a
worker thread of its own and the call waits at most ``seconds`` for it; an async tool is
cancelled at the limit. A thread cannot be killed, so a sync tool past its limit keeps
running: ``late`` is called with its future when it does finish, so what it did (a write
that went through after all) can still be recorded. The failure is a :class:`ToolTimeoutError`,
a ``TimeoutError``: classified as transient, and as a call that may have run, so a write is
never retried blindly after it.

Example:
    >>> import time
    >>> def slow(request):
    ...     time.sleep(0.5)
    ...     return "late"
    >>> try:
    ...     run_within(slow, {"name": "report"}, 0.01)
    ... except ToolTimeoutError as err:
    ...     print(err)
    report did not answer within 0.01 s (it may still finish)
    >>> run_within(lambda request: "fast", {"name": "report"}, 5)
    'fast'
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Awaitable, Callable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any

__all__ = ["ToolTimeoutError", "arun_within", "run_within"]


class ToolTimeoutError(TimeoutError):
    """A tool call ran past its time limit (it may still finish)."""

    def __init__(self, tool: str, seconds: float) -> None:
        super().__init__(f"{tool} did not answer within {seconds:g} s (it may still finish)")
        self.tool, self.seconds = tool, seconds


def _tool(request: Any) -> str:
    call = getattr(request, "tool_call", request)
    name = call.get("name") if isinstance(call, dict) else None
    return str(name or "the tool")


def run_within(
    execute: Callable[[Any], Any],
    request: Any,
    seconds: float | None,
    late: Callable[[Future[Any]], None] | None = None,
) -> Any:
    """``execute(request)``, or :class:`ToolTimeoutError` after ``seconds`` (None: no limit)."""
    if seconds is None:
        return execute(request)
    context = contextvars.copy_context()  # the run's config and runtime travel along
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="agent_guards-tool")
    future = pool.submit(context.run, execute, request)
    pool.shutdown(wait=False)  # the worker ends with the tool; nothing waits for it here
    try:
        return future.result(timeout=seconds)
    except FutureTimeout:
        if late is not None:
            future.add_done_callback(late)
        raise ToolTimeoutError(_tool(request), seconds) from None


async def arun_within(
    execute: Callable[[Any], Awaitable[Any]], request: Any, seconds: float | None
) -> Any:
    """``await execute(request)``, cancelled with :class:`ToolTimeoutError` after ``seconds``.

    The tool's own ``TimeoutError`` passes as it is: only the limit raises ToolTimeoutError.
    """
    if seconds is None:
        return await execute(request)
    task = asyncio.ensure_future(execute(request))
    done, _ = await asyncio.wait({task}, timeout=seconds)
    if not done:
        task.cancel()
        raise ToolTimeoutError(_tool(request), seconds)
    return task.result()
