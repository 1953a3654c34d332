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

from collections.abc import Sequence
from typing import Any, Literal

from langchain_core.callbacks import AsyncCallbackManagerForToolRun, CallbackManagerForToolRun
from langchain_core.messages import ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, ToolException
from langsmith.run_helpers import tracing_context

from agent_guards.evidence_resolve.boundary import identities_of, withhold

__all__ = ["PermissionFilteredTool", "permission_filtered"]

_CALL_ID = "permission_filtered"


class PermissionFilteredTool(BaseTool):
    """``inner`` with every result filtered by :func:`~.boundary.withhold` for the run's
    principal (``configurable["principal"]``). Build it with :func:`permission_filtered`."""

    inner: BaseTool
    response_format: Literal["content", "content_and_artifact"] = "content_and_artifact"

    def _inner_call(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        tool_input = args[0] if args and not kwargs else kwargs
        return {"type": "tool_call", "id": _CALL_ID, "name": self.inner.name, "args": tool_input}

    def _filtered(self, out: Any, config: RunnableConfig) -> tuple[Any, Any]:
        if not isinstance(out, ToolMessage):  # a Command or a bare value: nothing to filter
            return out, None
        if out.status == "error":
            raise ToolException(out.content)
        kept = withhold(out.content, out.artifact, identities_of(config))
        return kept.content, kept.artifact

    def _run(
        self,
        *args: Any,
        config: RunnableConfig,
        run_manager: CallbackManagerForToolRun | None = None,
        **kwargs: Any,
    ) -> tuple[Any, Any]:
        with tracing_context(enabled=False):
            out = self.inner.invoke(self._inner_call(args, kwargs), {**config, "callbacks": []})
        return self._filtered(out, config)

    async def _arun(
        self,
        *args: Any,
        config: RunnableConfig,
        run_manager: AsyncCallbackManagerForToolRun | None = None,
        **kwargs: Any,
    ) -> tuple[Any, Any]:
        with tracing_context(enabled=False):
            out = await self.inner.ainvoke(
                self._inner_call(args, kwargs), {**config, "callbacks": []}
            )
        return self._filtered(out, config)


def permission_filtered(tools: Sequence[Any]) -> list[Any]:
    """``tools`` with each ``content_and_artifact`` tool wrapped in a
    :class:`PermissionFilteredTool` (other tools return no evidence and stay as they are).

    The wrapper keeps the tool's name, description, argument schema, metadata (its effect
    annotations) and tags, so models, ``ToolNode`` and the guards see the same tool.

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
            out.append(
                PermissionFilteredTool(
                    inner=tool,
                    name=tool.name,
                    description=tool.description,
                    args_schema=tool.args_schema,
                    metadata=tool.metadata,
                    tags=tool.tags,
                    return_direct=tool.return_direct,
                    handle_tool_error=tool.handle_tool_error,
                    handle_validation_error=tool.handle_validation_error,
                )
            )
        else:
            out.append(tool)
    return out
