"""The reference graph reads a tool's evidence artifact without trusting its shape.

A retriever adds keys of its own (``url``), and a tool may return items that are no evidence
at all; the tool has already run when its result is read, so neither may end the run or
leave the thread unable to resume.
"""

from __future__ import annotations

import json
from typing import Any

from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from agent_guards import guard_serializer
from agent_guards.graphs.plan_execute import Policies, build_graph, run_config
from agent_guards.graphs.scenarios import RoleScript
from agent_guards.testing import tool_call_message

GOAL = {"intent": "renewal", "dimensions": ["renewal_date"], "constraints": {"vendor": "Acme"}}
GOOD = {"id": "c-17", "claim_key": "renewal_date", "value": "2026-09-30", "source_type": "official"}


def _run(artifact: list[Any]) -> tuple[Any, dict[str, Any]]:
    @tool(response_format="content_and_artifact")
    def search_docs(vendor: str) -> tuple[str, list[Any]]:
        """Search documents."""
        return "c-17: renews on 2026-09-30", artifact

    step = {"id": "s1", "description": "x", "tool": "search_docs", "args": {"vendor": "Acme"}}
    script = RoleScript(
        parse_goal=[json.dumps(GOAL)],
        plan=[json.dumps({"steps": [step]})],
        agent=[tool_call_message("search_docs", {"vendor": "Acme"}), "done"],
        review=[json.dumps({"action": "finish"})],
    )
    policies = Policies()
    graph = build_graph(
        script.model(),
        [search_docs],
        policies=policies,
        checkpointer=InMemorySaver(serde=guard_serializer()),
    )
    config = run_config(policies, thread_id="t", principal="ops", agent_guards_now="2026-06-01")
    out = graph.invoke({"messages": [("user", "When does the Acme contract renew?")]}, config)
    return graph.get_state(config), out


def test_an_extra_key_of_a_retriever_is_ignored() -> None:
    state, out = _run([{**GOOD, "url": "https://intranet/contracts/17"}])
    assert state.next == ()
    assert out["outcome"]["route"] == "answer"
    assert [e.id for e in out["evidence"]] == ["c-17"]


def test_malformed_items_are_left_out_with_a_decision_each() -> None:
    secret = {"id": "SECRET-9", "claim_key": "renewal_date", "value": [9], "allowed": ["legal"]}
    state, out = _run([GOOD, {"no_id": 1}, "str", 5, secret])
    assert state.next == ()
    assert out["outcome"]["route"] == "answer"
    assert [e.id for e in out["evidence"]] == ["c-17"]
    left_out = [d for d in out["guard_log"] if d.guard == "evidence_artifact"]
    assert [(d.reason, d.data["field"]) for d in left_out] == [
        ("invalid_input", "id"),
        ("invalid_input", "items"),
        ("invalid_input", "items"),
    ]
    places = [d.data["item"].rsplit(".", 1)[-1] for d in left_out]
    assert places == ["artifact[1]", "artifact[2]", "artifact[3]"]
    assert "SECRET" not in repr(state.values)
