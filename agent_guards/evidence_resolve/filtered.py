"""A tool whose results are filtered for the run's principal inside the tool's own run.

Wrapping (not a ``ToolNode`` hook) is what keeps the withheld items out of the trace:
LangChain reports a tool's output to its callbacks (LangSmith among them) when the tool
run ends, before any node or ``wrap_tool_call`` sees it. The wrapped tool runs with
callbacks and tracing off; the wrapper's own run, which every callback sees, only ever
carries the filtered result.
"""

# No ``from __future__ import annotations`` here: LangChain reads the type hints of a
# tool's ``_run`` on every call (to find its config parameter), and evaluated annotations
# are several times cheaper to read than strings it has to compile first.

import asyncio
import functools
import inspect
import json
import typing
from collections.abc import Sequence
from typing import Any, Literal, cast

from langchain_core.callbacks import AsyncCallbackManagerForToolRun, CallbackManagerForToolRun
from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.config import set_config_context
from langchain_core.tools import BaseTool
from langsmith.run_helpers import tracing_context

from agent_guards.evidence_resolve.boundary import identities_of, withhold
from agent_guards.graph import unobserved

__all__ = ["PermissionFilteredTool", "permission_filtered"]


class PermissionFilteredTool(BaseTool):
    """``inner`` with every result filtered by :func:`~.boundary.withhold` for the run's
    principal (``configurable["principal"]``). Build it with :func:`permission_filtered`."""

    inner: BaseTool
    response_format: Literal["content", "content_and_artifact"] = "content_and_artifact"

    def _filtered(self, out: Any, config: RunnableConfig) -> Any:
        if not isinstance(out, tuple) or len(out) != 2:  # LangChain says what it expected
            return out
        content, artifact = out
        if not isinstance(content, str | list):  # as the tool message would carry it
            content = _stringify(content)
        kept = withhold(content, artifact, identities_of(config))
        return kept.content, kept.artifact

    def _run(
        self,
        *args: Any,
        config: RunnableConfig,
        run_manager: CallbackManagerForToolRun | None = None,
        **kwargs: Any,
    ) -> Any:
        quiet = _quiet(config)
        extra = _passed(type(self.inner)._run, quiet, CallbackManagerForToolRun)
        if unobserved(config):  # no handler and no trace to keep the result from
            return self._filtered(self.inner._run(*args, **kwargs, **extra), config)
        with tracing_context(enabled=False), set_config_context(quiet) as context:
            out = context.run(self.inner._run, *args, **kwargs, **extra)
        return self._filtered(out, config)

    async def _arun(
        self,
        *args: Any,
        config: RunnableConfig,
        run_manager: AsyncCallbackManagerForToolRun | None = None,
        **kwargs: Any,
    ) -> Any:
        inner = type(self.inner)
        func = inner._run if inner._arun is BaseTool._arun else inner._arun  # as LangChain picks
        quiet = _quiet(config)
        with tracing_context(enabled=False), set_config_context(quiet) as context:
            extra = _passed(func, quiet, AsyncCallbackManagerForToolRun)
            coro = self.inner._arun(*args, **kwargs, **extra)
            out = await asyncio.create_task(coro, context=context)
        return self._filtered(out, config)


def _quiet(config: RunnableConfig) -> RunnableConfig:
    """The run's config without its callbacks: what the inner tool and anything it calls
    run with, so no trace or handler sees a result before it is filtered."""
    return cast(RunnableConfig, {**config, "callbacks": []})


def _passed(func: Any, quiet: RunnableConfig, manager: Any) -> dict[str, Any]:
    """The keywords ``BaseTool.run`` adds to a tool's ``_run``: a run manager (here one
    that reports to no one) and the config (``quiet``), when it takes them."""
    takes_manager, config_param = _hooks(func)
    extra: dict[str, Any] = {"run_manager": manager.get_noop_manager()} if takes_manager else {}
    if config_param is not None:
        extra[config_param] = quiet
    return extra


@functools.cache
def _hooks(func: Any) -> tuple[bool, str | None]:
    """Whether a tool class's ``_run``/``_arun`` takes ``run_manager``, and its
    ``RunnableConfig`` parameter: read once per class (LangChain reads them per call)."""
    try:
        hints = typing.get_type_hints(func)
    except Exception:  # unresolvable annotations: LangChain then passes no config either
        hints = {}
    config = next((name for name, hint in hints.items() if hint is RunnableConfig), None)
    return "run_manager" in inspect.signature(func).parameters, config


def _stringify(content: Any) -> str:
    """Non-text content as a tool message carries it: JSON when it can be, else ``str``."""
    try:
        return json.dumps(content, ensure_ascii=False)
    except Exception:
        return str(content)


def _fields_of(tool: BaseTool) -> dict[str, Any]:
    """Every ``BaseTool`` field of ``tool`` (name, schema, metadata, provider extras, its own
    callbacks, error handlers, ...), so the wrapper is the same tool to a model and a node."""
    fields = {name: getattr(tool, name) for name in BaseTool.model_fields}
    if tool.args_schema is None:  # a BaseTool subclass: the schema LangChain reads off _run
        fields["args_schema"] = tool.get_input_schema()
    return fields


def permission_filtered(tools: Sequence[Any]) -> list[Any]:
    """``tools`` with each ``content_and_artifact`` tool wrapped in a
    :class:`PermissionFilteredTool` (other tools return no evidence and stay as they are).

    The wrapper keeps every field of the tool (name, description, argument schema,
    metadata with its effect annotations, tags, provider extras, its own callbacks and error
    handlers), so models, ``ToolNode`` and the guards see the same tool.

    Example:
        >>> from langchain_core.tools import tool
        >>> @tool(response_format="content_and_artifact")
        ... def search(query: str) -> tuple[str, list[dict]]:
        ...     '''Search.'''
        ...     docs = [{"id": "pub", "claim_key": "k", "value": "open"},
        ...             {"id": "sec", "claim_key": "k", "value": "hidden", "allowed": ["legal"]}]
        ...     return "pub: open\\nsec: hidden", docs
        >>> [wrapped] = permission_filtered([search])
        >>> call = {"type": "tool_call", "id": "c1", "name": "search", "args": {"query": "k"}}
        >>> msg = wrapped.invoke(call, {"configurable": {"principal": "analyst"}})
        >>> msg.content, [d["id"] for d in msg.artifact]
        ('pub: open', ['pub'])
    """
    out: list[Any] = []
    for tool in tools:
        if (
            isinstance(tool, BaseTool)
            and not isinstance(tool, PermissionFilteredTool)
            and tool.response_format == "content_and_artifact"
        ):
            out.append(PermissionFilteredTool(inner=tool, **_fields_of(tool)))
        else:
            out.append(tool)
    return out
