"""Guard decisions on LangSmith runs: metadata and ``guard:<name>:<verdict>`` tags.

When a guard records a decision inside a traced run (``LANGSMITH_TRACING=true``), the
decision is attached to the run of the node that made it, so LangSmith and LangGraph
Studio show *why* a run answered, clarified or stopped. Outside a traced run this is a
no-op that costs one context-variable lookup.

Example:
    >>> from agent_guards.core import GuardDecision, Verdict
    >>> d = GuardDecision(guard="loop_check", verdict=Verdict.NUDGE, reason="repeated_call")
    >>> decision_metadata([d])["guard_verdicts"]
    {'loop_check': 'nudge'}
    >>> attach_decision(d)  # no active run here: nothing happens
    False
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from agent_guards.core.decision import GuardDecision

__all__ = ["attach_decision", "decision_metadata", "decision_tags", "traced"]

METADATA_KEY = "guard_decisions"


def decision_tags(decisions: Iterable[GuardDecision]) -> list[str]:
    """Tags for a set of decisions, in order, without duplicates.

    Example:
        >>> from agent_guards import GuardDecision
        >>> from agent_guards.tracing import decision_tags
        >>> nudge = GuardDecision(guard="loop_check", verdict="nudge", reason="repeated_call")
        >>> stop = GuardDecision(guard="budget", verdict="stop", reason="max_steps")
        >>> decision_tags([nudge, stop, nudge])
        ['guard:loop_check:nudge', 'guard:budget:stop']
    """
    return list(dict.fromkeys(d.tag for d in decisions))


def decision_metadata(decisions: Iterable[GuardDecision]) -> dict[str, Any]:
    """Run metadata for decisions: the full records plus a ``guard -> verdict`` summary.

    Example:
        >>> from agent_guards import GuardDecision
        >>> from agent_guards.tracing import decision_metadata
        >>> d = GuardDecision(guard="budget", verdict="stop", reason="max_steps")
        >>> meta = decision_metadata([d])
        >>> meta["guard_verdicts"], meta["guard_decisions"][0]["reason"]
        ({'budget': 'stop'}, 'max_steps')
    """
    items = list(decisions)
    return {
        METADATA_KEY: [d.to_dict() for d in items],
        "guard_verdicts": {d.guard: d.verdict.value for d in items},
    }


def traced() -> bool:
    """Whether there is a current LangSmith run to attach decisions to.

    Example:
        >>> from langsmith import trace, tracing_context
        >>> traced()
        False
        >>> with tracing_context(enabled="local"), trace("loop_check"):  # sends nothing
        ...     traced()
        True
    """
    return _current_run() is not None


def _current_run() -> Any:
    """The current LangSmith run, or None (also when langsmith's internals changed)."""
    try:
        from langsmith.run_helpers import get_current_run_tree

        return get_current_run_tree()
    except Exception:  # pragma: no cover - langsmith internals changed
        return None


def attach_decision(decision: GuardDecision) -> bool:
    """Attach ``decision`` to the current LangSmith run, if there is one.

    Returns True when a run was found. Never raises: tracing must not break a run.

    Example:
        >>> from langsmith import trace, tracing_context
        >>> from agent_guards import GuardDecision
        >>> from agent_guards.tracing import attach_decision
        >>> d = GuardDecision(guard="loop_check", verdict="nudge", reason="repeated_call")
        >>> with tracing_context(enabled="local"), trace("loop_check") as run:  # sends nothing
        ...     attach_decision(d)
        True
        >>> run.tags, run.metadata["guard_verdicts"]
        (['guard:loop_check:nudge'], {'loop_check': 'nudge'})
    """
    run = _current_run()
    if run is None:
        return False
    metadata = run.metadata  # a dict held in run.extra; mutated in place
    metadata.setdefault(METADATA_KEY, []).append(decision.to_dict())
    metadata.setdefault("guard_verdicts", {})[decision.guard] = decision.verdict.value
    tags = list(run.tags or [])
    if decision.tag not in tags:
        tags.append(decision.tag)
    run.tags = tags
    return True
