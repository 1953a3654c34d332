"""Every guard node and edge, in a compiled graph, survives malformed state.

Hypothesis writes at least 1,000 malformed states per node (derandomized) into a small
checkpointed graph that holds just that node: what LangGraph Studio, the SDK or
``update_state`` can put in a channel (JSON strings where objects belong, None, ints far
past ``str()``'s digit limit, nested junk, messages with odd content and tool calls,
non-list pins, principals of any shape). Each example runs on a fresh thread of one
compiled graph. The reference graph gets the same treatment with a real question and junk
in every other channel it reads. After every run:

* no exception from guard code, ever: a guard turns bad input into a decision, and a
  guard's reducer drops junk instead of raising (a raising reducer leaves the write
  pending and the thread unreadable);
* an input LangGraph itself rejects (``add_messages`` refusing a junk message) fails
  before any node starts; that is LangGraph validating its input, not a guard escape;
* the only error allowed once a node has run is the checkpointer's msgpack refusing an int
  of more than 64 bits that the client wrote (in state or config), and the thread stays
  readable;
* ``get_state`` still reads the thread, so the checkpoint is not damaged;
* what the node wrote to ``guard_log`` is a ``GuardDecision``, and an ``invalid_input``
  decision names the field (and the item when the error is about one item).
"""

from __future__ import annotations

import functools
import itertools
import logging
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import ormsgpack
import pytest
from hypothesis import given
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.store.memory import InMemoryStore

import agent_guards
from agent_guards import (
    ContextState,
    EvidenceState,
    GuardDecision,
    LoopState,
    MemoryState,
    PlanState,
    RetryState,
    ToolCallGuard,
    create_context_guard,
    create_evidence_resolve,
    create_loop_check,
    create_memory_resolve,
    create_planner_gate,
    create_retry_router,
)
from agent_guards.loop_check import create_loop_nudge, create_loop_stop
from agent_guards.retry_router import create_retry_finish
from tests._malformed import MALFORMED, PLAIN_JSON, client_values, histories, messages

GUARD_CODE = str(Path(agent_guards.__file__).parent)
WHOLE_CHANNEL = {"messages", "plans", "goal", "evidence", "evidence_query", "principal",
                 "memory_facts", "memory_records", "context_pinned_ids", "context_pins",
                 "usage", "max_tokens", "pinned", "versions", "claim_key", "entity", "basis",
                 "as_of", "claims", "observations", "executed_steps"}  # fmt: skip
_threads = itertools.count()


def _mostly(usual: st.SearchStrategy[Any], rare: st.SearchStrategy[Any], one_in: int) -> Any:
    """``rare`` about once in ``one_in`` draws, else ``usual`` (one_of weighs its branches
    unevenly, so the choice is drawn first)."""
    return st.integers(1, one_in).flatmap(lambda i: rare if i == 1 else usual)


JUNK = _mostly(PLAIN_JSON, client_values, 4)
"""Mostly values a checkpointer can store, so most runs get past the first checkpoint."""
_ACCEPTED = st.lists(messages(JUNK).filter(lambda m: isinstance(m, BaseMessage)), max_size=4)
HISTORY = _mostly(_ACCEPTED, histories(JUNK, max_size=4), 6)
"""Mostly messages ``add_messages`` takes (odd content, calls and artifacts), so the node
runs; sometimes junk that LangGraph itself rejects."""


@tool
def search(q: str) -> str:
    """Look something up."""
    return f"result for {q}"


def _sink(state: Any) -> dict[str, Any]:
    return {}


def _compiled(builder: StateGraph[Any, Any, Any, Any]) -> Any:
    return builder.compile(checkpointer=InMemorySaver(), store=InMemoryStore())


def _node_graph(state: type, name: str, node: Any) -> Any:
    """START -> the node -> END (a node returning ``Command`` picks ``sink`` itself)."""
    builder = StateGraph(state)
    builder.add_node(name, node, destinations=("sink",))
    builder.add_node("sink", _sink)
    builder.add_edge(START, name)
    builder.add_edge("sink", END)
    return _compiled(builder)


def _edge_graph(state: type, route: Any, labels: tuple[str, ...]) -> Any:
    """START -> agent -(the edge)-> sink: the edge reads what the input wrote."""
    builder = StateGraph(state)
    builder.add_node("agent", _sink)
    builder.add_node("sink", _sink)
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", route, dict.fromkeys(labels, "sink"))
    builder.add_edge("sink", END)
    return _compiled(builder)


class LoopGraphState(MessagesState, LoopState):
    pass


class RetryGraphState(MessagesState, RetryState):
    pass


class ContextGraphState(MessagesState, ContextState):
    pass


class PlanGraphState(MessagesState, PlanState):
    pass


class EvidenceGraphState(MessagesState, EvidenceState):
    pass


class MemoryGraphState(MessagesState, MemoryState):
    pass


@dataclass(frozen=True)
class Target:
    """One node (or edge) under test: how to build its graph and what a client may write."""

    build: Callable[[], Any]
    writes: st.SearchStrategy[dict[str, Any]]
    guard: str | None
    """The guard whose decision the node writes to ``guard_log`` (None: an edge)."""
    principal: bool = False
    """The node reads the caller's identities from the run's config."""


def _writes(
    required: dict[str, st.SearchStrategy[Any]] | None = None, **optional: st.SearchStrategy[Any]
) -> st.SearchStrategy[dict[str, Any]]:
    """The required channels, any subset of the optional ones, and junk ``guard_log`` and
    ``usage`` writes now and then."""
    usage = JUNK | st.dictionaries(
        st.sampled_from(["steps", "tool_calls", "started_at", "x"]), JUNK, max_size=2
    )
    return st.fixed_dictionaries(
        required or {}, optional={**optional, "guard_log": JUNK, "usage": usage}
    )


def _tool_turn() -> st.SearchStrategy[Any]:
    """A history ending in an assistant turn whose tool calls have odd names, args and ids
    (args that are no dict, or ids that are no string, LangGraph itself refuses)."""
    call = st.fixed_dictionaries(
        {"name": st.sampled_from(["search", "missing", ""]) | st.text(max_size=4),
         "args": st.dictionaries(st.sampled_from(["q", "x", ""]), JUNK, max_size=2),
         "id": st.sampled_from(["c1", "c2", ""]) | st.text(max_size=3)},
    )  # fmt: skip
    turn = st.lists(call, min_size=1, max_size=3).map(
        lambda calls: {"type": "ai", "content": "", "tool_calls": calls}
    )
    return st.builds(lambda head, last: [*head, last], _ACCEPTED, turn)


def _history() -> dict[str, st.SearchStrategy[Any]]:
    return {"messages": HISTORY | _tool_turn()}


PLAN = st.one_of(
    st.just({"version": 1, "steps": [{"id": "s1", "description": "look up"}]}),
    st.dictionaries(st.sampled_from(["version", "steps", "trigger", "parent", "status"]), JUNK,
                    max_size=3),
    st.builds(lambda v, steps: {"version": v, "steps": steps}, st.integers(1, 3) | JUNK,
              st.lists(st.dictionaries(st.sampled_from(["id", "description", "depends_on",
                                                        "status", "tool", "risk"]), JUNK),
                       max_size=3)),
)  # fmt: skip
EVIDENCE = st.one_of(
    JUNK,
    st.lists(
        st.one_of(
            st.just({"id": "e1", "claim_key": "limit", "value": "4M", "source_type": "official"}),
            st.dictionaries(st.sampled_from(["id", "claim_key", "value", "updated_at",
                                             "confidence", "allowed", "status", "metadata",
                                             "page_content"]), JUNK, max_size=4),
            JUNK,
        ),
        max_size=3,
    ),
)  # fmt: skip
FACTS = st.one_of(
    JUNK,
    st.lists(
        st.one_of(
            st.just({"id": "f1", "key": "format", "value": "pdf", "persist": True}),
            st.dictionaries(st.sampled_from(["id", "key", "value", "persist", "scope", "source",
                                             "confidence", "valid_until"]), JUNK, max_size=4),
            JUNK,
        ),
        max_size=3,
    ),
)  # fmt: skip

ROUTES = ("retry", "repair", "replan", "clarify", "abstain", "refuse", "fallback", "continue")
TARGETS: dict[str, Target] = {
    "loop_check": Target(
        lambda: _edge_graph(LoopGraphState, create_loop_check(), ("continue", "nudge", "stop", "escalate")),
        _writes(_history()),
        None,
    ),
    "loop_nudge": Target(
        lambda: _node_graph(LoopGraphState, "loop_nudge", create_loop_nudge()),
        _writes(_history()),
        "loop_check",
    ),
    "loop_stop": Target(
        lambda: _node_graph(LoopGraphState, "loop_stop", create_loop_stop()),
        _writes(_history()),
        "loop_check",
    ),
    "retry_router": Target(
        lambda: _edge_graph(RetryGraphState, create_retry_router(), ROUTES),
        _writes(_history()),
        None,
    ),
    "retry_finish": Target(
        lambda: _node_graph(RetryGraphState, "retry_finish", create_retry_finish()),
        _writes(_history()),
        "retry_router",
    ),
    "context_guard": Target(
        lambda: _node_graph(ContextGraphState, "context_guard", create_context_guard(400)),
        _writes(
            {"messages": HISTORY},
            context_pins=JUNK,
            context_pinned_ids=JUNK | st.lists(st.sampled_from(["h", "a", "c1", "t", "zz"]) | JUNK, max_size=3),
        ),
        "context_guard",
    ),
    "planner_gate": Target(
        lambda: _node_graph(PlanGraphState, "planner_gate", create_planner_gate(
            destinations=dict.fromkeys(("execute", "replan", "clarify", "escalate", "stop"), "sink"))),
        _writes(plans=PLAN | st.lists(PLAN, max_size=3) | JUNK,
                goal=JUNK | st.dictionaries(st.sampled_from(["intent", "constraints", "required"]), JUNK),
                executed_since_plan=JUNK, observations_since_plan=JUNK),
        "planner_gate",
    ),
    "evidence_resolve": Target(
        lambda: _node_graph(EvidenceGraphState, "evidence_resolve", create_evidence_resolve()),
        _writes(evidence=EVIDENCE,
                evidence_query=JUNK | st.dictionaries(st.sampled_from(["claim_key", "entity", "basis", "as_of", "claims"]), JUNK),
                messages=HISTORY),
        "evidence_resolve",
        principal=True,
    ),
    "memory_resolve": Target(
        lambda: _node_graph(MemoryGraphState, "memory_resolve", create_memory_resolve()),
        _writes(memory_facts=FACTS, memory_records=FACTS, messages=HISTORY),
        "memory_resolve",
        principal=True,
    ),
    "tool_node": Target(
        lambda: _node_graph(LoopGraphState, "tools", ToolCallGuard().tool_node([search])),
        _writes({"messages": _tool_turn()}),
        None,
    ),
}  # fmt: skip


@functools.cache
def _app(name: str) -> Any:
    return TARGETS[name].build()


def _frames(err: BaseException) -> Iterator[str]:
    """File names of every frame the error (and what caused it) went through."""
    seen: set[int] = set()
    stack: list[BaseException | None] = [err]
    while stack:
        e = stack.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        tb = e.__traceback__
        while tb is not None:
            yield tb.tb_frame.f_code.co_filename
            tb = tb.tb_next
        stack += [e.__cause__, e.__context__]


def _in_guard_code(err: BaseException) -> bool:
    return any(f.startswith(GUARD_CODE) for f in _frames(err))


def _unstorable(err: BaseException, write: Any) -> bool:
    """The checkpointer's msgpack refused an int of more than 64 bits the client wrote."""
    saving = any("/langgraph/checkpoint/" in f for f in _frames(err))
    return saving and isinstance(err, ormsgpack.MsgpackEncodeError) and _wide_int(write)


def _wide_int(value: Any) -> bool:
    if isinstance(value, int) and not isinstance(value, bool):
        return not -(2**63) <= value < 2**64
    if isinstance(value, Mapping):
        return any(_wide_int(k) or _wide_int(v) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return any(_wide_int(v) for v in value)
    if isinstance(value, BaseMessage):
        return _wide_int(value.model_dump())
    return False


def _check_decision(d: Any) -> None:
    assert isinstance(d, GuardDecision), f"not a GuardDecision in guard_log: {d!r}"[:300]
    if d.reason == "invalid_input":
        field = d.data.get("field")
        assert field, f"the decision does not name the field: {d.detail}"
        if field not in WHOLE_CHANNEL and not str(field).startswith("usage"):
            assert d.data.get("item"), f"the decision does not name the item: {d.detail}"


def _feed(name: str, write: dict[str, Any], principal: Any) -> str:
    """Run one malformed write on a fresh thread; return what happened."""
    target, app = TARGETS[name], _app(name)
    configurable: dict[str, Any] = {"thread_id": f"{name}-{next(_threads)}"}
    if target.principal and principal is not None:
        configurable["principal"] = principal
    config: Any = {"configurable": configurable, "recursion_limit": 12}
    ran: list[str] = []
    try:
        for chunk in app.stream(write, config, stream_mode="tasks", durability="exit"):
            if "input" in chunk and "result" not in chunk:
                ran.append(chunk["name"])
    except Exception as err:
        assert not _in_guard_code(err), f"guard code raised: {err!r} ({ran} started)"[:2000]
        if ran:
            # only the checkpointer may refuse, after a node ran: msgpack cannot store an
            # int of more than 64 bits the client wrote (state or config); the thread stays readable
            assert _unstorable(err, [write, principal]), f"{err!r} after {ran}"[:2000]
            app.get_state(config)
            return "refused by the checkpointer"
        return "rejected by LangGraph"
    values = app.get_state(config).values  # the checkpoint still reads
    log = values.get("guard_log") or []
    if target.guard is not None and name in ran:
        ours = [d for d in log if isinstance(d, GuardDecision) and d.guard == target.guard]
        assert ours, f"{name} ran but logged no decision: {log!r}"[:500]
        for d in ours:
            _check_decision(d)
        return ours[-1].reason
    return "ran"


PRINCIPALS = st.one_of(st.none(), st.just("alice"), st.just(["alice", "hr"]), JUNK)


@pytest.fixture(autouse=True)
def _quiet_reducers() -> Iterator[None]:
    """Reducers log every write they drop; thousands of them are noise here."""
    names = ("agent_guards.planner_gate", "agent_guards.evidence_resolve", "agent_guards.state")
    loggers = [logging.getLogger(n) for n in names]
    for log in loggers:
        log.disabled = True
    yield
    for log in loggers:
        log.disabled = False


@pytest.mark.parametrize("name", sorted(TARGETS))
@MALFORMED
@given(data=st.data())
def test_node_survives_malformed_state(name: str, data: st.DataObject) -> None:
    target = TARGETS[name]
    write = data.draw(target.writes, label="write")
    principal = data.draw(PRINCIPALS, label="principal") if target.principal else None
    _feed(name, write, principal)


def test_the_harness_tells_a_rejected_input_from_a_decision() -> None:
    """A junk message is rejected by LangGraph before any node starts; a real loop is a
    decision found in guard_log."""
    assert _feed("loop_nudge", {"messages": [{"type": "zzz"}]}, None) == "rejected by LangGraph"
    calls = [
        AIMessage("", tool_calls=[{"name": "search", "args": {"q": "r"}, "id": f"c{i}"}])
        for i in range(2)
    ]
    assert _feed("loop_nudge", {"messages": [HumanMessage("hi"), *calls]}, None) == "repeated_call"


# -- the reference graph ------------------------------------------------------------------

REFERENCE = "procurement_threshold"
_REF_JUNK = _mostly(PLAIN_JSON, client_values, 20)
REFERENCE_WRITES = _writes(
    {"messages": st.just([("user", "采购合同超过多少金额需要复核？")])},
    goal=_REF_JUNK
    | st.dictionaries(st.sampled_from(["intent", "constraints", "required"]), _REF_JUNK),
    plans=PLAN | st.lists(PLAN, max_size=2) | _REF_JUNK,
    evidence=EVIDENCE,
    evidence_query=_REF_JUNK,
    memory_facts=FACTS,
    memory_records=FACTS,
    context_pins=_REF_JUNK,
    context_pinned_ids=_REF_JUNK,
    current_step=_REF_JUNK,
    step_started_at=_REF_JUNK,
    replan_trigger=_REF_JUNK,
    outcome=_REF_JUNK,
    executed_since_plan=_REF_JUNK,
    observations_since_plan=_REF_JUNK,
    evidence_verdict=_REF_JUNK,
    memory_verdict=_REF_JUNK,
    step_messages=_ACCEPTED,
)
"""A real question, with junk in every other channel the reference graph reads."""


@functools.cache
def _reference() -> Any:
    from agent_guards.graphs.plan_execute import build_graph
    from agent_guards.graphs.scenarios import SCENARIOS, seed_memories

    scenario = SCENARIOS[REFERENCE]
    store = InMemoryStore()
    seed_memories(store, scenario)
    graph = build_graph(
        scenario.script().model(),
        scenario.tools(),
        policies=scenario.policies,
        checkpointer=InMemorySaver(),
        store=store,
        sleep=lambda _s: None,
    )
    return graph, scenario


def _feed_reference(write: dict[str, Any]) -> str:
    from agent_guards.graphs.scenarios import scenario_config

    graph, scenario = _reference()
    config = scenario_config(scenario, f"reference-{next(_threads)}")
    ran: list[str] = []
    try:
        for chunk in graph.stream(write, config, stream_mode="tasks"):
            if "input" in chunk and "result" not in chunk:
                ran.append(chunk["name"])
    except Exception as err:
        assert not _in_guard_code(err), f"guard code raised: {err!r} ({ran} started)"[:2000]
        if ran:
            assert _unstorable(err, write), f"{err!r} after {ran}"[:2000]
            graph.get_state(config)
            return "refused by the checkpointer"
        return "rejected by LangGraph"
    values = graph.get_state(config).values
    for d in values.get("guard_log") or []:
        if isinstance(d, GuardDecision):
            _check_decision(d)
    return "ran"


@MALFORMED
@given(write=REFERENCE_WRITES)
def test_reference_graph_survives_malformed_state(write: dict[str, Any]) -> None:
    _feed_reference(write)


def test_tool_node_treats_a_junk_guard_log_write_as_junk() -> None:
    call = {"type": "ai", "content": "", "tool_calls": [{"name": "search", "args": {}, "id": "c1"}]}
    _feed("tool_node", {"messages": [call], "guard_log": ""}, None)
