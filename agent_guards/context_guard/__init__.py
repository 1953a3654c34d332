"""context_guard: keep the context inside the window without losing constraints, evidence or
tool-call pairs, and flag instructions injected into tool results.
"""

from agent_guards.context_guard.archive import (
    DEFAULT_NAMESPACE,
    archive_scope,
    create_archive_reader_tool,
)
from agent_guards.context_guard.core import fit_context
from agent_guards.context_guard.graph import ContextState, create_context_guard
from agent_guards.context_guard.injection import (
    DEFAULT_INJECTION_PATTERNS,
    INJECTION_FLAG,
    InjectionPolicy,
    flag_evidence,
    quote_untrusted,
    scan_injection,
    tool_result_flags,
)
from agent_guards.context_guard.model import ArchiveRecord, ContextBudgetError, ContextVerdict
from agent_guards.context_guard.policy import ContextPolicy
from agent_guards.context_guard.summary import pin_message
from agent_guards.context_guard.verdict import with_summary_text
from agent_guards.core.decision import ContextRoute

__all__ = [
    "DEFAULT_INJECTION_PATTERNS",
    "DEFAULT_NAMESPACE",
    "INJECTION_FLAG",
    "ArchiveRecord",
    "ContextBudgetError",
    "ContextPolicy",
    "ContextRoute",
    "ContextState",
    "ContextVerdict",
    "InjectionPolicy",
    "archive_scope",
    "create_archive_reader_tool",
    "create_context_guard",
    "fit_context",
    "flag_evidence",
    "pin_message",
    "quote_untrusted",
    "scan_injection",
    "tool_result_flags",
    "with_summary_text",
]
