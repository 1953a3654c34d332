"""detect_loop's fast path (one answered call, alone in its turn) decides as the full scan does.

The fast path reads only the end of the history; these tests run both on varied histories
(healthy and failing results, sub-agent stops, chanting replies, guard notes, summaries,
earlier turns, bad items) and policies, and ask for the same decision, or the same error.
The retry_router edge, which skips both cores on such a turn, is held to the same: the
same route and the same decisions stamped (attached to the trace), or the same error.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from agent_guards import create_retry_router
from agent_guards import graph as agent_graph
from agent_guards.core import InvalidInputError
from agent_guards.core.effects import ToolEffects
from agent_guards.core.history import ScanOptions, lone_call
from agent_guards.loop_check import LoopPolicy, detect_loop
from agent_guards.loop_check import core as loop_core
from agent_guards.retry_router import RetryRouterPolicy, failure_artifact
from agent_guards.retry_router import graph as router_graph

STOP = "I stopped because I kept repeating myself: search was called 3 times."
CHANT = "I will check the policy again now. " * 20
SUMMARY = {"agent_guards": {"role": "summary"}}


def _call(names: list[str], content: str = "", n: int = 0, q: int = 0) -> AIMessage:
    calls = [
        {"name": name, "args": {"q": f"x{q}"}, "id": f"c{n}-{j}"} for j, name in enumerate(names)
    ]
    return AIMessage(content=content, tool_calls=calls)


def _result(kind: str, n: int = 0, name: str = "search", j: int = 0) -> ToolMessage:
    texts = {"ok": f"record {n % 3}", "error_text": "Error: no such record", "stop": STOP}
    texts["long"] = "The 2026 procurement policy requires a second review above 500k."
    cid = f"c{n}-{j}"
    if kind == "error":
        return ToolMessage("timeout", tool_call_id=cid, name=name, status="error")
    if kind == "artifact":
        artifact = failure_artifact("transient", "upstream 503")
        return ToolMessage("failed", tool_call_id=cid, name=name, artifact=artifact)
    return ToolMessage(texts[kind], tool_call_id=cid, name=name)


RESULTS = ("ok", "ok", "long", "error", "error_text", "stop", "artifact")


def _piece(kind: str, n: int) -> list[Any]:
    """One earlier piece of a history (``n`` keeps its call ids apart)."""
    pieces: dict[str, Callable[[], list[Any]]] = {
        "system": lambda: [SystemMessage("you are an agent")],
        "say": lambda: [AIMessage("Here is what I found.")],
        "say_empty": lambda: [AIMessage("")],
        "call_other": lambda: [_call(["fetch"], n=n, q=n), _result("ok", n, "fetch")],
        "call_same": lambda: [_call(["search"], n=n), _result("ok", n)],
        "call_same_long": lambda: [_call(["search"], n=n), _result("long", n)],
        "call_fail": lambda: [_call(["search"], n=n), _result("error", n)],
        "call_pair": lambda: [_call(["search", "fetch"], n=n, q=n), _result("ok", n)],
        "call_nameless": lambda: [_call([""], n=n), _result("ok", n)],
        "orphan_result": lambda: [_result("ok", n)],
        "worker_stop": lambda: [AIMessage(STOP, response_metadata={"agent_guards": WORKER_STOP})],
        "dict": lambda: [{"role": "user", "content": "a dict message"}],
        "bad_dict": lambda: [{"role": "nobody", "content": "?"}],
        "not_a_message": lambda: [42],
    }
    return pieces[kind]()


WORKER_STOP = {"guard": "loop_check", "verdict": "stop", "reason": "repeated_call"}
PIECES = (
    "system", "say", "say_empty", "call_other", "call_same", "call_same", "call_same_long",
    "call_fail", "call_fail", "call_pair", "call_nameless", "orphan_result", "worker_stop",
    "dict", "bad_dict", "not_a_message",
)  # fmt: skip
# weights: most histories end in a healthy lone call after earlier user turns (the fast
# path's case, where the two could differ); the rest make it step aside
SEPARATOR_DRAWS = ("user",) * 5 + ("guard_note", "summary", "nothing")
NAME_DRAWS = ([["search"]] * 5) + [["fetch"], [""], ["search", "fetch"], []]
SEPARATORS: dict[str, Callable[[], list[Any]]] = {
    "user": lambda: [HumanMessage("next step")],
    "guard_note": lambda: [HumanMessage("[loop_check] stop repeating", name="loop_check")],
    "summary": lambda: [HumanMessage("summary of earlier work", additional_kwargs=SUMMARY)],
    "nothing": list,
}


def _boom(text: str) -> str:
    raise RuntimeError("a normalizer that fails")


POLICIES = (
    LoopPolicy(),
    LoopPolicy(),
    LoopPolicy(nudge_at=1),
    LoopPolicy(thresholds={"repeated_call": (1, 3)}),
    LoopPolicy(nudge_at=None),
    LoopPolicy(mode="headless"),
    LoopPolicy(exempt_tools=frozenset({"search"})),
    LoopPolicy(normalizers=(str.lower,)),
    LoopPolicy(normalizers=(_boom,)),
    LoopPolicy(patterns=frozenset({"cycle", "no_progress"})),
    LoopPolicy(window=2),
    LoopPolicy(failure_prefixes=()),
    LoopPolicy(content_chunk=8, content_repeats=3),
    LoopPolicy(effects=ToolEffects(read_only=frozenset({"search", "fetch"}))),
)


@contextmanager
def _full_scan() -> Iterator[None]:
    """detect_loop without its fast path: every history goes through the scan."""
    with mock.patch.object(loop_core, "quiet_turn", lambda *_: False):
        yield


def _outcome(messages: list[Any], policy: LoopPolicy, effects: Any) -> Any:
    try:
        return detect_loop(messages, policy=policy, effects=effects)
    except Exception as err:  # the same error, word for word
        return (type(err), str(err))


def _same_either_way(messages: list[Any], policy: LoopPolicy, effects: Any = None) -> None:
    fast = _outcome(messages, policy, effects)
    with _full_scan():
        full = _outcome(messages, policy, effects)
    assert fast == full
    if not isinstance(fast, tuple):
        assert (fast.detail, fast.data, fast.policy) == (full.detail, full.data, full.policy)


def _history(turns: list[tuple[list[str], str]], names: list[str], content: str) -> list[Any]:
    messages: list[Any] = []
    n = 2
    for pieces, separator in turns:
        for kind in pieces:
            messages.extend(_piece(kind, n))
            n += 1
        messages.extend(SEPARATORS[separator]())
    messages.append(_call(names, content))
    return messages


@settings(max_examples=1000, deadline=None)
@given(
    turns=st.lists(
        st.tuples(st.lists(st.sampled_from(PIECES), max_size=3), st.sampled_from(SEPARATOR_DRAWS)),
        max_size=3,
    ),
    names=st.sampled_from(NAME_DRAWS),
    content=st.sampled_from(["", "", "", "Let me look that up.", CHANT]),
    result=st.sampled_from(RESULTS),
    tail=st.sampled_from(["answer"] * 5 + ["none", "two", "note_after"]),
    policy=st.sampled_from(POLICIES),
    effects=st.sampled_from([None, None, None, {"search": "write"}, {"search": "bogus"}]),
)
def test_the_fast_path_decides_as_the_full_scan(
    *,
    turns: list[tuple[list[str], str]],
    names: list[str],
    content: str,
    result: str,
    tail: str,
    policy: LoopPolicy,
    effects: Any,
) -> None:
    messages = _history(turns, names, content)
    name = (names or ["search"])[0]
    if tail != "none":
        messages.append(_result(result, 0, name=name))
    if tail == "two":  # a second answer: the same text, for the turn's second call if any
        messages.append(_result(result, 0, name=name, j=1))
    elif tail == "note_after":
        messages.append(HumanMessage("[loop_check] note", name="loop_check"))
    _same_either_way(messages, policy, effects)


HEALTHY: list[tuple[str, list[BaseMessage]]] = [
    (
        "the bench's step",
        [SystemMessage("s"), HumanMessage("Step s1"), _call(["search"]), _result("ok")],
    ),
    ("a call alone", [_call(["search"]), _result("ok")]),
    (
        "after earlier turns",
        [
            HumanMessage("a"),
            _call(["search"], n=1),
            _result("ok", 1),
            HumanMessage("b"),
            _call(["search"]),
            _result("ok"),
        ],
    ),
    (
        "after a guard note",
        [HumanMessage("a"), HumanMessage("n", name="loop_check"), _call(["search"]), _result("ok")],
    ),
]


@pytest.mark.parametrize(("name", "messages"), HEALTHY, ids=[h[0] for h in HEALTHY])
def test_a_healthy_lone_call_takes_the_fast_path(name: str, messages: list[BaseMessage]) -> None:
    policy = LoopPolicy()
    assert loop_core.quiet_turn(messages, policy, policy.loop_scan_options())
    assert detect_loop(messages, policy=policy).reason == "no_loop"
    _same_either_way(messages, policy)


NOT_FAST: list[tuple[str, list[Any]]] = [
    (
        "a second call in the turn",
        [
            HumanMessage("a"),
            _call(["search"], n=1),
            _result("ok", 1),
            _call(["search"]),
            _result("ok"),
        ],
    ),
    ("two calls in one message", [_call(["search", "fetch"]), _result("ok")]),
    ("a failed result", [_call(["search"]), _result("error")]),
    ("a text failure", [_call(["search"]), _result("error_text")]),
    ("a sub-agent's stop", [_call(["search"]), _result("stop")]),
    ("a chanting call message", [_call(["search"], CHANT), _result("ok")]),
    ("a dict before it", [{"role": "user", "content": "a"}, _call(["search"]), _result("ok")]),
    ("not a message before it", [42, HumanMessage("a"), _call(["search"]), _result("ok")]),
    (
        "a nameless call in an earlier turn",
        [_call([""], n=1), HumanMessage("a"), _call(["search"]), _result("ok")],
    ),
    ("a reply last", [_call(["search"]), _result("ok"), AIMessage("done")]),
]


@pytest.mark.parametrize(("name", "messages"), NOT_FAST, ids=[h[0] for h in NOT_FAST])
def test_anything_else_goes_through_the_scan(name: str, messages: list[Any]) -> None:
    policy = LoopPolicy()
    assert not loop_core.quiet_turn(messages, policy, policy.loop_scan_options())
    _same_either_way(messages, policy)


# histories a step away from the fast path's case, where skipping the scan would be wrong
NEAR_MISSES: list[tuple[str, list[Any], LoopPolicy, str]] = [
    (
        "the same failure in an earlier user turn",
        [*_piece("call_fail", 2), HumanMessage("again"), _call(["search"]), _result("error")],
        LoopPolicy(),
        "failure_loop",
    ),
    (
        "the same call before a guard's note (no user turn)",
        [HumanMessage("a"), *_piece("call_same_long", 2), HumanMessage("n", name="loop_check"),
         _call(["search"]), _result("long")],
        LoopPolicy(),
        "repeated_call",
    ),
    (
        "the same call in an earlier user turn, headless",
        [*_piece("call_same_long", 2), HumanMessage("again"), _call(["search"]), _result("long")],
        LoopPolicy(mode="headless"),
        "repeated_call",
    ),
    (
        "two calls of one message bring back the same long result",
        [_call(["search", "fetch"]), _result("long"), _result("long", j=1)],
        LoopPolicy(effects=ToolEffects(read_only=frozenset({"search", "fetch"}))),
        "no_progress",
    ),
    (
        "a result that is a sub-agent's stop",
        [_call(["search"]), _result("stop")],
        LoopPolicy(),
        "subagent_stuck",
    ),
    (
        "a call whose message chants",
        [_call(["search"], CHANT), _result("ok")],
        LoopPolicy(),
        "content_loop",
    ),
    (
        "a nameless call in an earlier user turn",
        [_call([""], n=2), HumanMessage("again"), _call(["search"]), _result("ok")],
        LoopPolicy(),
        "invalid_input",
    ),
    (
        "a normalizer that fails",
        [_call(["search"]), _result("ok")],
        LoopPolicy(normalizers=(_boom,)),
        "RuntimeError",
    ),
]  # fmt: skip


@pytest.mark.parametrize(
    ("name", "messages", "policy", "found"), NEAR_MISSES, ids=[m[0] for m in NEAR_MISSES]
)
def test_near_misses_are_decided_by_the_scan(
    name: str, messages: list[Any], policy: LoopPolicy, found: str
) -> None:
    outcome = _outcome(messages, policy, None)
    if isinstance(outcome, tuple):  # an error: its type's name
        seen = "invalid_input" if outcome[0] is InvalidInputError else outcome[0].__name__
    else:
        seen = outcome.reason
    assert seen == found
    assert not loop_core.quiet_turn(messages, policy, policy.loop_scan_options())
    _same_either_way(messages, policy)


def test_a_policy_that_counts_one_call_or_normalizes_results_takes_the_scan() -> None:
    messages = [_call(["search"]), _result("ok")]
    for policy in (LoopPolicy(nudge_at=1), LoopPolicy(normalizers=(str.lower,))):
        assert not loop_core.quiet_turn(messages, policy, policy.loop_scan_options())
        _same_either_way(messages, policy)
    assert detect_loop(messages, policy=LoopPolicy(nudge_at=1)).verdict.value == "nudge"


def test_lone_call_stops_where_a_scan_within_one_turn_stops() -> None:
    """Without ``across_turns`` the scan never reads past the user's message: neither does
    lone_call, so what lies before it (here an item that is no message) does not matter."""
    messages: list[Any] = [42, HumanMessage("a"), _call(["search"]), _result("ok")]
    assert lone_call(messages, ScanOptions()) is not None
    assert lone_call(messages, ScanOptions(across_turns=True)) is None


# --- the retry_router edge: a healthy turn skips both cores, with the same trace -----------

RETRY_POLICIES = (
    RetryRouterPolicy(),
    RetryRouterPolicy(failure_patterns={"search": [(r"^record 0", "transient")]}),
)
EDGE_LOOP_POLICIES = (None, LoopPolicy(), LoopPolicy(nudge_at=1), LoopPolicy(mode="headless"))
CLOCK = {"configurable": {"agent_guards_now": "2026-06-01"}, "metadata": {"langgraph_step": 3}}
BAD_CLOCK = {"configurable": {"agent_guards_now": object()}}


def _edge_run(
    edge: Any, messages: list[Any], config: Any, *, traced: bool = True
) -> tuple[Any, list[Any]]:
    """The edge's route (or its error) and the decisions it stamped, in order, in a run
    that is traced (the decisions the trace would get) or not."""
    stamped: list[Any] = []
    stamp = agent_graph.stamp

    def recorded(decision: Any, cfg: Any) -> Any:
        out = stamp(decision, cfg)
        stamped.append(out.to_dict())
        return out

    with (
        mock.patch.object(agent_graph, "stamp", recorded),
        mock.patch.object(agent_graph, "traced", lambda: traced),
    ):
        try:
            return edge.invoke({"messages": messages}, config), stamped
        except Exception as err:
            return (type(err), str(err)), stamped


@settings(max_examples=300, deadline=None)
@given(
    turns=st.lists(
        st.tuples(st.lists(st.sampled_from(PIECES), max_size=3), st.sampled_from(SEPARATOR_DRAWS)),
        max_size=3,
    ),
    names=st.sampled_from(NAME_DRAWS),
    result=st.sampled_from(RESULTS),
    retry=st.sampled_from(RETRY_POLICIES),
    loop=st.sampled_from(EDGE_LOOP_POLICIES),
    config=st.sampled_from([CLOCK, CLOCK, BAD_CLOCK]),
)
def test_the_edge_routes_and_traces_a_healthy_turn_as_its_cores_do(
    *,
    turns: list[tuple[list[str], str]],
    names: list[str],
    result: str,
    retry: RetryRouterPolicy,
    loop: LoopPolicy | None,
    config: Any,
) -> None:
    messages = _history(turns, names, "")
    messages.append(_result(result, 0, name=(names or ["search"])[0]))
    edge = create_retry_router(policy=retry, loop_policy=loop)
    fast = _edge_run(edge, messages, config)
    with mock.patch.object(router_graph, "_healthy", lambda *_: False):
        full = _edge_run(edge, messages, config)
    assert fast == full


def test_the_edge_takes_its_fast_path_on_a_healthy_turn() -> None:
    messages = [SystemMessage("s"), HumanMessage("Step s1"), _call(["search"]), _result("ok")]
    assert router_graph._healthy(messages, RetryRouterPolicy(), LoopPolicy())
    edge = create_retry_router(loop_policy=LoopPolicy())
    route, stamped = _edge_run(edge, messages, CLOCK)
    assert route == "continue"
    assert [(d["guard"], d["reason"], d["step"]) for d in stamped] == [
        ("retry_router", "no_failure", 3),
        ("loop_check", "no_loop", 3),
    ]
    # untraced, the decisions only a trace keeps are not stamped at all
    assert _edge_run(edge, messages, CLOCK, traced=False) == ("continue", [])
    failing = RetryRouterPolicy(failure_patterns={"search": [(r"^record 0", "permission")]})
    assert not router_graph._healthy(messages, failing, LoopPolicy())  # its own failures
    assert create_retry_router(policy=failing).invoke({"messages": messages}, CLOCK) == "refuse"
