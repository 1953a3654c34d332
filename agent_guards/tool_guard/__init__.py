"""The ToolNode wrapper loop_check and retry_router share: reuse, in-place retries with backoff,
the circuit breaker, and tool-call counting.
"""

from agent_guards.tool_guard.wrapper import ToolCallGuard

__all__ = [
    "ToolCallGuard",
]
