"""The ToolNode wrapper loop_check and retry_router share: effect-aware reuse, in-place
retries with backoff, the circuit breaker, and tool-call counting.

What a tool does to the world (``Effect``, ``ToolEffects``, ``annotate_tool``) lives in
:mod:`agent_guards.core.effects` and is re-exported here, next to the wrapper that uses it.
"""

from agent_guards.core.effects import Effect, ToolEffects, annotate_tool, effects_of_tools
from agent_guards.tool_guard.ledger import GRANT_KEY, RunLedger
from agent_guards.tool_guard.wrapper import ToolCallGuard

__all__ = [
    "GRANT_KEY",
    "Effect",
    "RunLedger",
    "ToolCallGuard",
    "ToolEffects",
    "annotate_tool",
    "effects_of_tools",
]
