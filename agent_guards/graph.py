"""Plumbing shared by every guard adapter (node or edge). Private: not part of the API.

An adapter does three things around a pure core, and they are the same for every guard:

* stamp the decision with the graph step and the run's clock, attach it to the LangSmith
  run, and write it to ``guard_log``;
* turn :class:`InvalidInputError` from the core into a decision with reason
  ``invalid_input`` that leaves the rest of the state untouched;
* let ``GraphBubbleUp`` (interrupts, ``Command`` bubbling) pass, always.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import sys
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeVar, cast

from langchain_core.callbacks import BaseCallbackManager
from langchain_core.messages import ToolMessage
from langchain_core.runnables import Runnable, RunnableConfig, RunnableLambda
from langchain_core.tracers.context import _tracing_v2_is_enabled
from langgraph.config import get_config, get_store
from langgraph.errors import GraphBubbleUp
from langgraph.graph import END
from langgraph.store.base import BaseStore
from langgraph.types import Command, interrupt

from agent_guards.core.clock import now_iso_from_config, step_from_config
from agent_guards.core.decision import GuardDecision, Verdict
from agent_guards.core.errors import InvalidInputError
from agent_guards.core.signatures import is_guard_message
from agent_guards.core.state import DEFAULT_KEYS, StateKeys
from agent_guards.tracing import attach_decision, traced

T = TypeVar("T")

LOG_KEY = "guard_log"


def state_value(state: Any, key: str, default: Any = None) -> Any:
    """``state[key]`` for dict states, ``state.key`` for object states (``default`` if absent)."""
    if type(state) is dict or isinstance(state, Mapping):
        return state.get(key, default)
    return getattr(state, key, default)


def state_reader(state: Any) -> Callable[[str], Any]:
    """:func:`state_value` for one state, with ``None`` for an absent key: whether the state
    is a dict or an object is asked once, for a caller that reads several keys."""
    if type(state) is dict or isinstance(state, Mapping):
        return state.get
    return lambda key: getattr(state, key, None)


def state_messages(state: Any, key: str) -> list[Any]:
    """The message list in a state (a dict, an object, or the list itself)."""
    if isinstance(state, list):
        return state
    return list(state_value(state, key) or ())


def ends_with_tool_results(messages: Sequence[Any]) -> bool:
    """Whether the last message, past the notes a guard added, is a tool result: the model
    is about to read what the tools just returned, not a new user turn. A failure in an
    earlier step was handled then; judged again, it would end every later turn."""
    for m in reversed(messages):
        if getattr(m, "type", None) == "human" and is_guard_message(m):
            continue
        return isinstance(m, ToolMessage)
    return False


def graph_store(config: RunnableConfig | None) -> BaseStore | None:
    """The store the running graph was compiled with, or None (outside a graph, no store).

    Read first from the node's own config, which carries the run's runtime; then from
    ``langgraph.config.get_store()``, for a config that does not (a caller's own), which
    reads the same runtime from a context variable (one that async code on Python 3.10
    does not propagate).
    """
    runtime = ((config or {}).get("configurable") or {}).get(_RUNTIME)
    if runtime is not None:
        return getattr(runtime, "store", None)
    try:
        return get_store()
    except Exception:  # not in a runnable context
        return None


def stamp(decision: GuardDecision, config: RunnableConfig | None, **data: Any) -> GuardDecision:
    """Fill in step and time from the config (and ``data`` into the decision's data), and
    attach the decision to the current run."""
    stamped = decision.with_context(step=step_from_config(config), at=now_iso_from_config(config))
    if data:
        stamped.data.update(data)  # the copy's own dict
    attach_decision(stamped)
    return stamped


def trace_only(decision: GuardDecision, config: RunnableConfig | None) -> None:
    """:func:`stamp` for a decision that only the trace keeps (a route's, on a healthy turn):
    in a run nothing traces, the stamped copy would be made and dropped, so it is not made."""
    if traced():
        stamp(decision, config)


def invalid_input(
    guard: str, error: InvalidInputError, *, policy: str = "", verdict: Verdict = Verdict.ABSTAIN
) -> GuardDecision:
    """The decision an adapter records when its core rejected the input."""
    return GuardDecision(
        guard=guard,
        verdict=verdict,
        reason="invalid_input",
        detail=str(error),
        selected_ids=(),
        dropped_ids=(error.item,) if error.item else (),
        policy=policy,
        data={"field": error.field, "item": error.item, "problem": error.problem},
    )


def guarded(
    func: Callable[[Any, RunnableConfig], T],
    on_invalid: Callable[[InvalidInputError], T],
) -> Callable[[Any, RunnableConfig], T]:
    """Wrap a ``(state, config)`` function so bad input becomes ``on_invalid(err)``.

    Interrupts (``GraphBubbleUp``) always pass. The wrapper keeps the two-argument
    signature so ``RunnableLambda`` hands it the config.
    """

    def wrapper(state: Any, config: RunnableConfig) -> T:
        try:
            return func(state, config)
        except GraphBubbleUp:
            raise
        except InvalidInputError as err:
            return on_invalid(err)

    return wrapper


def decide_on_messages(
    guard: str,
    core: Callable[[list[Any]], GuardDecision],
    state: Any,
    config: RunnableConfig,
    *,
    policy: str,
    key: str,
) -> GuardDecision:
    """Run a message-reading core on ``state[key]``, stamped (see :func:`decide_messages`)."""
    return stamp(decide_messages(guard, core, state_messages(state, key), policy=policy), config)


def decide_messages(
    guard: str, core: Callable[[list[Any]], GuardDecision], messages: list[Any], *, policy: str
) -> GuardDecision:
    """``core(messages)``; bad input becomes a CONTINUE decision with reason
    ``invalid_input`` (an edge must still pick a route). Interrupts pass through."""
    try:  # as guarded() wraps a node, without building the wrapper on every call
        return core(messages)
    except GraphBubbleUp:
        raise
    except InvalidInputError as err:
        return invalid_input(guard, err, policy=policy, verdict=Verdict.CONTINUE)


def runnable(
    name: str,
    func: Callable[[Any, RunnableConfig], Any],
    afunc: Callable[[Any, RunnableConfig], Awaitable[Any]] | None = None,
    *,
    keys: StateKeys | None = None,
    mixin: str | None = None,
    channels: Sequence[str] = (),
    wiring: str | None = None,
) -> RunnableLambda[Any, Any]:
    """A sync+async node/edge built once (a :class:`GuardLambda`, ``func`` and ``afunc``).

    Without ``afunc`` the async path runs ``func`` inline: the cores are pure CPU work
    that finishes in microseconds, so a thread hop would cost more than it saves. With
    ``keys`` naming the guard channels otherwise, the node reads and writes them there.
    A node that writes decisions names its state ``mixin``: in a graph whose state has no
    decision log it fails on its first run, naming the mixin (LangGraph would drop its
    writes silently, and a node added with ``add_node`` has no build step to check), and
    so does one whose state lacks the node's own ``channels`` (its input and its verdict).
    An edge names its ``wiring`` (how to add it): run as a node it raises, saying so.
    """

    async def _afunc(state: Any, config: RunnableConfig) -> Any:
        return func(state, config)

    run, arun = func, afunc or _afunc
    if keys is not None and keys.renamed:
        chosen = keys

        def run(state: Any, config: RunnableConfig) -> Any:
            return renamed_update(chosen, func(chosen.inbound(state), config))

        async def arun(state: Any, config: RunnableConfig) -> Any:
            inner = afunc or _afunc
            return renamed_update(chosen, await inner(chosen.inbound(state), config))

    if mixin is not None:
        log, inner_run, inner_arun = (keys or DEFAULT_KEYS).log, run, arun

        own = tuple(channels)

        def run(state: Any, config: RunnableConfig) -> Any:
            _require_state(state, config, name, log, mixin, channels=own)
            return inner_run(state, config)

        async def arun(state: Any, config: RunnableConfig) -> Any:
            _require_state(state, config, name, log, mixin, channels=own)
            return await inner_arun(state, config)

    if wiring is None:
        return GuardLambda(run, afunc=arun, name=name)
    edge = GuardEdge(run, afunc=arun, name=name)
    edge.wiring = wiring
    return edge


_ABSENT = object()


def _require_state(
    state: Any,
    config: RunnableConfig,
    node: str,
    log: str,
    mixin: str,
    *,
    channels: Sequence[str] = (),
) -> None:
    """Raise when a guard node runs in a graph whose state has no ``log`` channel, or lacks
    one of the node's own ``channels``. Its decisions (or its input, its verdict) would vanish:
    a graph with the log always hands it to the node (its reducer starts it empty); the
    other channels are asked of the task's reader. Outside a graph (a node called
    directly) nothing is checked."""
    if _RUNTIME not in (config.get("configurable") or {}) or isinstance(state, list):
        return
    if state_value(state, log, _ABSENT) is _ABSENT:
        raise ValueError(
            f"{node}: the graph's state has no {log!r} channel, so this node's decisions "
            f"would be dropped; add the {mixin} mixin to your state schema "
            f"(class State(MessagesState, {mixin})), or give the guards the names your "
            "state uses: keys=StateKeys(log=...)"
        )
    missing = missing_channels(config, channels)
    if missing:
        raise ValueError(
            f"{node}: the graph's state has no {', '.join(map(repr, missing))} channel, so "
            f"this node's input or verdict would be dropped; add the {mixin} mixin to your "
            f"state schema (class State(MessagesState, {mixin})), or name your own channels "
            "with the node's *_key options"
        )


def ask_human(value: Any) -> Any:
    """LangGraph's ``interrupt(value)``, refused in a run with no checkpointer: the pause
    could never be resumed (LangGraph returns it as ``__interrupt__`` all the same, and the
    ``Command(resume=...)`` then fails). Under ``langgraph dev`` or the Agent Server the
    server's checkpointer is the run's, so nothing is refused there."""
    try:
        config = get_config()
    except RuntimeError:  # not in a runnable context: LangGraph's own error follows
        config = {}
    configurable = config.get("configurable") or {}
    if _RUNTIME in configurable and configurable.get(_CHECKPOINTER) is None:
        asks = value.get("type") if isinstance(value, Mapping) else None
        raise ValueError(
            f"a guard asked a human ({asks or 'a pause'}) in a graph with no checkpointer, so "
            "the run could never be resumed: compile it with a checkpointer "
            "(checkpointer=InMemorySaver(), SqliteSaver or PostgresSaver)"
        )
    return interrupt(value)


def _channels_of(read: Any) -> tuple[Mapping[str, Any], ...] | None:
    """The running graph's channels and managed values, as LangGraph's task reader holds
    them (``partial(local_read, scratchpad, channels, managed, task)``); None for any other
    reader (the names are then asked of it one by one)."""
    func, args = getattr(read, "func", None), getattr(read, "args", ())
    if getattr(func, "__name__", "") != "local_read" or not isinstance(args, tuple):
        return None
    held = args[1:3]
    if len(held) == 2 and isinstance(held[0], Mapping) and isinstance(held[1], Mapping):
        return held
    return None


def missing_channels(config: RunnableConfig, names: Sequence[str]) -> list[str]:
    """Which of ``names`` the running graph has no channel for. Asked of the task's reader
    (what LangGraph's ``ChannelRead`` calls: ``read(select, fresh)``), which raises
    ``KeyError`` for a channel the graph does not have; none when there is no such reader."""
    read = (config.get("configurable") or {}).get(_READ)
    if not callable(read):
        return []
    held = _channels_of(read)
    if held is not None:  # the graph's own channel names: no read per name
        channels, managed = held
        return [name for name in names if name not in channels and name not in managed]
    missing = []
    for name in names:
        try:
            read([name], False)
        except KeyError:
            missing.append(name)
    return missing


class GuardLambda(RunnableLambda[Any, Any]):
    """A ``RunnableLambda`` that, inside a graph run nobody traces or listens to, calls its
    function the way LangGraph calls a plain function node: with the node's config, and no
    child run. A child run that no callback sees records nothing, and its bookkeeping
    (callback managers, run ids, signature checks) costs more than a guard's decision.
    Anywhere else (a traced run, callbacks, a call outside a graph) it is a RunnableLambda.
    """

    def invoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        if kwargs or not unobserved(config):
            return super().invoke(input, config, **kwargs)
        assert config is not None
        return cast("_Node", self.func)(input, config)

    async def ainvoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        if kwargs or not unobserved(config):
            return await super().ainvoke(input, config, **kwargs)
        assert config is not None
        return await cast("_ANode", self.afunc)(input, config)


class GuardEdge(GuardLambda):
    """A :class:`GuardLambda` that routes: it returns a label for a conditional edge. Added
    with ``add_node`` by mistake, LangGraph would only say that a node returned a string;
    run as a node, it says how to wire it (``wiring``) instead."""

    wiring: str = ""

    def invoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        _require_edge(self, config, sys._getframe(1))
        return super().invoke(input, config, **kwargs)

    async def ainvoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        _require_edge(self, config, sys._getframe(1))
        return await super().ainvoke(input, config, **kwargs)


def _require_edge(edge: GuardEdge, config: RunnableConfig | None, caller: Any) -> None:
    """Raise when LangGraph runs ``edge`` as a graph node: the node step of a task (its
    callbacks are tagged ``seq:step:1``), called by LangGraph itself or as the task's own
    coroutine, never from a node function of the user's that asks the edge for a route."""
    callbacks = (config or {}).get("callbacks")
    tags = callbacks.tags if isinstance(callbacks, BaseCallbackManager) else ()
    if _NODE_STEP not in tags:
        return
    module = caller.f_globals.get("__name__", "") if caller is not None else ""
    if not module.startswith(_NODE_CALLERS):
        return
    raise TypeError(
        f"{edge.name} is a conditional edge (it returns a route label, which a node cannot): "
        f"wire it with {edge.wiring or 'builder.add_conditional_edges(<source>, ...)'}, "
        f"not builder.add_node"
    )


_NODE_STEP = "seq:step:1"  # LangGraph's tag on a task's node step (its writers: 2, 3, ...)
_NODE_CALLERS = ("langgraph.", "asyncio.")  # who calls a node: the runner, or its own task


def unobserved(config: RunnableConfig | None) -> bool:
    """A node's config inside a graph run, with no callback handler and tracing off: what
    runs under it reports to no one (a child run, a callback, a trace)."""
    if config is None or _RUNTIME not in (config.get("configurable") or {}):
        return False
    callbacks = config.get("callbacks")
    if isinstance(callbacks, BaseCallbackManager):
        if callbacks.handlers or callbacks.inheritable_handlers:
            return False
    elif callbacks:  # a list of handlers
        return False
    return not _tracing_v2_is_enabled()


_RUNTIME = "__pregel_runtime"  # LangGraph puts the run's Runtime here for every node
_READ = "__pregel_read"  # and the reader of the task's channels
_CHECKPOINTER = "__pregel_checkpointer"  # and the run's checkpointer (None without one)
_Node = Callable[[Any, RunnableConfig], Any]
_ANode = Callable[[Any, RunnableConfig], Awaitable[Any]]


def renamed_update(keys: StateKeys, out: Any) -> Any:
    """A node's result (a dict, a ``Command``, or a list of them) with the guard channels
    under the graph's names (``keys``); anything else (a route) as it is."""
    if isinstance(out, Command):
        update = out.update
        if isinstance(update, Mapping):
            return dataclasses.replace(out, update=keys.outbound(update))
        return out
    if isinstance(out, list):
        return [renamed_update(keys, item) for item in out]
    return keys.outbound(out)


def require_channels(
    builder: Any,
    helper: str,
    mixin: str,
    channels: Sequence[str],
    keys: StateKeys | None = None,
    *,
    own: Sequence[str] = (),
) -> None:
    """Fail at build time when the graph's state lacks channels a guard reads or writes.

    LangGraph drops a node's writes to channels the state does not have, silently: the
    guard's decisions (or plans) would vanish. The message names the mixin to add.
    ``channels`` use the guards' names; ``keys`` says where the graph keeps them. ``own``
    are the node's own channels (its input, its verdict), under the names it was given:
    they must exist, whatever their reducer.
    """
    keys = keys or DEFAULT_KEYS
    names = dict(keys.renamed)
    wanted = [names.get(c, c) for c in channels]
    have = dict(getattr(builder, "channels", {}) or {})
    missing = [c for c in (*wanted, *own) if c not in have]
    if missing:
        add = (
            "keys.schema() (the guard channels under your names) to your state schema "
            "(class State(MessagesState, keys.schema()))"
            if set(missing) <= set(names.values())
            else f"the {mixin} mixin to your state schema (class State(MessagesState, {mixin}))"
        )
        raise ValueError(
            f"{helper}: the graph's state has no {', '.join(map(repr, missing))} channel; add {add}"
        )
    require_reducers(
        have,
        helper,
        (*wanted, keys.usage),
        f"take it from {mixin} (GuardState's reducers), or keep yours and give the guards "
        f"other names: keys=StateKeys(log=..., usage=...) on every guard of the graph",
    )


def require_reducers(
    channels: Mapping[str, Any], helper: str, names: Sequence[str], fix: str
) -> None:
    """Fail at build time when a guard channel of the state has no reducer (a field of the
    user's own): every write would replace the last one, so two guards writing in one step
    fail at run time and a later decision or count silently replaces an earlier one."""
    plain = [c for c in names if type(channels.get(c)).__name__ == "LastValue"]
    if plain:
        raise ValueError(
            f"{helper}: the state's {', '.join(map(repr, plain))} channel has no reducer (a "
            f"field of your own?): each write would replace the guards' earlier ones; {fix}"
        )


def require_messages(builder: Any, helper: str, key: str) -> None:
    """Fail at build time when the state has no ``key`` channel for the messages: no mixin
    adds it, the fix is the key."""
    have = getattr(builder, "channels", {}) or {}
    if key not in have:
        keys = sorted(k for k in have if "message" in k)
        raise ValueError(
            f"{helper}: the graph's state has no {key!r} channel for the messages; pass "
            f"messages_key= the channel your state keeps them in (MessagesState: 'messages'"
            f"{'; yours: ' + ', '.join(map(repr, keys)) if keys else ''})"
        )


def require_nodes(
    builder: Any, helper: str, destinations: Mapping[str, str], option: str = "destinations"
) -> None:
    """Fail at build time when a default route leads to a node the graph does not have.

    Name the route's node (an existing one, or END) in ``option``, or add the node first.
    """
    nodes = set(getattr(builder, "nodes", {}) or {}) | {END}
    unknown = {route: node for route, node in destinations.items() if node not in nodes}
    if unknown:
        raise ValueError(
            f"{helper}: by default {', '.join(f'{r} -> {n!r}' for r, n in unknown.items())}, "
            f"which is not a node of the graph; pass {option}={{...}} naming an existing node "
            f"or END for {sorted(unknown)}, or add the node first"
        )


def require_free_source(builder: Any, helper: str, source: str, own: str | None = None) -> None:
    """Fail at build time when ``source`` already has an edge out, plain or conditional (but
    the guard's ``own``): the guard's edge would run next to it, and the other one keeps
    looping past every stop. The helper that wires ``own`` checks again at ``compile()``."""
    taken = sorted(end for start, end in getattr(builder, "edges", set()) if start == source)
    if taken:
        raise ValueError(
            f"{helper}: {source!r} already has an edge to {', '.join(map(repr, taken))}; remove "
            f"builder.add_edge({source!r}, {taken[0]!r}): {helper} routes from {source!r} itself"
        )
    out = set((getattr(builder, "branches", {}) or {}).get(source, {}))
    if routed_by := builder.__dict__.get(_ROUTED, {}).get(source):  # routes its own turns
        out.add(routed_by)
    branches = sorted(out - {own})
    if not branches:
        return
    guards = {helper.removeprefix("add_"), *branches}  # the edges are named after the guards
    if {"loop_check", "retry_router"} <= guards:  # the router's one edge does both
        fix = (
            "retry_router already makes loop_check's decisions: drop add_loop_check and wire "
            f"one edge, add_retry_router(builder, {source!r}, model=..., tools=..., "
            "loop_policy=LoopPolicy())"
        )
    else:
        fix = (
            f"remove builder.add_conditional_edges({source!r}, ...): {helper} routes from "
            f"{source!r} itself"
        )
    raise ValueError(
        f"{helper}: {source!r} already has the conditional edge "
        f"{', '.join(map(repr, branches))}; {fix}"
    )


def _record_route_in_node(builder: Any, source: str, guard: str) -> None:
    """Record that ``source`` ends its turns with ``guard``'s route (``Command(goto=...)``)
    in this graph: to the checks above it is that guard's edge out of ``source``."""
    builder.__dict__.setdefault(_ROUTED, {})[source] = guard


def recheck_at_compile(builder: Any, helper: str, source: str, own: str) -> None:
    """Check ``source`` again when ``builder.compile()`` runs: an edge out of it added after
    the helper (the tutorial's ``add_edge("tools", "model")`` pasted below it) would run
    next to the guard's edge ``own`` and keep the graph looping past every stop, and no
    check made before it was added can see it."""
    checks = builder.__dict__.get(_RECHECKS)
    if checks is None:
        checks = builder.__dict__[_RECHECKS] = []
        builder.compile = _Recheck(builder)
    checks.append((helper, source, own))


class _Recheck:
    """``builder.compile`` after the checks :func:`recheck_at_compile` recorded. It holds
    the builder, not a bound method, so a copy of the builder checks and compiles itself."""

    def __init__(self, builder: Any) -> None:
        self.builder = builder
        functools.update_wrapper(self, type(builder).compile)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        for helper, source, own in self.builder.__dict__.get(_RECHECKS, ()):
            require_free_source(self.builder, helper, source, own=own)
        return type(self.builder).compile(self.builder, *args, **kwargs)


_RECHECKS = "_agent_guards_rechecks"
_ROUTED = "_agent_guards_routed"


def guarded_tool_node(
    builder: Any,
    helper: str,
    tools: str,
    keys: StateKeys | None = None,
    *,
    purpose: str = "so failures are classified and retried",
    messages_key: str | None = None,
) -> None:
    """Fail at build time when ``tools`` is a ``ToolNode`` without the guard's wrapper (what
    the helper relies on it for, ``purpose``, would never happen: a failure would escape
    raw, a retry would re-run nothing, a repeated call would run again), or with a guard
    that keeps the guard channels under other names than ``keys`` (its decisions would go
    elsewhere), or reads another messages channel than ``messages_key`` (the tool node
    would find no tool call there)."""
    from langgraph.prebuilt import ToolNode

    spec = (getattr(builder, "nodes", {}) or {}).get(tools)
    node = getattr(spec, "runnable", None)
    if _guard_of(getattr(node, "func", None)) is not None:  # add_node("tools", ToolCallGuard())
        raise ValueError(
            f"{helper}: {tools!r} is a ToolCallGuard, not a tools node; add the node as "
            f"ToolCallGuard(...).tool_node(tools) (the guard wraps each call of a ToolNode)"
        )
    if not isinstance(node, ToolNode):
        return
    guard = _guard_of(getattr(node, "_wrap_tool_call", None))
    if guard is None:
        raise ValueError(
            f"{helper}: {tools!r} is a ToolNode without ToolCallGuard; build it with "
            f"ToolCallGuard(...).tool_node(tools) {purpose}"
        )
    if guard.keys != (keys or DEFAULT_KEYS):
        raise ValueError(
            f"{helper}: {tools!r} keeps the guard channels as {guard.keys!r} and {helper} as "
            f"{keys or DEFAULT_KEYS!r}; pass the same keys= to ToolCallGuard and {helper}"
        )
    if messages_key is not None and guard.messages_key != messages_key:
        raise ValueError(
            f"{helper}: {tools!r} reads the messages channel {guard.messages_key!r} and "
            f"{helper} {messages_key!r}; pass the same messages_key= to ToolCallGuard and {helper}"
        )


def shared_policy(
    builder: Any, helper: str, tools: str, *, given: Any, field: str, arg: str
) -> Any:
    """The policy a helper's edge decides by: ``given``, else the one the ``tools`` node's
    ToolCallGuard has in ``field`` (so a policy given once, to the guard, holds on both).
    A ``given`` policy that differs from the guard's fails: the tool node would decide by
    one (what to reuse, refuse, retry) and the edge count by the other, silently."""
    node = getattr((getattr(builder, "nodes", {}) or {}).get(tools), "runnable", None)
    held = getattr(_guard_of(getattr(node, "_wrap_tool_call", None)), field, None)
    if given is None:
        return held
    if held is not None and given != held:
        kind = type(given).__name__
        raise ValueError(
            f"{helper}: {tools!r} runs ToolCallGuard({field}=...) with another {kind} than "
            f"{helper}({arg}=...), so the tool node would decide by one and the edge by the "
            f"other; pass the same policy to both, ToolCallGuard({field}=policy) and "
            f"{helper}(..., {arg}=policy), or to the guard alone"
        )
    return given


def require_retry_targets(builder: Any, helper: str, *, model: str, tools: str) -> None:
    """Fail at build time when ``model=`` or ``tools=`` names the wrong kind of node (a node
    not added yet is not checked). A ``retry`` goes back to ``tools``, where the guard
    re-runs only the failed calls: any other node would record the retry and serve none.
    ``repair`` and ``replan`` go back to ``model``: a tool node there would run no model."""
    from langgraph.prebuilt import ToolNode

    nodes = getattr(builder, "nodes", {}) or {}

    def kind(name: str) -> str:
        if name not in nodes:
            return "absent"
        return "tools" if isinstance(getattr(nodes[name], "runnable", None), ToolNode) else "other"

    model_kind, tools_kind = kind(model), kind(tools)
    if model_kind == "tools" and tools_kind == "other":
        raise ValueError(
            f"{helper}: model={model!r} is a ToolNode and tools={tools!r} is not: model= and "
            f"tools= are swapped; pass model={tools!r}, tools={model!r}"
        )
    if model_kind == "tools":
        raise ValueError(
            f"{helper}: model={model!r} is a ToolNode; model= names the node that calls the "
            f"model (repair and replan go back there), tools= the ToolCallGuard(...).tool_node "
            f"node (a retry goes back there)"
        )
    if tools_kind == "other":
        raise ValueError(
            f"{helper}: tools={tools!r} is not a ToolNode, so a retry would run that node again "
            f"and never the failed calls; pass tools= the node built with "
            f"ToolCallGuard(...).tool_node(tools)"
        )


def serve_retries_in_place(node: Any) -> None:
    """Have a guarded ``ToolNode`` serve its ``retry`` routes in the call.

    For a graph with no edge that takes a ``retry`` route back to the tools (no
    :func:`~agent_guards.add_retry_router`): there a transient failure would reach the
    model as final. The node's guard is swapped for one with ``retry_in_place=True`` (a
    ToolNode binds its wrapper when built, so the node itself is updated). Anything else
    is left alone.
    """
    from langgraph.prebuilt import ToolNode

    if not isinstance(node, ToolNode):
        return
    guard = _guard_of(getattr(node, "_wrap_tool_call", None))
    if guard is None or guard.retry is None or guard.retry_in_place:
        return
    served = dataclasses.replace(guard, retry_in_place=True)
    node._wrap_tool_call, node._awrap_tool_call = served, served.awrap


def _guard_of(wrapper: Any) -> Any:
    """The ToolCallGuard behind a ToolNode's ``wrap_tool_call``, or None."""
    from agent_guards.tool_guard.wrapper import ToolCallGuard

    for candidate in (wrapper, getattr(wrapper, "__self__", None)):
        if isinstance(candidate, ToolCallGuard):
            return candidate
    return None


def node_writes(output: Any) -> list[tuple[str, Any]]:
    """The channel writes a node's ``output`` makes, in the order LangGraph applies them: a
    dict's items, each ``Command``'s update (one sent to the parent graph is not this
    graph's), each item of a list of them."""
    if isinstance(output, dict):
        return list(output.items())
    if isinstance(output, Command):
        return [] if output.graph == Command.PARENT else list(output._update_as_tuples())
    if isinstance(output, (list, tuple)):
        return [w for item in output for w in node_writes(item)]
    return []


def with_goto(output: Any, goto: str) -> Any:
    """``output`` with ``Command(goto=goto)``: a dict becomes the command's update, a list
    (what ``ToolNode`` returns when a tool answered with a command) gets one more."""
    if isinstance(output, dict):
        return Command(update=output, goto=goto)
    items: Sequence[Any] = output if isinstance(output, (list, tuple)) else [output]
    return [*items, Command(goto=goto)]


def route_in_node(
    builder: Any,
    helper: str,
    source: str,
    route: Runnable[Any, Any],
    path_map: dict[str, str],
    *,
    reads: Sequence[str],
) -> None:
    """Make ``source``, the tools node ``ToolCallGuard.tool_node`` builds
    (:class:`~agent_guards.tool_guard.node.GuardedToolNode`), end each turn with
    ``Command(goto=path_map[label])``, ``label`` being what ``route`` (a guard's
    conditional edge, which reads the channels ``reads``) answers on those channels as the
    edge would read them: each one the node writes updated by that channel's reducer. The
    same branch channels are written, so the same nodes run next.

    Why: a conditional edge reads the state with its node's writes applied, and LangGraph
    builds that state by copying every channel of the graph (65 on the reference graph, on
    each tool turn); the tools node has the state it ran on and the writes it returns.
    The price: no edge leaves the node, so ``update_state(values, as_node=source)`` routes
    nowhere (pass ``Command(goto=..., update=values)``), as for any node that routes with
    ``Command``."""
    spec = builder.nodes[source]
    node = spec.runnable
    if not callable(getattr(node, "route_with", None)):
        raise ValueError(
            f"{helper}(route_in_node=True): {source!r} is not the tools node ToolCallGuard "
            f"builds; add it as ToolCallGuard(...).tool_node(tools), or leave route_in_node "
            f"off (the route is then a conditional edge)"
        )
    channels = {key: builder.channels[key] for key in reads if key in builder.channels}

    def then(state: Any, output: Any, config: RunnableConfig) -> Any:
        label = route.invoke(_written(channels, state, output), config)
        return with_goto(output, path_map[label])

    async def athen(state: Any, output: Any, config: RunnableConfig) -> Any:
        label = await route.ainvoke(_written(channels, state, output), config)
        return with_goto(output, path_map[label])

    node.route_with(route, then, athen)
    _record_route_in_node(builder, source, str(route.name))
    labels: dict[str, list[str]] = {}
    for label, target in path_map.items():
        labels.setdefault(target, []).append(label)
    # what get_graph() and Studio draw: the routes out of the node, labelled
    ends = {target: "/".join(names) for target, names in labels.items()}
    builder.nodes[source] = dataclasses.replace(spec, ends=ends)


def _written(channels: Mapping[str, Any], state: Any, output: Any) -> dict[str, Any]:
    """``state``'s ``channels`` with the node's ``output`` written: what a conditional edge
    after the node reads of them (each channel copied and updated only when written)."""
    read = state_reader(state)
    view = {key: value for key in channels if (value := read(key)) is not None}
    writes: dict[str, list[Any]] = {}
    for key, value in node_writes(output):
        if key in channels:
            writes.setdefault(key, []).append(value)
    for key, values in writes.items():
        spec = channels[key]
        channel = spec.from_checkpoint(copy.copy(view[key])) if key in view else spec.copy()
        channel.update(values)
        if channel.is_available():
            view[key] = channel.get()
    return view
