"""retry_router: route every tool failure to the right recovery (one recovery per failure kind).

==============  ==============================  =====================================
kind            examples                        route (default)
==============  ==============================  =====================================
TRANSIENT       timeout, connection, 429, 5xx   ``retry`` with backoff + jitter, then
                                                ``fallback`` when attempts run out
INVALID_ARGS    pydantic errors, 400/422        ``repair`` (precise field errors); the
                                                same invalid args again -> ``abstain``
PRECONDITION    404, 409, 412, premise gone     ``replan``
AMBIGUOUS       several matches                 ``clarify``
EMPTY_BUSINESS  a real "no data"                ``continue`` (report it, no retry)
EMPTY_ERROR     empty because it broke          ``retry``
PERMISSION      401, 403, PermissionError       ``refuse`` (never retried or worked around)
SAFETY          content policy                  ``refuse``
QUOTA           402, insufficient_quota         ``fallback``
UNKNOWN         anything else                   ``replan`` (never retried by default)
==============  ==============================  =====================================

Pure cores (no LangGraph): :func:`classify_failure`, :func:`describe_failure`,
:func:`route_failures`. Adapters: :class:`ToolCallGuard` (inside the ``ToolNode``: turns
exceptions into classified error ToolMessages, checks the :class:`CircuitBreaker` in the
store, serves ``retry`` by re-running only the failed calls after the backoff) and
:func:`create_retry_router` / :func:`add_retry_router` (the route after it).
Tool authors raise typed errors (:class:`TransientToolError`, :class:`InvalidArgsError`,
...) or return a :func:`failure_artifact`, so nothing depends on string matching.

Example:
    >>> from langchain_core.messages import HumanMessage
    >>> from langchain_core.tools import tool
    >>> from langgraph.graph import START, StateGraph
    >>> from langgraph.prebuilt import tools_condition
    >>> from agent_guards.testing import ScriptedChatModel, tool_call_message
    >>> from agent_guards import RetryState, ToolCallGuard, add_retry_router
    >>> from agent_guards.retry_router import TransientToolError
    >>> calls = []
    >>> @tool
    ... def quote(symbol: str) -> str:
    ...     '''Latest quote.'''
    ...     calls.append(symbol)
    ...     if len(calls) < 3:
    ...         raise TransientToolError("upstream 429", retry_after=2)
    ...     return "42.0"
    >>> waits = []
    >>> guard = ToolCallGuard(sleep=waits.append)
    >>> model = ScriptedChatModel(script=[tool_call_message("quote", {"symbol": "X"}), "42"])
    >>> builder = StateGraph(RetryState)
    >>> _ = builder.add_node("model", lambda s: {"messages": [model.invoke(s["messages"])]})
    >>> _ = builder.add_node("tools", guard.tool_node([quote]))
    >>> _ = builder.add_edge(START, "model")
    >>> _ = builder.add_conditional_edges("model", tools_condition)
    >>> _ = add_retry_router(builder, "tools", model="model", tools="tools")
    >>> out = builder.compile().invoke({"messages": [HumanMessage("quote X")]})
    >>> waits, out["usage"]["tool_calls"], out["messages"][-1].content
    ([2.0, 2.0], 3, '42')
"""

from __future__ import annotations

from collections.abc import Hashable
from functools import partial
from typing import Annotated, Any, Literal, cast

from langchain_core.messages import AIMessage, AnyMessage, ToolMessage
from langchain_core.runnables import RunnableConfig, RunnableLambda
from langgraph.graph import END, StateGraph
from langgraph.graph.message import add_messages
from langgraph.types import RetryPolicy

from agent_guards import graph as _node
from agent_guards.core.decision import GuardDecision, LoopRoute, RetryRoute, Verdict
from agent_guards.core.state import GuardState, StateKeys
from agent_guards.core.stopping import answer_pending, final_message, is_budget_refusal
from agent_guards.core.texts import TEXTS_EN, Texts
from agent_guards.graph import state_messages
from agent_guards.loop_check.core import detect_loop, no_loop, quiet_turn
from agent_guards.loop_check.graph import add_loop_nodes
from agent_guards.loop_check.policy import LoopPolicy
from agent_guards.retry_router.core import all_succeeded, no_failure, retryable, route_failures
from agent_guards.retry_router.policy import RetryRouterPolicy

__all__ = [
    "RetryState",
    "add_retry_router",
    "create_retry_finish",
    "create_retry_router",
    "finish_messages",
    "model_retry_policy",
]

GUARD = "retry_router"

# Every label of the router's edge (RetryRoute's, then LoopRoute's) as ONE Literal: LangGraph
# reads a route's labels from its return annotation when no path map is given, and checks
# them at compile time; it cannot read a Union of Literals (it would accept any target).
RouterRoute = Literal[
    "retry", "repair", "replan", "clarify", "abstain", "refuse", "fallback", "continue",
    "nudge", "stop", "escalate",
]  # fmt: skip
_ENDING = ("refuse", "clarify", "abstain", "fallback")


class RetryState(GuardState, total=False):
    """State mixin for retry_router: messages plus ``guard_log`` and ``usage``.

    The edge reads ``messages``; :class:`ToolCallGuard` writes ToolMessages, failure
    decisions to ``guard_log`` and ``usage["tool_calls"]`` (one per execution, retries
    included); the finish node appends the final message and its decision.

    Example:
        >>> from agent_guards import RetryState
        >>> sorted(RetryState.__annotations__)
        ['guard_log', 'messages', 'run_ledger', 'usage']
        >>> builder = StateGraph(RetryState)
        >>> _ = builder.add_node("tools", lambda s: {"usage": {"tool_calls": 2}})
        >>> graph = builder.set_entry_point("tools").compile()
        >>> graph.invoke({"usage": {"tool_calls": 1}})["usage"]  # usage counts add up
        {'tool_calls': 3}
    """

    messages: Annotated[list[AnyMessage], add_messages]


def _check(policy: RetryRouterPolicy | None) -> RetryRouterPolicy:
    return RetryRouterPolicy.coerce(policy)


def _decide(
    state: Any, config: RunnableConfig, policy: RetryRouterPolicy, key: str
) -> GuardDecision:
    core = partial(route_failures, policy=policy)
    return _node.decide_on_messages(GUARD, core, state, config, policy=policy.label, key=key)


def _healthy(
    messages: list[Any], policy: RetryRouterPolicy, loop_policy: LoopPolicy | None
) -> bool:
    """Whether the cores decide ``no_failure`` and (with ``loop_policy``) ``no_loop`` from
    the end of the history alone, by their own fast paths: every result of the latest
    turn succeeded and, with ``loop_policy``, that turn is one answered call that repeats
    nothing. The edge then takes their decisions as made once (the same every time)."""
    if loop_policy is not None and not quiet_turn(
        messages, loop_policy, loop_policy.loop_scan_options()
    ):
        return False
    return all_succeeded(messages, policy)


def create_retry_router(
    *,
    policy: RetryRouterPolicy | None = None,
    loop_policy: LoopPolicy | None = None,
    messages_key: str = "messages",
    keys: StateKeys | None = None,
) -> RunnableLambda[Any, RouterRoute]:
    """The retry_router conditional edge, placed after a ``ToolNode`` using :class:`ToolCallGuard`.

    Returns a :data:`~agent_guards.core.RetryRoute` label (``"continue"`` when nothing
    failed). With ``loop_policy`` it also runs loop_check, so one edge serves both:
    ``refuse`` first, then loop ``stop``/``escalate``, then the other failure routes, then a
    loop ``nudge``, then ``continue``. Decisions are attached to the trace; ToolCallGuard
    and the finish / loop nodes write them to ``guard_log``.

    Example:
        >>> from agent_guards import create_retry_router
        >>> from agent_guards.retry_router import describe_failure, failure_message
        >>> router = create_retry_router()
        >>> call = AIMessage("", tool_calls=[{"name": "pay", "args": {}, "id": "c1"}])
        >>> for code in (503, 404, 403):
        ...     error = failure_message(describe_failure(code), tool="pay", tool_call_id="c1")
        ...     print(code, router.invoke({"messages": [call, error]}))
        503 retry
        404 replan
        403 refuse
    """
    policy = _check(policy)
    if loop_policy is not None and not isinstance(loop_policy, LoopPolicy):
        raise TypeError(
            f"loop_policy must be a LoopPolicy or None, got {type(loop_policy).__name__}"
        )

    # built once: every tool turn runs both cores, or their decisions on a healthy turn
    route_core = partial(route_failures, policy=policy)
    loop_core = partial(detect_loop, policy=loop_policy)
    made_once = (no_failure(policy),) + ((no_loop(loop_policy),) if loop_policy is not None else ())

    def route(state: Any, config: RunnableConfig) -> RouterRoute:
        messages = state_messages(state, messages_key)  # both cores read the same history
        if _healthy(messages, policy, loop_policy):
            for made in made_once:  # attached to the trace as the cores' own would be
                _node.trace_only(made, config)
            return "continue"
        decision = _node.stamp(
            _node.decide_messages(GUARD, route_core, messages, policy=policy.label), config
        )
        label: str = (
            decision.data.get("route", "continue")
            if decision.reason != "invalid_input"
            else "continue"
        )
        if loop_policy is not None and label != "refuse":
            loop = _node.decide_messages("loop_check", loop_core, messages, policy="")
            verdict = _node.stamp(loop, config).verdict
            if verdict in (Verdict.STOP, Verdict.ESCALATE) or (
                verdict is Verdict.NUDGE and label == "continue"
            ):
                return cast("LoopRoute", verdict.value)
        return cast("RetryRoute", label)

    wiring = "add_retry_router(builder, 'tools', model='model', tools='tools')"
    return _node.runnable(GUARD, route, keys=keys, wiring=wiring)


def _finish_text(decision: GuardDecision, texts: Texts, *, budget: bool = False) -> str:
    """The user's sentence for an ending route (``texts`` words it; no guard name, no code);
    ``budget``: the failure is the tool budget's refusal, not the tool's."""
    data = decision.data
    tool = data.get("tool") or "the tool"
    route = data.get("route")
    if budget:
        return texts.render("stop", detail=f"the tool budget is spent ({data.get('message')})")
    if decision.reason == "outcome_unknown":  # whatever route the policy chose for it
        return texts.render("outcome_unknown", tool=tool)
    if route == "clarify":
        options = data.get("options") or []
        question = data.get("question") or texts.render("clarification", tool=tool)
        return question + (texts.render("options", options=", ".join(options)) if options else "")
    if route == "refuse":
        message = data.get("message") or texts.no_message
        return texts.render("refusal", tool=tool, message=message)
    if route == "fallback":
        return texts.render("unavailable", tool=tool)
    return texts.render("tool_failed", tool=tool)


def finish_messages(
    decision: GuardDecision, messages: list[Any], *, texts: Texts | None = None
) -> list[AIMessage | Any]:
    """The messages that end a run on a refuse / clarify / abstain / fallback route.

    Pending tool calls get a ToolMessage; then one message: the clarifying question, or
    the reason (refusal, unavailability, what is missing) plus the confirmed partial result.

    Example:
        >>> from agent_guards.retry_router import AmbiguousInput, describe_failure, failure_message
        >>> from agent_guards.retry_router import route_failures
        >>> f = describe_failure(AmbiguousInput(question="Which Paris?", options=["FR", "US"]))
        >>> call = AIMessage("", tool_calls=[{"name": "hotels", "args": {}, "id": "c1"}])
        >>> history = [call, failure_message(f, tool="hotels", tool_call_id="c1")]
        >>> [m.content for m in finish_messages(route_failures(history), history)]
        ['Which Paris? Options: FR, US.']
    """
    pending = answer_pending(
        messages, f"Not executed: retry_router ended the run ({decision.reason}).", name=GUARD
    )
    texts = texts or TEXTS_EN
    failed = str(decision.data.get("call_id"))
    budget = any(
        isinstance(m, ToolMessage) and m.tool_call_id == failed and is_budget_refusal(m)
        for m in messages
    )
    text = _finish_text(decision, texts, budget=budget)
    if decision.data.get("route") == "clarify":
        final = AIMessage(
            content=text, name=GUARD, response_metadata={"agent_guards": {"guard": GUARD}}
        )
    else:
        final = final_message(decision, [*messages, *pending], lead=text, texts=texts)
    return [*pending, final]


def create_retry_finish(
    *,
    policy: RetryRouterPolicy | None = None,
    messages_key: str = "messages",
    keys: StateKeys | None = None,
) -> RunnableLambda[Any, dict[str, Any]]:
    """Node for the ending routes (refuse, clarify, abstain, default fallback).

    Answers pending tool calls, then ends with one message: the clarifying question, the
    refusal, or the reason plus the confirmed partial result.

    Example:
        >>> from agent_guards.retry_router import create_retry_finish, describe_failure
        >>> from agent_guards.retry_router import failure_message
        >>> call = AIMessage("", tool_calls=[{"name": "pay", "args": {}, "id": "c1"}])
        >>> error = failure_message(describe_failure(403), tool="pay", tool_call_id="c1")
        >>> out = create_retry_finish().invoke({"messages": [call, error]})
        >>> out["guard_log"][0].verdict.value, out["messages"][-1].content
        ('refuse', "I can't do that: pay refused the request (...). I won't retry it or try ...")
    """
    policy = _check(policy)

    def finish(state: Any, config: RunnableConfig) -> dict[str, Any]:
        decision = _decide(state, config, policy, messages_key)
        messages = state_messages(state, messages_key)
        log = _node.state_value(state, "guard_log") or []  # a dict state, or an object
        # ToolCallGuard already logged this failure's decision: record it once
        last = log[-1] if log else None
        logged = isinstance(last, GuardDecision) and (
            last.guard,
            last.verdict,
            last.reason,
            last.selected_ids,
        ) == (decision.guard, decision.verdict, decision.reason, decision.selected_ids)
        ended = finish_messages(decision, messages, texts=policy.texts)
        update: dict[str, Any] = {messages_key: ended}
        return update if logged else {**update, "guard_log": [decision]}

    return _node.runnable("retry_finish", finish, keys=keys, mixin="RetryState")


def add_retry_router(
    builder: StateGraph[Any, Any, Any, Any],
    source: str,
    *,
    model: str,
    tools: str,
    replan: str | None = None,
    fallback: str | None = None,
    policy: RetryRouterPolicy | None = None,
    loop_policy: LoopPolicy | None = None,
    messages_key: str = "messages",
    end: str = END,
    keys: StateKeys | None = None,
    route_in_node: bool = False,
) -> dict[str, str]:
    """Wire retry_router after ``source`` (the tools node) and return the path map.

    ``retry`` goes back to ``tools`` (ToolCallGuard re-runs only the failed calls after
    the backoff); ``repair``, ``continue`` and, unless ``replan`` names a planner node,
    ``replan`` go to ``model``; ``refuse``, ``clarify``, ``abstain`` and, unless
    ``fallback`` names a node, ``fallback`` go to the ``retry_finish`` node, then ``end``.
    With ``loop_policy`` the loop_check nodes are added too and share the edge. ``keys``
    names the guard channels (:class:`~agent_guards.core.StateKeys`); the tools node's
    ToolCallGuard must have the same. ``route_in_node=True`` (the tools node must be
    ``ToolCallGuard(...).tool_node(tools)``): no conditional edge; the node decides the
    route and ends its turn with ``Command(goto=...)``, sparing the copy of every channel
    LangGraph's edge makes each turn; ``update_state(values, as_node=source)`` then routes
    nowhere (see :func:`~agent_guards.graph.route_in_node`).

    Example:
        >>> from agent_guards import RetryState, ToolCallGuard, add_retry_router
        >>> builder = StateGraph(RetryState)
        >>> _ = builder.add_node("model", lambda s: {})
        >>> _ = builder.add_node("tools", ToolCallGuard().tool_node([]))
        >>> add_retry_router(builder, "tools", model="model", tools="tools")
        {'retry': 'tools', 'repair': 'model', 'replan': 'model', 'continue': 'model',
         'refuse': 'retry_finish', 'clarify': 'retry_finish', 'abstain': 'retry_finish',
         'fallback': 'retry_finish'}
    """
    for name, value in (("source", source), ("model", model), ("tools", tools)):
        if not isinstance(value, str) or not value:
            raise ValueError(f"add_retry_router {name} must be a node name, got {value!r}")
    share = partial(_node.shared_policy, builder, "add_retry_router", tools)
    policy = _check(share(given=policy, field="retry", arg="policy"))
    if loop_policy is not None:  # None: no loop check on the edge, whatever the guard has
        loop_policy = share(given=loop_policy, field="loop", arg="loop_policy")
    _node.require_channels(builder, "add_retry_router", "RetryState", ("guard_log",), keys)
    _node.require_messages(builder, "add_retry_router", messages_key)
    _node.require_free_source(builder, "add_retry_router", source)
    _node.recheck_at_compile(builder, "add_retry_router", source, own=GUARD)
    _node.guarded_tool_node(builder, "add_retry_router", tools, keys, messages_key=messages_key)
    _node.require_retry_targets(builder, "add_retry_router", model=model, tools=tools)
    builder.add_node(
        "retry_finish",
        create_retry_finish(policy=policy, messages_key=messages_key, keys=keys),
    )
    builder.add_edge("retry_finish", end)
    path_map: dict[str, str] = {
        "retry": tools,
        "repair": model,
        "replan": replan or model,
        "continue": model,
        "refuse": "retry_finish",
        "clarify": "retry_finish",
        "abstain": "retry_finish",
        "fallback": fallback or "retry_finish",
    }
    if loop_policy is not None:
        path_map.update(
            add_loop_nodes(
                builder,
                continue_to=model,
                policy=loop_policy,
                messages_key=messages_key,
                end=end,
                keys=keys,
            )
        )
    router = create_retry_router(
        policy=policy, loop_policy=loop_policy, messages_key=messages_key, keys=keys
    )
    if route_in_node:
        _node.route_in_node(builder, "add_retry_router", source, router, path_map,
                            reads=(messages_key,))  # fmt: skip
    else:
        builder.add_conditional_edges(source, router, cast("dict[Hashable, str]", path_map))
    return path_map


def model_retry_policy(
    policy: RetryRouterPolicy | None = None, *, jitter: bool | None = None
) -> RetryPolicy:
    """LangGraph's ``RetryPolicy`` for a node that calls a model, from retry_router's policy.

    ``retry_on`` is :func:`~agent_guards.retry_router.retryable`: a 429, a 5xx, a timeout
    or a langchain-core ``ModelError`` whose ``is_retryable`` is True is retried with the
    policy's backoff (``base_delay``, ``factor``, ``max_delay``, ``max_attempts``); a
    permission, safety, invalid-request or unknown error is raised at once. Pair it with
    the node's ``error_handler`` to end the run with a reason once the attempts run out.

    Example:
        >>> from agent_guards.retry_router import Backoff, RetryRouterPolicy
        >>> from langchain_core.exceptions import ModelRateLimitError
        >>> rp = model_retry_policy(RetryRouterPolicy(backoff=Backoff(max_attempts=4)))
        >>> rp.max_attempts, rp.initial_interval, rp.retry_on(ModelRateLimitError("429"))
        (4, 1.0, True)
        >>> rp.retry_on(PermissionError("403 Forbidden"))
        False
    """
    policy = _check(policy)
    backoff = policy.backoff
    return RetryPolicy(
        initial_interval=float(backoff.base_delay),  # type: ignore[arg-type]
        backoff_factor=float(backoff.factor),
        max_interval=float(backoff.max_delay),  # type: ignore[arg-type]
        max_attempts=backoff.max_attempts,
        jitter=backoff.jitter != "none" if jitter is None else bool(jitter),
        retry_on=partial(_model_retry_on, policy=policy),
    )


def _model_retry_on(error: Exception, *, policy: RetryRouterPolicy) -> bool:
    return retryable(error, policy=policy)
