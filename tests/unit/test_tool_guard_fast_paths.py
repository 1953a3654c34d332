"""The tool node's fast paths give what the general paths give, on varied inputs.

Each fast path skips work whose answer is known in the common case (a call alone in a
new turn needs no history scan; a ledger kept in state needs no store batch). Here each is
run against the general path it stands for, on generated inputs, errors included.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

from agent_guards.core import ToolEffects
from agent_guards.loop_check import LoopPolicy
from agent_guards.retry_router import RetryRouterPolicy
from agent_guards.tool_guard import plan as plan_module
from agent_guards.tool_guard.plan import plan_call

EFFECTS = ToolEffects(read_only={"search"}, writes={"pay"})
POLICIES = [
    LoopPolicy(effects=EFFECTS),
    LoopPolicy(effects=EFFECTS, reuse_results=False),
    LoopPolicy(effects=EFFECTS, exempt_tools=frozenset({"poll"})),
    None,
]


@dataclass
class Request:
    """What ``plan_call`` reads of a ``ToolCallRequest``."""

    state: dict[str, Any]
    tool_call: Any
    tool: Any = None


names = st.sampled_from(["search", "pay", "poll", "probe", ""])
args = st.one_of(
    st.fixed_dictionaries({"q": st.sampled_from(["a", "b", " a "])}),
    st.fixed_dictionaries({"q": st.just("a"), "trace_id": st.integers(0, 3)}),
    st.just({}),
)
ids = st.sampled_from(["c1", "c2", "c3"])


@st.composite
def calls(draw: Any) -> dict[str, Any]:
    return {"name": draw(names), "args": draw(args), "id": draw(ids), "type": "tool_call"}


@st.composite
def turn(draw: Any) -> list[Any]:
    """An earlier assistant turn: its calls, then answers to some of them."""
    asked = draw(st.lists(calls(), min_size=1, max_size=2))
    out: list[Any] = [AIMessage("", tool_calls=asked)]
    for c in asked:
        if draw(st.booleans()):
            status = draw(st.sampled_from(["success", "error"]))
            text = draw(st.sampled_from(["result a", "result b"]))
            out.append(ToolMessage(text, tool_call_id=c["id"], name=c["name"], status=status))
    return out


other = st.sampled_from(
    [
        [SystemMessage("rules")],
        [HumanMessage("task")],
        [HumanMessage("stop repeating", name="loop_check")],
        [AIMessage("thinking")],
        [ToolMessage("result a", tool_call_id="c9", name="search")],
        [{"role": "user", "content": "hi"}],
        [7],
    ]
)


@st.composite
def histories(draw: Any) -> tuple[list[Any], Any]:
    """Earlier messages, then the latest assistant turn (maybe answered in part)."""
    blocks = draw(st.lists(st.one_of(turn(), other), max_size=4))
    asked = draw(st.lists(calls(), min_size=1, max_size=2))
    invalid = draw(st.sampled_from([[], [{"name": None, "args": "{", "id": "x", "error": "e"}]]))
    ai = AIMessage("", tool_calls=asked, invalid_tool_calls=invalid)
    after = draw(st.sampled_from([[], [ToolMessage("done", tool_call_id="c3", name="probe")]]))
    return [*(m for block in blocks for m in block), ai, *after], ai.tool_calls[0]


def _outcome(run: Any, *args: Any) -> Any:
    try:
        return ("ok", run(*args))
    except Exception as err:  # an error is part of the answer
        return ("error", type(err), str(err))


@settings(max_examples=600, suppress_health_check=[HealthCheck.too_slow])
@given(histories(), st.sampled_from(POLICIES), st.booleans())
def test_a_call_alone_in_a_new_turn_is_planned_as_the_scan_plans_it(
    history: tuple[list[Any], Any], loop: LoopPolicy | None, retry: bool
) -> None:
    messages, call = history
    request = Request({"messages": messages}, call)
    policy = RetryRouterPolicy() if retry else None

    def plan() -> Any:
        return plan_call(request, loop=loop, retry=policy, effects=EFFECTS)  # type: ignore[arg-type]

    fast = _outcome(plan)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(plan_module, "_alone_in_a_new_turn", lambda *a: False)
        general = _outcome(plan)
    assert fast == general


def test_the_fast_plan_is_taken_for_a_steps_first_call() -> None:
    ai = AIMessage("", tool_calls=[{"name": "search", "args": {"q": "a"}, "id": "c1"}])
    messages = [SystemMessage("rules"), HumanMessage("Step s1: search"), ai]
    assert plan_module._alone_in_a_new_turn(messages, 2, ai, ai.tool_calls[0])
    assert not plan_module._alone_in_a_new_turn([*messages[:1], ai, ai], 2, ai, ai.tool_calls[0])


labels = st.sampled_from(["agent_guards", "ledger", "t.1", "", "langgraph", "t1"])
namespaces = st.lists(labels, max_size=3).map(tuple)
keys = st.sampled_from(["c1#1", "c1#2", "c2#1"])
values = st.one_of(st.none(), st.fixed_dictionaries({"status": st.sampled_from(["done", "x"])}))


@settings(max_examples=300)
@given(st.lists(st.tuples(st.booleans(), namespaces, keys, values), max_size=6))
def test_the_state_ledgers_get_and_put_do_what_a_batch_does(ops: list[Any]) -> None:
    from langgraph.store.base import BaseStore

    from agent_guards.tool_guard.state_ledger import StateLedger

    entries = {"c1#1": {"status": "done", "executions": 1}}
    direct, batched = StateLedger(entries), StateLedger(entries)
    for put, namespace, key, value in ops:
        if put:
            got = _outcome(direct.put, namespace, key, value)
            want = _outcome(BaseStore.put, batched, namespace, key, value)
        else:
            got = _outcome(direct.get, namespace, key)
            want = _outcome(BaseStore.get, batched, namespace, key)
        assert got == want
        assert direct.writes == batched.writes


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(
    histories(),
    st.sampled_from([*POLICIES[:3], LoopPolicy(effects=EFFECTS, ignore_arg_keys=frozenset({"q"}))]),
)
def test_the_signature_planning_made_is_the_retry_signature(
    history: tuple[list[Any], Any], loop: LoopPolicy
) -> None:
    messages, call = history
    plan = plan_call(Request({"messages": messages}, call), loop=loop, retry=None)  # type: ignore[arg-type]
    assert plan_module.signature_of(call, plan) == plan_module.retry_signature(call, plan.effect)


def _after_then_record(message: ToolMessage, plan: Any, execution: int | None) -> ToolMessage:
    """What the wrapper did before it recorded the effect with the attempt: two copies."""
    from collections.abc import Mapping

    meta = dict(message.response_metadata or {})
    ours = meta.get("agent_guards")
    meta["agent_guards"] = {**(ours if isinstance(ours, Mapping) else {}), "attempt": plan.attempt}
    first = message.model_copy(update={"response_metadata": meta})
    if plan.effect is None:
        return first
    fields: dict[str, Any] = {"effect": plan.effect.value}
    if execution is not None:
        fields["execution"] = execution
    meta = dict(first.response_metadata or {})
    ours = meta.get("agent_guards")
    meta["agent_guards"] = {**(ours if isinstance(ours, Mapping) else {}), **fields}
    return first.model_copy(update={"response_metadata": meta})


ours_meta = st.one_of(
    st.none(),
    st.just("junk"),
    st.fixed_dictionaries(
        {},
        optional={
            "attempt": st.integers(1, 3),
            "effect": st.sampled_from(["read", "write", "unknown"]),
            "execution": st.one_of(st.integers(1, 3), st.just(True)),
            "other": st.just("kept"),
        },
    ),
)


@given(
    ours_meta,
    st.sampled_from([None, "read", "write", "unknown"]),
    st.integers(1, 3),
    st.one_of(st.none(), st.integers(1, 3)),
)
def test_the_attempt_and_the_effect_are_recorded_in_one_copy(
    ours: Any, effect: str | None, attempt: int, execution: int | None
) -> None:
    from agent_guards.core import Effect
    from agent_guards.tool_guard.plan import Plan
    from agent_guards.tool_guard.wrapper import ToolCallGuard, record_effect

    meta = {} if ours is None else {"agent_guards": ours, "model": "m"}
    message = ToolMessage("ok", tool_call_id="c1", name="search", response_metadata=meta)
    plan = Plan("execute", attempt=attempt, effect=None if effect is None else Effect(effect))
    request = Request({"messages": []}, {"name": "search", "id": "c1", "args": {}})
    done, _, _ = ToolCallGuard()._after(request, message, plan, execution)  # type: ignore[arg-type]
    if plan.effect is not None:  # as _outcome then records it, finding it recorded
        done = record_effect(done, plan.effect, execution)
    want = _after_then_record(message, plan, execution)
    assert done == want
    assert list(done.response_metadata["agent_guards"]) == list(
        want.response_metadata["agent_guards"]
    )


@given(
    ours_meta,
    st.sampled_from(["read", "write", "unknown"]),
    st.one_of(st.none(), st.integers(1, 3)),
)
def test_an_effect_recorded_already_is_not_copied_again(
    ours: Any, effect: str, execution: int | None
) -> None:
    from collections.abc import Mapping

    from agent_guards.core import Effect
    from agent_guards.tool_guard.wrapper import record_effect

    meta = {} if ours is None else {"agent_guards": ours}
    message = ToolMessage("ok", tool_call_id="c1", name="search", response_metadata=meta)
    fields: dict[str, Any] = {"effect": effect}
    if execution is not None:
        fields["execution"] = execution
    kept = ours if isinstance(ours, Mapping) else {}
    want = {**meta, "agent_guards": {**kept, **fields}}  # what every call copied in
    got = record_effect(message, Effect(effect), execution)
    assert repr(got.response_metadata) == repr(want)


ledger_ops = st.lists(
    st.tuples(
        st.sampled_from(["claim", "overwrite"]),
        keys,
        st.fixed_dictionaries(
            {"status": st.sampled_from(["started", "done"]), "n": st.integers(0, 3)}
        ),
    ),
    max_size=8,
)


@settings(max_examples=300)
@given(ledger_ops)
def test_claims_on_the_state_ledger_do_what_they_do_on_a_store(ops: list[Any]) -> None:
    # the view of state is written in place; InMemoryStore goes through get and put
    from langgraph.store.memory import InMemoryStore

    from agent_guards.tool_guard.claims import claim, overwrite, size
    from agent_guards.tool_guard.state_ledger import StateLedger

    ns = ("agent_guards", "ledger", "t1")
    entries = {"c1#1": {"status": "done", "n": 0}}
    view, store = StateLedger(entries), InMemoryStore()
    store.put(ns, "c1#1", entries["c1#1"])
    for op, key, value in ops:
        if op == "claim":
            assert claim(view, ns, key, value) == claim(store, ns, key, value)
        else:
            overwrite(view, ns, key, value)
            overwrite(store, ns, key, value)
        assert size(view, ns) == size(store, ns)
    assert {k: view._value(k) for k in view.writes} == {
        k: store.get(ns, k).value
        for k in view.writes  # type: ignore[union-attr]
    }
    assert entries == {"c1#1": {"status": "done", "n": 0}}  # what the step read stays as it was


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=8,
)


@settings(max_examples=300)
@given(st.one_of(json_values, st.just({"x": object()}), st.just("x" * 70_000), st.just({1: "a"})))
def test_an_entry_kept_as_it_is_holds_what_its_json_would(extra: Any) -> None:
    # in-process stores skip the entry's JSON text: the same args or artifact are kept
    from agent_guards.tool_guard.ledger import _with_small_json

    entry = {"call_id": "c1", "status": "done", "content": "ok"}
    kept, text = _with_small_json(entry, "artifact", extra, text=False)
    written, json_text = _with_small_json(entry, "artifact", extra)
    assert text is None and isinstance(json_text, str)
    assert kept == written
