"""planner_gate: truth tables for gate_plan (the critique loop included), laws, plan records."""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, get_args

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent_guards.core import InvalidInputError, PlannerRoute, Verdict
from agent_guards.planner_gate import (
    Approval,
    Goal,
    PlannerPolicy,
    PlanStatus,
    PlanStep,
    PlanTrigger,
    PlanVersion,
    RiskLevel,
    StepStatus,
    carry_over,
    create_planner_gate,
    current_plan,
    gate_plan,
    keep_done_writes,
    mark_step,
    merge_plans,
    missing_constraints,
    needs_approval,
    next_step,
    plan_similarity,
    progress_update,
    runnable_steps,
    same_calls,
)
from agent_guards.planner_gate.core import RULES

SEED_V1 = ["收集资料", "分析", "输出"]
SEED_V2 = ["先明确目标", "再收集资料", "再分析"]
SEED_V3 = ["确认需求", "收集资料", "分析"]


def plan(
    n: int,
    texts: list[str],
    trigger: str = "initial",
    *,
    status: str = "proposed",
    marks: dict[str, str] | None = None,
    executed: int = 0,
    observed: int = 0,
    tool: str | None = None,
) -> PlanVersion:
    """One plan version; ``marks`` sets step statuses, ``tool`` the first step's tool."""
    v = PlanVersion.linear(
        n,
        texts,
        trigger=trigger,
        parent=n - 1 if n > 1 else None,
        status=status,
        executed_steps=executed,
        observations=observed,
    )
    steps = list(v.steps)
    if tool is not None and steps:
        steps[0] = replace(steps[0], tool=tool)
    for sid, st_ in (marks or {}).items():
        steps = [replace(s, status=st_) if s.id == sid else s for s in steps]
    return replace(v, steps=tuple(steps))


V1 = plan(1, SEED_V1, status="accepted")
V1_BLOCKED = plan(1, SEED_V1, status="accepted", marks={"s1": "failed"})
V1_DONE = plan(1, SEED_V1, status="accepted", marks={"s1": "done", "s2": "done", "s3": "done"})
V2_CRIT = plan(2, SEED_V2, "critique")
V2_CRIT_REJ = plan(2, SEED_V2, "critique", status="rejected")
V3_CRIT = plan(3, SEED_V3, "critique")
REPHRASED = ["收集资料。", "分析", "输出报告"]  # similarity 0.89 with SEED_V1
OTHER = ["查官方价格表", "对比三家竞品", "写结论"]


@dataclass(frozen=True)
class Case:
    versions: list[PlanVersion]
    verdict: str
    reason: str
    selected: tuple[str, ...] = ()
    policy: PlannerPolicy | None = None
    kw: dict[str, Any] = field(default_factory=dict)


def row(
    name: str,
    versions: list[PlanVersion],
    verdict: str,
    reason: str,
    selected: tuple[str, ...] = (),
    *,
    policy: PlannerPolicy | None = None,
    **kw: Any,
) -> Any:
    return pytest.param(Case(versions, verdict, reason, selected, policy, kw), id=name)


ONCE_EACH = {"status": "rejected", "observed": 1}
# fmt: off
TRUTH_TABLE = [
    # the initial plan
    row("initial", [plan(1, SEED_V1)], "execute", "initial_plan", ("v1",)),
    row("initial-empty", [plan(1, [])], "clarify", "empty_plan"),
    row("initial-complete", [replace(V1_DONE, status="proposed")], "stop", "plan_complete", ("v1",)),
    row("initial-blocked", [plan(1, SEED_V1, marks={"s1": "failed"})], "clarify", "no_runnable_step"),
    row("initial-unknown-tool", [plan(1, SEED_V1, tool="ghost")], "clarify", "invalid_step", tools=["search"]),
    row("initial-known-tool", [plan(1, SEED_V1, tool="search")], "execute", "initial_plan", ("v1",), tools=["search"]),
    # the critique loop: round 3 is caught by the execute gate, round 5 by no-new-evidence
    row("seed-round3-critique", [V1, V2_CRIT], "execute", "critique_only", ("v1",)),
    row("seed-round5-stale", [V1, V2_CRIT, V3_CRIT], "clarify", "no_new_evidence"),
    row("seed-round5-v2-rejected", [V1, V2_CRIT_REJ, V3_CRIT], "clarify", "no_new_evidence"),
    row("seed-round5-unmarked-history", [plan(1, SEED_V1), V2_CRIT, V3_CRIT], "clarify", "no_new_evidence"),
    row("seed-round5-execute-option", [V1, V2_CRIT_REJ, V3_CRIT], "execute", "no_new_evidence", ("v1",), policy=PlannerPolicy(on_no_new_evidence="execute")),
    row("seed-round3-one-stale-round", [V1, V2_CRIT], "clarify", "no_new_evidence", policy=PlannerPolicy(stale_rounds=1)),
    row("seed-round5-after-evidence", [V1, plan(2, SEED_V2, "critique", **ONCE_EACH), V3_CRIT], "execute", "critique_only", ("v1",)),
    # execute gate: a critique alone never replaces a runnable plan, even after progress
    row("critique-after-progress", [V1, V2_CRIT], "execute", "critique_only", ("v1",), executed_steps=1, observations=1),
    row("critique-plan-complete", [V1_DONE, V2_CRIT], "stop", "critique_only", ("v1",), observations=1),
    row("critique-plan-blocked", [V1_BLOCKED, V2_CRIT], "clarify", "critique_only", observations=1),
    row("feedback-claimed-nothing-new", [V1, plan(2, OTHER, "execution_feedback")], "execute", "execute_gate", ("v1",)),
    row("user-input-claimed-nothing-new", [V1, plan(2, OTHER, "user_input")], "execute", "execute_gate", ("v1",)),
    row("feedback-nothing-new-blocked", [V1_BLOCKED, plan(2, OTHER, "execution_feedback")], "clarify", "no_new_evidence"),
    # accepted replans
    row("user-input", [V1, plan(2, OTHER, "user_input")], "replan", "user_input", ("v2",), observations=1),
    row("execution-feedback", [V1_BLOCKED, plan(2, OTHER, "execution_feedback")], "replan", "execution_feedback", ("v2",), executed_steps=1, observations=1),
    row("seed-v3-as-user-input", [V1, V2_CRIT_REJ, plan(3, SEED_V3, "user_input")], "replan", "user_input", ("v3",), observations=1),
    row("critique-allowed-by-policy", [V1, V2_CRIT], "replan", "critique", ("v2",), policy=PlannerPolicy(replan_triggers={"critique", "execution_feedback"}), observations=1),
    row("user-input-not-allowed", [V1, plan(2, OTHER, "user_input")], "execute", "trigger_not_allowed", ("v1",), policy=PlannerPolicy(replan_triggers={"execution_feedback"}), observations=1),
    # plan similarity: a rephrased plan is the same plan
    row("rephrased", [V1, plan(2, REPHRASED, "execution_feedback")], "execute", "same_plan", ("v1",), observations=1),
    row("rephrased-blocked", [V1_BLOCKED, plan(2, REPHRASED, "execution_feedback")], "clarify", "same_plan", executed_steps=1),
    # ...but new user input is authoritative: a two-character change of city is a new plan
    row("user-changed-city", [plan(1, ["查询下周北京到上海高铁", "筛选上午出发", "生成推荐"]), plan(2, ["查询下周北京到杭州高铁", "筛选上午出发", "生成推荐"], "user_input")], "replan", "user_input", ("v2",), observations=1),
    row("user-rephrased", [V1, plan(2, REPHRASED, "user_input")], "replan", "user_input", ("v2",), observations=1),
    row("back-to-an-old-plan", [V1, plan(2, OTHER, "execution_feedback", status="accepted", observed=1), plan(3, REPHRASED, "execution_feedback")], "execute", "same_plan", ("v2",), observations=1),
    row("rephrased-under-a-strict-threshold", [V1, plan(2, REPHRASED, "execution_feedback")], "replan", "execution_feedback", ("v2",), policy=PlannerPolicy(similarity_threshold=0.95), observations=1),
    # the new version itself must be runnable
    row("new-empty", [V1, plan(2, [], "user_input")], "clarify", "empty_plan", observations=1),
    row("new-invalid-tool", [V1, plan(2, OTHER, "user_input", tool="ghost")], "execute", "invalid_step", ("v1",), observations=1, tools=["search"]),
    row("new-no-runnable", [V1, plan(2, OTHER, "user_input", marks={"s1": "cancelled"})], "execute", "no_runnable_step", ("v1",), observations=1),
    row("new-already-complete", [V1, plan(2, OTHER, "user_input", marks={"s1": "done", "s2": "done", "s3": "skipped"})], "stop", "plan_complete", ("v2",), observations=1),
    row("no-plan-in-force", [plan(1, [], status="rejected"), plan(2, OTHER, "user_input")], "replan", "user_input", ("v2",), observations=1),
    # replan budget (default: 2 revisions after the initial plan)
    row("budget-spent-current-runnable", [V1, plan(2, OTHER, "execution_feedback", **ONCE_EACH), plan(3, OTHER, "execution_feedback", **ONCE_EACH), plan(4, SEED_V3, "execution_feedback")], "execute", "replan_budget", ("v1",), observations=1),
    row("budget-spent-current-blocked", [V1_BLOCKED, plan(2, OTHER, "execution_feedback", **ONCE_EACH), plan(3, OTHER, "execution_feedback", **ONCE_EACH), plan(4, SEED_V3, "execution_feedback")], "stop", "replan_budget", executed_steps=1),
    # the replan budget is per goal: new user input starts it again (the thread's Budget does not)
    row("user-input-restarts-budget", [V1, plan(2, OTHER, "execution_feedback", **ONCE_EACH), plan(3, OTHER, "execution_feedback", **ONCE_EACH), plan(4, SEED_V3, "user_input")], "replan", "user_input", ("v4",), observations=1),
    row("budget-after-user-input", [V1, plan(2, OTHER, "user_input", **ONCE_EACH), plan(3, OTHER, "execution_feedback", **ONCE_EACH), plan(4, SEED_V2, "execution_feedback", **ONCE_EACH), plan(5, SEED_V3, "execution_feedback")], "execute", "replan_budget", ("v1",), observations=1),
    row("budget-spent-escalate", [V1_BLOCKED, plan(2, OTHER, "user_input")], "escalate", "replan_budget", policy=PlannerPolicy(max_replans=0, on_budget_exhausted="escalate"), observations=1),
    row("budget-zero", [V1, plan(2, OTHER, "user_input")], "execute", "replan_budget", ("v1",), policy=PlannerPolicy(max_replans=0), observations=1),
    # the goal layer: a missing required constraint comes first
    row("goal-missing", [plan(1, SEED_V1)], "clarify", "missing_constraints", goal=Goal("analysis", {"region": None}, required=("region",))),
    row("goal-complete", [plan(1, SEED_V1)], "execute", "initial_plan", ("v1",), goal=Goal("analysis", {"region": "华东"}, required=("region",))),
    # nothing proposed: go on with the plan in force
    row("regate-next-step", [V1], "execute", "next_step", ("v1",)),
    row("regate-complete", [V1_DONE], "stop", "plan_complete", ("v1",)),
    row("regate-blocked", [V1_BLOCKED], "clarify", "plan_blocked"),
    row("regate-blocked-escalate", [V1_BLOCKED], "escalate", "plan_blocked", policy=PlannerPolicy(on_blocked="escalate")),
    row("regate-after-rejection", [V1, V2_CRIT_REJ], "execute", "next_step", ("v1",)),
    row("regate-empty", [plan(1, [], status="accepted")], "clarify", "empty_plan"),
    row("regate-nothing-in-force", [plan(1, [], status="rejected")], "clarify", "no_plan"),
]
# fmt: on


@pytest.mark.parametrize("case", TRUTH_TABLE)
def test_gate_plan_truth_table(case: Case) -> None:
    d = gate_plan(case.versions, policy=case.policy, **case.kw)
    assert (d.verdict.value, d.reason, d.selected_ids) == (
        case.verdict,
        case.reason,
        case.selected,
    ), d.detail
    assert d.guard == "planner_gate"
    assert d.policy == (case.policy or PlannerPolicy()).label
    newest = case.versions[-1]
    rejected = newest.status is PlanStatus.PROPOSED and case.selected != (newest.id,)
    assert d.dropped_ids == ((newest.id,) if rejected else ())


@pytest.mark.parametrize("case", TRUTH_TABLE)
def test_the_nodes_checked_gate_decides_as_gate_plan(case: Case) -> None:
    """The planner_gate node checks the versions and the policy once, then decides with
    ``gate_checked``: the same decision as ``gate_plan``, data and texts included."""
    from agent_guards.planner_gate.core import coerce_versions, gate_checked

    pol = case.policy or PlannerPolicy()
    kw = {"executed_steps": 0, "observations": 0, "goal": None, "tools": None, **case.kw}
    checked = gate_checked(coerce_versions(case.versions), pol, **kw)
    general = gate_plan(case.versions, policy=case.policy, **case.kw)
    assert (checked, checked.detail, checked.data) == (general, general.detail, general.data)


# The rows of the table in docs/planner_gate.md, in order ("already decided" is the case
# the docs describe below the table; it is checked right after the goal).
DOCUMENTED_RULES = [
    "missing_constraints",  # 0
    "already_decided",
    "initial_plan",  # 1
    "replan_budget",  # 2
    "no_new_evidence",  # 3
    "critique_only",  # 4
    "execute_gate",  # 5
    "same_plan",  # 6
    "invalid_plan",  # 7
    "replan",  # 8
]


def test_rules_are_the_documented_table_in_order() -> None:
    assert [rule.__name__ for rule in RULES] == DOCUMENTED_RULES
    docs = (Path(__file__).parents[2] / "docs" / "planner_gate.md").read_text(encoding="utf-8")
    sentence = re.search(r"The code is this table:.*?\n\n", docs, re.S)
    assert sentence is not None, "docs/planner_gate.md no longer says the code is RULES"
    named = [n for n in re.findall(r"`(\w+)`", sentence.group()) if n not in ("RULES", "gate_plan")]
    assert named == DOCUMENTED_RULES


def test_seed_trace_is_a_loop_although_similarity_stays_under_threshold() -> None:
    assert plan_similarity(SEED_V1, SEED_V2) < 0.86
    assert plan_similarity(SEED_V2, SEED_V3) < 0.86
    assert plan_similarity(SEED_V1, SEED_V3) < 0.86
    round3 = gate_plan([V1, V2_CRIT])
    round5 = gate_plan([V1, V2_CRIT_REJ, V3_CRIT])
    assert round3.data["similarity"] < 0.86 and round5.data["similarity"] < 0.86
    assert (round3.verdict, round5.verdict) == (Verdict.EXECUTE, Verdict.CLARIFY)
    assert round5.data["stale_rounds"] == 2


@pytest.mark.parametrize(
    ("a", "b", "low", "high"),
    [
        (SEED_V1, REPHRASED, 0.86, 0.9),
        (SEED_V1, ["收集资料", "分析", "输出"], 1.0, 1.0),
        (
            ["Collect sources", "Analyze", "Write report"],
            ["collect sources.", "analyze", "write the report"],
            0.86,
            1.0,
        ),
        (["search flights", "compare"], ["book hotel", "pay"], 0.0, 0.4),
        (SEED_V1, [], 0.0, 0.0),
        ([], [], 1.0, 1.0),
    ],
)
def test_similarity_examples(a: list[str], b: list[str], low: float, high: float) -> None:
    assert low <= plan_similarity(a, b) <= high


def test_similarity_ignores_finished_steps_and_sees_tools_and_args() -> None:
    done = plan(1, SEED_V1, marks={"s1": "done", "s2": "done"})
    assert plan_similarity(done, ["输出"]) == 1.0
    a = PlanVersion(1, (PlanStep("a", "查询", tool="search", args={"q": "北京"}),))
    b = PlanVersion(1, (PlanStep("a", "查询", tool="search", args={"q": "上海"}),))
    assert plan_similarity(a, b) < 1.0 == plan_similarity(a, a)


LOOKUP = "Look up the renewal date of the Acme contract"


def _recovery(tool: str, args: dict[str, Any]) -> tuple[PlanVersion, PlanVersion]:
    """v1 whose first step failed on ``contracts_primary``, and v2 proposing it on ``tool``."""
    v1 = PlanVersion(
        1,
        (
            PlanStep("s1", LOOKUP, tool="contracts_primary", args={"vendor": "Acme"}),
            PlanStep("s2", "Write the answer", depends_on=("s1",)),
        ),
        status="accepted",
    )
    v1 = mark_step(v1, "s1", "failed", note="contracts_primary: index offline")
    v2 = PlanVersion(
        2,
        (
            PlanStep("s1b", LOOKUP, tool=tool, args=args),
            PlanStep("s2", "Write the answer", depends_on=("s1b",)),
        ),
        trigger="execution_feedback",
        parent=1,
    )
    return v1, v2


@pytest.mark.parametrize(
    ("tool", "args", "verdict", "reason"),
    [
        ("contracts_backup", {"vendor": "Acme"}, "replan", "execution_feedback"),
        ("contracts_primary", {"vendor": "Acme Corp"}, "replan", "execution_feedback"),
        # the same call again, only reworded: the failed step would run unchanged
        ("contracts_primary", {"vendor": "Acme"}, "clarify", "same_plan"),
    ],
)
def test_a_step_moved_to_another_call_is_no_rephrase(
    tool: str, args: dict[str, Any], verdict: str, reason: str
) -> None:
    v1, v2 = _recovery(tool, args)
    tools = {"contracts_primary", "contracts_backup"}
    d = gate_plan([v1, v2], executed_steps=1, observations=1, tools=tools)
    assert d.data["similarity"] >= PlannerPolicy().similarity_threshold
    assert (d.verdict.value, d.reason) == (verdict, reason)


def test_same_calls_compares_the_open_steps_tools_and_args() -> None:
    v1, v2 = _recovery("contracts_backup", {"vendor": "Acme"})
    assert not same_calls(v1, v2)
    assert same_calls(v1, replace(v1, steps=(replace(v1.steps[0], description="Find it"),)))
    done = mark_step(v1, "s1", "done")
    assert same_calls(done, [PlanStep("s2", "Write the answer")])


def test_decision_data_carries_the_evidence_for_the_verdict() -> None:
    d = gate_plan([V1, plan(2, OTHER, "user_input")], observations=3, executed_steps=1)
    assert d.data["replans"] == 1 and d.data["max_replans"] == 2
    assert d.data["observations"] == 3 and d.data["executed_steps"] == 1
    assert d.data["version"] == 2 and d.data["next_step"] == "s1"
    assert d.data["similar_to"] == "v1"
    json.dumps(d.to_dict(), ensure_ascii=False)  # JSON-ready


@pytest.mark.parametrize(
    ("versions", "kw", "item", "field"),
    [
        pytest.param([], {}, None, "versions", id="empty"),
        pytest.param("v1", {}, None, "versions", id="not-a-list"),
        pytest.param([V1, plan(1, OTHER)], {}, "v1", "version", id="not-increasing"),
        pytest.param([V1, plan(2, OTHER, "initial")], {}, "v2", "trigger", id="second-initial"),
        pytest.param(
            [V1, PlanVersion(3, trigger="user_input", parent=2)],
            {},
            "v3",
            "parent",
            id="unknown-parent",
        ),
        pytest.param([V1], {"observations": -1}, None, "observations", id="negative-observations"),
        pytest.param([V1], {"executed_steps": 1.5}, None, "executed_steps", id="float-count"),
        pytest.param(
            [{"version": 1, "steps": [{"id": "a", "depends_on": ["b"]}]}],
            {},
            "a",
            "depends_on",
            id="unknown-dependency",
        ),
        pytest.param(
            [{"version": 1, "steps": [{"id": "a", "cost": 3}]}], {}, "a", "cost", id="unknown-key"
        ),
        pytest.param(
            # named by the version and the step's position
            [{"version": 1, "steps": [{"description": "x"}]}],
            {},
            "v1 step #0",
            "id",
            id="step-without-id",
        ),
        pytest.param(
            [{"version": 1, "steps": [{"id": "a", "risk": "extreme"}]}],
            {},
            "a",
            "risk",
            id="bad-risk",
        ),
        pytest.param(
            [{"version": 1, "steps": [{"id": "a", "timeout_s": float("nan")}]}],
            {},
            "a",
            "timeout_s",
            id="nan-timeout",
        ),
        pytest.param(
            [
                {
                    "version": 1,
                    "steps": [{"id": "a", "depends_on": ["b"]}, {"id": "b", "depends_on": ["a"]}],
                }
            ],
            {},
            "a",
            "depends_on",
            id="cycle",
        ),
        pytest.param(
            [{"version": 1, "steps": [{"id": "a"}, {"id": "a"}]}],
            {},
            "a",
            "id",
            id="duplicate-step",
        ),
        pytest.param([{"version": 0}], {}, None, "version", id="version-zero"),
    ],
)
def test_bad_input_names_item_and_field(
    versions: Any, kw: dict[str, Any], item: str | None, field: str
) -> None:
    with pytest.raises(InvalidInputError) as err:
        gate_plan(versions, **kw)
    assert (err.value.item, err.value.field) == (item, field)


def test_mappings_are_accepted_like_versions() -> None:
    as_dicts = [V1.to_dict(), V2_CRIT.to_dict()]
    assert gate_plan(as_dicts) == gate_plan([V1, V2_CRIT])
    assert PlanVersion.from_dict(json.loads(json.dumps(V1_BLOCKED.to_dict()))) == V1_BLOCKED


# --- policy and factory validation -------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"max_replans": -1}, "max_replans must be an int >= 0, got -1"),
        ({"max_replans": True}, "max_replans must be an int >= 0, got True"),
        ({"stale_rounds": 0}, "stale_rounds must be an int >= 1, got 0"),
        ({"similarity_threshold": 0}, "similarity_threshold must be in (0, 1], got 0"),
        ({"similarity_threshold": 1.2}, "similarity_threshold must be in (0, 1], got 1.2"),
        (
            {"on_no_new_evidence": "retry"},
            "on_no_new_evidence='retry' is not allowed; allowed: 'clarify', 'execute'",
        ),
        ({"on_budget_exhausted": "execute"}, "on_budget_exhausted='execute' is not allowed"),
        ({"on_blocked": "replan"}, "on_blocked='replan' is not allowed"),
        ({"replan_triggers": {"initial"}}, "replan_triggers item='initial' is not allowed"),
        ({"replan_triggers": "critique"}, "replan_triggers must be a set of triggers"),
        ({"name": ""}, "name must be a non-empty string"),
        ({"version": 0}, "version must be an int >= 1, got 0"),
    ],
)
def test_policy_rejects_bad_values_by_name(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises((ValueError, TypeError)) as err:
        PlannerPolicy(**kwargs)
    assert message in str(err.value)


def test_policy_is_frozen_keyword_only_and_labelled() -> None:
    pol = PlannerPolicy(name="strict-planner", version=3, max_replans=1)
    assert pol.label == "strict-planner@3"
    assert replace(pol, max_replans=4).max_replans == 4
    with pytest.raises(AttributeError):
        pol.max_replans = 9  # type: ignore[misc]
    with pytest.raises(TypeError):
        PlannerPolicy(2)  # type: ignore[misc]
    assert PlannerPolicy().replan_triggers == {
        PlanTrigger.EXECUTION_FEEDBACK,
        PlanTrigger.USER_INPUT,
    }


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"destinations": {"answer": "x"}}, "destinations key='answer' is not allowed"),
        ({"destinations": {"stop": ""}}, "destinations['stop'] must be a node name"),
        ({"destinations": ["execute"]}, "destinations must be a mapping"),
        ({"approval_risk": "extreme"}, "approval_risk='extreme' is not allowed"),
        ({"on_rejected": "retry"}, "on_rejected='retry' is not allowed"),
        ({"policy": {"max_replans": 1}}, "policy must be a PlannerPolicy"),
        ({"name": ""}, "name must be a non-empty string"),
    ],
)
def test_factory_rejects_bad_options_at_build_time(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises((ValueError, TypeError)) as err:
        create_planner_gate(**kwargs)
    assert message in str(err.value)


def test_gate_plan_rejects_a_wrong_policy_type() -> None:
    with pytest.raises(TypeError, match="policy must be a PlannerPolicy"):
        gate_plan([V1], policy="strict")  # type: ignore[arg-type]


# --- plan records and helpers ------------------------------------------------------------


def test_runnable_steps_follow_dependencies() -> None:
    v = PlanVersion(
        1,
        (
            PlanStep("fetch_a", "取 A 数据", tool="search"),
            PlanStep("fetch_b", "取 B 数据", tool="search"),
            PlanStep("compare", "对比", depends_on=("fetch_a", "fetch_b")),
        ),
    )
    assert [s.id for s in runnable_steps(v)] == ["fetch_a", "fetch_b"]
    v = mark_step(v, "fetch_a", "done")
    assert [s.id for s in runnable_steps(v)] == ["fetch_b"]
    v = mark_step(v, "fetch_b", "skipped")
    assert next_step(v) == v.step("compare")
    assert not v.is_complete
    v = mark_step(v, "compare", "done")
    assert v.is_complete and next_step(v) is None


def test_failed_and_cancelled_steps_block_dependents() -> None:
    v = mark_step(PlanVersion.linear(1, ["a", "b"]), "s1", "failed")
    assert runnable_steps(v) == ()
    v = mark_step(v, "s1", "pending")  # a retry may reset a failed step
    assert next_step(v) == v.step("s1")
    v = mark_step(v, "s1", "cancelled")
    assert runnable_steps(v) == ()


def test_mark_step_returns_a_new_value_and_keeps_finished_steps_finished() -> None:
    v = PlanVersion.linear(1, ["a", "b"])
    done = mark_step(v, "s1", "done", evidence_ids=["e1"], call_ids=["c1"], note="ok")
    assert v.step("s1").status is StepStatus.PENDING  # the original is untouched
    again = mark_step(done, "s1", "done", evidence_ids=["e1", "e2"])  # a replayed node
    assert again.step("s1").evidence_ids == ("e1", "e2") and again.step("s1").call_ids == ("c1",)
    with pytest.raises(InvalidInputError) as err:
        mark_step(done, "s1", "failed")
    assert (err.value.item, err.value.field) == ("s1", "status")
    with pytest.raises(InvalidInputError) as err:
        mark_step(done, "nope", "done")
    assert (err.value.item, err.value.field) == ("nope", "id")
    with pytest.raises(InvalidInputError):
        mark_step(done, "s2", "finished")


def test_carry_over_reuses_only_matching_finished_work() -> None:
    old = PlanVersion(
        (1), (PlanStep("a", "search", tool="search", args={"q": "x"}), PlanStep("b", "read"))
    )
    old = mark_step(mark_step(old, "a", "done", evidence_ids=["e1"]), "b", "failed")
    same = PlanVersion(
        2,
        (PlanStep("a", "search again", tool="search", args={"q": "x"}), PlanStep("b", "read")),
        trigger="execution_feedback",
    )
    other_args = PlanVersion(
        2, (PlanStep("a", "search", tool="search", args={"q": "y"}),), trigger="execution_feedback"
    )
    kept = carry_over(old, same)
    assert kept.step("a").status is StepStatus.DONE and kept.step("a").evidence_ids == ("e1",)
    assert kept.step("b").status is StepStatus.PENDING  # failed work is not reused
    assert carry_over(old, other_args).step("a").status is StepStatus.PENDING


def test_current_plan_is_the_newest_accepted_version() -> None:
    assert current_plan([V1, V2_CRIT_REJ]) == V1
    assert current_plan([plan(1, SEED_V1)]) is None
    accepted = plan(2, OTHER, "user_input", status="accepted")
    assert current_plan([V1, accepted, plan(3, SEED_V3, "critique", status="rejected")]) == accepted


def test_step_fields_are_normalized() -> None:
    from datetime import timedelta

    s = PlanStep(
        "a", "x", depends_on="b0", risk="HIGH", timeout_s=timedelta(seconds=3), status="Done"
    )
    assert s.depends_on == ("b0",) and s.risk is RiskLevel.HIGH and s.timeout_s == 3.0
    assert s.status is StepStatus.DONE
    assert PlanStep.from_dict(json.loads(json.dumps(s.to_dict()))) == s
    with pytest.raises(InvalidInputError, match="cannot depend on itself"):
        PlanStep("a", depends_on=["a"])
    with pytest.raises(InvalidInputError) as err:
        PlanStep("a", args=["q"])  # type: ignore[arg-type]
    assert err.value.field == "args"


@pytest.mark.parametrize(
    ("value", "missing"),
    [
        (None, True),
        ("", True),
        ("  ", True),
        ([], True),
        ({}, True),
        (math.nan, True),
        (0, False),
        (False, False),
        ("杭州", False),
        ([2024, 2026], False),
    ],
)
def test_missing_constraint_values(value: Any, missing: bool) -> None:
    goal = Goal("compare", {"region": value}, required=("region",))
    assert (missing_constraints(goal) == ("region",)) is missing


def test_goal_updates_and_absent_keys() -> None:
    goal = Goal("book", {"from": "北京"}, required=("from", "to", "date"), dimensions=("price",))
    assert goal.missing() == ("to", "date")
    assert missing_constraints(goal, ["from"]) == ()
    later = goal.with_constraints({"to": "上海", "date": "2026-03-01"})
    assert later.missing() == () and goal.missing() == ("to", "date")
    with pytest.raises(InvalidInputError) as err:
        Goal("x", {"": 1})
    assert err.value.field == "constraints"


@pytest.mark.parametrize(
    ("value", "approved", "cancelled"),
    [
        (True, True, False),
        (False, False, False),
        ("approve", True, False),
        (" Yes ", True, False),
        ("reject", False, False),
        ({"approved": True, "by": "ops", "note": "fine"}, True, False),
        ({"approved": False, "reason": "too risky"}, False, False),
        ({"cancel": "user left"}, False, True),
    ],
)
def test_approval_resume_values(value: Any, approved: bool, cancelled: bool) -> None:
    answer = Approval.from_resume(value, step_id="pay")
    assert (answer.approved, answer.cancelled) == (approved, cancelled)


@pytest.mark.parametrize(
    "value", [None, "maybe", 1, {"approved": "yes"}, {"approved": True, "args": [1]}]
)
def test_unreadable_approval_names_the_step(value: Any) -> None:
    with pytest.raises(InvalidInputError) as err:
        Approval.from_resume(value, step_id="pay")
    assert (err.value.item, err.value.field) == ("pay", "resume")


def test_needs_approval_by_risk_and_answer() -> None:
    high = PlanStep("pay", "付款", tool="pay", risk="high")
    assert needs_approval(high) and needs_approval(high, "medium")
    assert not needs_approval(PlanStep("read", risk="medium"))
    assert needs_approval(PlanStep("read", risk="medium"), RiskLevel.MEDIUM)
    assert not needs_approval(replace(high, approved=True))


def test_progress_update_and_merge_plans() -> None:
    assert progress_update(executed=1) == {"executed_since_plan": 1, "observations_since_plan": 0}
    with pytest.raises(InvalidInputError):
        progress_update(observations=-2)
    merged = merge_plans([V1], [plan(2, OTHER, "user_input"), V1_BLOCKED])
    assert [v.id for v in merged] == ["v1", "v2"] and merged[0] == V1_BLOCKED
    assert merge_plans(None, V1.to_dict()) == [V1]
    assert merge_plans([V1], None) == [V1]


# --- laws (hypothesis) -------------------------------------------------------------------

texts = st.text(alphabet="收集资料分析输出确认需求先再abc xyz", min_size=1, max_size=8)
step_lists = st.lists(texts, min_size=0, max_size=6)


@given(step_lists, step_lists)
def test_similarity_is_symmetric_and_bounded(a: list[str], b: list[str]) -> None:
    ab, ba = plan_similarity(a, b), plan_similarity(b, a)
    assert math.isclose(ab, ba, abs_tol=1e-9)
    assert 0.0 <= ab <= 1.0


@given(st.lists(texts, min_size=1, max_size=6))
def test_a_plan_is_identical_to_itself(a: list[str]) -> None:
    assert plan_similarity(a, a) == 1.0


@st.composite
def dags(draw: st.DrawFn) -> PlanVersion:
    n = draw(st.integers(1, 8))
    steps = []
    for i in range(n):
        deps = draw(st.sets(st.integers(0, i - 1), max_size=3)) if i else set()
        steps.append(
            PlanStep(f"s{i}", f"step {i}", depends_on=tuple(f"s{d}" for d in sorted(deps)))
        )
    return PlanVersion(1, tuple(steps))


@given(dags())
def test_running_the_next_step_until_none_finishes_every_step(v: PlanVersion) -> None:
    for _ in range(len(v.steps)):
        ready = runnable_steps(v)
        assert ready, "an acyclic plan always has a runnable step until it is complete"
        finished = {s.id for s in v.steps if s.status is StepStatus.DONE}
        assert all(set(s.depends_on) <= finished for s in ready)
        v = mark_step(v, ready[0].id, "done")
    assert v.is_complete and runnable_steps(v) == ()


triggers = st.sampled_from(["critique", "execution_feedback", "user_input"])
histories = st.lists(
    st.tuples(step_lists, triggers, st.sampled_from(["accepted", "rejected"]), st.integers(0, 2)),
    max_size=4,
)


def _build(first: list[str], history: list[Any], new: tuple[list[str], str]) -> list[PlanVersion]:
    versions = [plan(1, first, status="accepted")]
    for i, (steps, trig, status, seen) in enumerate(history, start=2):
        versions.append(plan(i, steps, trig, status=status, observed=seen))
    versions.append(plan(len(versions) + 1, new[0], new[1]))
    return versions


@settings(max_examples=150)
@given(
    st.lists(texts, min_size=1, max_size=4),
    histories,
    st.tuples(step_lists, triggers),
    st.tuples(st.integers(0, 2), st.integers(0, 2)),
)
def test_gate_laws(
    first: list[str], history: list[Any], proposal: tuple[list[str], str], counts: tuple[int, int]
) -> None:
    (new, trigger), (executed, observed) = proposal, counts
    versions = _build(first, history, (new, trigger))
    snapshot = list(versions)
    d = gate_plan(versions, executed_steps=executed, observations=observed)
    assert versions == snapshot  # pure: input untouched
    assert d == gate_plan(versions, executed_steps=executed, observations=observed)  # deterministic
    assert d.verdict.value in get_args(PlannerRoute)
    if d.verdict is Verdict.REPLAN:
        assert executed + observed > 0, "a replan with nothing new is never accepted"
        assert trigger != "critique", "a critique alone never replaces the plan"
        since_user = max(
            i for i, v in enumerate(versions) if v.trigger.value in ("initial", "user_input")
        )
        revisions = [v for v in versions[since_user:] if v.trigger.value != "initial"]
        assert len(revisions) <= PlannerPolicy().max_replans, "the budget is never exceeded"
        assert d.selected_ids == (versions[-1].id,)
    if d.verdict is Verdict.EXECUTE:
        assert d.selected_ids and d.data["next_step"] is not None


def _invoice_plan(version: int, *steps: tuple[str, str, dict[str, Any]], **kw: Any) -> PlanVersion:
    return PlanVersion(
        version, [PlanStep(i, f"{t} {a}", tool=t, args=a) for i, t, a in steps], **kw
    )


@pytest.mark.parametrize(
    ("relisted", "reads", "status"),
    [
        (("x9", "create_invoice", {"n": 7}), (), "done"),  # same write, new id: not re-run
        (("s1", "create_invoice", {"n": 7}), (), "done"),
        (("x9", "create_invoice", {"n": 8}), (), "pending"),  # another invoice
        (("x9", "search", {"q": "a"}), ("search",), "pending"),  # a read may run again
        (("x9", "search", {"q": "a"}), (), "done"),  # unknown effect: may have written
    ],
    ids=["same write, new id", "same write, same id", "other args", "a read", "unknown"],
)
def test_a_replan_never_reruns_a_completed_write(
    relisted: tuple[str, str, dict[str, Any]], reads: tuple[str, ...], status: str
) -> None:
    v1 = _invoice_plan(1, ("s1", "create_invoice", {"n": 7}), ("s2", "search", {"q": "a"}))
    v1 = mark_step(mark_step(v1, "s1", "done"), "s2", "done")
    v2 = _invoice_plan(2, relisted, trigger="execution_feedback", parent=1)
    v3 = _invoice_plan(3, relisted, trigger="execution_feedback", parent=2)
    # the write was done under v1: v3 is checked against every earlier version
    kept = keep_done_writes([v1, v2], v3, reads=reads)
    assert kept.steps[0].status.value == status
    if status == "done":
        assert "not run again" in (kept.steps[0].note or "") or kept.steps[0].id == "s1"


def test_a_failed_write_may_run_again_after_a_replan() -> None:
    v1 = mark_step(_invoice_plan(1, ("s1", "create_invoice", {"n": 7})), "s1", "failed")
    v2 = _invoice_plan(
        2, ("x9", "create_invoice", {"n": 7}), trigger="execution_feedback", parent=1
    )
    assert keep_done_writes([v1], v2).steps[0].status.value == "pending"
