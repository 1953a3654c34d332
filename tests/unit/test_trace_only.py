"""A decision only the trace keeps (the route's on a healthy turn) reaches a traced run, stamped;
its route through LangSmith: tests/integration/test_tracing_langsmith.py."""

from __future__ import annotations

from typing import Any

from langsmith import trace, tracing_context

from agent_guards.core import GuardDecision
from agent_guards.graph import trace_only
from agent_guards.tracing import traced


def test_traced_is_whether_a_run_is_current() -> None:
    assert not traced()
    with tracing_context(enabled="local"), trace("route"):
        assert traced()
    assert not traced()


def test_trace_only_attaches_the_stamped_decision_to_the_current_run() -> None:
    decision = GuardDecision(guard="retry_router", verdict="continue", reason="no_failure")
    config: Any = {"metadata": {"langgraph_step": 7}}
    with tracing_context(enabled="local"), trace("route") as run:
        trace_only(decision, config)
    (attached,) = run.metadata["guard_decisions"]
    assert (attached["reason"], attached["step"]) == ("no_failure", 7)
    assert "guard:retry_router:continue" in run.tags
    assert decision.step is None  # the copy was stamped, not the decision made once
