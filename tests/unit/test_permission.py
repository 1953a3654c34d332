"""Permission at the boundary (``withhold``, ``permission_filtered``) and malformed ACLs.

What a principal may not see is removed from a tool result before it goes anywhere, and
an error about an item nobody can tell the visibility of never names it.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

import pytest
from langchain_core.documents import Document
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import InjectedToolCallId, tool
from langgraph.graph import START, StateGraph

from agent_guards import Evidence, resolve_evidence
from agent_guards.core import InvalidInputError
from agent_guards.evidence_resolve import EvidenceState, create_evidence_resolve
from agent_guards.evidence_resolve.boundary import identities_of, may_see, withhold
from agent_guards.evidence_resolve.filtered import PermissionFilteredTool, permission_filtered

ANALYST = frozenset({"analyst"})
PUBLIC = {"id": "pub", "claim_key": "k", "value": "50w", "text": "Over 50w needs review."}
SECRET = {
    "id": "sec-9",
    "claim_key": "k",
    "value": "30w",
    "text": "(legal only) 30w from July.",
    "allowed": ["legal"],
}
CONTENT = "pub: Over 50w needs review.\nsec-9: (legal only) 30w from July."


def _ids(artifact: Any) -> list[str]:
    items = artifact["evidence"] if isinstance(artifact, dict) else artifact
    return [i["id"] if isinstance(i, dict) else getattr(i, "id", None) for i in items]


# -- may_see: one access list per line -------------------------------------------------


@pytest.mark.parametrize(
    ("item", "expected"),
    [
        ({"id": "a"}, True),
        ({"id": "a", "allowed": None}, True),
        ({"id": "a", "allowed": "analyst"}, True),
        ({"id": "a", "allowed": ["legal", "analyst"]}, True),
        ({"id": "a", "allowed": ["legal"]}, False),
        ({"id": "a", "acl": ["legal"]}, False),
        ({"id": "a", "allowed_principals": ["legal"]}, False),
        ({"id": "a", "allowed": []}, False),
        ({"id": "a", "allowed": [["analyst"]]}, None),
        ({"id": "a", "allowed": [3]}, None),
        ({"id": "a", "allowed": [""]}, None),
        ({"id": "a", "allowed": {"analyst": True}}, None),
        ({"id": "a", "allowed": 7}, None),
        (Document("x", id="a", metadata={"acl": ["legal"]}), False),
        (Document("x", id="a", metadata={"acl": "analyst"}), True),
        (Evidence("a", "k", "v", allowed=["legal"]), False),
    ],
)
def test_may_see(item: Any, expected: bool | None) -> None:
    assert may_see(item, ANALYST) is expected


@pytest.mark.parametrize(
    ("principal", "expected"),
    [
        ("u1", {"u1"}),
        (["u1", "g"], {"u1", "g"}),
        (None, set()),
        (7, set()),
        ({"u1": 1}, set()),
        (["u1", 3, ""], {"u1"}),
        ("", set()),
    ],
)
def test_identities_of_config(principal: Any, expected: set[str]) -> None:
    assert identities_of({"configurable": {"principal": principal}}) == expected


# -- withhold: the tool result the principal gets -----------------------------------


def test_withhold_removes_the_item_and_every_line_naming_it() -> None:
    out = withhold(CONTENT, [PUBLIC, SECRET], ANALYST)
    assert (out.content, _ids(out.artifact), out.withheld) == (
        "pub: Over 50w needs review.",
        ["pub"],
        1,
    )


def test_withhold_keeps_everything_for_a_principal_who_may_see_it() -> None:
    out = withhold(CONTENT, [PUBLIC, SECRET], frozenset({"legal"}))
    assert (out.content, _ids(out.artifact), out.withheld) == (CONTENT, ["pub", "sec-9"], 0)


@pytest.mark.parametrize(
    "artifact",
    [
        [PUBLIC, SECRET],
        {"evidence": [PUBLIC, SECRET], "total": 2},
        [Evidence.from_dict(PUBLIC), Evidence.from_dict(SECRET)],
        [
            Document(PUBLIC["text"], id="pub", metadata={"claim_key": "k", "value": "50w"}),
            Document(SECRET["text"], id="sec-9", metadata={"value": "30w", "acl": ["legal"]}),
        ],
    ],
    ids=["dicts", "mapping", "evidence", "documents"],
)
def test_withhold_reads_every_artifact_shape(artifact: Any) -> None:
    out = withhold(CONTENT, artifact, ANALYST)
    assert _ids(out.artifact) == ["pub"]
    assert "sec-9" not in out.content and "30w" not in out.content
    assert type(out.artifact) is type(artifact)


def test_a_malformed_acl_is_withheld_fail_closed() -> None:
    broken = {**SECRET, "allowed": [["analyst"]]}
    out = withhold(CONTENT, [PUBLIC, broken], ANALYST)
    assert (_ids(out.artifact), out.withheld) == (["pub"], 1)


def test_content_blocks_and_a_secret_left_after_the_lines_go() -> None:
    blocks = [{"type": "text", "text": CONTENT}, {"type": "image", "url": "x"}]
    out = withhold(blocks, [PUBLIC, SECRET], ANALYST)
    assert out.content[0]["text"] == "pub: Over 50w needs review."
    assert out.content[1]["text"].startswith("[withheld")
    # the value inside one line shared with a visible item: the whole line goes
    out = withhold("pub 50w, sec-9 30w", [PUBLIC, SECRET], ANALYST)
    assert out.content == ""


def test_nothing_to_filter_returns_the_result_unchanged() -> None:
    for artifact in (None, "text", [PUBLIC], {"rows": [SECRET]}):
        out = withhold(CONTENT, artifact, ANALYST)
        assert (out.content, out.artifact, out.withheld) == (CONTENT, artifact, 0)


# -- the wrapped tool: filtered inside its own run ------------------------------------


@tool(response_format="content_and_artifact")
def search(query: str) -> tuple[str, list[dict[str, Any]]]:
    """Search the policies."""
    return CONTENT, [PUBLIC, SECRET]


@tool
def plain(query: str) -> str:
    """A tool without an artifact."""
    return "plain"


def _call(name: str = "search") -> dict[str, Any]:
    return {"type": "tool_call", "id": "c1", "name": name, "args": {"query": "q"}}


def test_wrapped_tool_result_and_callbacks_see_only_the_visible_part() -> None:
    from langchain_core.callbacks import BaseCallbackHandler

    seen: list[str] = []

    class Spy(BaseCallbackHandler):
        def on_tool_end(self, output: Any, **kwargs: Any) -> None:
            seen.append(repr(output))

    wrapped, untouched = permission_filtered([search, plain])
    assert isinstance(wrapped, PermissionFilteredTool) and untouched is plain
    assert (wrapped.name, wrapped.args) == (search.name, search.args)
    config: Any = {"configurable": {"principal": "analyst"}, "callbacks": [Spy()]}
    msg = wrapped.invoke(_call(), config)
    assert (msg.content, _ids(msg.artifact), msg.tool_call_id) == (
        "pub: Over 50w needs review.",
        ["pub"],
        "c1",
    )
    assert len(seen) == 1 and "sec-9" not in seen[0] and "30w" not in seen[0]
    legal = wrapped.invoke(_call(), {"configurable": {"principal": ["legal"]}})
    assert _ids(legal.artifact) == ["pub", "sec-9"]


async def test_wrapped_tool_async_agrees() -> None:
    [wrapped] = permission_filtered([search])
    config: Any = {"configurable": {"principal": "analyst"}}
    sync, async_ = wrapped.invoke(_call(), config), await wrapped.ainvoke(_call(), config)
    assert (sync.content, sync.artifact) == (async_.content, async_.artifact)


def test_the_wrapped_tool_runs_once_with_the_call_id_and_its_own_config() -> None:
    runs: list[tuple[str, Any]] = []

    @tool(response_format="content_and_artifact")
    def cited(
        query: str, call_id: Annotated[str, InjectedToolCallId], config: RunnableConfig
    ) -> tuple[str, list[dict[str, Any]]]:
        """Search, naming the call."""
        runs.append((call_id, config.get("callbacks")))
        return CONTENT, [PUBLIC, SECRET]

    [wrapped] = permission_filtered([cited])
    msg = wrapped.invoke(_call("cited"), {"configurable": {"principal": "analyst"}})
    assert _ids(msg.artifact) == ["pub"] and "30w" not in msg.content
    assert runs == [("c1", [])]  # once, with the model's call id, and no callbacks


def test_a_tool_error_is_worded_once_by_the_tool_own_handler() -> None:
    from langchain_core.tools import ToolException

    @tool(response_format="content_and_artifact")
    def broken(query: str) -> tuple[str, list[dict[str, Any]]]:
        """Fail."""
        raise ToolException("index offline")

    broken.handle_tool_error = lambda err: f"search failed: {err}"
    [wrapped] = permission_filtered([broken])
    msg = wrapped.invoke(_call("broken"), {"configurable": {"principal": "analyst"}})
    assert (msg.status, msg.content) == ("error", "search failed: index offline")


def test_nothing_the_tool_calls_inside_reaches_the_callbacks() -> None:
    from langchain_core.callbacks import BaseCallbackHandler
    from langchain_core.runnables import RunnableLambda

    seen: list[str] = []

    class Spy(BaseCallbackHandler):
        def on_chain_end(self, outputs: Any, **kwargs: Any) -> None:
            seen.append(repr(outputs))

        def on_tool_end(self, output: Any, **kwargs: Any) -> None:
            seen.append(repr(output))

    fetch = RunnableLambda(lambda q: CONTENT)

    @tool(response_format="content_and_artifact")
    def nested(query: str) -> tuple[str, list[dict[str, Any]]]:
        """Search through a chain."""
        return fetch.invoke(query), [PUBLIC, SECRET]

    [wrapped] = permission_filtered([nested])
    config: Any = {"configurable": {"principal": "analyst"}, "callbacks": [Spy()]}
    wrapped.invoke(_call("nested"), config)
    assert len(seen) == 1 and "sec-9" not in seen[0] and "30w" not in seen[0]


async def test_the_async_path_filters_what_a_coroutine_tool_returns() -> None:
    @tool(response_format="content_and_artifact")
    async def asearch(query: str) -> tuple[str, list[dict[str, Any]]]:
        """Search, async."""
        return CONTENT, [PUBLIC, SECRET]

    [wrapped] = permission_filtered([asearch])
    msg = await wrapped.ainvoke(_call("asearch"), {"configurable": {"principal": "analyst"}})
    assert (msg.content, _ids(msg.artifact)) == ("pub: Over 50w needs review.", ["pub"])


def test_a_tool_class_without_args_schema_keeps_the_arguments_the_model_sees() -> None:
    from langchain_core.tools import BaseTool
    from langchain_core.utils.function_calling import convert_to_openai_tool

    class Lookup(BaseTool):
        name: str = "lookup"
        description: str = "Look up a policy."
        response_format: Any = "content_and_artifact"

        def _run(self, query: str, limit: int = 3) -> tuple[str, list[dict[str, Any]]]:
            return f"{query}: {CONTENT}", [PUBLIC, SECRET][:limit]

    inner = Lookup()
    [wrapped] = permission_filtered([inner])
    schema = convert_to_openai_tool(wrapped)["function"]["parameters"]
    assert schema == convert_to_openai_tool(inner)["function"]["parameters"]
    assert sorted(schema["properties"]) == ["limit", "query"]
    call = {"type": "tool_call", "id": "c1", "name": "lookup", "args": {"query": "q", "limit": 2}}
    msg = wrapped.invoke(call, {"configurable": {"principal": "analyst"}})
    assert (msg.content, _ids(msg.artifact)) == ("q: pub: Over 50w needs review.", ["pub"])


def test_the_wrapper_keeps_the_tool_fields_and_its_own_callbacks_see_the_filtered_end() -> None:
    from langchain_core.callbacks import BaseCallbackHandler

    seen: list[str] = []

    class Spy(BaseCallbackHandler):
        def on_tool_end(self, output: Any, **kwargs: Any) -> None:
            seen.append(repr(output))

    @tool(response_format="content_and_artifact", extras={"cache_control": {"type": "ephemeral"}})
    def tagged(query: str) -> tuple[str, list[dict[str, Any]]]:
        """Search, with provider extras."""
        return CONTENT, [PUBLIC, SECRET]

    tagged.callbacks, tagged.tags = [Spy()], ["policies"]
    [wrapped] = permission_filtered([tagged])
    assert (wrapped.extras, wrapped.tags) == (tagged.extras, ["policies"])
    wrapped.invoke(_call("tagged"), {"configurable": {"principal": "analyst"}})
    assert len(seen) == 1 and "sec-9" not in seen[0] and "30w" not in seen[0]


def test_wrapping_twice_is_wrapping_once() -> None:
    [once] = permission_filtered([search])
    assert permission_filtered([once])[0] is once


# -- B: a malformed ACL never names the item's id, only its position --------------------


@pytest.mark.parametrize(
    ("make", "position"),
    [
        (lambda: Evidence("sec-9", "k", "30w", allowed=[["legal"]]), None),
        (lambda: Evidence("sec-9", "k", "30w", allowed=[3]), None),
        (lambda: resolve_evidence([{**SECRET, "allowed": [["legal"]]}], principal="legal"), "#0"),
        (
            lambda: resolve_evidence([{**SECRET, "allowed": {"legal": 1}}], principal="analyst"),
            "#0",
        ),
        (
            lambda: resolve_evidence(
                [PUBLIC, Document("x", id="sec-9", metadata={"claim_key": "k", "acl": [1]})]
            ),
            "#1",
        ),
    ],
)
def test_a_malformed_acl_error_names_the_field_and_position_not_the_id(
    make: Any, position: str | None
) -> None:
    """A list of items names the item by its position (the id stays unsaid); a lone
    ``Evidence`` has no position to give."""
    with pytest.raises(InvalidInputError) as err:
        make()
    assert (err.value.item, err.value.field) == (position, "allowed")
    assert "sec-9" not in str(err.value) and "30w" not in str(err.value)


def test_an_acl_key_on_a_dict_is_an_access_list() -> None:
    items = [PUBLIC, {k: v for k, v in SECRET.items() if k != "allowed"} | {"acl": ["legal"]}]
    hidden = resolve_evidence(items, principal="analyst")
    assert "sec-9" not in json.dumps(hidden.to_dict())
    assert hidden.selected_ids == ("pub",)
    seen = resolve_evidence(items, principal="legal")
    assert "sec-9" in (*seen.selected_ids, *seen.conflicting_ids, *seen.dropped_ids)


def test_node_records_a_malformed_acl_by_position_without_the_id() -> None:
    g = StateGraph(EvidenceState)
    g.add_node("evidence_resolve", create_evidence_resolve())
    g.add_edge(START, "evidence_resolve")
    bad = {**SECRET, "allowed": [["legal"]]}
    state: Any = {"evidence": [PUBLIC, bad]}
    out = g.compile().invoke(state, {"configurable": {"principal": "analyst"}})
    [decision] = out["guard_log"]
    assert decision.reason == "invalid_input"
    assert decision.data["field"] == "allowed" and decision.data["item"] == "#1"
    text = repr(decision) + json.dumps(decision.to_dict(), default=str)
    assert "sec-9" not in text and "30w" not in text and "legal only" not in text


@pytest.mark.parametrize(
    ("value", "line"),
    [
        (1250000, "executive pay: 1,250,000 (HR only)"),
        ("1,250,000", "executive pay: 1250000"),
        (1250000, "executive pay: 1 250 000"),
        ("30w", "draft: 30W"),
        (0.5, "rate 0.50"),
    ],
)
def test_a_withheld_value_is_found_however_it_is_spelt(value: Any, line: str) -> None:
    artifact = [
        {"id": "pub", "claim_key": "k", "value": "public"},
        {"id": "x9", "claim_key": "k", "value": value, "allowed": ["hr"]},
    ]
    out = withhold(f"pub: public\n{line}", artifact, frozenset({"alice"}))
    assert out.content == "pub: public"


def test_a_withheld_id_is_found_in_any_case() -> None:
    artifact = [{"id": "d27", "claim_key": "k", "value": "x", "allowed": ["legal"]}]
    assert withhold("p26: ok\nD27 (draft)", artifact, frozenset()).content == "p26: ok"
