"""A cancel compensates every completed write of the thread once each, newest first.

A write is an execution (a tool call that ran), not a plan step marked done: a replan that
renumbers a carried-over write does not make it two writes, a step whose write failed has
nothing to undo, and a write a cancel already undid is never undone again, by a later
cancel on the thread or (with a store) by a replay from a checkpoint before the cancel.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage
from langchain_core.tools import BaseTool, tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from agent_guards import PlanStep, guard_serializer, replay_config
from agent_guards.graphs.plan_execute import Policies, build_graph, cancel_run, run_config
from agent_guards.graphs.scenarios import RoleScript
from agent_guards.retry_router import InvalidArgsError, PreconditionFailed
from agent_guards.tool_guard import annotate_tool
from tests.integration._reference import persistence

GOAL = json.dumps({"intent": "pay", "dimensions": [], "constraints": {}})
CONTINUE = json.dumps({"action": "continue"})


class World:
    """The tools' side of the story: what really ran, and what the hooks undid."""

    def __init__(self) -> None:
        self.ran: list[str] = []
        self.undone: list[str] = []
        self.ids = itertools.count(1)

    def tools(self) -> list[BaseTool]:
        ran = self.ran

        @tool
        def create_draft(invoice: int) -> str:
            """Create a payment draft (a write)."""
            if invoice < 0:
                raise InvalidArgsError("invoice must be positive", field_errors={"invoice": "> 0"})
            ran.append(f"create_draft({invoice})")
            return f"draft for invoice {invoice}"

        @tool
        def check_budget(invoice: int) -> str:
            """Check the budget."""
            raise PreconditionFailed("409: budget locked for review")

        @tool
        def open_account(owner: str) -> str:
            """Open an account (a write)."""
            ran.append("open_account")
            return "account acc-1 opened"

        @tool
        def deposit(account: str, amount: int) -> str:
            """Deposit money (a write)."""
            ran.append("deposit")
            return "deposited"

        @tool
        def send_payment(invoice: int) -> str:
            """Send the payment (high risk)."""
            ran.append("send_payment")
            return "paid"

        found = (create_draft, check_budget, open_account, deposit, send_payment)
        return [annotate_tool(t) for t in found]

    def hook(self, what: str) -> Any:
        def undo(step: PlanStep) -> str:
            self.undone.append(f"{what} ({step.id})")
            return f"{what} of step {step.id}"

        return undo

    def call(self, name: str, **args: Any) -> Any:
        call = {"name": name, "args": args, "id": f"fresh-{next(self.ids)}"}
        return lambda _m: AIMessage("", tool_calls=[call])

    def graph(self, plans: list[dict[str, Any]], agent: dict[str, Any], checkpointer: Any,
              store: Any) -> Any:  # fmt: skip
        script = RoleScript(parse_goal=[GOAL], plan=[json.dumps(p) for p in plans], agent=agent,
                            review=[CONTINUE])  # fmt: skip
        undo = {"create_draft": self.hook("delete draft"), "open_account": self.hook("close"),
                "deposit": self.hook("withdraw")}  # fmt: skip
        return build_graph(script.model(), self.tools(), policies=Policies(),
                           checkpointer=checkpointer, store=store, compensations=undo)  # fmt: skip


def st(sid: str, tool_name: str | None, risk: str = "low", **args: Any) -> dict[str, Any]:
    step: dict[str, Any] = {"id": sid, "description": f"{tool_name or 'open'} {args}",
                            "args": args, "risk": risk}  # fmt: skip
    return {**step, "tool": tool_name} if tool_name else step


def cfg(thread: str = "t") -> Any:
    return run_config(Policies(), thread_id=thread, principal="ops", agent_guards_now="2026-06-01")


@contextmanager
def saved(kind: str, tmp_path: Path) -> Iterator[tuple[Any, Any]]:
    """``(checkpointer, store)``: "nostore" (InMemorySaver only), "memory" or "sqlite"."""
    if kind == "nostore":
        yield InMemorySaver(serde=guard_serializer()), None
        return
    with persistence(kind, tmp_path) as pair:
        yield pair


KINDS = ["nostore", "memory", "sqlite"]


def paused_then_cancelled(graph: Any, config: Any, message: str = "pay invoice 7") -> Any:
    paused = graph.invoke({"messages": [("user", message)]}, config)
    assert "__interrupt__" in paused, paused.get("outcome")
    return graph.invoke(Command(resume={"cancel": "the user changed their mind"}), config)


@pytest.mark.parametrize("kind", KINDS)
def test_a_write_carried_over_and_renumbered_by_a_replan_is_undone_once(
    kind: str, tmp_path: Path
) -> None:
    """v1 s1 drafts, s2 fails 409 -> v2 renumbers the draft d1 (carried over as done, not
    re-run): one draft was made, so one compensation runs."""
    world = World()
    plans = [
        {"steps": [st("s1", "create_draft", invoice=7), st("s2", "check_budget", invoice=7)]},
        {"steps": [st("d1", "create_draft", invoice=7),
                   st("d2", "send_payment", risk="high", invoice=7)],
         "reason": "budget check is locked; pay directly"},
    ]  # fmt: skip
    agent = {"s1": [world.call("create_draft", invoice=7), "draft created"],
             "s2": [world.call("check_budget", invoice=7)]}  # fmt: skip
    with saved(kind, tmp_path) as (checkpointer, store):
        out = paused_then_cancelled(world.graph(plans, agent, checkpointer, store), cfg())
    assert [[s.id for s in v.steps] for v in out["plans"]] == [["s1", "s2"], ["d1", "d2"]]
    assert world.ran == ["create_draft(7)"]
    assert world.undone == ["delete draft (s1)"]
    assert out["outcome"]["compensated"] == ["delete draft of step s1"]


@pytest.mark.parametrize("kind", KINDS)
def test_a_step_marked_done_whose_write_failed_has_nothing_to_undo(
    kind: str, tmp_path: Path
) -> None:
    """The draft was rejected (invalid args) and the model ended the step in text: the step
    is done, but no draft exists, so the cancel undoes nothing."""
    world = World()
    plans = [{"steps": [st("s1", "create_draft", invoice=7),
                        st("s2", "send_payment", risk="high", invoice=7)]}]  # fmt: skip
    agent = {"s1": [world.call("create_draft", invoice=-7), "I could not create the draft."]}
    with saved(kind, tmp_path) as (checkpointer, store):
        out = paused_then_cancelled(world.graph(plans, agent, checkpointer, store), cfg())
    assert out["plans"][-1].steps[0].status.value == "done"
    assert (world.ran, world.undone) == ([], [])
    assert "compensated" not in out["outcome"]
    assert not [d for d in out["guard_log"] if d.reason == "compensated"]


@pytest.mark.parametrize("kind", KINDS)
def test_unlisted_and_listed_writes_are_undone_newest_first(kind: str, tmp_path: Path) -> None:
    """s1 names no tool (the model opens the account itself), s2 deposits into it: the
    deposit (newer) is undone before the account is closed."""
    world = World()
    plans = [{"steps": [st("s1", None), st("s2", "deposit", account="acc-1", amount=100),
                        st("s3", "send_payment", risk="high", invoice=7)]}]  # fmt: skip
    agent = {"s1": [world.call("open_account", owner="ann"), "opened"],
             "s2": [world.call("deposit", account="acc-1", amount=100), "deposited"]}  # fmt: skip
    with saved(kind, tmp_path) as (checkpointer, store):
        out = paused_then_cancelled(world.graph(plans, agent, checkpointer, store), cfg())
    assert world.ran == ["open_account", "deposit"]
    assert world.undone == ["withdraw (s2)", "close (fresh-1)"]
    records = [d.data["call_id"] for d in out["guard_log"] if d.reason == "compensated"]
    assert records == ["fresh-2", "fresh-1"]


def two_cancels(world: World, checkpointer: Any, store: Any) -> tuple[Any, Any, Any]:
    """Turn 1 drafts 1 and is cancelled at the payment's approval; turn 2 on the same
    thread drafts 2 and is cancelled between steps."""
    plans = [
        {"steps": [st("s1", "create_draft", invoice=1),
                   st("s2", "send_payment", risk="high", invoice=1)]},
        {"steps": [st("s3", "create_draft", invoice=2)]},
    ]  # fmt: skip
    agent = {"s1": [world.call("create_draft", invoice=1), "draft 1 created"],
             "s3": [world.call("create_draft", invoice=2), "draft 2 created"]}  # fmt: skip
    graph, config = world.graph(plans, agent, checkpointer, store), cfg("t1")
    first = paused_then_cancelled(graph, config)
    graph.invoke({"messages": [("user", "make draft 2")]}, config, interrupt_after=["record_step"])
    return graph, first, cancel_run(graph, config, "stop again")


@pytest.mark.parametrize("kind", KINDS)
def test_a_second_cancel_on_the_thread_never_undoes_a_write_again(
    kind: str, tmp_path: Path
) -> None:
    world = World()
    with saved(kind, tmp_path) as (checkpointer, store):
        _, first, second = two_cancels(world, checkpointer, store)
    assert first["outcome"]["compensated"] == ["delete draft of step s1"]
    assert second["outcome"]["compensated"] == ["delete draft of step s3"]
    assert world.ran == ["create_draft(1)", "create_draft(2)"]
    assert world.undone == ["delete draft (s1)", "delete draft (s3)"]
    marks = {cid: r.get("compensated") for cid, r in second["executed_writes"].items()}
    assert marks == {"fresh-1": "delete draft of step s1", "fresh-2": "delete draft of step s3"}


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_a_replay_from_before_the_cancel_does_not_undo_again_with_a_store(
    kind: str, tmp_path: Path
) -> None:
    """The store's record of the compensation outlives the branch: replaying the checkpoint
    before ``respond`` (whose state never saw the cancel's record) runs no hook again."""
    world = World()
    plans = [{"steps": [st("s1", "create_draft", invoice=1),
                        st("s2", "send_payment", risk="high", invoice=1)]}]  # fmt: skip
    agent = {"s1": [world.call("create_draft", invoice=1), "draft 1 created"]}
    with saved(kind, tmp_path) as (checkpointer, store):
        graph, config = world.graph(plans, agent, checkpointer, store), cfg("t1")
        out = paused_then_cancelled(graph, config)
        assert world.undone == ["delete draft (s1)"]
        past = next(s for s in graph.get_state_history(config) if s.next == ("respond",))
        for _ in range(2):
            again = graph.invoke(None, replay_config(past, config))
            assert again["outcome"]["route"] == "cancelled"
            assert "compensated" not in again["outcome"]
    assert out["outcome"]["compensated"] == ["delete draft of step s1"]
    assert world.ran == ["create_draft(1)"]
    assert world.undone == ["delete draft (s1)"]


@pytest.mark.parametrize("kind", KINDS)
def test_a_run_stopped_by_its_tool_budget_can_still_be_cancelled(kind: str, tmp_path: Path) -> None:
    """The budget allows one call: the draft is made and the run ends partial. A
    ``cancel_run`` afterwards (no next node to resume) still undoes the draft, once."""
    from agent_guards import Budget

    world = World()
    plans = [{"steps": [st("s1", "create_draft", invoice=7), st("s2", "create_draft", invoice=8)]}]
    agent = {"s1": [world.call("create_draft", invoice=7), "draft created"],
             "s2": [world.call("create_draft", invoice=8), "draft created"]}  # fmt: skip
    policies = Policies(budget=Budget(max_steps=120, max_tool_calls=1))
    script = RoleScript(parse_goal=[GOAL], plan=[json.dumps(p) for p in plans], agent=agent,
                        review=[CONTINUE])  # fmt: skip
    with saved(kind, tmp_path) as (checkpointer, store):
        graph = build_graph(script.model(), world.tools(), policies=policies,
                            checkpointer=checkpointer, store=store,
                            compensations={"create_draft": world.hook("delete draft")})  # fmt: skip
        config = run_config(policies, thread_id="t", principal="ops",
                            agent_guards_now="2026-06-01")  # fmt: skip
        ended = graph.invoke({"messages": [("user", "draft both")]}, config)
        assert (ended["outcome"]["route"], ended["outcome"]["reason"]) == (
            "partial",
            "max_tool_calls",
        )
        out = cancel_run(graph, config, "undo it")
        again = cancel_run(graph, config, "undo it")
    assert world.ran == ["create_draft(7)"]
    assert world.undone == ["delete draft (s1)"]
    assert out["outcome"]["route"] == "cancelled"
    assert out["outcome"]["compensated"] == ["delete draft of step s1"]
    assert again["outcome"]["route"] == "cancelled" and "compensated" not in again["outcome"]


@pytest.mark.parametrize("kind", KINDS)
def test_a_write_run_again_under_the_same_call_id_is_undone_twice(
    kind: str, tmp_path: Path
) -> None:
    """Two answered requests on one thread, each drafting invoice 7, and a model that
    repeats the call id from one turn to the next: the draft is made twice (a new request
    runs again), so the cancel undoes it twice. Before, the record of writes was keyed by
    call id and the second draft stayed."""
    drafts: list[str] = []

    @tool(response_format="content_and_artifact")
    def create_draft(invoice: int) -> tuple[str, list[dict[str, Any]]]:
        """Create a payment draft (a write)."""
        drafts.append(f"d{len(drafts) + 1}")
        item = {
            "id": drafts[-1],
            "claim_key": "draft",
            "value": drafts[-1],
            "source_type": "official",
        }
        return f"draft {drafts[-1]}", [item]

    def undo(step: PlanStep) -> str:
        return f"deleted {drafts.pop()}"

    fixed = {"name": "create_draft", "args": {"invoice": 7}, "id": "call-draft"}
    script = RoleScript(
        parse_goal=[json.dumps({"intent": "draft", "dimensions": ["draft"], "constraints": {}})],
        plan=[json.dumps({"steps": [st("s1", "create_draft", invoice=7)]})],
        agent={"s1": [lambda _m: AIMessage("", tool_calls=[fixed]), "draft created"]},
        review=[json.dumps({"action": "finish"})],
    )
    with saved(kind, tmp_path) as (checkpointer, store):
        graph = build_graph(script.model(), [annotate_tool(create_draft)], checkpointer=checkpointer,
                            store=store, compensations={"create_draft": undo})  # fmt: skip
        for _ in range(2):
            done = graph.invoke({"messages": [("user", "draft invoice 7")]}, cfg())
            assert done["outcome"]["route"] == "answer"
        assert drafts == ["d1", "d2"]
        out = cancel_run(graph, cfg(), "the user changed their mind")
    assert out["outcome"]["compensated"] == ["deleted d2", "deleted d1"]
    assert drafts == []
