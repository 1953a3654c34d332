"""Case kinds: inputs in JSON, guards' decisions out; policy overrides; the registry."""

from __future__ import annotations

import itertools
from datetime import UTC
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from agent_guards import EvidencePolicy, FailureKind, LoopPolicy, PlannerPolicy
from agent_guards.evals import (
    KINDS,
    Case,
    EvalPolicies,
    policy_versions,
    register_kind,
    run_case,
    run_cases,
    run_kind,
)
from agent_guards.evals.errors import build_failure
from agent_guards.evals.jsonform import messages_from_json, messages_to_json, to_jsonable


def ev(id: str, value: str, **kw: Any) -> dict[str, Any]:
    return {"id": id, "claim_key": "limit", "value": value, **kw}


OLD = ev("old", "100w", source_type="official", updated_at="2024-06-01")
NEW = ev("new", "50w", source_type="official", updated_at="2026-01-01")
FORUM = ev("forum", "80w", source_type="forum", updated_at="2026-05-01")

# evidence input -> (verdict, reason, value)
EVIDENCE_TABLE = [
    ({"items": []}, ("abstain", "no_evidence", None)),
    ({"items": [OLD, NEW]}, ("answer", "newer_version", "50w")),
    ({"items": [OLD, FORUM]}, ("answer", "source_credibility", "100w")),
    ({"items": [OLD, NEW], "as_of": "2025-01-01"}, ("answer", "consistent", "100w")),
    ({"items": [OLD, {**NEW, "updated_at": "2024-07-01"}]}, ("clarify", "close_call", None)),
    (
        {"items": [OLD, {**NEW, "updated_at": "2024-07-01"}], "policy": {"high_risk": True}},
        ("escalate", "close_call", None),
    ),
    (
        {"items": [{**NEW, "allowed": ["board"]}], "principal": "alice"},
        ("abstain", "no_evidence", None),
    ),
    ({"items": [{"claim_key": "limit", "value": "1"}]}, ("abstain", "invalid_input", None)),
]


@pytest.mark.parametrize(("data", "want"), EVIDENCE_TABLE)
def test_evidence_kind(data: dict[str, Any], want: tuple[str, str, Any]) -> None:
    out = run_kind("evidence", data)
    assert (out["verdict"], out["reason"], out.get("value")) == want


def test_invalid_input_is_observed_as_the_node_records_it() -> None:
    cases = {
        "evidence": (
            {"items": [{"id": "d1", "claim_key": "k", "value": "1", "confidence": 2}]},
            "abstain",
        ),
        "memory": (
            {
                "now": "2026-01-01",
                "records": [{"id": "m1", "key": "k", "value": 1, "source": "guess"}],
            },
            "abstain",
        ),
        "planner": ({"versions": []}, "escalate"),
        "loop": (
            {"messages": [{"type": "ai", "tool_calls": [{"name": "", "args": {}}]}]},
            "continue",
        ),
        "retry": ({"error": {"status": 200}}, "continue"),
    }
    for kind, (data, verdict) in cases.items():
        out = run_kind(kind, data)
        assert (out["verdict"], out["reason"]) == (verdict, "invalid_input"), kind


def test_a_malformed_case_fails_with_the_bad_key_named() -> None:
    bad = Case("bad", "s", "evidence", {"itmes": []}, {"verdict": "abstain"})
    result = run_case(bad)
    assert not result.passed
    assert "unknown key(s) ['itmes']" in result.failures[0]
    unknown = run_case(Case("u", "s", "nope", {}, {}))
    assert "unknown kind 'nope'" in unknown.failures[0]
    with pytest.raises(ValueError, match="has no field 'stop'"):
        run_kind("loop", {"messages": [], "policy": {"stop": 3}})


def test_run_policies_break_cases_on_purpose() -> None:
    case = Case("c", "s", "evidence", {"items": [OLD, FORUM]}, {"value": "100w"})
    assert run_cases([case]).metrics["pass_rate"] == 1.0
    upside_down = EvidencePolicy(source_weights={"forum": 5, "official": 1}, version=9)
    run = run_cases([case], policies=EvalPolicies(evidence=upside_down))
    assert run.metrics["pass_rate"] == 0.0
    assert run.policies["evidence_resolve"] == "EvidencePolicy@9"
    assert run.results[0].observed["policy"] == "EvidencePolicy@9"


def test_policy_versions_name_every_guard() -> None:
    assert policy_versions() == {
        "evidence_resolve": "EvidencePolicy@1",
        "memory_resolve": "MemoryPolicy@1",
        "planner_gate": "PlannerPolicy@1",
        "loop_check": "LoopPolicy@1",
        "retry_router": "RetryRouterPolicy@1",
        "context_guard": "ContextPolicy@1",
    }
    with pytest.raises(TypeError, match=r"EvalPolicies\.loop must be a LoopPolicy"):
        EvalPolicies(loop=PlannerPolicy())  # type: ignore[arg-type]


def test_register_kind() -> None:
    seen: list[dict[str, Any]] = []

    def graph_runner(data: dict[str, Any]) -> dict[str, Any]:  # no policies parameter
        seen.append(data)
        return {"verdict": "answer", "reason": "scripted", "steps": data["steps"]}

    try:
        register_kind("graph_test", graph_runner)
        with pytest.raises(ValueError, match="already registered"):
            register_kind("graph_test", lambda d: {})
        result = run_case(Case("g", "s", "graph_test", {"steps": 4}, {"max_steps": 5}))
        assert result.passed and seen == [{"steps": 4}]
        with pytest.raises(ValueError, match="non-empty"):
            register_kind(" ", graph_runner)
        with pytest.raises(TypeError, match="callable"):
            register_kind("x", "not a function")  # type: ignore[arg-type]
    finally:
        KINDS.pop("graph_test", None)
    with pytest.raises(ValueError, match="unknown kind 'graph_test'"):
        run_kind("graph_test", {})


def test_memory_kind_facts_and_write_back() -> None:
    out = run_kind(
        "memory",
        {
            "now": "2026-04-01",
            "scopes": ["user:alice"],
            "records": [{"id": "m1", "key": "fmt", "value": "pdf", "scope": "user:alice"}],
            "facts": [{"key": "fmt", "value": "markdown", "persist": True}],
        },
    )
    fact_id = out["inject_ids"][0]
    assert fact_id.startswith("turn-")  # the node's stable id for a current-turn fact
    assert out["excluded"] == {"m1": f"overridden_by:{fact_id}"}
    assert out["writes"] == [
        {"id": "m1", "status": "superseded", "supersedes": []},
        {"id": fact_id, "status": "active", "supersedes": ["m1"]},
    ]


def test_planner_rounds_run_steps_before_the_next_version() -> None:
    rounds = [
        {"steps": ["search", "read", "write"]},
        {
            "steps": ["search more", "read", "write"],
            "trigger": "execution_feedback",
            "executed": 1,
            "observations": 1,
        },
    ]
    out = run_kind("planner", {"rounds": rounds})
    assert out["verdicts"] == ["execute", "replan"]
    assert out["statuses"] == {"v1": "accepted", "v2": "accepted"}
    with pytest.raises(ValueError, match="trigger is required"):
        run_kind("planner", {"rounds": [rounds[0], {"steps": ["x"]}]})
    with pytest.raises(ValueError, match="exactly one of"):
        run_kind("planner", {"rounds": rounds, "versions": []})
    budget = run_kind("planner", {"rounds": rounds, "policy": {"max_replans": 0}})
    assert budget["reasons"] == ["initial_plan", "replan_budget"]


def test_loop_replay_counts_what_the_guard_would_run() -> None:
    call = {"call": "search", "args": {"q": "x"}, "result": "the same forty-odd characters of text"}
    reads = {"read_only": ["search"]}
    out = run_kind(
        "loop", {"messages": [{"type": "human", "content": "q"}, *[call] * 6], "effects": reads}
    )
    assert out["verdicts"] == ["nudge", "stop"]
    assert (out["executions"], out["unguarded_tool_calls"], out["model_calls"]) == (1, 6, 3)
    assert out["reused_ids"] == ["c2", "c3"]
    lenient = run_kind(
        "loop",
        {
            "messages": [*[call] * 6],
            "policy": {"stop_at": 10, "nudge_at": None},
            "effects": reads,
        },
    )
    assert (lenient["aborted"], lenient["executions"]) == (False, 1)


def test_retry_kind_from_history_for_one_call() -> None:
    msgs = [
        {
            "type": "ai",
            "tool_calls": [
                {"name": "pay", "args": {"n": 1}, "id": "a"},
                {"name": "pay", "args": {"n": 2}, "id": "b"},
            ],
        },
        {"type": "tool", "tool_call_id": "a", "content": "timed out", "status": "error"},
        {"type": "tool", "tool_call_id": "b", "content": "403 Forbidden", "status": "error"},
    ]
    assert run_kind("retry", {"messages": msgs})["route"] == "refuse"
    # pay declares no effect: it may have paid before timing out, so it is not retried
    assert run_kind("retry", {"messages": msgs, "call_id": "a"})["route"] == "clarify"
    idempotent = {"messages": msgs, "call_id": "a", "effects": {"idempotent": ["pay"]}}
    assert run_kind("retry", idempotent)["route"] == "retry"
    with pytest.raises(ValueError, match="unknown keys"):
        run_kind("retry", {"messages": msgs, "effects": {"reads": ["pay"]}})
    with pytest.raises(ValueError, match="names no failed call"):
        run_kind("retry", {"messages": msgs, "call_id": "zzz"})


def test_context_kind() -> None:
    long = "x" * 4000
    msgs = [
        {"type": "system", "content": "be brief", "id": "s"},
        {"type": "human", "content": "q", "id": "h"},
        {"call": "read", "args": {"doc": "a"}, "result": long, "id": "c1"},
    ]
    out = run_kind(
        "context", {"messages": msgs, "max_tokens": 600, "pinned": [{"key": "goal", "value": "g"}]}
    )
    assert out["verdict"] == "repair"
    assert out["usage"] < out["usage_before"]
    assert (
        run_kind("context", {"messages": msgs, "max_tokens": 100_000})["reason"] == "within_budget"
    )


# JSON failure spec -> kind
FAILURE_TABLE = [
    ({"exception": "TimeoutError"}, FailureKind.TRANSIENT),
    ({"exception": "PermissionError", "message": "no"}, FailureKind.PERMISSION),
    ({"exception": "APIConnectionError"}, FailureKind.TRANSIENT),  # by class name
    ({"exception": "NotFoundError"}, FailureKind.PRECONDITION),
    ({"exception": "InvalidArgsError", "field_errors": {"a": "bad"}}, FailureKind.INVALID_ARGS),
    ({"exception": "EmptyResult", "business": True}, FailureKind.EMPTY_BUSINESS),
    ({"exception": "QuotaExceeded"}, FailureKind.QUOTA),
    (
        {"exception": "ValidationError", "fields": {"n": "int"}, "args": {"n": "x"}},
        FailureKind.INVALID_ARGS,
    ),
    ({"status": 409}, FailureKind.PRECONDITION),
    ({"status": 500, "headers": {}}, FailureKind.TRANSIENT),
    ({"tool_message": {"content": "Access denied for user"}}, FailureKind.PERMISSION),
    ({"tool_message": {"content": "ok", "failure": {"kind": "safety"}}}, FailureKind.SAFETY),
]


@pytest.mark.parametrize(("spec", "kind"), FAILURE_TABLE)
def test_failure_specs(spec: dict[str, Any], kind: FailureKind) -> None:
    assert build_failure(spec).kind is kind


def test_failure_spec_errors() -> None:
    with pytest.raises(ValueError, match="unknown key"):
        build_failure({"exception": "TimeoutError", "retry": 1})
    with pytest.raises(ValueError, match="class name"):
        build_failure({"exception": "not a name"})
    with pytest.raises(ValueError, match="valid for these fields"):
        build_failure({"exception": "ValidationError", "fields": {"n": "int"}, "args": {"n": 1}})


def test_message_json_form() -> None:
    msgs = messages_from_json(
        [
            {"type": "user", "content": "hi"},
            {
                "type": "assistant",
                "tool_calls": [{"name": "a", "args": {}}, {"name": "b", "args": {"x": 1}}],
            },
            {"type": "tool", "content": "A"},  # answers the oldest open call: c1
            {
                "type": "tool",
                "content": "B",
                "status": "error",
                "failure": {"kind": "transient"},
                "meta": {"attempt": 2},
            },
            {"call": "c", "args": {}, "result": "C", "evidence_ids": ["d1"]},
        ]
    )
    assert [type(m) for m in msgs] == [
        HumanMessage,
        AIMessage,
        ToolMessage,
        ToolMessage,
        AIMessage,
        ToolMessage,
    ]
    assert [m.tool_call_id for m in msgs if isinstance(m, ToolMessage)] == ["c1", "c2", "c3"]
    assert msgs[3].artifact["agent_guards_failure"]["kind"] == "transient"
    assert msgs[3].response_metadata == {"agent_guards": {"attempt": 2}}
    assert msgs[5].artifact == {"evidence_ids": ["d1"]}
    assert messages_from_json(messages_to_json(msgs)) == msgs  # the JSON form round-trips
    for bad, match in (
        ([{"type": "robot"}], "type must be one of"),
        ([{"type": "tool", "content": "x"}], "no call to answer"),
        ([{"type": "human", "tool_calls": []}], "unknown key"),
        ("hello", "list of message objects"),
    ):
        with pytest.raises(ValueError, match=match):
            messages_from_json(bad)


def test_to_jsonable() -> None:
    from datetime import datetime

    from agent_guards import PlanVersion, Verdict

    value = {
        "v": Verdict.STOP,
        "when": datetime(2026, 1, 1, tzinfo=UTC),
        "t": (1, 2),
        "plan": PlanVersion.linear(1, ["a"]),
        "s": {"b", "a"},
    }
    out = to_jsonable(value)
    assert out["v"] == "stop" and out["when"] == "2026-01-01T00:00:00+00:00"
    assert out["t"] == [1, 2] and out["s"] == ["a", "b"] and out["plan"]["steps"][0]["id"] == "s1"


SOURCES = st.sampled_from(["official", "internal", "memory", "forum", None])
ITEMS = st.lists(
    st.builds(
        lambda i, v, s, d: {
            "id": f"d{i}",
            "claim_key": "k",
            "value": v,
            "source_type": s,
            "updated_at": f"2026-0{d}-01",
        },
        st.integers(0, 99),
        st.sampled_from(["1", "2", "3"]),
        SOURCES,
        st.integers(1, 9),
    ),
    max_size=6,
    unique_by=lambda e: e["id"],
)


@settings(max_examples=60, deadline=None)
@given(items=ITEMS, seed=st.randoms(use_true_random=False))
def test_evidence_kind_is_invariant_under_input_order(
    items: list[dict[str, Any]], seed: Any
) -> None:
    shuffled = list(items)
    seed.shuffle(shuffled)
    a, b = run_kind("evidence", {"items": items}), run_kind("evidence", {"items": shuffled})
    assert (a["verdict"], a["reason"], a["value"]) == (b["verdict"], b["reason"], b["value"])
    for key in ("selected_ids", "conflicting_ids", "dropped_ids"):
        assert set(a[key]) == set(b[key])


CALLS = st.lists(st.sampled_from(["a", "b", "c"]), min_size=1, max_size=12)


@settings(max_examples=60, deadline=None)
@given(tools=CALLS)
def test_loop_replay_never_runs_more_than_the_unguarded_run(tools: list[str]) -> None:
    msgs = [
        {"call": t, "args": {"k": 1}, "result": f"{t}: a result long enough to be evidence, 42"}
        for t in tools
    ]
    reads = {"read_only": ["a", "b", "c"]}
    out = run_kind("loop", {"messages": msgs, "policy": {"stop_at": 3}, "effects": reads})
    assert out["executions"] <= out["unguarded_tool_calls"] == len(tools)
    assert out["executions"] <= len(set(tools))  # identical reads run once
    # Tools of unknown effect may write, so another call in between makes a re-run fair;
    # a run of identical calls with nothing in between still executes at most twice.
    unknown = run_kind("loop", {"messages": msgs, "policy": {"stop_at": 3}})
    runs = 1 + sum(a != b for a, b in itertools.pairwise(tools))
    assert unknown["executions"] <= 2 * runs
    assert out["aborted"] == (out["verdict"] in ("stop", "escalate"))
    policy = LoopPolicy()
    assert out["policy"] == policy.label
