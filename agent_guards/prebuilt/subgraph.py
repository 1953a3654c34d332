"""Guarded agents inside a bigger graph: workers of a supervisor, plan-and-execute executors.

A compiled graph added as a node (``builder.add_node("worker", agent)``) hands the parent
its *whole* final state: with ``guard_log`` and ``usage`` in both states, every earlier
decision is appended again and every count is added twice. :func:`subgraph_node` runs the
agent on the parent's messages and returns only what the run added: its new messages
(all, or the last), its decisions and its usage. :func:`add_subgraph` adds that node and
checks the parent has the channels; :func:`guard_updates` is the same delta for a node
of your own that calls the agent (the plan-and-execute tutorial's ``execute_step``).

Interrupts and ``Command(graph=Command.PARENT)`` handoffs raised inside the agent pass
through unchanged.

Example:
    >>> from langgraph.graph import START, MessagesState, StateGraph
    >>> from agent_guards import GuardState
    >>> from agent_guards.prebuilt import guarded_react_agent
    >>> from agent_guards.testing import ScriptedChatModel, tool_call_message
    >>> from langchain_core.tools import tool
    >>> @tool
    ... def pay(amount: int) -> str:
    ...     '''Pay.'''
    ...     raise PermissionError("403 Forbidden")
    >>> call = lambda _: tool_call_message("pay", {"amount": 5})  # a fresh call id each time
    >>> model = ScriptedChatModel(script=[call],
    ...                           repeat_last=True)
    >>> worker = guarded_react_agent(model, [pay])
    >>> class State(MessagesState, GuardState):
    ...     pass
    >>> builder = StateGraph(State)
    >>> add_subgraph(builder, "worker", worker)
    >>> _ = builder.add_edge(START, "worker")
    >>> out = builder.compile().invoke({"messages": [("user", "pay 5")]})
    >>> [d.verdict.value for d in out["guard_log"]], out["usage"]
    (['refuse'], {'tool_calls': 1})
    >>> out["messages"][-1].content
    "I can't do that: pay refused the request (403 Forbidden). I won't retry it ..."
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, get_type_hints

from langchain_core.runnables import RunnableConfig, RunnableLambda
from langgraph.graph import StateGraph

from agent_guards import graph as _node
from agent_guards.core.errors import check_choice

__all__ = ["add_subgraph", "guard_updates", "subgraph_node"]

OutputMode = Literal["last_message", "full_history"]


def guard_updates(result: Mapping[str, Any]) -> dict[str, Any]:
    """The ``guard_log`` and ``usage`` of a guarded agent's run, to return to the parent.

    Call the agent with fresh input (not the parent's ``guard_log`` / ``usage``), so its
    log and counts are what this run added.

    Example:
        >>> guard_updates({"messages": [], "guard_log": ["d"], "usage": {"tool_calls": 2}})
        {'guard_log': ['d'], 'usage': {'tool_calls': 2}}
        >>> guard_updates({"messages": []})
        {}
    """
    out: dict[str, Any] = {}
    if result.get("guard_log"):
        out["guard_log"] = list(result["guard_log"])
    if result.get("usage"):
        out["usage"] = dict(result["usage"])
    return out


def _delta(before: list[Any], result: Mapping[str, Any], mode: str) -> dict[str, Any]:
    known = {m.id for m in before if getattr(m, "id", None)}
    new = [m for m in result.get("messages") or () if getattr(m, "id", None) not in known]
    if mode == "last_message":
        new = new[-1:]
    return {"messages": new, **guard_updates(result)}


def subgraph_node(
    graph: Any, *, output_mode: OutputMode = "last_message", name: str = "subgraph"
) -> RunnableLambda[Any, dict[str, Any]]:
    """A node running ``graph`` on the parent's messages and returning only what it added.

    Args:
        graph: A compiled guarded agent (``guarded_react_agent``, ``create_agent`` with
            the guard middleware) or any graph with ``messages``.
        output_mode: ``"last_message"`` (the parent sees the agent's answer, or the
            guard's stop message) or ``"full_history"`` (every new message).
        name: The node's run name.

    Example:
        >>> subgraph_node(object())
        Traceback (most recent call last):
        ...
        TypeError: subgraph_node needs a compiled graph, got object
    """
    mode = check_choice("output_mode", output_mode, ("last_message", "full_history"))
    if not hasattr(graph, "invoke") or not hasattr(graph, "ainvoke"):
        raise TypeError(f"subgraph_node needs a compiled graph, got {type(graph).__name__}")

    def run(state: Any, config: RunnableConfig) -> dict[str, Any]:
        messages = _node.state_messages(state, "messages")
        return _delta(messages, graph.invoke({"messages": messages}, config), mode)

    async def arun(state: Any, config: RunnableConfig) -> dict[str, Any]:
        messages = _node.state_messages(state, "messages")
        return _delta(messages, await graph.ainvoke({"messages": messages}, config), mode)

    return RunnableLambda(run, afunc=arun, name=name)


def add_subgraph(
    builder: StateGraph[Any, Any, Any, Any],
    name: str,
    graph: Any,
    *,
    output_mode: OutputMode = "last_message",
    destinations: tuple[str, ...] | None = None,
) -> None:
    """Add ``graph`` as the node ``name`` through :func:`subgraph_node`.

    The parent state must have ``messages``, ``guard_log`` and ``usage``, the last two
    with their reducers (a ValueError names :class:`~agent_guards.GuardState` otherwise).
    ``destinations`` lists the nodes a handoff from inside ``graph`` may go to (for drawing
    the graph; routing needs nothing).

    Example:
        >>> from langgraph.graph import MessagesState
        >>> from agent_guards.prebuilt import guarded_react_agent
        >>> from agent_guards.testing import ScriptedChatModel
        >>> worker = guarded_react_agent(ScriptedChatModel(script=[]), [])
        >>> add_subgraph(StateGraph(MessagesState), "worker", worker)
        Traceback (most recent call last):
        ...
        ValueError: add_subgraph('worker'): the parent state MessagesState has no guard_log, ...
    """
    if not isinstance(builder, StateGraph):
        raise TypeError(f"add_subgraph needs a StateGraph builder, got {type(builder).__name__}")
    if not isinstance(name, str) or not name:
        raise ValueError(f"add_subgraph name must be a node name, got {name!r}")
    hints = get_type_hints(builder.state_schema, include_extras=True)
    missing = [key for key in ("messages", "guard_log", "usage") if key not in hints]
    if missing:
        raise ValueError(
            f"add_subgraph({name!r}): the parent state {builder.state_schema.__name__} has no "
            f"{', '.join(missing)} channel(s), so the worker's decisions could not reach it: "
            "add agent_guards.GuardState to it (class State(MessagesState, GuardState))"
        )
    _node.require_reducers(
        builder.channels,
        f"add_subgraph({name!r})",
        ("guard_log", "usage"),
        "take them from agent_guards.GuardState (class State(MessagesState, GuardState)) "
        "and drop your own",
    )
    node = subgraph_node(graph, output_mode=output_mode, name=name)
    builder.add_node(name, node, destinations=destinations or ())
