"""Which channels a running graph has: read off LangGraph's task reader, or asked of it."""

from __future__ import annotations

from typing import Any, TypedDict

from langchain_core.runnables import RunnableConfig
from langgraph.graph import StateGraph

from agent_guards.graph import _channels_of, missing_channels


class State(TypedDict, total=False):
    a: int
    seen: dict[str, Any]


def test_a_node_reads_the_graphs_channel_names_off_its_reader() -> None:
    def node(state: State, config: RunnableConfig) -> dict[str, Any]:
        read = config["configurable"]["__pregel_read"]
        held = _channels_of(read)
        return {
            "seen": {
                "missing": missing_channels(config, ["a", "seen", "nope"]),
                "fast": held is not None and "a" in held[0],
            }
        }

    graph = StateGraph(State).add_node("n", node).set_entry_point("n").compile()
    seen = graph.invoke({"a": 1})["seen"]
    # the fast path held: if LangGraph changes its reader, the names are asked one by one
    assert seen == {"missing": ["nope"], "fast": True}


def test_any_other_reader_is_asked_name_by_name() -> None:
    asked: list[list[str]] = []

    def read(select: list[str], fresh: bool) -> dict[str, Any]:
        asked.append(select)
        if select != ["a"]:
            raise KeyError(select[0])
        return {"a": 1}

    config: RunnableConfig = {"configurable": {"__pregel_read": read}}
    assert _channels_of(read) is None
    assert missing_channels(config, ["a", "nope"]) == ["nope"]
    assert asked == [["a"], ["nope"]]
