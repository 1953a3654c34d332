"""loop_check: repeated calls, cycles and no progress; nudge, then stop."""

from agent_guards.core.decision import LoopRoute
from agent_guards.core.signatures import call_signature, normalize_result
from agent_guards.core.stopping import answer_pending, partial_results
from agent_guards.loop_check.core import detect_loop
from agent_guards.loop_check.graph import (
    LoopState,
    add_loop_check,
    add_loop_nodes,
    create_loop_check,
    create_loop_escalate,
    create_loop_nudge,
    create_loop_stop,
    nudge_text,
)
from agent_guards.loop_check.policy import PATTERNS, LoopPolicy

__all__ = [
    "PATTERNS",
    "LoopPolicy",
    "LoopRoute",
    "LoopState",
    "add_loop_check",
    "add_loop_nodes",
    "answer_pending",
    "call_signature",
    "create_loop_check",
    "create_loop_escalate",
    "create_loop_nudge",
    "create_loop_stop",
    "detect_loop",
    "normalize_result",
    "nudge_text",
    "partial_results",
]
