"""The reference graph fits ``step_messages`` inside the agent node, right before each call.

One long ReAct step reads page after page into a small window: every model call gets one
context_guard decision, the compressions happen, the model is sent the fitted messages
(the summary, never the removed pages), and the running tally in state stays a few fields.
"""

from __future__ import annotations

import json
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from agent_guards import Budget
from agent_guards.graphs.plan_execute import Policies, build_graph
from agent_guards.graphs.scenarios import RoleScript
from agent_guards.testing import tool_call_message


@tool(response_format="content_and_artifact")
def page(i: int) -> tuple[str, list[dict[str, Any]]]:
    """Read page i of the report."""
    text = f"page {i}: " + "row data " * 120
    return text, [{"id": f"p{i}", "claim_key": "pages", "value": "ok", "source_type": "official"}]


def _reader(messages: list[BaseMessage]) -> Any:
    pages = sum(m.type == "tool" for m in messages)
    return "done" if pages >= 3 and len(messages) > 14 else tool_call_message("page", {"i": pages})


def _read_pages(**policies: Any) -> tuple[Any, Any, Any]:
    """One long step reading page after page into a 2,000-token window: the graph, its
    scripted model and the run's final state."""
    plan = {"steps": [{"id": "s1", "description": "read the pages", "tool": "page"}]}
    script = RoleScript(
        parse_goal=[json.dumps({"intent": "read", "dimensions": ["pages"]})],
        plan=[json.dumps({**plan, "reason": "read"})],
        agent={"*": [_reader]},
        review=[json.dumps({"action": "finish"})],
    )
    model = script.model()
    budget = Budget(max_steps=60, max_tool_calls=12, max_model_calls=40)
    graph = build_graph(
        model,
        [page],
        policies=Policies(max_context_tokens=2000, budget=budget, **policies),
        checkpointer=InMemorySaver(),
    )
    config: Any = {"configurable": {"thread_id": "t", "agent_guards_now": "2026-06-01"}}
    return graph, model, graph.invoke({"messages": [("user", "read the report")]}, config)


def test_the_agent_node_sends_the_fitted_context() -> None:
    graph, model, out = _read_pages()
    fits = [d for d in out["guard_log"] if d.guard == "context_guard"]
    step_calls = [c for c in model.calls if any("Step s1" in str(m.content) for m in c)]
    # one decision per model call of the step (the budget stops the calls it asks for)
    assert len(fits) == len(step_calls) > 1
    assert "agent" in graph.nodes and "context_guard" not in graph.nodes
    compressed = [i for i, d in enumerate(fits) if d.reason == "compressed"]
    assert compressed, [d.reason for d in fits]
    for i in compressed:
        sent = step_calls[i]
        assert any(m.id == fits[i].data["summary_id"] for m in sent)
        assert sum(isinstance(m, HumanMessage) for m in sent) == 2  # the brief, the summary
    assert all(d.data["tokens"] <= d.data["budget"] for d in fits)
    tally = out["context_tally"]
    assert tally is not None and set(tally) <= {
        "v", "basis", "n", "last", "tokens", "lead", "head", "pinned", "usage", "biggest"
    }  # fmt: skip
    ids = [m.id for m in out["step_messages"]]  # the fit, then the agent's own messages
    assert ids.index(tally["last"]) == tally["n"] - 1
    reply, *stopped = out["step_messages"][tally["n"] :]
    assert isinstance(reply, AIMessage)
    if stopped:  # the budget stopped the calls it asked for: each answered, then its note
        assert [m.tool_call_id for m in stopped[:-1]] == [c["id"] for c in reply.tool_calls]
        assert stopped[-1].name == "budget"


def _two_step_run(**input_extra: Any) -> tuple[Any, Any, Any]:
    """A two-step plan, one page per step: the graph, its scripted model, the run's config."""
    plan = {"steps": [{"id": f"s{i}", "description": f"read page {i}", "tool": "page"}
                      for i in (1, 2)]}  # fmt: skip
    script = RoleScript(
        parse_goal=[json.dumps({"intent": "read", "dimensions": ["pages"]})],
        plan=[json.dumps({**plan, "reason": "read"})],
        agent={"*": [tool_call_message("page", {"i": 1}), "done"]},
        review=[json.dumps({"action": "continue"})],
    )
    model = script.model()
    graph = build_graph(model, [page], checkpointer=InMemorySaver())
    config: Any = {"configurable": {"thread_id": "t", "agent_guards_now": "2026-06-01"}}
    graph.invoke({"messages": [("user", "read the report")], **input_extra}, config)
    return graph, model, config


def test_a_step_sends_its_brief_once_and_its_first_fit_rewrites_nothing() -> None:
    from langchain_core.messages import RemoveMessage, SystemMessage

    graph, model, config = _two_step_run()
    agent_writes = [
        task.result.get("step_messages") or []
        for snapshot in graph.get_state_history(config)
        for task in snapshot.tasks
        if task.name == "agent" and task.result
    ]
    assert len(agent_writes) == 4  # two model calls per step, two steps
    assert all(not isinstance(m, RemoveMessage) for w in agent_writes for m in w)
    first_calls = [  # each step's first agent call
        c for c in model.calls if "Step s" in str(c[-1].content) and c[-1].type == "human"
    ]
    assert [c[-1].id for c in first_calls] == ["agent_guards-brief-s1", "agent_guards-brief-s2"]
    for call in first_calls:  # the step prompt and the brief, once
        assert [type(m) for m in call] == [SystemMessage, HumanMessage]
        assert sum(str(call[-1].content) in str(m.content) for m in call) == 1
    assert graph.get_state(config).values["context_pinned_ids"] == ["agent_guards-brief-s2"]


def test_the_brief_outlives_a_compression_that_does_not_keep_the_last_human_turn() -> None:
    """``context_pinned_ids`` keeps the brief, not only ``pin_last_human``."""
    from agent_guards.context_guard import ContextPolicy

    _, model, out = _read_pages(context=ContextPolicy(pin_last_human=False))
    compressed = [d for d in out["guard_log"] if d.reason == "compressed"]
    assert compressed
    step_calls = [c for c in model.calls if any("[agent]" in str(m.content) for m in c)]
    late = step_calls[-1]
    assert any(m.id == compressed[-1].data["summary_id"] for m in late)  # it was compressed
    assert "agent_guards-brief-s1" in [m.id for m in late]


def test_a_thread_begun_by_0_1_drops_its_old_step_pin_and_keeps_the_users() -> None:
    """0.1 pinned each step's brief under ``context_pins["goal"]``: a thread resumed on this
    version would keep a stale brief pinned, so the next step removes it (and only it)."""
    graph, model, config = _two_step_run(
        context_pins={"goal": "Step s9: a stale brief", "region": "Shanghai"}
    )
    assert graph.get_state(config).values["context_pins"] == {"region": "Shanghai"}
    agent_calls = [c for c in model.calls if any("[agent]" in str(m.content) for m in c)]
    assert agent_calls
    for call in agent_calls:
        text = "\n".join(str(m.content) for m in call)
        assert "Shanghai" in text and "stale brief" not in text
