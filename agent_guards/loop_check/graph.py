"""loop_check: stop tool loops early, without executing a repeated call twice.

Pure core :func:`detect_loop` (no LangGraph import) plus thin adapters:

* :func:`create_loop_check` - a conditional edge returning ``"continue" | "nudge" | "stop" |
  "escalate"`` (:data:`~agent_guards.core.LoopRoute`); place it after the tools node;
* :func:`add_loop_check` - adds that edge with its path map and the nudge / stop /
  escalate nodes in one call;
* :func:`add_reply_check` - the edge after the model (in place of ``tools_condition``) that
  checks replies without tool calls (content and conversation loops);
* :class:`ToolCallGuard` - the ``ToolNode(wrap_tool_call=...)`` helper that answers an
  identical call from the earlier result (verdict REUSE), so the tool runs once.

Defaults: the 2nd identical call is reused (not executed) and nudged, the 3rd stops the
run with the partial result and the reason. Nothing is kept on Python objects: counts come
from the messages, so resume, fork and replay decide the same.

Example:
    >>> from langchain_core.messages import HumanMessage
    >>> from langchain_core.tools import tool
    >>> from langgraph.graph import START, StateGraph
    >>> from langgraph.prebuilt import tools_condition
    >>> from agent_guards.testing import ScriptedChatModel, tool_call_message
    >>> from agent_guards import LoopState, ToolCallGuard, add_loop_check
    >>> @tool
    ... def search(q: str) -> str:
    ...     '''Search.'''
    ...     return "rates are 4%"
    >>> from agent_guards.tool_guard import annotate_tool
    >>> search = annotate_tool(search, read_only=True)  # it only reads: safe to answer again
    >>> model = ScriptedChatModel(script=[tool_call_message("search", {"q": "rates"})],
    ...                           repeat_last=True)
    >>> builder = StateGraph(LoopState)
    >>> _ = builder.add_node("model", lambda s: {"messages": [model.invoke(s["messages"])]})
    >>> _ = builder.add_node("tools", ToolCallGuard().tool_node([search]))
    >>> _ = builder.add_edge(START, "model")
    >>> _ = builder.add_conditional_edges("model", tools_condition)
    >>> _ = add_loop_check(builder, "tools", continue_to="model")
    >>> out = builder.compile().invoke({"messages": [HumanMessage("rates?")]})
    >>> [d.verdict.value for d in out["guard_log"]], out["usage"]["tool_calls"], len(model.calls)
    (['reuse', 'nudge', 'reuse', 'stop'], 1, 3)
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import replace
from functools import partial
from typing import Annotated, Any, Literal, cast

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langchain_core.runnables import RunnableConfig, RunnableLambda
from langgraph.graph import END, StateGraph
from langgraph.graph.message import add_messages
from langgraph.types import Command

from agent_guards import graph as _node
from agent_guards.core.decision import GuardDecision, LoopRoute, Verdict
from agent_guards.core.state import DEFAULT_KEYS, GuardState, StateKeys
from agent_guards.core.stopping import answer_pending, budget_refused_again, final_message
from agent_guards.core.texts import Texts
from agent_guards.graph import state_messages
from agent_guards.loop_check.core import detect_loop
from agent_guards.loop_check.policy import LoopPolicy
from agent_guards.loop_check.recovery import after_cut, cut_loop

__all__ = [
    "LoopState",
    "ReplyRoute",
    "add_loop_check",
    "add_loop_nodes",
    "add_reply_check",
    "create_loop_check",
    "create_loop_escalate",
    "create_loop_nudge",
    "create_loop_stop",
    "create_reply_check",
    "nudge_text",
    "nudge_update",
]

GUARD = "loop_check"


class LoopState(GuardState, total=False):
    """State mixin for loop_check: messages plus ``guard_log`` and ``usage``.

    The edge reads ``messages``; the nudge / stop nodes append to ``messages`` and
    ``guard_log``; :class:`ToolCallGuard` adds ``usage["tool_calls"]``.

    Example:
        >>> from langgraph.graph import START
        >>> from agent_guards.testing import tool_call_message
        >>> builder = StateGraph(LoopState).add_node("nudge", create_loop_nudge())
        >>> app = builder.add_edge(START, "nudge").compile()
        >>> calls = [tool_call_message("search", {"q": "rates"}) for _ in range(2)]
        >>> out = app.invoke({"messages": calls})
        >>> [m.type for m in out["messages"]], [d.verdict.value for d in out["guard_log"]]
        (['ai', 'ai', 'human'], ['nudge'])
    """

    messages: Annotated[list[AnyMessage], add_messages]


def _check(policy: LoopPolicy | None) -> LoopPolicy:
    return LoopPolicy.coerce(policy)


def _decide(state: Any, config: RunnableConfig, policy: LoopPolicy, key: str) -> GuardDecision:
    messages = _node.state_value(state, key)
    spent = budget_refused_again(messages) if isinstance(messages, list) else None
    if spent is not None:  # the tool budget refused two turns in a row, and nothing else stops
        return _node.stamp(replace(spent, policy=policy.label), config)
    core = partial(detect_loop, policy=policy)
    decision = _node.decide_on_messages(GUARD, core, state, config, policy=policy.label, key=key)
    if policy.on_loop != "truncate":
        return decision
    log = _node.state_value(state, "guard_log")  # a dict state, or an object (pydantic)
    return after_cut(decision, log, escalate=policy.on_stop == "escalate")


def nudge_update(
    decision: GuardDecision, messages: list[Any], policy: LoopPolicy, key: str = "messages"
) -> dict[str, Any]:
    """The nudge's update: the note, after cutting the loop back with ``on_loop="truncate"``
    (the decision then records ``data["truncated"]``, the number of messages removed)."""
    removed = cut_loop(messages, decision) if policy.on_loop == "truncate" else []
    if removed:
        decision = replace(decision, data={**decision.data, "truncated": len(removed)})
    note = HumanMessage(nudge_text(decision), name=GUARD)
    return {key: [*removed, note], "guard_log": [decision]}


def create_loop_check(
    *,
    policy: LoopPolicy | None = None,
    messages_key: str = "messages",
    keys: StateKeys | None = None,
) -> RunnableLambda[Any, LoopRoute]:
    """The loop_check conditional edge: ``"continue" | "nudge" | "stop" | "escalate"``.

    An edge cannot write state: its decision is attached to the trace, and the nudge /
    stop / escalate nodes it routes to write the same decision to ``guard_log`` (they
    recompute it from the same messages). Malformed messages route to ``"continue"``.

    Example:
        >>> from agent_guards.testing import tool_call_message
        >>> route = create_loop_check()
        >>> calls = [tool_call_message("search", {"q": "rates"}) for _ in range(3)]
        >>> [route.invoke({"messages": calls[:n]}) for n in (1, 2, 3)]
        ['continue', 'nudge', 'stop']
    """
    policy = _check(policy)

    def route(state: Any, config: RunnableConfig) -> LoopRoute:
        decision = _decide(state, config, policy, messages_key)
        label = decision.verdict.value
        return label if label in ("nudge", "stop", "escalate") else "continue"  # type: ignore[return-value]

    wiring = "add_loop_check(builder, 'tools', continue_to='model')"
    return _node.runnable(GUARD, route, keys=keys, wiring=wiring)


def nudge_text(decision: GuardDecision) -> str:
    """The nudge the model reads: what repeated and what to try instead.

    Example:
        >>> from agent_guards import GuardDecision, Verdict
        >>> decision = GuardDecision(guard="loop_check", verdict=Verdict.NUDGE,
        ...                          reason="repeated_call", detail="search was called 2 times")
        >>> nudge_text(decision)
        '[loop_check] search was called 2 times. Repeating it will not change the result. ...'
    """
    cut = decision.data.get("truncated") if isinstance(decision.data, Mapping) else None
    lead = f"[loop_check] {decision.detail}"
    if cut:
        lead += f" (the {cut} messages of the repeats were removed from the history)"
    return (
        f"{lead}. Repeating it will not change the result. Use "
        "what you already have, try a different approach (other arguments, another scope "
        "or tool), or give your final answer and say what is missing."
    )


def create_loop_nudge(
    *,
    policy: LoopPolicy | None = None,
    messages_key: str = "messages",
    keys: StateKeys | None = None,
) -> RunnableLambda[Any, dict[str, Any]]:
    """Node: append one nudge (a user-role message named ``loop_check``) and log it.

    Example:
        >>> from agent_guards.testing import tool_call_message
        >>> calls = [tool_call_message("search", {"q": "rates"}) for _ in range(2)]
        >>> out = create_loop_nudge().invoke({"messages": calls})
        >>> note = out["messages"][0]
        >>> note.type, note.name, note.content.split(". ")[0]
        ('human', 'loop_check', '[loop_check] search was called 2 times with the same arguments')
    """
    policy = _check(policy)

    def nudge(state: Any, config: RunnableConfig) -> dict[str, Any]:
        decision = _decide(state, config, policy, messages_key)
        if decision.verdict is not Verdict.NUDGE:
            return {"guard_log": [decision]}
        return nudge_update(decision, state_messages(state, messages_key), policy, messages_key)

    return _node.runnable("loop_nudge", nudge, keys=keys, mixin="LoopState")


def _stop_update(
    decision: GuardDecision, messages: list[Any], key: str, texts: Texts | None = None
) -> dict[str, Any]:
    decision = replace(decision, verdict=Verdict.STOP)
    pending = answer_pending(
        messages, f"Not executed: loop_check stopped the run ({decision.reason})."
    )
    final = final_message(decision, [*messages, *pending], texts=texts)
    return {key: [*pending, final], "guard_log": [decision]}


def create_loop_stop(
    *,
    policy: LoopPolicy | None = None,
    messages_key: str = "messages",
    keys: StateKeys | None = None,
) -> RunnableLambda[Any, dict[str, Any]]:
    """Node: answer pending tool calls, end with the partial result and the reason.

    Example:
        >>> from langchain_core.messages import ToolMessage
        >>> from agent_guards.testing import tool_call_message
        >>> msgs = [m for i in range(2) for m in (tool_call_message("search", {}, id=f"c{i}"),
        ...         ToolMessage("rate is 4%", tool_call_id=f"c{i}", name="search"))]
        >>> out = create_loop_stop().invoke({"messages": [*msgs, tool_call_message("search", {})]})
        >>> out["messages"][0].content
        'Not executed: loop_check stopped the run (repeated_call).'
        >>> print(out["messages"][1].content)
        I stopped because I kept repeating myself: search was called 3 times with the same ...
        What I have so far:
        - search: rate is 4%
        Missing: the rest of the task could not be completed reliably.
    """
    policy = _check(policy)

    def stop(state: Any, config: RunnableConfig) -> dict[str, Any]:
        decision = _decide(state, config, policy, messages_key)
        messages = state_messages(state, messages_key)
        update = _stop_update(decision, messages, messages_key, policy.texts)
        log = _node.state_value(state, "guard_log") or []
        last = log[-1] if log else None
        if isinstance(last, GuardDecision) and (last.guard, last.reason) == (GUARD, "human_stop"):
            del update["guard_log"]  # a human just stopped the run: that is its decision
        return update

    return _node.runnable("loop_stop", stop, keys=keys, mixin="LoopState")


def create_loop_escalate(
    *,
    continue_to: str,
    stop_to: str = "loop_stop",
    policy: LoopPolicy | None = None,
    messages_key: str = "messages",
    keys: StateKeys | None = None,
) -> RunnableLambda[Any, Command[str]]:
    """Node: ask a human through ``interrupt`` whether to stop or go on.

    The interrupt payload is ``{"guard", "decision", "question"}``. Resume with ``"stop"``,
    ``"continue"``, a guidance string (added as a user message, which starts a fresh count
    in interactive mode), or ``{"action": "stop" | "continue", "message": "..."}``.

    Example:
        >>> from langgraph.checkpoint.memory import InMemorySaver
        >>> from agent_guards.testing import tool_call_message
        >>> node = create_loop_escalate(continue_to=END, stop_to=END)
        >>> app = (StateGraph(LoopState).add_node("ask", node).set_entry_point("ask")
        ...        .compile(checkpointer=InMemorySaver()))
        >>> cfg = {"configurable": {"thread_id": "1"}}
        >>> calls = [tool_call_message("search", {"q": "rates"}) for _ in range(3)]
        >>> app.invoke({"messages": calls}, cfg)["__interrupt__"][0].value["question"]
        'The agent seems stuck: search was called 3 times with the same arguments. Stop or ...'
        >>> [d.reason for d in app.invoke(Command(resume="stop"), cfg)["guard_log"]]
        ['repeated_call', 'human_stop']
    """
    policy = _check(policy)

    def escalate(state: Any, config: RunnableConfig) -> Command[str]:
        decision = _decide(state, config, policy, messages_key)
        answer = _node.ask_human(
            {
                "guard": GUARD,
                "decision": decision.to_dict(),
                "question": policy.texts.render("stuck_question", detail=decision.detail),
            }
        )
        action, text = _parse_answer(answer)
        human = GuardDecision(
            guard=GUARD,
            verdict=Verdict.STOP if action == "stop" else Verdict.CONTINUE,
            reason=f"human_{action}",
            detail=text or "",
            policy=policy.label,
            data={"escalated": decision.reason},
        )
        update: dict[str, Any] = {"guard_log": [decision, _node.stamp(human, config)]}
        if action == "stop":
            return Command(goto=stop_to, update=update)
        if text:
            update[messages_key] = [HumanMessage(text)]
        return Command(goto=continue_to, update=update)

    return _node.runnable("loop_escalate", escalate, keys=keys, mixin="LoopState")


def _parse_answer(answer: Any) -> tuple[str, str | None]:
    if isinstance(answer, Mapping):
        action = str(answer.get("action", "continue")).lower()
        message = answer.get("message")
        return ("stop" if action == "stop" else "continue"), message if isinstance(
            message, str
        ) else None
    if isinstance(answer, str):
        word = answer.strip().lower()
        if word in ("stop", "continue"):
            return word, None
        return "continue", answer.strip() or None
    return ("stop" if answer is False else "continue"), None


def add_loop_check(
    builder: StateGraph[Any, Any, Any, Any],
    source: str,
    *,
    continue_to: str,
    policy: LoopPolicy | None = None,
    messages_key: str = "messages",
    end: str = END,
    keys: StateKeys | None = None,
    route_in_node: bool = False,
) -> dict[str, str]:
    """Wire loop_check after ``source`` (usually the tools node) and return the path map.

    Adds the nodes ``loop_nudge`` (then ``continue_to``), ``loop_stop`` (then ``end``) and,
    with ``on_stop="escalate"``, ``loop_escalate``; and the conditional edge from ``source``
    (with ``route_in_node=True``, the route decided inside the tools node, as
    :func:`~agent_guards.retry_router.add_retry_router` says).
    ``keys`` names the guard channels when your state uses ``guard_log`` or ``usage`` for
    something else (:class:`~agent_guards.core.StateKeys`).

    Example:
        >>> builder = StateGraph(LoopState).add_node("model", lambda s: {})
        >>> builder = builder.add_node("tools", lambda s: {})
        >>> add_loop_check(builder, "tools", continue_to="model")
        {'continue': 'model', 'nudge': 'loop_nudge', 'stop': 'loop_stop'}
        >>> sorted(builder.nodes)
        ['loop_nudge', 'loop_stop', 'model', 'tools']
    """
    if not isinstance(source, str) or not source:
        raise ValueError(f"add_loop_check source must be a node name, got {source!r}")
    policy = _check(
        _node.shared_policy(builder, "add_loop_check", source, given=policy, field="loop",
                            arg="policy")
    )  # fmt: skip
    if not isinstance(continue_to, str) or not continue_to:
        raise ValueError(f"add_loop_check continue_to must be a node name, got {continue_to!r}")
    _node.require_channels(builder, "add_loop_check", "LoopState", ("guard_log",), keys)
    _node.require_messages(builder, "add_loop_check", messages_key)
    _node.require_free_source(builder, "add_loop_check", source)
    _node.recheck_at_compile(builder, "add_loop_check", source, own=GUARD)
    # the guarded tool node is what answers a repeat from its result and counts each run:
    # the edge alone would let every repeat run until the stop
    _node.guarded_tool_node(
        builder, "add_loop_check", source, keys, messages_key=messages_key,
        purpose="so a repeated call is answered from its earlier result, not run again, "
        "and each run is counted in usage",
    )  # fmt: skip
    # no retry edge here to serve a retry route: the guarded tool node serves it itself
    _node.serve_retries_in_place(getattr(builder.nodes.get(source), "runnable", None))
    path_map = add_loop_nodes(
        builder,
        continue_to=continue_to,
        policy=policy,
        messages_key=messages_key,
        end=end,
        keys=keys,
    )
    edge = create_loop_check(policy=policy, messages_key=messages_key, keys=keys)
    if route_in_node:
        # the route reads the messages, and the log after a cut (on_loop="truncate") only
        log = (keys or DEFAULT_KEYS).log
        reads = (messages_key, log) if policy.on_loop == "truncate" else (messages_key,)
        _node.route_in_node(builder, "add_loop_check", source, edge, path_map, reads=reads)
    else:
        builder.add_conditional_edges(source, edge, cast("dict[Hashable, str]", path_map))
    return path_map


def add_loop_nodes(
    builder: StateGraph[Any, Any, Any, Any],
    *,
    continue_to: str,
    policy: LoopPolicy | None = None,
    messages_key: str = "messages",
    end: str = END,
    keys: StateKeys | None = None,
) -> dict[str, str]:
    """Add loop_check's nodes only and return the path map for its labels.

    Example:
        >>> add_loop_nodes(StateGraph(LoopState), continue_to="model")
        {'continue': 'model', 'nudge': 'loop_nudge', 'stop': 'loop_stop'}
        >>> add_loop_nodes(StateGraph(LoopState), continue_to="model",
        ...                policy=LoopPolicy(on_stop="escalate"))["escalate"]
        'loop_escalate'
    """
    policy = _check(policy)
    kw: dict[str, Any] = {"policy": policy, "messages_key": messages_key, "keys": keys}
    builder.add_node("loop_nudge", create_loop_nudge(**kw))
    builder.add_node("loop_stop", create_loop_stop(**kw))
    builder.add_edge("loop_nudge", continue_to)
    builder.add_edge("loop_stop", end)
    path_map = {"continue": continue_to, "nudge": "loop_nudge", "stop": "loop_stop"}
    if policy.on_stop == "escalate":
        builder.add_node(
            "loop_escalate",
            create_loop_escalate(continue_to=continue_to, **kw),
            destinations=(continue_to, "loop_stop"),
        )
        path_map["escalate"] = "loop_escalate"
    return path_map


ReplyRoute = Literal["tools", "nudge", "stop", "escalate", "__end__"]


def create_reply_check(
    *,
    policy: LoopPolicy | None = None,
    messages_key: str = "messages",
    keys: StateKeys | None = None,
) -> RunnableLambda[Any, ReplyRoute]:
    """Edge after the model: ``"tools"`` for tool calls, else loop_check on the reply.

    Use it instead of ``tools_condition``: a reply without tool calls that loops (a
    content loop inside it, or the same reply again, across user turns too) routes to
    ``"nudge"`` (the model answers again after the note) or ``"stop"``; any other reply
    ends the run (``"__end__"``). Tool calls are counted by the edge after the tools node.

    Example:
        >>> from langchain_core.messages import AIMessage
        >>> route = create_reply_check()
        >>> route.invoke({"messages": [AIMessage("I am done. " * 30)]})
        'nudge'
        >>> route.invoke({"messages": [AIMessage("Here is your answer.")]})
        '__end__'
    """
    policy = _check(policy)

    def route(state: Any, config: RunnableConfig) -> ReplyRoute:
        messages = state_messages(state, messages_key)
        last = messages[-1] if messages else None
        if isinstance(last, AIMessage) and last.tool_calls:
            return "tools"
        label = _decide(state, config, policy, messages_key).verdict.value
        return label if label in ("nudge", "stop", "escalate") else "__end__"  # type: ignore[return-value]

    wiring = "add_reply_check(builder, 'model', tools='tools')"
    return _node.runnable("reply_check", route, keys=keys, wiring=wiring)


def add_reply_check(
    builder: StateGraph[Any, Any, Any, Any],
    source: str,
    *,
    tools: str = "tools",
    policy: LoopPolicy | None = None,
    messages_key: str = "messages",
    end: str = END,
    keys: StateKeys | None = None,
) -> dict[str, str]:
    """Wire :func:`create_reply_check` after the model node ``source`` (in place of
    ``tools_condition``), adding loop_check's nodes if :func:`add_loop_check` has not.

    Example:
        >>> builder = StateGraph(LoopState).add_node("model", lambda s: {})
        >>> builder = builder.add_node("tools", lambda s: {})
        >>> add_reply_check(builder, "model")
        {'tools': 'tools', 'nudge': 'loop_nudge', 'stop': 'loop_stop', '__end__': '__end__'}
    """
    policy = _check(policy)
    if not isinstance(source, str) or not source:
        raise ValueError(f"add_reply_check source must be a node name, got {source!r}")
    if "loop_nudge" not in builder.nodes:
        add_loop_nodes(
            builder,
            continue_to=source,
            policy=policy,
            messages_key=messages_key,
            end=end,
            keys=keys,
        )
    path_map = {"tools": tools, "nudge": "loop_nudge", "stop": "loop_stop", "__end__": end}
    if "loop_escalate" in builder.nodes:
        path_map["escalate"] = "loop_escalate"
    paths = cast("dict[Hashable, str]", path_map)
    builder.add_conditional_edges(
        source, create_reply_check(policy=policy, messages_key=messages_key, keys=keys), paths
    )
    return path_map
