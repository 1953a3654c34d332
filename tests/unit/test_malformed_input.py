"""Pure cores never raise unhandled on malformed input.

Hypothesis feeds each core at least 1,000 malformed inputs (derandomized: the same examples
on every run and machine). A core either returns a verdict or raises ``InvalidInputError``
naming the field, and the item (its id, or ``#<position>`` when it has no readable id) when
the error is about one item. The one exception is deliberate: an item whose access list is
malformed is not named, since nobody can tell who may see it (the position is in the text).
"""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent_guards import resolve_evidence, resolve_memory
from agent_guards.core import InvalidInputError
from tests._malformed import MALFORMED


class BadStr:
    """An object whose ``__str__`` and ``__repr__`` raise."""

    def __str__(self) -> str:
        raise RuntimeError("unprintable")

    __repr__ = __str__


NASTY = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.sampled_from([10**400, -(10**5000), 2**64, 0, -1]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.sampled_from(["", " ", "2026-13-45", "2019", "2026-01-01", "official", "active", "x" * 300]),
    st.binary(max_size=4),
    st.builds(BadStr),
    st.lists(st.one_of(st.text(max_size=4), st.integers(), st.none()), max_size=3),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)

EVIDENCE_KEYS = ["id", "claim_key", "value", "entity", "source_type", "version", "updated_at",
                 "effective_at", "confidence", "relevance", "basis", "status", "supersedes",
                 "allowed", "acl", "text", "flags", "colour"]  # fmt: skip
MEMORY_KEYS = ["id", "key", "value", "source", "scope", "confidence", "created_at",
               "valid_until", "status", "supersedes", "persist", "colour"]  # fmt: skip
WHOLE_CALL = {"items", "records", "principal", "as_of", "now", "scopes", "entity", "basis",
              "claim_key"}  # fmt: skip


def _item(keys: list[str], base: dict[str, Any]) -> st.SearchStrategy[Any]:
    """Mostly a valid dict with one to three fields made nasty (or dropped); sometimes junk."""
    broken = st.dictionaries(st.sampled_from(keys), NASTY, min_size=1, max_size=3)
    dropped = st.lists(st.sampled_from(keys[:3]), max_size=1)
    record = st.builds(
        lambda b, gone: {k: v for k, v in {**base, **b}.items() if k not in gone}, broken, dropped
    )
    return st.one_of(record, record, record, NASTY)


def _items(keys: list[str], base: dict[str, Any]) -> st.SearchStrategy[Any]:
    valid = st.just({**base, "id": "ok"})
    return st.one_of(
        st.lists(st.one_of(_item(keys, base), valid), max_size=4),
        NASTY,
    )


def _check(err: InvalidInputError) -> None:
    assert err.field, err
    if err.field not in WHOLE_CALL and err.field != "allowed":
        assert err.item, f"the error does not name the item: {err}"
    str(err)  # printable


@MALFORMED
@given(
    items=_items(EVIDENCE_KEYS, {"id": "e", "claim_key": "k", "value": "1"}),
    principal=st.one_of(st.none(), st.just("hr"), NASTY),
    as_of=st.one_of(st.none(), NASTY),
)
def test_resolve_evidence_never_raises_unhandled(items: Any, principal: Any, as_of: Any) -> None:
    try:
        verdict = resolve_evidence(items, principal=principal, as_of=as_of)
    except InvalidInputError as err:
        _check(err)
    else:
        assert verdict.decision is not None
        value = verdict.value
        assert not (isinstance(value, float) and math.isnan(value))


@MALFORMED
@given(
    records=_items(MEMORY_KEYS, {"id": "m", "key": "k", "value": "v"}),
    now=st.one_of(st.just("2026-06-01"), NASTY),
    scopes=st.one_of(st.none(), st.just(["u"]), NASTY),
)
def test_resolve_memory_never_raises_unhandled(records: Any, now: Any, scopes: Any) -> None:
    try:
        verdict = resolve_memory(records, now=now, scopes=scopes)
    except InvalidInputError as err:
        _check(err)
    else:
        assert verdict.decision is not None


STEP_KEYS = ["id", "description", "tool", "args", "depends_on", "status", "risk", "timeout_s",
             "fallback", "done_when", "approved", "colour"]  # fmt: skip


@MALFORMED
@given(
    steps=st.lists(_item(STEP_KEYS, {"id": "s", "description": "d"}), max_size=3) | NASTY,
    version=st.one_of(st.just(1), NASTY),
    goal=st.one_of(
        st.none(),
        st.just({"intent": "x", "required": ["region"]}),
        st.dictionaries(st.sampled_from(["intent", "constraints", "required", "x"]), NASTY),
        NASTY,
    ),
    executed=st.one_of(st.just(0), NASTY),
)
def test_gate_plan_never_raises_unhandled(
    steps: Any, version: Any, goal: Any, executed: Any
) -> None:
    from agent_guards import gate_plan

    try:
        decision = gate_plan(
            [{"version": version, "steps": steps}], goal=goal, executed_steps=executed
        )
    except InvalidInputError as err:
        assert err.field, err
        str(err)
    else:
        assert decision.verdict is not None


@pytest.mark.parametrize("pinned", [5, 3.5, {"a": 1}, "m1", b"m1"])
def test_context_guard_node_records_non_list_pinned_ids(pinned: Any) -> None:
    from langgraph.graph import START, MessagesState, StateGraph

    from agent_guards import ContextState, create_context_guard

    class State(MessagesState, ContextState):
        pass

    g = StateGraph(State)
    g.add_node("context_guard", create_context_guard(8000))
    g.add_edge(START, "context_guard")
    state: Any = {"messages": [("user", "hi")], "context_pinned_ids": pinned}
    out = g.compile().invoke(state)
    decision = out["guard_log"][-1]
    assert (decision.reason, decision.data["field"]) == ("invalid_input", "context_pinned_ids")
