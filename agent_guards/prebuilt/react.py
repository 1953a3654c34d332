"""loop_check and retry_router for ``langgraph.prebuilt.create_react_agent``.

``create_react_agent(model, ToolCallGuard().tool_node(tools))`` alone half-works: the tool
node records decisions, but nothing stops the run (``tools`` always goes back to the
model) and, without the guard channels in the state, the decisions are dropped. The
route below uses the agent's own extension points:

* ``tools``: a guarded ``ToolNode`` (reuse of identical reads, classified failures
  retried in the call with their backoff, handoff tools always executed);
* ``pre_model_hook``: one nudge when the agent starts repeating itself;
* ``post_model_hook``: stop before the next tool call runs, on a loop stop, a refusal
  (or clarify / abstain / fallback) or a handoff that repeats without progress; pending
  calls are answered and the run ends with the partial result and the reason;
* ``state_schema``: :class:`GuardedReactState`, with ``guard_log`` and ``usage``;
* ``version="v2"``: the only version that runs ``post_model_hook`` before the tools.

``create_react_agent`` always calls the model after the tools ran, so after a refusal the
model is called once more; its tool calls are answered, never executed.

Example:
    >>> from langchain_core.messages import HumanMessage
    >>> from langchain_core.tools import tool
    >>> from agent_guards.testing import ScriptedChatModel, tool_call_message
    >>> from agent_guards.tool_guard import annotate_tool
    >>> @tool
    ... def search(q: str) -> str:
    ...     '''Search.'''
    ...     return "rates are 4%"
    >>> search = annotate_tool(search, read_only=True)
    >>> call = lambda _: tool_call_message("search", {"q": "rates"})  # a fresh call id each time
    >>> model = ScriptedChatModel(script=[call],
    ...                           repeat_last=True)
    >>> agent = guarded_react_agent(model, [search])
    >>> out = agent.invoke({"messages": [HumanMessage("rates?")]})
    >>> [d.verdict.value for d in out["guard_log"]], out["usage"]["tool_calls"], len(model.calls)
    (['reuse', 'nudge', 'stop'], 1, 3)
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from typing import Annotated, Any, NotRequired, Required, get_type_hints

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig, RunnableLambda
from langgraph.graph import StateGraph
from langgraph.graph.message import add_messages
from langgraph.managed import RemainingSteps
from langgraph.prebuilt import ToolNode
from langgraph.types import Command

from agent_guards import graph as _node
from agent_guards.core.decision import GuardDecision, Verdict
from agent_guards.core.errors import InvalidInputError
from agent_guards.core.state import DEFAULT_LOG_SIZE, GuardState, Usage, keep_last, merge_usage
from agent_guards.core.stopping import answer_pending, final_message
from agent_guards.core.texts import TEXTS_EN, Texts
from agent_guards.loop_check.core import detect_loop
from agent_guards.loop_check.graph import nudge_text
from agent_guards.loop_check.policy import LoopPolicy
from agent_guards.prebuilt.handoff import (
    HANDOFF_PREFIXES,
    HandoffPolicy,
    check_handoffs,
    handoff_names,
)
from agent_guards.retry_router.core import route_failures
from agent_guards.retry_router.graph import finish_messages
from agent_guards.retry_router.policy import RetryRouterPolicy
from agent_guards.tool_guard.wrapper import ToolCallGuard

__all__ = ["GuardedReactState", "ReactAgentHooks", "guarded_react_agent", "react_agent_hooks"]

_ENDING = ("refuse", "clarify", "abstain", "fallback")
_UNSET: Any = object()
_LOG = keep_last(DEFAULT_LOG_SIZE)
"""One reducer object: ``create_react_agent`` re-reads the schema and compares reducers."""


class GuardedReactState(GuardState, total=False):
    """``create_react_agent`` state with the guard channels (``guard_log``, ``usage``, and
    ``run_ledger`` for a ledger kept without a store).

    Example:
        >>> sorted(GuardedReactState.__annotations__)
        ['guard_log', 'messages', 'remaining_steps', 'run_ledger', 'usage']
    """

    messages: Required[Annotated[Sequence[AnyMessage], add_messages]]
    remaining_steps: NotRequired[RemainingSteps]
    guard_log: Annotated[list[GuardDecision], _LOG]
    usage: Annotated[Usage, merge_usage]


@dataclass(frozen=True)
class ReactAgentHooks:
    """What :func:`react_agent_hooks` returns: ``create_react_agent(model, **hooks.kwargs())``.

    Attributes:
        tools: The guarded ``ToolNode``.
        pre_model_hook: Node run before each model call (the nudge).
        post_model_hook: Node run after each model call (the stops).
        state_schema: A state with ``guard_log`` and ``usage``.
    """

    tools: ToolNode
    pre_model_hook: RunnableLambda[Any, Any]
    post_model_hook: RunnableLambda[Any, Any]
    state_schema: type[Any]

    def kwargs(self) -> dict[str, Any]:
        """Keyword arguments for ``create_react_agent`` (``version="v2"`` included)."""
        return {
            "tools": self.tools,
            "pre_model_hook": self.pre_model_hook,
            "post_model_hook": self.post_model_hook,
            "state_schema": self.state_schema,
            "version": "v2",
        }


@dataclass(frozen=True)
class _HandoffAware:
    """``wrap_tool_call`` that runs handoff tools as they are (a handoff is control flow:
    answering it from an earlier result would never hand over) and the rest through the guard."""

    guard: ToolCallGuard
    handoffs: frozenset[str]

    def __call__(self, request: Any, execute: Callable[[Any], Any]) -> Any:
        if request.tool_call["name"] in self.handoffs:
            return _carry_guard_channels(execute(request), request.state)
        return self.guard(request, execute)

    async def awrap(self, request: Any, execute: Callable[[Any], Awaitable[Any]]) -> Any:
        if request.tool_call["name"] in self.handoffs:
            return _carry_guard_channels(await execute(request), request.state)
        return await self.guard.awrap(request, execute)


def _carry_guard_channels(result: Any, state: Any) -> Any:
    """A handoff to the parent graph carries this run's ``guard_log`` and ``usage``.

    The agent's run ends with the handoff, so what it recorded before (a reuse, a nudge,
    the calls it counted) would otherwise stay behind. A handoff that sends the state
    already (langgraph-supervisor's ``{**state, ...}``) is left as it is.
    """
    if not isinstance(result, Command) or result.graph != Command.PARENT:
        return result
    update = result.update
    if not isinstance(update, dict) or not isinstance(state, dict):
        return result
    carried = {
        key: state[key] for key in ("guard_log", "usage") if key not in update and state.get(key)
    }
    if not carried:
        return result
    return replace(result, update={**update, **carried})


def check_state_schema(schema: Any, *, owner: str) -> type[Any]:
    """``schema``, when it has the guard channels with their reducers; else a ValueError
    naming the mixin."""
    if schema is None:
        return GuardedReactState
    try:
        hints = get_type_hints(schema, include_extras=True)
    except Exception as err:  # not a class with annotations
        raise TypeError(f"{owner} state_schema must be a TypedDict class, got {schema!r}") from err
    missing = [key for key in ("messages", "guard_log", "usage") if key not in hints]
    if missing:
        raise ValueError(
            f"{owner}: state_schema {getattr(schema, '__name__', schema)} has no "
            f"{', '.join(missing)} channel(s), so every guard decision would be dropped: "
            "subclass agent_guards.prebuilt.GuardedReactState (or add agent_guards.GuardState)"
        )
    _node.require_reducers(
        StateGraph(schema).channels,
        f"{owner}: state_schema {getattr(schema, '__name__', schema)}",
        ("guard_log", "usage"),
        "take them from agent_guards.prebuilt.GuardedReactState (subclass it: GuardState's "
        "reducers) and drop your own",
    )
    return schema  # type: ignore[no-any-return]


def _tool_node(
    tools: Any, guard: ToolCallGuard, extra: Sequence[str]
) -> tuple[ToolNode, frozenset[str]]:
    if isinstance(tools, ToolNode):
        wrapper = getattr(tools, "_wrap_tool_call", None)
        if not isinstance(wrapper, (ToolCallGuard, _HandoffAware)):
            raise ValueError(
                "react_agent_hooks got a ToolNode without ToolCallGuard: pass the list of "
                "tools instead (the hooks build the guarded ToolNode)"
            )
        _node.serve_retries_in_place(tools)  # the agent has no retry edge
        names = handoff_names(tools.tools_by_name.values(), extra)
        if names and not isinstance(wrapper, _HandoffAware):
            raise ValueError(
                f"the ToolNode has handoff tools {sorted(names)} that ToolCallGuard would answer "
                "from earlier results: pass the list of tools instead of a ToolNode"
            )
        return tools, names
    tools = list(tools)
    names = handoff_names(tools, extra)
    if not names:
        return guard.tool_node(tools), names
    wrap = _HandoffAware(guard, names)
    handle: dict[str, Any] = {} if guard.retry is None else {"handle_tool_errors": False}
    return ToolNode(tools, wrap_tool_call=wrap, awrap_tool_call=wrap.awrap, **handle), names


def _build_guard(guard: ToolCallGuard | None, loop: Any, retry: Any) -> ToolCallGuard:
    if guard is None:
        kw: dict[str, Any] = {}
        if loop is not _UNSET:
            kw["loop"] = LoopPolicy.coerce(loop) if loop is not None else None
        if retry is not _UNSET:
            kw["retry"] = RetryRouterPolicy.coerce(retry) if retry is not None else None
        return ToolCallGuard(retry_in_place=True, **kw)
    if not isinstance(guard, ToolCallGuard):
        raise TypeError(f"guard must be a ToolCallGuard, got {type(guard).__name__}")
    if loop is not _UNSET or retry is not _UNSET:
        raise ValueError(
            "pass either guard=ToolCallGuard(loop=..., retry=...) or loop=/retry=, not both: "
            "the hooks use the guard's policies"
        )
    # the agent's tools always go back to the model: a retry is served in the tool call
    return replace(guard, retry_in_place=True)


def react_agent_hooks(
    tools: Any,
    *,
    loop: LoopPolicy | None = _UNSET,
    retry: RetryRouterPolicy | None = _UNSET,
    guard: ToolCallGuard | None = None,
    handoff: HandoffPolicy | None = None,
    handoff_tools: Sequence[str] = (),
    state_schema: type[Any] | None = None,
) -> ReactAgentHooks:
    """The guarded ``tools``, hooks and state for ``create_react_agent``.

    Args:
        tools: The tools (or a ``ToolNode`` built by ``ToolCallGuard().tool_node``; its
            guard is set to retry in place: the agent has no retry edge).
        loop: loop_check policy (default :class:`LoopPolicy`; None turns loop_check off).
        retry: retry_router policy (default :class:`RetryRouterPolicy`; None: off).
        guard: A configured :class:`ToolCallGuard` (budget, ledger, breaker) instead of
            ``loop`` / ``retry``.
        handoff: When handoffs stop (default :class:`HandoffPolicy`), for supervisors.
        handoff_tools: Names of handoff tools beyond the detected ones.
        state_schema: Your state; it must have the guard channels.

    Example:
        >>> from langgraph.prebuilt import create_react_agent
        >>> from agent_guards.testing import ScriptedChatModel
        >>> hooks = react_agent_hooks([])
        >>> agent = create_react_agent(ScriptedChatModel(script=["hi"]), **hooks.kwargs())
        >>> agent.invoke({"messages": [("user", "hello")]})["messages"][-1].content
        'hi'
        >>> react_agent_hooks([], state_schema=dict)
        Traceback (most recent call last):
        ...
        ValueError: react_agent_hooks: state_schema dict has no messages, guard_log, usage ...
    """
    built = _build_guard(guard, loop, retry)
    if handoff is not None and not isinstance(handoff, HandoffPolicy):
        raise TypeError(f"handoff must be a HandoffPolicy or None, got {type(handoff).__name__}")
    schema = check_state_schema(state_schema, owner="react_agent_hooks")
    node, names = _tool_node(tools, built, tuple(handoff_tools))
    own = frozenset(node.tools_by_name)
    checks = _Checks(built.loop, built.retry, handoff or HandoffPolicy(), names, own)
    pre = _node.runnable("pre_model_hook", checks.before_model)
    post = _node.runnable("post_model_hook", checks.after_model)
    return ReactAgentHooks(node, pre, post, schema)


def guarded_react_agent(
    model: Any,
    tools: Any,
    *,
    loop: LoopPolicy | None = _UNSET,
    retry: RetryRouterPolicy | None = _UNSET,
    guard: ToolCallGuard | None = None,
    handoff: HandoffPolicy | None = None,
    handoff_tools: Sequence[str] = (),
    state_schema: type[Any] | None = None,
    **kwargs: Any,
) -> Any:
    """``create_react_agent(model, tools, **kwargs)`` with loop_check and retry_router.

    ``kwargs`` go to ``create_react_agent`` (``prompt``, ``checkpointer``, ``store``,
    ``name``, ...); the guard owns ``pre_model_hook``, ``post_model_hook`` and ``version``.
    See :func:`react_agent_hooks` for the other arguments.

    Example:
        >>> from agent_guards.testing import ScriptedChatModel
        >>> guarded_react_agent(ScriptedChatModel(script=[]), [], version="v1")
        Traceback (most recent call last):
        ...
        ValueError: guarded_react_agent needs version="v2": with "v1" ...
    """
    from langgraph.prebuilt import create_react_agent

    if kwargs.get("version", "v2") != "v2":
        raise ValueError(
            'guarded_react_agent needs version="v2": with "v1" create_react_agent runs the '
            "tools before post_model_hook, so a loop or a refusal is executed before it stops"
        )
    taken = sorted(set(kwargs) & {"pre_model_hook", "post_model_hook"})
    if taken:
        raise ValueError(
            f"guarded_react_agent sets {', '.join(taken)} itself: build the agent with "
            "react_agent_hooks(...) and call your hook from a node of your own"
        )
    kwargs.pop("version", None)
    hooks = react_agent_hooks(
        tools, loop=loop, retry=retry, guard=guard, handoff=handoff,
        handoff_tools=handoff_tools, state_schema=state_schema,
    )  # fmt: skip
    return create_react_agent(model, **hooks.kwargs(), **kwargs)


@dataclass(frozen=True)
class _Checks:
    """The hooks' decisions, from the messages alone (nothing kept between calls)."""

    loop: LoopPolicy | None
    retry: RetryRouterPolicy | None
    handoff: HandoffPolicy
    handoffs: frozenset[str]
    own: frozenset[str]
    """This agent's tool names: a parent's handoff result in the history is not ours."""

    def _safe(self, guard: str, policy: str, decide: Callable[[], GuardDecision]) -> GuardDecision:
        try:
            return decide()
        except InvalidInputError as err:
            return _node.invalid_input(guard, err, policy=policy, verdict=Verdict.CONTINUE)

    def _texts(self) -> Texts | None:
        """The texts users read: loop_check's policy's, else retry_router's, else English."""
        policy = self.loop or self.retry
        return policy.texts if policy is not None else None

    def _loop(self, messages: list[Any], config: RunnableConfig) -> GuardDecision | None:
        policy = self.loop
        if policy is None:
            return None
        decision = self._safe(
            "loop_check", policy.label, lambda: detect_loop(messages, policy=policy)
        )
        return _node.stamp(decision, config)

    def before_model(self, state: Any, config: RunnableConfig) -> dict[str, Any]:
        """One nudge after the tools ran, when the agent starts repeating itself."""
        messages = _node.state_messages(state, "messages")
        if not messages or not isinstance(messages[-1], ToolMessage):
            return {}
        if messages[-1].name not in self.own:  # e.g. the handoff that brought us here
            return {}
        decision = self._loop(messages, config)
        if decision is None or decision.verdict is not Verdict.NUDGE:
            return {}
        note = HumanMessage(nudge_text(decision), name="loop_check")
        return {"messages": [note], "guard_log": [decision]}

    def after_model(self, state: Any, config: RunnableConfig) -> dict[str, Any]:
        """Stop before the model's tool calls run: refusal first, then handoffs, then loops."""
        messages = _node.state_messages(state, "messages")
        ended = self._failure_end(state, messages, config)
        if ended is not None:
            return ended
        last = messages[-1] if messages else None
        if not isinstance(last, AIMessage) or not last.tool_calls:
            return {}
        if self.handoffs:
            handoff = self._safe(
                "loop_check",
                self.handoff.name,
                lambda: check_handoffs(messages, handoffs=self.handoffs, policy=self.handoff),
            )
            if handoff.verdict is Verdict.STOP:
                stamped = _node.stamp(handoff, config)
                return _stop(stamped, messages, handoffs=self.handoffs, texts=self._texts())
            if all(call["name"] in self.handoffs for call in last.tool_calls):
                return {}  # handoffs are judged by progress, not by repetition alone
        decision = self._loop(messages, config)
        if decision is None:
            return {}
        if decision.verdict is Verdict.STOP:
            return _stop(decision, messages, texts=self._texts())
        if decision.verdict is Verdict.ESCALATE:
            return _escalate(decision, messages, self._texts())
        return {}

    def _failure_end(
        self, state: Any, messages: list[Any], config: RunnableConfig
    ) -> dict[str, Any] | None:
        """End on refuse / clarify / abstain / fallback of the results the model just read."""
        policy = self.retry
        # the model's last call read tool results (not a new user message)
        if policy is None or not _node.ends_with_tool_results(messages[:-1]):
            return None
        seen = messages[:-1]
        decision = self._safe(
            "retry_router", policy.label, lambda: route_failures(seen, policy=policy)
        )
        if decision.data.get("route") not in _ENDING:
            return None
        decision = _node.stamp(decision, config)
        update: dict[str, Any] = {
            "messages": finish_messages(decision, messages, texts=policy.texts)
        }
        log = _node.state_value(state, "guard_log") or []
        if not any(_same(d, decision) for d in log[-5:]):  # the tool node logged it already
            update["guard_log"] = [decision]
        return update


def _same(a: Any, b: GuardDecision) -> bool:
    return isinstance(a, GuardDecision) and (a.guard, a.verdict, a.reason, a.selected_ids) == (
        b.guard,
        b.verdict,
        b.reason,
        b.selected_ids,
    )


def _stop(
    decision: GuardDecision,
    messages: list[Any],
    *,
    handoffs: frozenset[str] = frozenset(),
    texts: Texts | None = None,
) -> dict[str, Any]:
    decision = replace(decision, verdict=Verdict.STOP)
    pending = answer_pending(
        messages, f"Not executed: {decision.guard} stopped the run ({decision.reason})."
    )
    if handoffs:  # what the agents answered is the partial result, not "transferred"
        messages = [_as_result(m) for m in messages if not _handed_off(m, handoffs)]
    final = final_message(decision, [*messages, *pending], texts=texts)
    return {"messages": [*pending, final], "guard_log": [decision]}


def _handed_off(message: Any, handoffs: frozenset[str]) -> bool:
    """A handoff's confirmation, this agent's or a worker's way back (``transfer_back_to_*``)."""
    if not isinstance(message, ToolMessage):
        return False
    return message.name in handoffs or str(message.name or "").startswith(HANDOFF_PREFIXES)


def _as_result(message: Any) -> Any:
    """A worker's answer (an assistant text without tool calls) read as a result."""
    if isinstance(message, AIMessage) and not message.tool_calls and message.content:
        return ToolMessage(message.content, tool_call_id="-", name=message.name or "agent")
    return message


def _escalate(
    decision: GuardDecision, messages: list[Any], texts: Texts | None = None
) -> dict[str, Any]:
    """Ask a human (``interrupt``): ``"stop"`` ends the run, anything else lets the call run."""
    answer = _node.ask_human(
        {
            "guard": "loop_check",
            "decision": decision.to_dict(),
            "question": (texts or TEXTS_EN).render("stuck_question", detail=decision.detail),
        }
    )
    action = answer.get("action") if isinstance(answer, dict) else answer
    if action == "stop" or action is False:
        return _stop(decision, messages, texts=texts)
    return {"guard_log": [decision]}
