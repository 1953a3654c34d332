"""A later turn on a thread: a new request after an answer reads the world again; a reply to
an unfinished run continues it without running a done write again.

Before, a later turn took the done steps of every earlier plan version: asking "what is my
balance?" again after a deposit answered from the first turn's read of an unannotated tool,
without running it. The run ledger did the same on its own when the model repeated a call
id from one turn to the next (scripted models do; some real ones do too): the id was
answered from the first turn's record. Both now look at the user message the call serves.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.tools import BaseTool, tool

from agent_guards.graphs.plan_execute import build_graph
from agent_guards.graphs.scenarios import CONTINUE, FINISH, RoleScript, scenario_config
from agent_guards.testing import tool_call_message
from agent_guards.tool_guard import annotate_tool
from tests.integration._reference import (
    calls_logged,
    drafting_scenario,
    graph_for,
    memory_persistence,
    persistence,
)


def _bank_tools(bank: dict[str, Any], *, new_ids: bool) -> list[BaseTool]:
    @tool(response_format="content_and_artifact")
    def balance() -> tuple[str, list[dict[str, Any]]]:
        """The account's balance (no effect declared: it may write, as far as anyone knows)."""
        bank["reads"] += 1
        value = bank["balance"]
        # the record's own id, or one per retrieval (as search hits often carry)
        item_id = f"acct-read-{bank['reads']}" if new_ids else "acct"
        item = {"id": item_id, "claim_key": "balance", "value": value, "source_type": "official"}
        return f"balance: {value}", [item]

    return [balance]


def _deposit(bank: dict[str, Any]) -> BaseTool:
    @tool
    def deposit(amount: int) -> str:
        """Deposit money (a declared write)."""
        bank["balance"] += amount
        return f"deposited {amount}"

    return annotate_tool(deposit)


def _balance_script() -> RoleScript:
    step = {"id": "s1", "description": "read the balance", "tool": "balance", "args": {}}
    return RoleScript(
        parse_goal=[json.dumps({"intent": "balance", "dimensions": ["balance"]})],
        plan=[json.dumps({"steps": [step], "reason": "scripted"})],
        # the same call id on every turn: call_s1_0
        agent={"s1": [tool_call_message("balance", {}), "balance read"]},
        review=[FINISH],
    )


@pytest.fixture(params=["state", "sqlite"])
def saver_and_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Any, Any]]:
    """The ledger kept in state (no store), or in a SqliteStore next to a SqliteSaver."""
    if request.param == "state":
        yield memory_persistence()[0], None
        return
    with persistence("sqlite", tmp_path) as pair:
        yield pair


@pytest.mark.parametrize("new_ids", [False, True], ids=["same-id", "new-id-per-read"])
def test_a_new_request_after_an_answer_reads_the_world_again(
    saver_and_store: tuple[Any, Any], new_ids: bool
) -> None:
    """The same read done again supersedes what it brought back before: with an id per
    retrieval, the two reads are not a conflict to ask the user about."""
    saver, store = saver_and_store
    bank = {"balance": 100, "reads": 0}
    app = build_graph(_balance_script().model(), _bank_tools(bank, new_ids=new_ids),
                      checkpointer=saver, store=store)  # fmt: skip
    config = {"configurable": {"thread_id": "t", "agent_guards_now": "2026-06-01T09:00:00Z"}}
    first = app.invoke({"messages": [("user", "What is my balance?")]}, config)
    assert first["outcome"]["route"] == "answer" and "100" in first["messages"][-1].content
    bank["balance"] = 250  # a deposit, made outside the agent, between the two turns
    second = app.invoke({"messages": [("user", "What is my balance now?")]}, config)
    assert second["outcome"]["route"] == "answer"
    assert "250" in second["messages"][-1].content
    assert "100" not in second["messages"][-1].content
    assert bank["reads"] == 2
    assert second["goal_start"] == 1  # the second goal's versions start after the first's
    assert [p.status.value for p in second["plans"][1].steps] == ["done"]
    assert second["evidence_verdict"].selected_ids == (("acct-read-2",) if new_ids else ("acct",))


def test_a_message_on_an_unfinished_run_continues_it_without_running_the_done_write_again(
    tmp_path: Path,
) -> None:
    """DRAFTING: fetch_alpha, create_draft (a declared write), fetch_beta. The run is
    stopped between steps once the draft is made; the user's next message continues the
    goal. The draft is not made again; the read before it may run again."""
    scenario = drafting_scenario(tmp_path)
    saver, store = memory_persistence()
    app = graph_for(scenario, saver, store)
    config = scenario_config(scenario, "t")
    app.invoke({"messages": [("user", scenario.message)]}, config, interrupt_after=["record_step"])
    app.invoke(None, config, interrupt_after=["record_step"])
    assert calls_logged(tmp_path) == ["fetch_alpha", "create_draft"]
    second = app.invoke({"messages": [("user", "Go on, please.")]}, config)
    assert second["outcome"]["route"] == "answer"
    assert second.get("goal_start", 0) == 0  # the same goal, continued
    assert calls_logged(tmp_path).count("create_draft") == 1
    assert calls_logged(tmp_path)[-1] == "fetch_beta"


def test_a_read_after_a_write_in_one_plan_supersedes_the_read_before_it() -> None:
    """balance, deposit (a declared write), balance: the second read is the world after the
    deposit. Before, the two reads (an id per retrieval) were a conflict on the balance."""
    bank = {"balance": 100, "reads": 0}
    [balance] = _bank_tools(bank, new_ids=True)
    steps = [
        {"id": "s1", "description": "read the balance", "tool": "balance", "args": {}},
        {"id": "s2", "description": "deposit 150", "tool": "deposit", "args": {"amount": 150},
         "depends_on": ["s1"]},
        {"id": "s3", "description": "read it again", "tool": "balance", "args": {},
         "depends_on": ["s2"]},
    ]  # fmt: skip
    script = RoleScript(
        parse_goal=[json.dumps({"intent": "deposit", "dimensions": ["balance"]})],
        plan=[json.dumps({"steps": steps, "reason": "scripted"})],
        agent={
            "s1": [tool_call_message("balance", {}), "read"],
            "s2": [tool_call_message("deposit", {"amount": 150}), "deposited"],
            "s3": [tool_call_message("balance", {}), "read"],
        },
        review=[CONTINUE, CONTINUE, FINISH],
    )
    app = build_graph(script.model(), [balance, _deposit(bank)],
                      checkpointer=memory_persistence()[0])  # fmt: skip
    config = {"configurable": {"thread_id": "t", "agent_guards_now": "2026-06-01T09:00:00Z"}}
    out = app.invoke({"messages": [("user", "Deposit 150 and tell me the balance.")]}, config)
    assert bank["reads"] == 2 and bank["balance"] == 250
    assert out["outcome"]["route"] == "answer"
    assert out["evidence_verdict"].selected_ids == ("acct-read-2",)
    assert "250" in out["messages"][-1].content


def test_every_earlier_read_is_superseded_by_the_newest_one() -> None:
    """balance, deposit, balance, deposit, balance: the third read supersedes both earlier
    ones. Before, each read superseded the first one only (the plan's steps were walked
    oldest first), so the middle read stayed in play and the run asked which one was meant."""
    bank = {"balance": 100, "reads": 0}
    [balance] = _bank_tools(bank, new_ids=True)
    read = {"description": "read the balance", "tool": "balance", "args": {}}
    pay = {"description": "deposit 150", "tool": "deposit", "args": {"amount": 150}}
    steps = [{**spec, "id": f"s{i}"} for i, spec in enumerate([read, pay, read, pay, read], 1)]
    script = RoleScript(
        parse_goal=[json.dumps({"intent": "deposit", "dimensions": ["balance"]})],
        plan=[json.dumps({"steps": steps, "reason": "scripted"})],
        agent={s["id"]: [tool_call_message(s["tool"], s["args"]), "done"] for s in steps},
        review=[CONTINUE] * 4 + [FINISH],
    )
    app = build_graph(script.model(), [balance, _deposit(bank)],
                      checkpointer=memory_persistence()[0])  # fmt: skip
    config = {"configurable": {"thread_id": "t", "agent_guards_now": "2026-06-01T09:00:00Z"}}
    out = app.invoke({"messages": [("user", "Deposit 150 twice; the balance?")]}, config)
    assert bank["reads"] == 3 and bank["balance"] == 400
    assert out["outcome"]["route"] == "answer"
    assert out["evidence_verdict"].selected_ids == ("acct-read-3",)
    latest = {e.id: e for e in out["evidence"]}["acct-read-3"]
    assert set(latest.supersedes) == {"acct-read-1", "acct-read-2"}
