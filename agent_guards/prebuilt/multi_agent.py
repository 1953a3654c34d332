"""langgraph-supervisor's ``create_supervisor`` and langgraph-swarm's ``create_swarm``, guarded.

Both packages add each agent to the parent graph so that it hands back its *whole* state:
``create_supervisor`` adds the supervisor agent as a subgraph node and calls each worker on
the parent's state, and its handoff tools send the supervisor's state to the parent with
``Command(graph=Command.PARENT, update={**state, ...})``; ``create_swarm`` adds every agent
as a subgraph node. With ``guard_log`` and ``usage`` in the parent state, each pass appends
every earlier decision again and adds every count again; without them, the decisions never
reach the parent. :func:`guarded_supervisor` and :func:`guarded_swarm` call the real
factories with every agent run through :func:`~agent_guards.prebuilt.subgraph_node` (the
agent starts from the parent's messages and returns only what it added), so a worker's
stop, a refusal and the supervisor's handoff bound reach the parent once.

The guards themselves are the ones :func:`~agent_guards.prebuilt.guarded_react_agent`
wires: build each worker with it, and the supervisor gets the same hooks (with the handoff
bound of :class:`~agent_guards.prebuilt.HandoffPolicy`) from :func:`guarded_supervisor`.

Example:
    >>> from agent_guards.prebuilt import guarded_react_agent
    >>> from agent_guards.testing import ScriptedChatModel
    >>> worker = guarded_react_agent(ScriptedChatModel(script=["3T"]), [], name="research")
    >>> guarded_supervisor([worker], model=ScriptedChatModel(script=[]), version="v1")
    Traceback (most recent call last):
    ...
    ValueError: guarded_supervisor sets version itself: ...
"""

from __future__ import annotations

import dataclasses
import importlib
import re
from collections.abc import Sequence
from typing import Any

from langgraph.graph import StateGraph
from langgraph.prebuilt import ToolNode

from agent_guards.core.state import GuardState
from agent_guards.loop_check.policy import LoopPolicy
from agent_guards.prebuilt.handoff import HandoffPolicy
from agent_guards.prebuilt.react import (
    _UNSET,
    _build_guard,
    _tool_node,
    check_state_schema,
    react_agent_hooks,
)
from agent_guards.prebuilt.subgraph import OutputMode, subgraph_node
from agent_guards.retry_router.policy import RetryRouterPolicy
from agent_guards.tool_guard.wrapper import ToolCallGuard

__all__ = ["guarded_supervisor", "guarded_swarm", "guarded_workers"]

_SUPERVISOR_OWNED = ("pre_model_hook", "post_model_hook", "version")
_WHITESPACE = re.compile(r"\s+")


def _require(module: str, package: str) -> Any:
    try:
        return importlib.import_module(module)
    except ImportError as err:
        raise ImportError(
            f"{module} is not installed: pip install {package} (agent-guards only wraps it)"
        ) from err


def _agent_name(agent: Any) -> str:
    name = getattr(agent, "name", None)
    if not isinstance(name, str) or not name or name == "LangGraph":
        raise ValueError(
            f"every agent needs a name (guarded_react_agent(..., name='research')), got {name!r}"
        )
    return name


def guarded_workers(
    agents: Sequence[Any], *, output_mode: OutputMode = "full_history"
) -> list[Any]:
    """Each agent as a node that starts from the parent's messages and returns what it added.

    The nodes keep the agents' names, so ``create_supervisor`` and ``create_swarm`` accept
    them in place of the agents. A handoff (``Command(graph=Command.PARENT)``) or an
    interrupt raised inside an agent passes through.

    Example:
        >>> from agent_guards.prebuilt import guarded_react_agent
        >>> from agent_guards.testing import ScriptedChatModel
        >>> agent = guarded_react_agent(ScriptedChatModel(script=["hi"]), [], name="greeter")
        >>> [w.name for w in guarded_workers([agent])]
        ['greeter']
        >>> guarded_workers([guarded_react_agent(ScriptedChatModel(script=[]), [])])
        Traceback (most recent call last):
        ...
        ValueError: every agent needs a name (guarded_react_agent(..., name='research')), ...
    """
    out = []
    for agent in agents:
        name = _agent_name(agent)
        out.append(subgraph_node(agent, output_mode=output_mode, name=name))
    return out


def _handoff_node(
    names: Sequence[str], guard: ToolCallGuard, tools: Any, kwargs: dict[str, Any]
) -> ToolNode:
    """The supervisor's guarded ``ToolNode``: its tools plus one handoff tool per worker,
    as ``create_supervisor`` names them (it keeps a node that has them all)."""
    handoff = _require("langgraph_supervisor.handoff", "langgraph-supervisor")
    prefix = kwargs.get("handoff_tool_prefix")
    add_messages = kwargs.get("add_handoff_messages", True)
    if isinstance(tools, ToolNode):
        raise ValueError(
            "guarded_supervisor takes the supervisor's tools as a list: it builds the guarded "
            "ToolNode with the handoff tools itself"
        )
    if tools is not None and not isinstance(tools, (list, tuple)):
        raise TypeError(
            f"guarded_supervisor tools must be a list of tools, got {type(tools).__name__}"
        )
    own = list(tools or ())
    given = {
        (getattr(t, "metadata", None) or {}).get(handoff.METADATA_KEY_HANDOFF_DESTINATION)
        for t in own
    }
    for name in names:
        if name in given:  # a handoff tool of the caller's own
            continue
        normal = _WHITESPACE.sub("_", name.strip()).lower()
        own.append(
            handoff.create_handoff_tool(
                agent_name=name,
                name=None if prefix is None else f"{prefix}{normal}",
                add_handoff_messages=add_messages,
            )
        )
    node, _ = _tool_node(own, guard, ())
    return node


def guarded_supervisor(
    agents: Sequence[Any],
    *,
    model: Any,
    tools: Sequence[Any] | None = None,
    loop: LoopPolicy | None = _UNSET,
    retry: RetryRouterPolicy | None = _UNSET,
    guard: ToolCallGuard | None = None,
    handoff: HandoffPolicy | None = None,
    state_schema: type[Any] | None = None,
    output_mode: str = "last_message",
    supervisor_name: str = "supervisor",
    **kwargs: Any,
) -> StateGraph[Any, Any, Any, Any]:
    """``langgraph_supervisor.create_supervisor`` with the guards; returns its ``StateGraph``.

    Build the workers with :func:`~agent_guards.prebuilt.guarded_react_agent` (each with a
    ``name=``). The supervisor agent gets loop_check and retry_router on its own ``tools``
    and the handoff bound (``handoff=``) on its ``transfer_to_<worker>`` tools; it and every
    worker run through :func:`~agent_guards.prebuilt.subgraph_node`, so the parent's
    ``guard_log`` and ``usage`` get each decision and each count once.

    Args:
        agents: The compiled workers, each with a name.
        model: The supervisor's chat model.
        tools: The supervisor's own tools (the handoff tools are added, one per worker).
        loop: loop_check policy for the supervisor's tools (None: off).
        retry: retry_router policy for the supervisor's tools (None: off).
        guard: A configured :class:`~agent_guards.ToolCallGuard` instead of ``loop`` /
            ``retry``.
        handoff: When the supervisor's handoffs stop (default :class:`HandoffPolicy`).
        state_schema: The parent state (and the supervisor's); it must have the guard
            channels (default :class:`~agent_guards.prebuilt.GuardedReactState`).
        output_mode: What a worker adds to the history: ``"last_message"`` (its answer,
            or the guard's stop message) or ``"full_history"``.
        supervisor_name: The supervisor's node name.
        **kwargs: Anything else ``create_supervisor`` takes (``prompt``,
            ``handoff_tool_prefix``, ``add_handoff_messages``, ...); the guard owns
            ``pre_model_hook``, ``post_model_hook`` and ``version``.
    """
    taken = sorted(set(kwargs) & set(_SUPERVISOR_OWNED))
    if taken:
        raise ValueError(
            f"guarded_supervisor sets {', '.join(taken)} itself: build the supervisor with "
            "create_supervisor(..., **react_agent_hooks(tools).kwargs()) to use your own"
        )
    create = _require("langgraph_supervisor", "langgraph-supervisor").create_supervisor
    schema = check_state_schema(state_schema, owner="guarded_supervisor")
    names = [_agent_name(a) for a in agents]
    built = _build_guard(guard, loop, retry)
    node = _handoff_node(names, built, tools, kwargs)
    hooks = react_agent_hooks(node, guard=built, handoff=handoff, state_schema=schema)
    builder: StateGraph[Any, Any, Any, Any] = create(
        guarded_workers(agents),
        model=model,
        tools=hooks.tools,
        pre_model_hook=hooks.pre_model_hook,
        post_model_hook=hooks.post_model_hook,
        state_schema=schema,
        output_mode=output_mode,
        supervisor_name=supervisor_name,
        **kwargs,
    )
    _run_as_subgraph(builder, supervisor_name)
    return builder


def _run_as_subgraph(builder: StateGraph[Any, Any, Any, Any], name: str) -> None:
    """Run the node ``name`` (a compiled agent) through ``subgraph_node``, keeping its edges
    and destinations: as a plain subgraph node it would hand back the parent's decisions."""
    spec = builder.nodes[name]
    node = subgraph_node(spec.runnable, output_mode="full_history", name=name)
    builder.nodes[name] = dataclasses.replace(
        spec, runnable=node, input_schema=builder.state_schema
    )


def guarded_swarm(
    agents: Sequence[Any],
    *,
    default_active_agent: str,
    state_schema: type[Any] | None = None,
    **kwargs: Any,
) -> StateGraph[Any, Any, Any, Any]:
    """``langgraph_swarm.create_swarm`` over guarded agents; returns its ``StateGraph``.

    Build each agent with :func:`~agent_guards.prebuilt.guarded_react_agent` and its
    ``create_handoff_tool(agent_name=...)`` tools (they always execute; ``HandoffPolicy``
    bounds them). Each agent runs through :func:`~agent_guards.prebuilt.subgraph_node`
    (its whole new history goes to the swarm, as ``create_swarm`` does), so the swarm's
    ``guard_log`` and ``usage`` get each decision and each count once.

    Args:
        agents: The compiled agents, each with a name.
        default_active_agent: The agent a new thread starts with.
        state_schema: The swarm state: ``active_agent`` plus the guard channels (default:
            ``SwarmState`` with :class:`~agent_guards.GuardState`).
        **kwargs: Anything else ``create_swarm`` takes (``context_schema``).

    Example:
        >>> from langgraph.graph import MessagesState
        >>> from agent_guards.prebuilt import guarded_react_agent
        >>> from agent_guards.testing import ScriptedChatModel
        >>> alice = guarded_react_agent(ScriptedChatModel(script=["hi"]), [], name="alice")
        >>> guarded_swarm([alice], default_active_agent="alice", state_schema=MessagesState)
        Traceback (most recent call last):
        ...
        ValueError: guarded_swarm: state_schema MessagesState has no guard_log, usage ...
    """
    swarm = _require("langgraph_swarm", "langgraph-swarm")
    schema = _swarm_state(swarm.SwarmState) if state_schema is None else state_schema
    check_state_schema(schema, owner="guarded_swarm")
    builder: StateGraph[Any, Any, Any, Any] = swarm.create_swarm(
        guarded_workers(agents),
        default_active_agent=default_active_agent,
        state_schema=schema,
        **kwargs,
    )
    return builder


def _swarm_state(base: Any) -> type[Any]:
    class GuardedSwarmState(base, GuardState):  # type: ignore[misc]
        """langgraph-swarm's ``SwarmState`` (``messages``, ``active_agent``) with the guard
        channels."""

    return GuardedSwarmState
