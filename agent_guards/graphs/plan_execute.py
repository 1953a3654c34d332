"""The reference Plan-and-Execute graph, with every agent-guards guard in place.

Clone this file as the template for your own planner. The flow::

    parse_goal -> memory_resolve -> plan -> planner_gate -> start_step
      -> [agent (context_guard, then the model) -> tools (loop_check + retry_router)]*
      -> record_step
      -> review -> planner_gate ... -> evidence_resolve -> respond

* ``parse_goal`` extracts the goal, its required constraints and the current turn's facts;
  a missing constraint goes straight to a clarifying question.
* ``planner_gate`` is the single entry to execution: it accepts or refuses every new plan
  version (replan budget, execute gate, no-new-evidence, similarity) and asks a human before
  a high-risk step.
* Each plan step runs as a bounded ReAct loop on its own message channel
  (``step_messages``), cleared when the next step starts, so checkpoints stay flat.
  context_guard fits that channel inside the agent node, right before each model call
  (one super-step, its decision in ``guard_log`` as ever), counting only what the tools
  added since the last fit (``context_tally``).
* ``respond`` answers only from the evidence verdict, with citations; a run that hits its
  budget returns the confirmed part and what is missing.

Budgets are cumulative per thread (``usage``), and ``recursion_limit`` is derived from them
(:func:`run_config`), so no scenario ends in ``GraphRecursionError``. With a store, the tool
node keeps a run ledger (what each call really did), and each super-step is checkpointed
before the next one starts, so a crash between two steps loses neither. ``graph`` at the
bottom is a checkpointer-free instance for ``langgraph.json`` (``langgraph dev``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.prebuilt import ToolNode
from langgraph.store.base import BaseStore

from agent_guards import (
    PlanStep,
    ToolCallGuard,
    add_retry_router,
    create_evidence_resolve,
    create_memory_resolve,
    create_planner_gate,
)
from agent_guards.core.texts import TEXTS_EN
from agent_guards.evidence_resolve.filtered import permission_filtered
from agent_guards.retry_router import CircuitBreaker, model_retry_policy
from agent_guards.tool_guard.ledger import CANCEL_KEY, RunLedger

from .nodes import Nodes, accept_every_plan, keep_all_evidence, no_facts
from .state import SUPERSTEPS_PER_STEP, PlanExecuteState, Policies, run_config

__all__ = [
    "SUPERSTEPS_PER_STEP",
    "Nodes",
    "PlanExecuteState",
    "Policies",
    "build_graph",
    "cancel_run",
    "graph",
    "run_config",
]


def build_graph(
    model: BaseChatModel,
    tools: Sequence[Any],
    *,
    policies: Policies | None = None,
    checkpointer: Any = None,
    store: Any = None,
    compensations: Mapping[str, Callable[[PlanStep], str]] | None = None,
    sleep: Callable[[float], Any] | None = None,
    ledger: RunLedger | None = None,
    name: str = "plan_execute",
) -> Any:
    """Build and compile the reference graph.

    Args:
        model: Any chat model; it must support ``bind_tools`` and ``with_structured_output``.
        tools: The tools steps may call. Tools that return ``(content, artifact)`` with a
            list of evidence dicts (or ``Document``s) in the artifact feed evidence_resolve;
            each such result is filtered for ``configurable["principal"]`` inside the tool
            run (:func:`~agent_guards.evidence_resolve.filtered.permission_filtered`).
        policies: Every guard's policy; :class:`Policies` defaults when omitted.
        checkpointer: Any LangGraph checkpointer (SQLite, Postgres, in-memory) or None.
        store: A ``BaseStore`` for long-term memories, circuit breakers and archived
            context. The breaker lives in the run's store: this one, or the Agent Server's
            under ``langgraph dev``; it is off for a run without any.
        compensations: Tool name -> undo hook run, when a run is cancelled, once for each
            call of that tool that ran and succeeded on the thread (newest first; handed
            the plan step that ran it). Each returns a line for the record.
        sleep: How the retry backoff waits (``time.sleep`` by default); inject one in tests.
        ledger: How the tool node keeps its run ledger (a ``reconcile`` hook, how long to
            wait for a call another worker runs); ``RunLedger()`` by default, kept in the
            run's store (``store``, or the Agent Server's under ``langgraph dev``), else in
            state.
        name: The compiled graph's name.

    With a checkpointer, the graph runs with ``durability="sync"`` unless a call passes
    another (see :func:`_durable`); without one, whoever brings the checkpointer (the
    Agent Server, a parent graph) chooses.
    """
    _check_parts(model, store)
    pol, tool_names = _checked(policies, tools, compensations)
    pol = _worded(pol)
    if pol.guards:
        # permission at the boundary: a tool result loses what the run's principal may not
        # see inside the tool's own run, before any channel, prompt, trace, ledger or archive
        tools = permission_filtered(tools)
    # on by default: in the run's store (this one, or the one the Agent Server brings to a
    # graph built without one), else in state
    ledger = ledger if ledger is not None else RunLedger() if pol.guards else None
    nodes = Nodes(model, tools, pol, compensations or {}, ledger=ledger)
    builder = StateGraph(PlanExecuteState)
    calls_model = _calls_model(pol, nodes)
    builder.add_node(
        "parse_goal", nodes.parse_goal, destinations=("memory_resolve", "respond"), **calls_model
    )
    # Unguarded baseline: stored memories are injected as they are, the turn's facts ignored.
    extractor = None if pol.guards else no_facts
    builder.add_node(
        "memory_resolve", create_memory_resolve(policy=pol.memory, extractor=extractor)
    )
    builder.add_node(
        "plan", nodes.plan, destinations=("planner_gate", "evidence_resolve"), **calls_model
    )
    if pol.guards:
        gate = create_planner_gate(
            policy=pol.planner,
            tools=tool_names,
            approval_risk=pol.approval_risk,
            destinations={
                "execute": "start_step",
                "replan": "start_step",
                "clarify": "respond",
                "escalate": "respond",
                "stop": "evidence_resolve",
            },
        )
        builder.add_node(
            "planner_gate", gate, destinations=("start_step", "respond", "evidence_resolve")
        )
        builder.add_node("evidence_resolve", create_evidence_resolve(policy=pol.evidence))
    else:
        builder.add_node("planner_gate", accept_every_plan, destinations=("start_step",))
        builder.add_node("evidence_resolve", keep_all_evidence)
    builder.add_node("start_step", nodes.start_step, destinations=(nodes.first, "evidence_resolve"))
    builder.add_node("agent", nodes.agent, destinations=("tools", "record_step"), **calls_model)
    builder.add_node(
        "record_step",
        nodes.record_step,
        destinations=("respond", "plan", "review", "evidence_resolve"),
    )
    builder.add_node(
        "review", nodes.review, destinations=("planner_gate", "evidence_resolve"), **calls_model
    )
    builder.add_node("respond", nodes.respond, destinations=("escalate", END))
    builder.add_node("escalate", nodes.escalate)
    builder.add_edge(START, "parse_goal")
    builder.add_edge("memory_resolve", "plan")
    builder.add_edge("evidence_resolve", "respond")
    builder.add_edge("escalate", END)
    _add_tools(builder, tools, pol, store=store, ledger=ledger, sleep=sleep,
               time_limit=nodes.tool_time_limit)  # fmt: skip
    compiled = builder.compile(checkpointer=checkpointer, store=store, name=name)
    return compiled if checkpointer is None else _durable(compiled)


def _calls_model(pol: Policies, nodes: Nodes) -> dict[str, Any]:
    """Options of the nodes that call the model: retryable failures (429, 5xx, timeouts,
    retryable ``ModelError``s) get the retry policy's backoff, then every failure of the
    model call ends the run with a reason (``Nodes.model_failed``), never a crash."""
    return {"retry_policy": model_retry_policy(pol.retry), "error_handler": nodes.model_failed}


def _worded(pol: Policies) -> Policies:
    """``pol`` with its texts in the loop and retry policies that keep the default ones."""
    if pol.texts is TEXTS_EN:
        return pol
    loop = pol.loop if pol.loop.texts is not TEXTS_EN else replace(pol.loop, texts=pol.texts)
    retry = pol.retry if pol.retry.texts is not TEXTS_EN else replace(pol.retry, texts=pol.texts)
    return replace(pol, loop=loop, retry=retry)


def _check_parts(model: Any, store: Any) -> None:
    """Refuse a model that is no chat model and a store that is no ``BaseStore`` (they
    failed later, at the first model call or the first ledger write, with an AttributeError)."""
    if not callable(getattr(model, "bind_tools", None)):
        hint = (
            f": for a provider string, pass init_chat_model({model!r}) "
            "(from langchain.chat_models import init_chat_model)"
            if isinstance(model, str)
            else ""
        )
        raise TypeError(f"model must be a LangChain chat model, got {type(model).__name__}{hint}")
    if store is not None and not isinstance(store, BaseStore):
        raise TypeError(
            f"store must be a LangGraph BaseStore (InMemoryStore, SqliteStore, PostgresStore) "
            f"or None, got {type(store).__name__}"
        )


def _checked(
    policies: Policies | None, tools: Sequence[Any], compensations: Mapping[str, Any] | None
) -> tuple[Policies, list[str]]:
    """The policies (defaults when None) and the tool names, or why they cannot be used."""
    pol = policies or Policies()
    if not isinstance(pol, Policies):
        raise TypeError(f"policies must be a Policies, got {type(pol).__name__}")
    if isinstance(tools, (str, bytes, Mapping)) or not isinstance(tools, Sequence):
        raise TypeError(
            f"tools must be a list of LangChain tools, got {type(tools).__name__}: "
            "build_graph(model, [my_tool, ...])"
        )
    plain = [i for i, t in enumerate(tools) if not isinstance(t, BaseTool)]
    if plain:
        raise TypeError(
            f"tools[{plain[0]}] is a {type(tools[plain[0]]).__name__}, not a LangChain tool: "
            "decorate the function with @tool (from langchain_core.tools import tool), or "
            "wrap it with StructuredTool.from_function"
        )
    tool_names = [t.name for t in tools]
    twice = sorted({n for n in tool_names if tool_names.count(n) > 1})
    if twice:
        raise ValueError(
            f"tool names must be unique, {twice} named more than once: the model calls a tool "
            "by name, so only one of them could ever run; rename one (@tool('other_name'))"
        )
    unknown = sorted(set(compensations or {}) - set(tool_names))
    if unknown:
        raise ValueError(f"compensations for unknown tools {unknown}; tools: {tool_names}")
    hooks = [n for n, hook in (compensations or {}).items() if not callable(hook)]
    if hooks:
        raise TypeError(
            f"compensations[{hooks[0]!r}] is not callable: give each tool name a function "
            "(step) -> str that undoes the write and says what it did"
        )
    return pol, tool_names


_DURABILITY = "__pregel_durability"


def _durable(compiled: Any) -> Any:
    """``compiled``, run with ``durability="sync"`` unless a call passes another.

    Each super-step's checkpoint is then written before the next super-step starts. With
    LangGraph's default (``"async"``) a background thread writes them while the run goes
    on, and a SIGKILL can lose a dozen steps: the model is asked again for tool calls it
    already made (a real model picks new call ids, which the ledger has never seen),
    completed reads run again, and a write answered from the ledger on the replay loses
    the count and the evidence its lost checkpoint held. The price is one wait per step
    for a checkpoint write. Only for a graph compiled with a checkpointer: LangGraph fails
    on a ``"sync"`` run that has none.
    """
    # LangGraph's stream() reads a run's default durability from this configurable key (the
    # one it sets for subgraphs). Set on the compiled graph itself: with_config() copies the
    # graph, and the copy loses the strict-msgpack allowlist compile() derived.
    config = dict(compiled.config or {})
    config["configurable"] = {**(config.get("configurable") or {}), _DURABILITY: "sync"}
    compiled.config = config
    compiled.__class__ = _ThreadedGraph  # copies (Pregel.copy) keep the class
    return compiled


class _ThreadedGraph(CompiledStateGraph):  # type: ignore[type-arg]
    """The reference graph on a checkpointer: a run names its thread.

    LangGraph refuses a checkpointed run without a ``configurable``; the graph's own
    configurable (the durability above) turns that check off, and a run without a
    ``thread_id`` would fail inside the checkpointer with a bare ``KeyError``.
    """

    def stream(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        _require_thread(config)
        return super().stream(input, config, **kwargs)

    def astream(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        _require_thread(config)
        return super().astream(input, config, **kwargs)


def _require_thread(config: RunnableConfig | None) -> None:
    if not ((config or {}).get("configurable") or {}).get("thread_id"):
        raise ValueError(
            "this graph has a checkpointer, so a run needs config['configurable']['thread_id']:"
            " pass run_config(policies, thread_id=...)"
        )


def _add_tools(
    builder: StateGraph[Any, Any, Any, Any],
    tools: Sequence[Any],
    pol: Policies,
    *,
    store: Any,
    ledger: RunLedger | None,
    sleep: Callable[[float], Any] | None,
    time_limit: Callable[[Any], float | None],
) -> None:
    """The step's tool loop: guarded (reuse, loops, failures) or plain."""
    if not pol.guards:
        builder.add_node(
            "tools", ToolNode(tools, messages_key="step_messages", handle_tool_errors=True)
        )
        builder.add_edge("tools", "agent")
        return
    guard = _RunStoreGuard(
        loop=pol.loop,
        retry=pol.retry,
        breaker=pol.breaker,  # in the run's store, or off for a run without one
        messages_key="step_messages",
        budget=pol.budget,  # max_tool_calls is checked per call, not per turn
        # what the tools really did, per thread: forks and resumes never re-run a write
        ledger=ledger,
        # a step's timeout_s holds inside the tool node too, even when a tool blocks
        timeout=time_limit,
    )
    if sleep is not None:
        guard = replace(guard, sleep=sleep, asleep=_async_sleep(sleep))
    builder.add_node("tools", guard.tool_node(tools))
    # context_guard runs inside the agent node, right before its model call (Nodes.agent)
    add_retry_router(
        builder,
        "tools",
        model="agent",
        tools="tools",
        replan="record_step",
        fallback="record_step",
        policy=pol.retry,
        loop_policy=pol.loop,
        messages_key="step_messages",
        end="record_step",
        # the tools node decides its route (Command), as every node of this graph does:
        # a conditional edge would copy the graph's 65 channels on each tool turn
        route_in_node=True,
    )


class _RunStoreGuard(ToolCallGuard):
    """A ToolCallGuard whose circuit breaker lives in the run's store: the one the graph
    was compiled with, or the one the Agent Server attaches to a graph built without one
    (``langgraph dev``). A run without a store has no breaker (it keeps its state there)."""

    def _breaker(self, request: Any) -> CircuitBreaker | None:
        if self.store is None and getattr(request.runtime, "store", None) is None:
            return None
        return self.breaker


def _async_sleep(sleep: Callable[[float], Any]) -> Callable[[float], Any]:
    async def asleep(seconds: float) -> None:
        sleep(seconds)

    return asleep


def cancel_run(app: Any, config: RunnableConfig, reason: str = "cancelled by the user") -> Any:
    """Cancel a run between steps, wherever it stands; returns the final state.

    The run resumes with ``configurable[CANCEL_KEY] = reason``: the next node that would do
    work (plan, step, model call, review) ends the run instead, and the thread's completed
    writes, whatever plan version ran them, are compensated newest first, once each (a
    write a cancel already undid is never undone again). Works on a run
    stopped between steps (``interrupt_before``/``interrupt_after``, a crash) and on one
    that ended (its answer given, or a budget spent): its writes are undone all the same.
    A run paused for an approval is cancelled with ``Command(resume={"cancel": reason})``.

    Example:
        >>> from langgraph.checkpoint.memory import InMemorySaver
        >>> from agent_guards.graphs.scenarios import SCENARIOS, scenario_config
        >>> scenario = SCENARIOS["procurement_threshold"]
        >>> app = build_graph(scenario.script().model(), scenario.tools(),
        ...                   checkpointer=InMemorySaver())
        >>> cfg = scenario_config(scenario, "t")
        >>> _ = app.invoke({"messages": [("user", scenario.message)]}, cfg,
        ...                interrupt_before=["start_step"])
        >>> out = cancel_run(app, cfg, "the user changed their mind")
        >>> out["outcome"]["route"], out["outcome"]["text"]
        ('cancelled', 'Cancelled: the user changed their mind')
    """
    thread = (config.get("configurable") or {}).get("thread_id")
    if thread is None:
        raise ValueError(
            "cancel_run needs the run's thread: config['configurable']['thread_id'] "
            "(run_config(policies, thread_id=...))"
        )
    configurable = {**(config.get("configurable") or {}), CANCEL_KEY: reason}
    state = app.get_state(config)
    if not state.values:
        raise ValueError(f"cancel_run: thread {thread!r} has no run to cancel")
    # a run that ended (answered, or stopped by a budget) has no next node to resume: a
    # turn with no new message starts, and its first node sees the cancel
    ended = not state.next
    return app.invoke({"messages": []} if ended else None, {**config, "configurable": configurable})


def graph(config: RunnableConfig) -> Any:
    """Graph factory for ``langgraph.json`` (``langgraph dev``, LangGraph Studio, Agent Server).

    Checkpointer-free: the server brings its own persistence and store. ``configurable``
    may name a built-in ``scenario`` (default ``procurement_threshold``) and a ``model``
    (``provider:name`` for ``init_chat_model``; default: the scenario's scripted model, so
    the server runs offline).
    """
    from .scenarios import SCENARIOS

    configurable = (config or {}).get("configurable") or {}
    name = configurable.get("scenario") or "procurement_threshold"
    if name not in SCENARIOS:
        raise ValueError(f"unknown scenario {name!r}; allowed: {', '.join(SCENARIOS)}")
    scenario = SCENARIOS[name]
    if configurable.get("model"):
        from langchain.chat_models import init_chat_model

        model = init_chat_model(configurable["model"])
    else:
        model = scenario.script().model()
    return build_graph(model, scenario.tools(), policies=scenario.policies)
