"""loop_check: repeated calls and failures, cycles, no progress, repeated replies and
content loops, condensation loops and stuck sub-agents; nudge (or cut back), then stop."""

from agent_guards.core.decision import LoopRoute
from agent_guards.core.signatures import call_signature, normalize_result
from agent_guards.core.stopping import answer_pending, partial_results
from agent_guards.loop_check.content import repeated_chunk
from agent_guards.loop_check.core import detect_loop
from agent_guards.loop_check.graph import (
    LoopState,
    ReplyRoute,
    add_loop_check,
    add_loop_nodes,
    add_reply_check,
    create_loop_check,
    create_loop_escalate,
    create_loop_nudge,
    create_loop_stop,
    create_reply_check,
    nudge_text,
    nudge_update,
)
from agent_guards.loop_check.judge import JUDGE_PROMPT, ajudge_loop, judge_due, judge_loop
from agent_guards.loop_check.policy import PATTERN_LIMITS, PATTERNS, LoopPolicy
from agent_guards.loop_check.recovery import after_cut, cut_loop

__all__ = [
    "JUDGE_PROMPT",
    "PATTERNS",
    "PATTERN_LIMITS",
    "LoopPolicy",
    "LoopRoute",
    "LoopState",
    "ReplyRoute",
    "add_loop_check",
    "add_loop_nodes",
    "add_reply_check",
    "after_cut",
    "ajudge_loop",
    "answer_pending",
    "call_signature",
    "create_loop_check",
    "create_loop_escalate",
    "create_loop_nudge",
    "create_loop_stop",
    "create_reply_check",
    "cut_loop",
    "detect_loop",
    "judge_due",
    "judge_loop",
    "normalize_result",
    "nudge_text",
    "nudge_update",
    "partial_results",
    "repeated_chunk",
]
