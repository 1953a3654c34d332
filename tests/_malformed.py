"""Hypothesis strategies for malformed input, shared by the pure-core and node fuzz tests.

``client_values`` is what a JSON client (LangGraph Studio, the SDK, ``update_state``) can
write into a state channel: JSON values, ints far past the digit limit of ``str()``, and
strings that look like JSON. ``python_values`` adds what only Python callers can pass
(bytes, objects whose ``__str__`` raises, bare objects). ``messages(values)`` builds
histories from either: real messages with odd content, tool calls, artifacts and metadata
(whatever the message classes accept), raw dicts (what a client writes) and non-messages.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

MALFORMED = settings(
    max_examples=1000,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
"""1,000 examples, the same ones on every run and machine."""

HUGE = 10**5000
"""An int past the default digit limit of ``str()`` (and of any JSON or msgpack writer)."""


class BadStr:
    """An object whose ``__str__`` and ``__repr__`` raise."""

    def __str__(self) -> str:
        raise RuntimeError("unprintable")

    __repr__ = __str__


_HUGE = st.booleans().map(lambda negative: -HUGE if negative else HUGE)
_PLAIN = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=8),
    st.sampled_from(["", "error", "success", "ai", "human", "tool", "system", '{"a": 1}', "[]"]),
)


def _nested(leaves: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.recursive(
        leaves,
        lambda inner: (
            st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
        ),
        max_leaves=6,
    )


PLAIN_JSON = _nested(_PLAIN)
"""JSON values (NaN and infinities included) whose ints fit in 64 bits."""
JSON = _nested(_PLAIN | st.sampled_from([2**64, 0, -1]) | _HUGE)
"""JSON values with ints past 64 bits and past ``str()``'s digit limit among the leaves."""

client_values = st.one_of(JSON, _HUGE, _HUGE.map(lambda h: [h]))
python_values = st.one_of(
    client_values, st.binary(max_size=4), st.builds(BadStr), st.builds(object)
)

NAMES = st.sampled_from(["search", "pay", "lookup", "", "ai"]) | st.text(max_size=4)
IDS = st.one_of(st.none(), st.sampled_from(["c1", "c2", "m1", ""]), st.text(max_size=4))
_META_KEYS = ["attempt", "effect", "reused_from", "duplicate", "guard", "verdict", "role",
              "reason"]  # fmt: skip
_FAILURE_KEYS = ["kind", "message", "retry_after", "status_code", "field_errors", "question",
                 "options", "x"]  # fmt: skip
VALID = st.sampled_from(
    [
        HumanMessage("rates?", id="h"),
        AIMessage("", tool_calls=[{"name": "search", "args": {"q": "r"}, "id": "c1"}], id="a"),
        ToolMessage("rate is 4%", tool_call_id="c1", id="t"),
    ]
)


def _built(cls: type[BaseMessage], fields: dict[str, Any]) -> Any:
    """The message if its own validation accepts the fields, else the raw dict."""
    try:
        return cls(**fields)
    except Exception:
        return {"type": cls.__name__.removesuffix("Message").lower(), **fields}


def artifacts(values: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Tool-result artifacts: junk, failure artifacts with junk fields, evidence lists."""
    return st.one_of(
        values,
        st.fixed_dictionaries({"agent_guards_failure": values}),
        st.fixed_dictionaries(
            {
                "agent_guards_failure": st.dictionaries(
                    st.sampled_from(_FAILURE_KEYS), values, max_size=4
                )
            }
        ),
        st.fixed_dictionaries({"evidence": values}),
        st.lists(
            st.dictionaries(st.sampled_from(["id", "claim_key", "value", "x"]), values),
            max_size=2,
        ),
    )


def messages(values: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """One history item: mostly a message with odd fields, sometimes a dict or junk."""
    ai, tool, plain, raw = _kinds(values)
    return st.one_of(ai, ai, tool, tool, plain, raw, VALID, values)


def tool_results(values: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """A ToolMessage with odd content, call id, status, artifact and metadata (or, when the
    message class refuses the fields, the raw dict)."""
    return _kinds(values)[1]


def _kinds(values: st.SearchStrategy[Any]) -> tuple[st.SearchStrategy[Any], ...]:
    """Strategies for assistant, tool, human/system and raw-dict history items."""
    block = st.one_of(
        st.text(max_size=8),
        st.fixed_dictionaries({"type": st.sampled_from(["text", "image_url", "tool_use", "x"])}),
        st.dictionaries(st.sampled_from(["type", "text", "id", "url"]), values, max_size=3),
    )
    content = st.one_of(st.text(max_size=40), st.lists(block, max_size=3), values)
    call = st.one_of(
        st.fixed_dictionaries(
            {
                "name": NAMES,
                "args": st.dictionaries(st.text(max_size=3), JSON, max_size=3),
                "id": IDS,
            }
        ),
        st.dictionaries(st.sampled_from(["name", "args", "id", "type"]), values, max_size=4),
    )
    meta = st.one_of(
        st.just({}),
        st.fixed_dictionaries({"agent_guards": values}),
        st.fixed_dictionaries(
            {"agent_guards": st.dictionaries(st.sampled_from(_META_KEYS), values, max_size=3)}
        ),
    )
    ai = st.builds(
        lambda content, calls, bad, meta, kw, mid: _built(
            AIMessage,
            {
                "content": content,
                "tool_calls": calls,
                "invalid_tool_calls": bad,
                "response_metadata": meta,
                "additional_kwargs": kw,
                "id": mid,
            },
        ),
        content,
        st.lists(call, max_size=3),
        st.lists(
            st.dictionaries(st.sampled_from(["name", "args", "id", "error"]), values), max_size=1
        ),
        meta,
        meta,
        IDS,
    )
    tool = st.builds(
        lambda content, call_id, status, artifact, meta: _built(
            ToolMessage,
            {
                "content": content,
                "tool_call_id": call_id,
                "status": status,
                "artifact": artifact,
                "response_metadata": meta,
            },
        ),
        content,
        st.sampled_from(["c1", "c2", ""]) | values,
        st.sampled_from(["success", "error"]) | values,
        artifacts(values),
        meta,
    )
    plain = st.builds(
        lambda cls, content, mid, kw: _built(
            cls, {"content": content, "id": mid, "additional_kwargs": kw}
        ),
        st.sampled_from([HumanMessage, SystemMessage]),
        content,
        IDS,
        meta,
    )
    raw = st.dictionaries(
        st.sampled_from(["type", "role", "content", "tool_calls", "tool_call_id", "id", "name"]),
        values,
        max_size=4,
    )
    return ai, tool, plain, raw


def histories(values: st.SearchStrategy[Any], max_size: int = 7) -> st.SearchStrategy[Any]:
    """A message list (or tuple) of :func:`messages`, or a junk value in its place."""
    items = st.lists(messages(values), max_size=max_size)
    return st.one_of(items, items.map(tuple), values)
