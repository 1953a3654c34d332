"""Built-in scenarios: scripted models and tools reproducing known failure traces.

Each scenario runs the reference graph (:mod:`agent_guards.graphs.plan_execute`) with a
scripted chat model, so ``make demo`` needs no network and no keys, and the same run can be
repeated, replayed from any checkpoint and compared with the unguarded graph.

Example:
    >>> from langgraph.checkpoint.memory import InMemorySaver
    >>> from langgraph.store.memory import InMemoryStore
    >>> result = run_scenario(SCENARIOS["procurement_threshold"], InMemorySaver(), InMemoryStore())
    >>> result.route, result.state["outcome"]["cited"]
    ('answer', ['policy_2026'])
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, tool
from langgraph.errors import GraphRecursionError
from langgraph.store.base import BaseStore
from langgraph.store.memory import InMemoryStore

from agent_guards import CircuitBreaker, GuardDecision, MemoryRecord, RetryRouterPolicy
from agent_guards.memory_resolve import memory_namespace, save_memories
from agent_guards.retry_router import Backoff, PermissionDenied, TransientToolError
from agent_guards.testing import ScriptedChatModel, tool_call_message
from agent_guards.tool_guard import annotate_tool

from .plan_execute import Policies, build_graph, run_config

__all__ = [
    "SCENARIOS",
    "RoleScript",
    "Scenario",
    "ScenarioResult",
    "run_baseline",
    "run_scenario",
    "scenario_config",
]

NOW = "2026-06-01T09:00:00+00:00"
PRINCIPAL = "analyst-1"  # who runs the scenarios (their memories, their permissions)
LANGGRAPH_DEFAULT_RECURSION_LIMIT = 10_007
BASELINE_STEPS = 300


class RoleScript:
    """A scripted model that is a pure function of its prompt, so runs replay exactly.

    The role is the ``[tag]`` opening the system prompt. Each role has a list of replies,
    indexed by how far the run is, read from the prompt itself: for ``agent`` the number of
    assistant turns in the step so far (replies may be a dict keyed by step id), for
    ``review`` the number of finished steps, for ``plan`` the number of plan versions.
    The last reply repeats (a model that keeps doing the same thing). ``calls`` counts
    invocations, for the cost comparison only. Tool calls whose id came from
    ``tool_call_message``'s process-wide counter get an id made from the step and the turn
    instead (``call_s1_0``), so a replay in another process asks for the same call ids.
    """

    def __init__(self, **replies: Sequence[Any] | Mapping[str, Sequence[Any]]) -> None:
        self.replies = replies
        self.calls = 0

    @staticmethod
    def role_of(messages: Sequence[BaseMessage]) -> str:
        for message in messages:
            text = str(message.content)
            if isinstance(message, SystemMessage) and text.startswith("[") and "]" in text:
                return text[1 : text.index("]")]
        return "agent"

    @staticmethod
    def turn(role: str, messages: Sequence[BaseMessage]) -> int:
        prompt = "\n".join(str(m.content) for m in messages if isinstance(m, HumanMessage))
        if role == "agent":
            return sum(isinstance(m, AIMessage) for m in messages)
        if role == "review":
            return max(0, len(re.findall(r"^- \S+ \[(?:done|failed|skipped)\]", prompt, re.M)) - 1)
        if role == "plan" and (found := re.search(r"Plan versions so far: (\d+)", prompt)):
            return int(found.group(1))
        return 0

    def __call__(self, messages: list[BaseMessage]) -> Any:
        self.calls += 1
        role = self.role_of(messages)
        items = self.replies.get(role)
        step = re.search(r"Step (\S+):", "\n".join(str(m.content) for m in messages))
        if isinstance(items, Mapping):
            items = items.get(step.group(1) if step else "", items.get("*", ()))
        if not items:
            raise KeyError(f"RoleScript has no replies for role {role!r}")
        turn = self.turn(role, messages)
        reply = items[min(turn, len(items) - 1)]
        reply = reply(messages) if callable(reply) else reply
        return _stable_call_ids(reply, f"{step.group(1) if step else role}_{turn}")

    def model(self) -> ScriptedChatModel:
        return ScriptedChatModel(script=[self], repeat_last=True)


_COUNTER_ID = re.compile(r"call_\d+")


def _stable_call_ids(reply: Any, where: str) -> Any:
    """``reply`` with counter-made tool call ids replaced by ``call_<step>_<turn>[_k]``."""
    if not isinstance(reply, AIMessage) or not reply.tool_calls:
        return reply
    calls = [
        {**call, "id": f"call_{where}" + (f"_{k}" if k else "")}
        if _COUNTER_ID.fullmatch(str(call.get("id") or ""))
        else call
        for k, call in enumerate(reply.tool_calls)
    ]
    return reply.model_copy(update={"tool_calls": calls})


def _doc(id: str, claim: str, value: Any, **meta: Any) -> dict[str, Any]:
    return {"id": id, "claim_key": claim, "value": value, **meta}


def _found(docs: Sequence[Mapping[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
    """A retrieval tool's answer: readable lines for the model, evidence dicts as artifact."""
    lines = [f"{d['id']}: {d.get('text', d['value'])}" for d in docs]
    return "\n".join(lines), [dict(d) for d in docs]


# -- the scenarios ----------------------------------------------------------------------


@dataclass(frozen=True)
class Scenario:
    """One failure trace: the user's message, a scripted model, tools, policies, memories."""

    name: str
    title: str
    message: str
    script: Callable[[], RoleScript]
    tools: Callable[[], list[BaseTool]]
    expect_route: str
    policies: Policies = field(default_factory=Policies)
    memories: tuple[MemoryRecord, ...] = ()
    compensations: Mapping[str, Callable[[Any], str]] = field(default_factory=dict)
    principal: str = PRINCIPAL


def _goal(
    intent: str, dims: Sequence[str], facts: Sequence[dict[str, Any]] = (), **constraints: Any
) -> str:
    return json.dumps(
        {
            "intent": intent,
            "dimensions": list(dims),
            "facts": list(facts),
            "constraints": constraints,
        },
        ensure_ascii=False,
    )


def _plan(*steps: dict[str, Any], reason: str = "") -> str:
    return json.dumps({"steps": list(steps), "reason": reason}, ensure_ascii=False)


def _step(id: str, description: str, tool: str | None = None, **args: Any) -> dict[str, Any]:
    return {"id": id, "description": description, "tool": tool, "args": args}


CONTINUE = json.dumps({"action": "continue"})
FINISH = json.dumps({"action": "finish"})


def _revise(reason: str, *descriptions: str) -> str:
    steps = [_step(f"r{i}", d) for i, d in enumerate(descriptions, 1)]
    return json.dumps(
        {"action": "revise", "trigger": "critique", "reason": reason, "steps": steps},
        ensure_ascii=False,
    )


PROCUREMENT_DOCS = (
    _doc(
        "policy_2024",
        "approval_threshold",
        "100w",
        source_type="official",
        version="2024",
        updated_at="2024-06-01",
        confidence=0.95,
        text="超过 100 万需要复核。",
    ),
    _doc(
        "policy_2026",
        "approval_threshold",
        "50w",
        source_type="official",
        version="2026",
        updated_at="2026-01-01",
        confidence=0.93,
        supersedes=["policy_2024"],
        text="超过 50 万需要复核。",
    ),
    _doc(
        "faq",
        "approval_records",
        "important contracts keep approval records",
        source_type="internal",
        updated_at="2025-08-01",
        confidence=0.7,
        text="重要合同需要保留审批记录。",
    ),
    _doc(
        "draft_2027",
        "approval_threshold",
        "30w",
        source_type="official",
        status="draft",
        allowed=["legal"],
        updated_at="2026-05-01",
        text="(legal only) 拟调整为 30 万。",
    ),
)


def _procurement() -> RoleScript:
    return RoleScript(
        parse_goal=[_goal("approval_threshold", ["approval_threshold"])],
        plan=[
            _plan(_step("s1", "检索采购复核政策", "search_policies", query="采购合同 复核 金额"))
        ],
        agent=[
            tool_call_message("search_policies", {"query": "采购合同 复核 金额"}),
            "找到三份相关文档。",
        ],
        review=[FINISH],
    )


def _report_format() -> RoleScript:
    return RoleScript(
        parse_goal=[
            _goal(
                "incident_report",
                ["incident_count"],
                [{"key": "report_format", "value": "markdown", "persist": False}],
            )
        ],
        plan=[_plan(_step("s1", "count Q1 incidents", "list_incidents", quarter="2026Q1"))],
        agent=[tool_call_message("list_incidents", {"quarter": "2026Q1"}), "3 incidents."],
        review=[FINISH],
    )


def _planner_loop() -> RoleScript:
    return RoleScript(
        parse_goal=[_goal("competitive_analysis", ["competitors"])],
        plan=[
            _plan(
                _step("s1", "收集资料", "search_market", query="竞品"),
                _step("s2", "分析"),
                _step("s3", "输出"),
            )
        ],
        agent={
            "s1": [tool_call_message("search_market", {"query": "竞品"}), "资料已收集。"],
            "*": ["完成。"],
        },
        review=[
            _revise("资料还不够，需要继续规划搜索策略", "先明确目标", "再收集资料", "再分析"),
            _revise("当前信息仍不足，需要制定更细计划", "确认需求", "收集资料", "分析"),
            _revise("继续拆分子任务", "拆分子任务", "收集资料", "分析", "输出"),
        ],
    )


def _duplicate_call() -> RoleScript:
    return RoleScript(
        parse_goal=[_goal("order_status", ["order_status"])],
        plan=[_plan(_step("s1", "look up order 42", "get_order", order_id=42))],
        # the model asks for the same call again and again (fresh call ids, as real models do)
        agent=[lambda _: tool_call_message("get_order", {"order_id": 42})],
        review=[FINISH],
    )


def _rate_limited() -> RoleScript:
    return RoleScript(
        parse_goal=[_goal("fx_rate", ["eur_usd"])],
        plan=[_plan(_step("s1", "fetch EUR/USD", "fx_rate", pair="EURUSD"))],
        agent=[tool_call_message("fx_rate", {"pair": "EURUSD"})],
        review=[FINISH],
    )


def _permission() -> RoleScript:
    return RoleScript(
        parse_goal=[_goal("cleanup", ["deleted"])],
        plan=[
            _plan(_step("s1", "delete last year's audit records", "delete_records", table="audit"))
        ],
        agent=[tool_call_message("delete_records", {"table": "audit"})],
        review=[FINISH],
    )


def _tools_procurement() -> list[BaseTool]:
    @tool(response_format="content_and_artifact")
    def search_policies(query: str) -> tuple[str, list[dict[str, Any]]]:
        """Search the procurement policies."""
        return _found(PROCUREMENT_DOCS)

    return [annotate_tool(search_policies, read_only=True)]


def _tools_incidents() -> list[BaseTool]:
    @tool(response_format="content_and_artifact")
    def list_incidents(quarter: str) -> tuple[str, list[dict[str, Any]]]:
        """List the incidents of a quarter."""
        return _found(
            [
                _doc(
                    "inc_q3",
                    "incident_count",
                    3,
                    source_type="official",
                    updated_at="2026-04-02",
                    text=f"{quarter}: 3 incidents",
                )
            ]
        )

    return [annotate_tool(list_incidents, read_only=True)]


def _tools_market() -> list[BaseTool]:
    @tool(response_format="content_and_artifact")
    def search_market(query: str) -> tuple[str, list[dict[str, Any]]]:
        """Search market research notes."""
        return _found(
            [
                _doc(
                    "mkt_1",
                    "competitors",
                    "A, B, C",
                    source_type="internal",
                    updated_at="2026-05-01",
                )
            ]
        )

    return [annotate_tool(search_market, read_only=True)]


def _tools_orders() -> list[BaseTool]:
    @tool(response_format="content_and_artifact")
    def get_order(order_id: int) -> tuple[str, list[dict[str, Any]]]:
        """Look up an order by id."""
        return _found(
            [
                _doc(
                    f"order_{order_id}",
                    "order_status",
                    "shipped",
                    source_type="official",
                    updated_at="2026-05-30",
                )
            ]
        )

    return [annotate_tool(get_order, read_only=True)]


def _tools_fx() -> list[BaseTool]:
    @tool
    def fx_rate(pair: str) -> str:
        """Current exchange rate for a currency pair."""
        raise TransientToolError("429 Too Many Requests", retry_after=0.05, status_code=429)

    return [annotate_tool(fx_rate, read_only=True)]


def _tools_records() -> list[BaseTool]:
    @tool
    def delete_records(table: str) -> str:
        """Delete records from a table."""
        raise PermissionDenied(f"user-7 may not delete from {table}")

    return [annotate_tool(delete_records, destructive=True)]


# Not the default policy, so it says so in every decision it makes (and in eval drafts).
STORM_RETRY = RetryRouterPolicy(
    backoff=Backoff(base_delay=0.01, max_delay=1.0, max_attempts=4), name="StormRetryPolicy"
)

SCENARIOS: dict[str, Scenario] = {
    s.name: s
    for s in (
        Scenario(
            "procurement_threshold",
            "RAG conflict: policy_2024 (100w) vs policy_2026 (50w)",
            "采购合同超过多少金额需要复核？",
            _procurement,
            _tools_procurement,
            "answer",
        ),
        Scenario(
            "pdf_vs_markdown",
            "Memory: stored 'PDF by default' vs 'Markdown this time'",
            "Summarize the Q1 incidents. Markdown this time, please.",
            _report_format,
            _tools_incidents,
            "answer",
            memories=(
                MemoryRecord(
                    "m_pdf",
                    "report_format",
                    "pdf",
                    source="memory",
                    created_at="2026-03-01",
                    scope="user-7",
                ),
            ),
            principal="user-7",
        ),
        Scenario(
            "planner_loop",
            "Planner loop: competitive analysis re-planned on critique alone",
            "生成一份竞品分析",
            _planner_loop,
            _tools_market,
            "answer",
        ),
        Scenario(
            "duplicate_tool_call",
            "Tool loop: the same call with the same args, again and again",
            "What is the status of order 42?",
            _duplicate_call,
            _tools_orders,
            "answer",
        ),
        Scenario(
            "rate_limit_storm",
            "429 storm: backoff with Retry-After, then the breaker opens",
            "What is EUR/USD right now?",
            _rate_limited,
            _tools_fx,
            "abstain",
            policies=Policies(
                retry=STORM_RETRY, breaker=CircuitBreaker(failure_threshold=3, cooldown=60)
            ),
        ),
        Scenario(
            "permission_denied",
            "Permission error: refused at once, never retried",
            "Delete last year's audit records.",
            _permission,
            _tools_records,
            "refuse",
        ),
    )
}


# -- running them -------------------------------------------------------------------------


@dataclass
class ScenarioResult:
    """What one run did: its final state, route, usage and guard decisions."""

    name: str
    state: dict[str, Any]
    config: dict[str, Any]
    model_calls: int
    tool_calls: int
    ended: str = "finished"

    @property
    def route(self) -> str:
        return str((self.state.get("outcome") or {}).get("route", self.ended))

    @property
    def decisions(self) -> list[GuardDecision]:
        return list(self.state.get("guard_log") or [])

    @property
    def usage(self) -> dict[str, Any]:
        return dict(self.state.get("usage") or {})


def seed_memories(store: BaseStore | None, scenario: Scenario) -> None:
    if store is not None and scenario.memories:
        save_memories(store, memory_namespace(scenario.principal), scenario.memories)


def _sleeps() -> tuple[list[float], Callable[[float], None]]:
    waited: list[float] = []
    return waited, waited.append


def scenario_config(scenario: Scenario, thread_id: str, **extra: Any) -> RunnableConfig:
    """The run config of a scenario: its principal, the pinned clock, the derived limit."""
    return run_config(
        scenario.policies,
        thread_id=thread_id,
        principal=scenario.principal,
        agent_guards_now=NOW,
        **extra,
    )


def run_scenario(
    scenario: Scenario,
    checkpointer: Any,
    store: BaseStore | None,
    *,
    thread_id: str | None = None,
    model: Any = None,
) -> ScenarioResult:
    """Run ``scenario`` on the guarded reference graph and return its result."""
    seed_memories(store, scenario)
    scripted = model or scenario.script().model()
    graph = build_graph(
        scripted,
        scenario.tools(),
        policies=scenario.policies,
        checkpointer=checkpointer,
        store=store,
        compensations=scenario.compensations,
    )
    config = scenario_config(scenario, thread_id or scenario.name)
    state = graph.invoke({"messages": [("user", scenario.message)]}, config)
    if "__interrupt__" in state:
        state = graph.get_state(config).values | {"__interrupt__": state["__interrupt__"]}
    usage = state.get("usage") or {}
    return ScenarioResult(
        scenario.name,
        state,
        dict(config),
        int(usage.get("model_calls", 0)),
        int(usage.get("tool_calls", 0)),
    )


class _ToolCounter(BaseCallbackHandler):
    """Counts tool executions (the unguarded graph keeps no usage counters)."""

    def __init__(self) -> None:
        self.calls = 0

    def on_tool_start(self, serialized: Any, input_str: str, **kwargs: Any) -> None:
        self.calls += 1


def run_baseline(scenario: Scenario, *, steps: int = BASELINE_STEPS) -> ScenarioResult:
    """The same script on the unguarded graph, with LangGraph's recursion_limit as the only stop.

    A looping script would run all 10,007 default super-steps (minutes, as the message list
    grows). The baseline runs ``steps`` super-steps for real; if it has not finished by then,
    the model and tool calls it made are scaled to the default limit (the loop is periodic),
    and ``ended`` says so.
    """
    script = scenario.script()
    counter = _ToolCounter()
    store = InMemoryStore()
    seed_memories(store, scenario)
    graph = build_graph(
        script.model(), scenario.tools(), policies=Policies(guards=False), store=store
    )
    config: dict[str, Any] = {
        "recursion_limit": steps,
        "callbacks": [counter],
        "configurable": {"principal": scenario.principal, "agent_guards_now": NOW},
    }
    try:
        state = graph.invoke({"messages": [("user", scenario.message)]}, config)
    except GraphRecursionError:
        scale = LANGGRAPH_DEFAULT_RECURSION_LIMIT / steps
        return ScenarioResult(
            scenario.name,
            {},
            config,
            round(script.calls * scale),
            round(counter.calls * scale),
            ended=f"GraphRecursionError (measured over {steps} super-steps, "
            f"scaled to the default {LANGGRAPH_DEFAULT_RECURSION_LIMIT})",
        )
    return ScenarioResult(scenario.name, state, config, script.calls, counter.calls)
