"""The reference graph keeps the promises it stores: ``Budget.max_seconds`` trips, and a
plan step's ``timeout_s`` and ``fallback`` are honored (scripted models, pinned clock)."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any

import pytest
from langchain_core.messages import AIMessage
from langchain_core.tools import BaseTool, tool
from langgraph.checkpoint.memory import InMemorySaver

from agent_guards import Budget, guard_serializer
from agent_guards.graphs.plan_execute import Policies, build_graph, run_config
from agent_guards.graphs.scenarios import CONTINUE, FINISH, NOW, RoleScript
from agent_guards.planner_gate import StepStatus
from agent_guards.testing import tool_call_message
from agent_guards.tool_guard import annotate_tool

T0 = datetime.fromisoformat(NOW)


def at(seconds: float) -> str:
    return (T0 + timedelta(seconds=seconds)).isoformat()


def _plan(*steps: dict[str, Any]) -> str:
    return json.dumps({"steps": list(steps), "reason": "scripted"})


def _step(id: str, tool_name: str, **extra: Any) -> dict[str, Any]:
    return {"id": id, "description": f"run {tool_name}", "tool": tool_name, "args": {}, **extra}


def _tools(calls: list[str], fail_after: int | None = None) -> list[BaseTool]:
    @tool(response_format="content_and_artifact")
    def fetch_alpha() -> tuple[str, list[dict[str, Any]]]:
        """Fetch the official alpha figure."""
        calls.append("fetch_alpha")
        if fail_after is not None and len(calls) > fail_after:
            raise TimeoutError("fetch_alpha did not answer in time")
        item = {"id": "doc_alpha", "claim_key": "alpha", "value": "alpha-ok",
                "source_type": "official", "updated_at": "2026-05-01"}  # fmt: skip
        return "doc_alpha: alpha-ok", [item]

    return [annotate_tool(fetch_alpha, read_only=True)]


def _graph(script: RoleScript, tools: list[BaseTool], policies: Policies) -> Any:
    return build_graph(script.model(), tools, policies=policies, sleep=lambda s: None,
                       checkpointer=InMemorySaver(serde=guard_serializer()))  # fmt: skip


def _config(policies: Policies, now: str) -> Any:
    return run_config(policies, thread_id="t", principal="analyst-1", agent_guards_now=now)


def _script(*steps: dict[str, Any], agent: Any = None) -> RoleScript:
    return RoleScript(
        parse_goal=[json.dumps({"intent": "audit", "dimensions": ["alpha"]})],
        plan=[_plan(*steps)],
        agent=agent or {"*": [tool_call_message("fetch_alpha", {}), "alpha fetched"]},
        review=[CONTINUE, CONTINUE, FINISH],
    )


def _decisions(out: dict[str, Any], guard: str) -> list[Any]:
    return [d for d in out["guard_log"] if d.guard == guard and d.reason != "within_budget"]


def test_max_seconds_trips_on_the_runs_clock() -> None:
    policies = Policies(budget=Budget(max_steps=120, max_seconds=60), approval_risk=None)
    graph = _graph(_script(_step("s1", "fetch_alpha")), _tools([]), policies)
    first = graph.invoke({"messages": [("user", "Audit alpha.")]}, _config(policies, at(0)),
                         interrupt_after=["tools"])  # fmt: skip
    assert first["usage"]["started_at"] == T0.timestamp()
    started = [d for d in first["guard_log"] if d.reason == "clock_started"]
    assert len(started) == 1 and started[0].data == {"started_at": T0.timestamp(), "limit": 60.0}
    out = graph.invoke(None, _config(policies, at(61)))
    assert out["outcome"]["route"] == "partial" and out["outcome"]["reason"] == "max_seconds"
    assert out["usage"]["started_at"] == T0.timestamp(), "a resume never restarts the clock"


def test_within_max_seconds_the_run_finishes() -> None:
    policies = Policies(budget=Budget(max_steps=120, max_seconds=60), approval_risk=None)
    graph = _graph(_script(_step("s1", "fetch_alpha")), _tools([]), policies)
    out = graph.invoke({"messages": [("user", "Audit alpha.")]}, _config(policies, at(0)))
    assert out["outcome"]["route"] != "stopped"


@pytest.mark.parametrize(
    ("fallback", "status", "route"),
    [("skip", StepStatus.SKIPPED, None), ("ask_user", StepStatus.FAILED, "clarify")],
)
def test_a_slow_high_risk_step_times_out_and_takes_its_fallback(
    fallback: str, status: StepStatus, route: str | None
) -> None:
    policies = Policies(approval_risk=None)
    slow = _step("s1", "fetch_alpha", risk="high", timeout_s=30, fallback=fallback)
    script = _script(slow, agent={"s1": [tool_call_message("fetch_alpha", {}), "alpha fetched"]})
    graph = _graph(script, _tools([]), policies)
    graph.invoke({"messages": [("user", "Audit alpha.")]}, _config(policies, at(0)),
                 interrupt_after=["tools"])  # fmt: skip
    out = graph.invoke(None, _config(policies, at(45)))  # the tool answered 45 s later
    step = out["plans"][-1].step("s1")
    assert step.status is status and step.timeout_s == 30 and step.fallback == fallback
    [decision] = [d for d in out["guard_log"] if d.reason == "step_timeout"]
    assert (decision.guard, decision.verdict.value) == ("planner_gate", "fallback")
    assert decision.data["taken"] == fallback and decision.data["elapsed"] == 45.0
    assert decision.selected_ids == ("s1",) and decision.data["risk"] == "high"
    if route is not None:
        assert out["outcome"]["route"] == route and "s1" in out["outcome"]["text"]
    agent_turns = [m for m in out["step_messages"] if isinstance(m, AIMessage)]
    assert agent_turns[-1].name == "budget", "no model call after the step's time ran out"


def test_a_failing_step_uses_the_cached_result_of_the_same_call() -> None:
    policies = Policies(approval_risk=None)
    calls: list[str] = []
    again = _step("s2", "fetch_alpha", risk="high", fallback="use_cache", depends_on=["s1"])
    graph = _graph(_script(_step("s1", "fetch_alpha"), again), _tools(calls, 1), policies)
    out = graph.invoke({"messages": [("user", "Audit alpha.")]}, _config(policies, at(0)))
    plan = out["plans"][-1]
    assert plan.step("s1").status is StepStatus.DONE
    assert plan.step("s2").status is StepStatus.DONE
    assert plan.step("s2").evidence_ids == plan.step("s1").evidence_ids == ("doc_alpha",)
    [decision] = [d for d in out["guard_log"] if d.guard == "planner_gate"
                  and d.verdict.value == "fallback"]  # fmt: skip
    assert decision.reason == "step_timeout", "a TimeoutError from the tool is a timeout"
    assert decision.data["taken"] == "use_cache" and decision.data["cached_from"] == "s1"
    assert len(calls) > 1


def test_a_cached_read_is_not_used_after_a_write_ran_since() -> None:
    """fetch, post (a write), fetch again failing with ``use_cache``: the first fetch's
    result predates the write, so it is no cache; the step is skipped, not answered stale."""
    calls: list[str] = []

    @tool
    def post_alpha() -> str:
        """Publish a new alpha figure."""
        calls.append("post_alpha")
        return "posted"

    policies = Policies(approval_risk=None)
    fetch = tool_call_message("fetch_alpha", {})
    script = RoleScript(
        parse_goal=[json.dumps({"intent": "audit", "dimensions": ["alpha"]})],
        plan=[_plan(_step("s1", "fetch_alpha"), _step("s2", "post_alpha", depends_on=["s1"]),
                    _step("s3", "fetch_alpha", fallback="use_cache", depends_on=["s2"]))],
        agent={"s1": [fetch, "fetched"], "s2": [tool_call_message("post_alpha", {}), "posted"],
               "s3": [fetch, "fetched"]},
        review=[CONTINUE, CONTINUE, CONTINUE, FINISH],
    )  # fmt: skip
    graph = _graph(script, [*_tools(calls, 2), annotate_tool(post_alpha)], policies)
    out = graph.invoke({"messages": [("user", "Audit alpha.")]}, _config(policies, at(0)))
    assert calls[:2] == ["fetch_alpha", "post_alpha"] and len(calls) > 2
    plan = out["plans"][-1]
    assert plan.step("s3").status is StepStatus.SKIPPED and not plan.step("s3").evidence_ids
    [decision] = [d for d in out["guard_log"] if d.guard == "planner_gate"
                  and d.verdict.value == "fallback"]  # fmt: skip
    assert decision.data["taken"] == "use_cache" and "no cached result" in decision.detail


def test_a_timeout_without_a_fallback_is_recorded() -> None:
    policies = Policies(approval_risk=None)
    graph = _graph(_script(_step("s1", "fetch_alpha", timeout_s=10)), _tools([]), policies)
    graph.invoke({"messages": [("user", "Audit alpha.")]}, _config(policies, at(0)),
                 interrupt_after=["tools"])  # fmt: skip
    out = graph.invoke(None, _config(policies, at(20)))
    [decision] = [d for d in out["guard_log"] if d.reason == "step_timeout"]
    assert decision.verdict.value == "stop" and decision.data["taken"] == "none"
    assert out["plans"][-1].step("s1").status is StepStatus.FAILED


def test_a_blocking_tool_is_cut_at_the_steps_timeout_and_the_fallback_taken() -> None:
    import threading

    release, started = threading.Event(), []

    @tool(response_format="content_and_artifact")
    def fetch_alpha() -> tuple[str, list[dict[str, Any]]]:
        """Fetch the official alpha figure (hangs)."""
        started.append(1)
        release.wait(30)
        return "doc_alpha: alpha-ok", []

    policies = Policies(approval_risk=None)
    hung = _step("s1", "fetch_alpha", timeout_s=0.05, fallback="skip")
    graph = _graph(_script(hung), [annotate_tool(fetch_alpha, read_only=True)], policies)
    try:
        out = graph.invoke({"messages": [("user", "Audit alpha.")]}, _config(policies, at(0)))
        assert not release.is_set() and started  # it returned while the tool still hung
        [decision] = [d for d in out["guard_log"] if d.reason == "step_timeout"]
        assert (decision.verdict.value, decision.data["taken"]) == ("fallback", "skip")
        assert out["plans"][-1].step("s1").status is StepStatus.SKIPPED
    finally:
        release.set()
