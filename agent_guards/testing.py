"""Test helpers for your own graphs: a scripted chat model and fault-injecting tools.

These are public so you can test the graphs you guard the way we test ours: offline,
deterministic, no keys.

Example:
    >>> from langchain_core.messages import HumanMessage
    >>> model = ScriptedChatModel(script=[tool_call_message("search", {"q": "x"}), "done"])
    >>> model.invoke([HumanMessage("hi")]).tool_calls[0]["name"]
    'search'
    >>> model.invoke([HumanMessage("again")]).content
    'done'
    >>> len(model.calls)
    2
"""

from __future__ import annotations

import asyncio
import itertools
import json
import threading
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable, RunnableLambda
from langchain_core.tools import BaseTool, StructuredTool
from pydantic import Field, PrivateAttr, TypeAdapter

__all__ = [
    "FaultyTool",
    "ScriptExhausted",
    "ScriptedChatModel",
    "faulty_tool",
    "tool_call_message",
]

ScriptItem = AIMessage | str | Mapping[str, Any] | Callable[[list[BaseMessage]], Any]

_call_ids = itertools.count(1)


def tool_call_message(
    name: str, args: Mapping[str, Any] | None = None, *, id: str | None = None, content: str = ""
) -> AIMessage:
    """An AIMessage asking for one tool call (a fresh call id unless ``id`` is given)."""
    return AIMessage(
        content=content,
        tool_calls=[
            {"name": name, "args": dict(args or {}), "id": id or f"call_{next(_call_ids)}"}
        ],
    )


class ScriptExhausted(RuntimeError):
    """The scripted model was called more times than its script has replies."""


def _as_message(item: Any, messages: list[BaseMessage]) -> AIMessage:
    if callable(item) and not isinstance(item, BaseMessage):
        item = item(messages)
    if isinstance(item, AIMessage):
        return item
    if isinstance(item, str):
        return AIMessage(content=item)
    if isinstance(item, Mapping):
        return AIMessage(content=json.dumps(dict(item), ensure_ascii=False))
    raise TypeError(
        f"script items must be AIMessage, str, dict or a callable returning one, "
        f"got {type(item).__name__}"
    )


class ScriptedChatModel(BaseChatModel):
    """A chat model that replays a script and records what it was sent.

    Script items: an ``AIMessage``; a ``str`` (the reply's content); a ``dict`` (replied as
    JSON, handy with :meth:`with_structured_output`); or a callable ``messages -> item`` for
    replies that depend on the conversation. When the script runs out the model raises
    :class:`ScriptExhausted`, or repeats its last reply when ``repeat_last=True`` (a model
    stuck in a loop). ``bind_tools`` returns the same model, recording the tool names.
    """

    script: list[Any]
    """The replies, in order."""
    repeat_last: bool = False
    """Keep repeating the last reply instead of raising :class:`ScriptExhausted`."""

    _index: int = PrivateAttr(default=0)
    _calls: list[list[BaseMessage]] = PrivateAttr(default_factory=list)
    _bound_tools: list[str] = PrivateAttr(default_factory=list)
    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)

    @property
    def _llm_type(self) -> str:
        return "scripted"

    @property
    def calls(self) -> list[list[BaseMessage]]:
        """Every prompt the model received, in order."""
        return self._calls

    @property
    def bound_tools(self) -> list[str]:
        """Names of the tools passed to :meth:`bind_tools`."""
        return self._bound_tools

    def _next_item(self, messages: list[BaseMessage]) -> AIMessage:
        with self._lock:
            self._calls.append(list(messages))
            if self._index < len(self.script):
                item = self.script[self._index]
                self._index += 1
            elif self.repeat_last and self.script:
                item = self.script[-1]
            else:
                raise ScriptExhausted(
                    f"ScriptedChatModel got call #{len(self._calls)} but its script has "
                    f"{len(self.script)} replies (pass repeat_last=True to repeat the last one)"
                )
        message = _as_message(item, messages)
        # Each reply is a fresh message: the same scripted object must not share ids.
        return message.model_copy(deep=True)

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=self._next_item(messages))])

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptedChatModel:
        """Record the tool names and return this model (the script decides the calls)."""
        for tool in tools:
            name = getattr(tool, "name", None) or getattr(tool, "__name__", None)
            if isinstance(tool, Mapping):
                name = tool.get("name") or tool.get("function", {}).get("name")
            self._bound_tools.append(str(name))
        return self

    def with_structured_output(
        self, schema: Any, *, include_raw: bool = False, **kwargs: Any
    ) -> Runnable[Any, Any]:
        """Parse the scripted reply (JSON content, or the first tool call's args) into ``schema``.

        ``schema`` may be a pydantic model, a TypedDict or any type pydantic can validate;
        a JSON-schema ``dict`` returns the parsed ``dict`` unvalidated.
        """
        adapter: TypeAdapter[Any] | None = None if isinstance(schema, dict) else TypeAdapter(schema)

        def parse(message: AIMessage) -> Any:
            if message.tool_calls:
                raw: Any = message.tool_calls[0]["args"]
            else:
                raw = json.loads(str(message.content))
            parsed = adapter.validate_python(raw) if adapter is not None else raw
            return (
                {"raw": message, "parsed": parsed, "parsing_error": None} if include_raw else parsed
            )

        return self | RunnableLambda(parse, name="parse_structured")


class FaultyTool(StructuredTool):
    """A tool wrapped with scripted faults. ``calls`` counts every call (1-based)."""

    calls: int = 0
    fail_on: dict[int, Any] = Field(default_factory=dict)
    empty_on: frozenset[int] = frozenset()
    delay_on: dict[int, float] = Field(default_factory=dict)
    empty_value: Any = ""

    def _fault(self, call: int) -> tuple[bool, float]:
        error = self.fail_on.get(call)
        if error is not None:
            raise error() if isinstance(error, type) else error
        return call in self.empty_on, self.delay_on.get(call, 0.0)


def _forward(
    tool: BaseTool, empty_value: Any
) -> tuple[Callable[[dict[str, Any]], Any], Callable[[dict[str, Any]], Awaitable[Any]], Any]:
    """How a wrapper calls ``tool`` (sync, async) and what its empty answer is. A tool
    answering ``(content, artifact)`` is called with a tool call, so its artifact comes
    back too; its empty answer has no artifact."""
    if tool.response_format != "content_and_artifact":
        return tool.invoke, tool.ainvoke, empty_value

    def as_call(kwargs: dict[str, Any]) -> dict[str, Any]:
        return {"type": "tool_call", "name": tool.name, "args": kwargs, "id": "faulty"}

    def run(kwargs: dict[str, Any]) -> Any:
        message = tool.invoke(as_call(kwargs))
        return message.content, message.artifact

    async def arun(kwargs: dict[str, Any]) -> Any:
        message = await tool.ainvoke(as_call(kwargs))
        return message.content, message.artifact

    return run, arun, (empty_value, None)


def faulty_tool(
    tool: BaseTool,
    *,
    fail_on: Mapping[int, BaseException | type[BaseException]] | None = None,
    fail_always: BaseException | type[BaseException] | None = None,
    empty_on: Iterable[int] = (),
    delay_on: Mapping[int, float] | None = None,
    empty_value: Any = "",
    sleep: Callable[[float], None] = time.sleep,
) -> FaultyTool:
    """Wrap ``tool`` so chosen calls (1-based) raise, come back empty, or are slow.

    Args:
        tool: The tool to wrap; name, description, args schema, metadata (its effect
            annotations), tags, response format (its artifacts) and ``return_direct`` are kept.
        fail_on: Call number -> exception (instance or class) to raise on that call.
        fail_always: Raise this on every call (a dead dependency).
        empty_on: Call numbers that return ``empty_value`` instead of calling the tool.
        delay_on: Call number -> seconds to wait first (through ``sleep``).
        empty_value: What an empty call returns.
        sleep: Injected sleep, so tests never wait for real.

    >>> from langchain_core.tools import tool
    >>> @tool
    ... def lookup(q: str) -> str:
    ...     '''Look something up.'''
    ...     return f"result for {q}"
    >>> flaky = faulty_tool(lookup, fail_on={1: TimeoutError("slow upstream")})
    >>> flaky.invoke({"q": "a"})
    Traceback (most recent call last):
    ...
    TimeoutError: slow upstream
    >>> flaky.invoke({"q": "a"}), flaky.calls
    ('result for a', 2)
    """
    faults: dict[int, Any] = dict(fail_on or {})
    for name, value in (("fail_on", faults), ("delay_on", dict(delay_on or {}))):
        bad = [k for k in value if isinstance(k, bool) or not isinstance(k, int) or k < 1]
        if bad:
            raise ValueError(f"faulty_tool {name} keys are 1-based call numbers, got {bad!r}")
    wrapped: FaultyTool

    def before(call_kwargs: dict[str, Any]) -> tuple[int, bool, float]:
        wrapped.calls += 1
        call = wrapped.calls
        if fail_always is not None:
            raise fail_always() if isinstance(fail_always, type) else fail_always
        empty, delay = wrapped._fault(call)
        return call, empty, delay

    run, arun, empty = _forward(tool, empty_value)

    def func(**kwargs: Any) -> Any:
        _, is_empty, delay = before(kwargs)
        if delay:
            sleep(delay)
        return empty if is_empty else run(kwargs)

    async def afunc(**kwargs: Any) -> Any:
        _, is_empty, delay = before(kwargs)
        if delay:
            await asyncio.to_thread(sleep, delay)
        return empty if is_empty else await arun(kwargs)

    wrapped = FaultyTool(
        name=tool.name,
        description=tool.description,
        args_schema=tool.args_schema or {},
        func=func,
        coroutine=afunc,
        metadata=tool.metadata,  # effect annotations (MCP hints) stay with the tool
        tags=tool.tags,
        response_format=tool.response_format,
        return_direct=tool.return_direct,
        fail_on=faults,
        empty_on=frozenset(empty_on),
        delay_on=dict(delay_on or {}),
        empty_value=empty_value,
    )
    return wrapped
