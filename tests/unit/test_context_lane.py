"""The context guard node's lane decides as its general path does.

Before most model calls a node's fit leaves the history as it is, and the node writes its
decision and tally without building a verdict (``ContextGuardNode.unchanged``). Each state
here goes through the lane and through the node's general path (``begin``, then ``end``);
where the lane decides, the update must be the one the general path writes: the same
decision (data, detail, step and time) and the same tally. The states grow fit by fit, as
a node's do, with tool results carrying injected instructions, long results, replies
reporting usage, later system messages and stale pins; the pins are message ids, tool
call ids, unknown ids, junk, or content under a pinned state key (placed, and later
stale); some tallies are damaged; some nodes have a store.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langgraph.store.memory import InMemoryStore

from agent_guards.context_guard import ContextPolicy
from agent_guards.context_guard.graph import ContextGuardNode, context_guard_node
from tests.unit.test_context_fast_path import KINDS, _event

CONFIG: dict[str, Any] = {
    "configurable": {"agent_guards_now": "2026-06-01T10:00:00Z"},
    "metadata": {"langgraph_step": 7},
}
PIN_IDS = st.sampled_from(["none", "human", "brief", "call_id", "unknown", "junk", "twice"])
DAMAGE = st.sampled_from(["none", "none", "none", "pinned", "tokens", "basis", "usage", "gone"])


def _ids(kind: str, history: list[BaseMessage]) -> Any:
    calls = [m.tool_call_id for m in history if isinstance(m, ToolMessage)]
    if kind == "human":
        return ["q"]
    if kind == "brief":
        return ["b"]
    if kind == "call_id":
        return calls[:1]
    if kind == "unknown":
        return ["nowhere"]
    if kind == "junk":
        return ("q",)  # a tuple, which the general path reads and the lane leaves to it
    if kind == "twice":
        return ["q", "b", "q"]
    return []


def _damaged(tally: Any, how: str) -> Any:
    if not isinstance(tally, dict) or how == "none":
        return tally
    if how == "gone":
        return None
    changed = {
        "pinned": {"q": ["t0", "call"]},
        "tokens": -1,
        "basis": "another|estimate|0",
        "usage": [0, 10, 5],
    }
    return {**tally, how: changed[how]}


def _general(node: ContextGuardNode, state: dict[str, Any]) -> dict[str, Any]:
    """The update the node writes without its lane."""
    return node.end(state, CONFIG, node.begin(state, CONFIG), [])


def _same_update(lane: dict[str, Any], general: dict[str, Any]) -> None:
    assert set(lane) == set(general)
    assert [d.to_dict() for d in lane["guard_log"]] == [d.to_dict() for d in general["guard_log"]]
    assert lane["context_tally"] == general["context_tally"]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
# system messages that keep joining the leading ones, and a pin that went stale
@example(
    events=[("system", 0), ("human", 0)],
    pins="none",
    damage="none",
    window=60_000,
    policy=ContextPolicy(),
    store=False,
    pinned_key="never",
    opening="system alone",
)
@example(
    events=[("call", 10)] * 4,
    pins="brief",
    damage="none",
    window=60_000,
    policy=ContextPolicy(),
    store=True,
    pinned_key="early",
    opening="step",
)
@given(
    events=st.lists(st.tuples(KINDS, st.integers(0, 2_500)), min_size=1, max_size=14),
    pins=PIN_IDS,
    damage=DAMAGE,
    window=st.sampled_from([2_000, 12_000, 60_000]),
    policy=st.sampled_from([ContextPolicy(), ContextPolicy(archive_over_tokens=None)]),
    store=st.booleans(),
    pinned_key=st.sampled_from(["never", "always", "early"]),
    opening=st.sampled_from(["step", "system alone"]),
)
def test_the_lane_writes_what_the_general_path_writes(
    *,
    events: list[tuple[str, int]],
    pins: str,
    damage: str,
    window: int,
    policy: ContextPolicy,
    store: bool,
    pinned_key: str,
    opening: str,
) -> None:
    node = context_guard_node(window, policy=policy, store=InMemoryStore() if store else None)
    history: list[BaseMessage] = [SystemMessage("Do the step.", id="sys")]
    if opening == "step":
        history += [HumanMessage("Compare 2023 and 2024.", id="q"), HumanMessage("s1", id="b")]
    tally: Any = None
    decided = 0
    for i, (kind, size) in enumerate([("opening", 0), *events]):  # the opening fitted first
        history = [*history, *_event(kind, i, size)] if i else history
        state: dict[str, Any] = {
            "messages": history,
            "context_pinned_ids": _ids(pins, history),
            "context_tally": _damaged(tally, damage if i % 2 else "none"),
        }
        if pinned_key == "always" or (pinned_key == "early" and i < 2):
            state["context_pins"] = {"goal": "compare"}  # placed, then stale when unpinned
        lane = node.unchanged(state, CONFIG)
        general = _general(node, state)
        if lane is not None:
            decided += 1
            _same_update(lane, general)
        if any(d.reason == "invalid_input" for d in general["guard_log"]):
            return  # refused: the run ends
        # the node goes on from what it sent (the history, or the general path's rewrite)
        history, tally = list(node.run(state, CONFIG)[1]), general.get("context_tally")
    # the lane takes every fit of a plain history that stays under the window
    if pins == "none" and pinned_key == "never" and window == 60_000 and opening == "step":
        quiet = all(kind in ("call", "human", "quiet") and size < 1_500 for kind, size in events)
        assert decided == len(events) + 1 or not quiet


def test_the_lane_takes_both_fits_of_a_reference_graph_step() -> None:
    """The step's brief alone, then the brief with a call and its result: both decided by
    the lane, from scratch and then from the tally the first wrote."""
    node = context_guard_node(16_000, messages_key="step_messages")
    history: list[BaseMessage] = [
        SystemMessage("Do the step.", id="sys"),
        HumanMessage("s1", id="b"),
    ]
    state: dict[str, Any] = {"step_messages": history, "context_pinned_ids": ["b"]}
    first = node.unchanged(state, CONFIG)
    assert first is not None and first["context_tally"]["n"] == 2
    grown = [*history, *_event("call", 1, 10)]
    state = {**state, "step_messages": grown, "context_tally": first["context_tally"]}
    second = node.unchanged(state, CONFIG)
    assert second is not None and second["context_tally"]["n"] == 4
    _same_update(second, _general(node, state))
    assert second["guard_log"][0].data["archive_available"] is False


@pytest.mark.parametrize(
    "state",
    [
        {"messages": [HumanMessage("q", id="q"), "not a message"]},
        {"messages": [HumanMessage("q", id="q")], "context_pinned_ids": "q"},
        {"messages": [HumanMessage("q", id="q")], "context_pinned_ids": ["q", 3]},
        {"messages": ({"role": "user"},)},
    ],
    ids=["item", "pins-a-string", "pin-not-a-string", "not-a-list"],
)
def test_bad_input_is_left_to_the_general_path_which_names_it(state: dict[str, Any]) -> None:
    node = context_guard_node(16_000)
    assert node.unchanged(state, CONFIG) is None
    assert node.node(state, CONFIG)["guard_log"][0].reason == "invalid_input"
