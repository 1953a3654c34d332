"""The plain-JSON forms eval cases use for messages and state values. Private.

Messages are JSON objects (``id`` and ``name`` are optional everywhere)::

    {"type": "human", "content": "..."}                  ("user" works too)
    {"type": "system", "content": "..."}
    {"type": "ai", "content": "",
     "tool_calls": [{"name": "search", "args": {"q": "x"}, "id": "c1"}]}
    {"type": "tool", "content": "...", "tool_call_id": "c1", "status": "error",
     "failure": {"kind": "transient"}, "evidence_ids": ["d1"], "meta": {"attempt": 2}}
    {"call": "search", "args": {"q": "x"}, "result": "...", "status": "error"}

``"ai"`` is also spelled ``"assistant"``; a tool call without an ``id`` gets ``c<n>``. A tool
message without ``tool_call_id`` answers the oldest unanswered call of the latest ai message.
``failure`` becomes the structured failure artifact (``failure_artifact``), ``evidence_ids``
the ``{"evidence_ids": [...]}`` artifact loop_check reads, ``meta`` the message's
``response_metadata["agent_guards"]`` (e.g. the retry ``attempt``). The last form is a
shorthand: one ai message with one call, followed by its tool message.

Example:
    >>> msgs = messages_from_json([{"type": "human", "content": "rates?"},
    ...                            {"call": "search", "args": {"q": "rates"}, "result": "4%"}])
    >>> [type(m).__name__ for m in msgs], msgs[2].tool_call_id
    (['HumanMessage', 'AIMessage', 'ToolMessage'], 'c1')
    >>> messages_to_json(msgs)[1]["tool_calls"]
    [{'name': 'search', 'args': {'q': 'rates'}, 'id': 'c1'}]
"""

from __future__ import annotations

import dataclasses
import enum
import json
from collections.abc import Iterable, Mapping
from datetime import date, datetime
from typing import Any

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

from agent_guards.retry_router.model import failure_artifact

__all__ = ["message_types", "messages_from_json", "messages_to_json", "to_jsonable"]

_TYPES = {"human": "human", "user": "human", "system": "system", "ai": "ai"}
_TYPES |= {"assistant": "ai", "tool": "tool"}
_COMMON = {"type", "content", "id", "name"}
_ALLOWED = {
    "human": _COMMON,
    "system": _COMMON,
    "ai": _COMMON | {"tool_calls"},
    "tool": _COMMON | {"tool_call_id", "status", "failure", "evidence_ids", "artifact", "meta"},
    "call": {"call", "args", "id", "result", "status", "failure", "evidence_ids", "meta"},
}


def message_types() -> tuple[str, ...]:
    """The accepted ``type`` spellings."""
    return tuple(_TYPES)


def _where(index: int) -> str:
    return f"messages[{index}]"


def _check_keys(item: Mapping[str, Any], kind: str, index: int) -> None:
    unknown = sorted(set(item) - _ALLOWED[kind])
    if unknown:
        raise ValueError(
            f"{_where(index)}: unknown key(s) {unknown} for a {kind} message; "
            f"allowed: {sorted(_ALLOWED[kind])}"
        )


def _artifact(item: Mapping[str, Any], index: int) -> Any:
    artifact: Any = item.get("artifact")
    if item.get("failure") is not None:
        body = item["failure"]
        if not isinstance(body, Mapping) or "kind" not in body:
            raise ValueError(f"{_where(index)}.failure must be an object with a 'kind'")
        artifact = failure_artifact(body["kind"], **{k: v for k, v in body.items() if k != "kind"})
    if item.get("evidence_ids") is not None:
        ids = item["evidence_ids"]
        if isinstance(ids, str) or not isinstance(ids, list):
            raise ValueError(f"{_where(index)}.evidence_ids must be a list of ids")
        artifact = {**(artifact or {}), "evidence_ids": [str(i) for i in ids]}
    return artifact


class _Builder:
    """Turns the JSON items into messages, numbering calls and pairing answers."""

    def __init__(self) -> None:
        self.out: list[BaseMessage] = []
        self.calls = 0
        self.open: list[str] = []  # unanswered call ids of the latest ai message

    def call_id(self, given: Any) -> str:
        self.calls += 1
        return str(given) if given else f"c{self.calls}"

    def ai(self, item: Mapping[str, Any], index: int) -> None:
        calls = []
        for j, call in enumerate(item.get("tool_calls") or ()):
            if not isinstance(call, Mapping) or not isinstance(call.get("name"), str):
                raise ValueError(f"{_where(index)}.tool_calls[{j}] needs a string 'name'")
            args = call.get("args", {})
            calls.append({"name": call["name"], "args": args, "id": self.call_id(call.get("id"))})
        self.open = [c["id"] for c in calls]
        self.out.append(
            AIMessage(
                content=item.get("content", ""),
                tool_calls=calls,
                id=item.get("id"),
                name=item.get("name"),
            )
        )

    def tool(self, item: Mapping[str, Any], index: int) -> None:
        call_id = item.get("tool_call_id")
        if call_id is None:
            if not self.open:
                raise ValueError(f"{_where(index)}: a tool message with no call to answer")
            call_id = self.open[0]
        if call_id in self.open:
            self.open.remove(call_id)
        status = item.get("status", "success")
        if status not in ("success", "error"):
            raise ValueError(f"{_where(index)}.status must be 'success' or 'error'")
        meta = item.get("meta")
        self.out.append(
            ToolMessage(
                content=item.get("content", ""),
                tool_call_id=str(call_id),
                status=status,
                artifact=_artifact(item, index),
                name=item.get("name"),
                id=item.get("id"),
                response_metadata={"agent_guards": dict(meta)} if meta else {},
            )
        )

    def add(self, item: Any, index: int) -> None:
        if not isinstance(item, Mapping):
            raise ValueError(f"{_where(index)} must be an object, got {type(item).__name__}")
        if "call" in item:
            _check_keys(item, "call", index)
            self.ai(
                {
                    "tool_calls": [
                        {"name": item["call"], "args": item.get("args", {}), "id": item.get("id")}
                    ]
                },
                index,
            )
            answer = {
                k: item[k] for k in ("status", "failure", "evidence_ids", "meta") if k in item
            }
            self.tool({"content": item.get("result", ""), **answer, "name": item["call"]}, index)
            return
        kind = _TYPES.get(str(item.get("type", "")).lower())
        if kind is None:
            raise ValueError(
                f"{_where(index)}.type must be one of {sorted(_TYPES)} (or use 'call'), "
                f"got {item.get('type')!r}"
            )
        _check_keys(item, kind, index)
        if kind == "ai":
            self.ai(item, index)
        elif kind == "tool":
            self.tool(item, index)
        else:
            cls = HumanMessage if kind == "human" else SystemMessage
            self.out.append(
                cls(content=item.get("content", ""), id=item.get("id"), name=item.get("name"))
            )


def messages_from_json(items: Iterable[Any]) -> list[BaseMessage]:
    """LangChain messages from the JSON form above (messages pass through unchanged)."""
    if isinstance(items, (str, bytes, Mapping)):
        raise ValueError("messages must be a list of message objects")
    builder = _Builder()
    for index, item in enumerate(items):
        if isinstance(item, BaseMessage):
            builder.out.append(item)
            builder.open = [c["id"] or "" for c in getattr(item, "tool_calls", None) or ()]
        else:
            builder.add(item, index)
    return builder.out


def _message_json(m: BaseMessage) -> dict[str, Any]:
    out: dict[str, Any]
    if isinstance(m, AIMessage):
        out = {"type": "ai", "content": to_jsonable(m.content)}
        if m.tool_calls:
            out["tool_calls"] = [
                {"name": c["name"], "args": to_jsonable(c["args"]), "id": c["id"]}
                for c in m.tool_calls
            ]
    elif isinstance(m, ToolMessage):
        out = {"type": "tool", "content": to_jsonable(m.content), "tool_call_id": m.tool_call_id}
        if m.status != "success":
            out["status"] = m.status
        if m.artifact is not None:
            out["artifact"] = to_jsonable(m.artifact)
        meta = (m.response_metadata or {}).get("agent_guards")
        if meta:
            out["meta"] = to_jsonable(meta)
    else:
        kind = {"human": "human", "system": "system"}.get(m.type, "human")
        out = {"type": kind, "content": to_jsonable(m.content)}
    if m.name:
        out["name"] = m.name
    if m.id:
        out["id"] = m.id
    return out


def messages_to_json(messages: Iterable[Any]) -> list[dict[str, Any]]:
    """The JSON form of LangChain messages (or of their serialized dicts)."""
    out = []
    for m in messages:
        if isinstance(m, BaseMessage):
            out.append(_message_json(m))
        elif isinstance(m, Mapping):
            out.append(_message_json(messages_from_json([dict(m)])[0]))
        else:
            raise ValueError(f"not a message: {type(m).__name__}")
    return out


def to_jsonable(value: Any) -> Any:
    """Plain JSON values from state values: dataclasses, enums, dates, tuples, messages."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, enum.Enum):
        return to_jsonable(value.value)
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    if isinstance(value, BaseMessage):
        return _message_json(value)
    to_dict = getattr(value, "to_dict", None)
    if callable(to_dict) and not isinstance(value, type):
        return to_jsonable(to_dict())
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return to_jsonable({f.name: getattr(value, f.name) for f in dataclasses.fields(value)})
    if hasattr(value, "page_content") and hasattr(value, "metadata"):
        return {
            "id": getattr(value, "id", None),
            "page_content": value.page_content,
            "metadata": to_jsonable(value.metadata),
        }
    if isinstance(value, Mapping):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        items = [to_jsonable(v) for v in value]
        return sorted(items, key=json.dumps) if isinstance(value, (set, frozenset)) else items
    return str(value)
