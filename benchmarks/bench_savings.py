"""Savings against what users would pick: the same scripted agents, three ways of guarding them.

Every scenario is a ``langchain.agents.create_agent`` agent over a scripted chat model (the
stand-in for the LLM: it replays the same behaviour whatever it is told) and real tools that
count their own executions. Each runs under:

* ``no guard``: the agent as created, only the tools (and ``TodoListMiddleware`` where the
  model plans);
* ``langchain``: LangChain's middlewares stacked at the settings their docstrings show:
  ``ModelCallLimitMiddleware(thread_limit=10, run_limit=5, exit_behavior="end")``,
  ``ToolCallLimitMiddleware(thread_limit=20, run_limit=10)`` (exit ``"continue"``, the
  default), ``ToolRetryMiddleware()`` (2 retries of any exception, backoff 1 s x 2^n) and
  ``SummarizationMiddleware(model, trigger=("fraction", 0.8))`` (keep the last 20 messages),
  the model's profile giving the window;
* on the long conversation also each of LangChain's two context tools alone:
  ``SummarizationMiddleware`` as above, and ``trim_messages`` applied to what the model is
  sent (``strategy="last"``, ``start_on="human"``, ``include_system=True``,
  ``max_tokens`` = the window), as its docstring shows, counting either with
  ``token_counter="approximate"`` or with the model's tokenizer (the o200k counter below);
* ``agent-guards``: ``ContextGuardMiddleware(max_tokens=window, pinned=[the constraints])``,
  ``LoopGuardMiddleware()``, ``RetryRouterMiddleware()`` (and ``PlannerGateMiddleware()``
  after ``TodoListMiddleware``), read-only tools annotated as such.

Measured per run: model calls (summary calls included), tool executions (counted by the
tools; ``write_todos`` runs are shown in the outcome), tokens sent to the model (the sum over
model calls of the prompt's o200k tokens, 4 per message for the chat format, tool calls as
JSON, tool schemas not counted; ``count_tokens_cjk`` when no o200k tokenizer is installed)
and the outcome. Backoff waits are recorded, not slept. The summarizer stand-in copies every
user message it is shown: an upper bound on what a model's summary keeps. The conversation's
turns go to one checkpointed thread, so thread limits count across them. Every run has
``recursion_limit`` = :data:`RECURSION_LIMIT`; one more row runs the longest healthy run
under agent-guards at :data:`LIMIT_CHECK`, since every middleware hook is a super-step.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import random
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Annotated, Any

import httpx
from langchain.agents import create_agent
from langchain.agents.middleware import (
    ModelCallLimitMiddleware,
    SummarizationMiddleware,
    TodoListMiddleware,
    ToolCallLimitMiddleware,
    ToolRetryMiddleware,
    wrap_model_call,
)
from langchain.agents.middleware import tool_retry as _tool_retry
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    trim_messages,
)
from langchain_core.tools import BaseTool, InjectedToolCallId, tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.errors import GraphRecursionError

from agent_guards import guard_serializer
from agent_guards.context_guard.tokens import count_tokens_cjk
from agent_guards.core.effects import annotate_tool
from agent_guards.middleware import (
    ContextGuardMiddleware,
    LoopGuardMiddleware,
    PlannerGateMiddleware,
    RetryRouterMiddleware,
)
from agent_guards.testing import ScriptedChatModel, tool_call_message

RECURSION_LIMIT = 400
WINDOW = 4_000
QUICK_WINDOW = 1_500
SYSTEM = "You are a careful assistant. Use the tools, then answer."
CONSTRAINTS = "出差住宿要求：预算不超过3000元，必须含早餐，离国贸步行不超过15分钟。"
PINNED_TEXTS = ("预算不超过3000元", "必须含早餐")
FINAL = "final answer"
# (healthy run, longer healthy run, conversation turns), by quick
SIZES = {True: (5, 12, 8), False: (20, 60, 30)}
VARIANTS = ("no guard", "langchain", "agent-guards")


# --- counting ---------------------------------------------------------------------------


def _encoder() -> tuple[str, Callable[[str], int] | None]:
    try:
        import bpe_openai  # type: ignore[import-not-found, unused-ignore]
    except ImportError:
        return "count_tokens_cjk", None
    enc = bpe_openai.get_encoding("o200k_base")
    return "o200k", lambda text: len(enc.encode(text))


COUNTER, _ENCODE = _encoder()
TRIM_APPROX = "trim_messages, approximate"
TRIM_COUNTED = f"trim_messages, {COUNTER}"
CONTEXT_VARIANTS = (
    "no guard",
    "langchain",
    "SummarizationMiddleware",
    TRIM_APPROX,
    TRIM_COUNTED,
    "agent-guards",
)
_PER_MESSAGE = 4
_cache: dict[str, int] = {}


def _message_tokens(message: BaseMessage) -> int:
    calls = getattr(message, "tool_calls", None) or []
    shown = [{"name": c["name"], "args": c["args"]} for c in calls]
    calls_json = json.dumps(shown, ensure_ascii=False) if shown else ""
    key = f"{message.type}\x00{message.text}\x00{calls_json}"
    if key not in _cache:
        if _ENCODE is None:
            _cache[key] = count_tokens_cjk([message])
        else:
            body = _ENCODE(message.text) + (_ENCODE(calls_json) if calls_json else 0)
            _cache[key] = body + _PER_MESSAGE
    return _cache[key]


def prompt_tokens(messages: Sequence[BaseMessage]) -> int:
    """The tokens of one prompt, by the one counter every variant is measured with."""
    return sum(_message_tokens(m) for m in messages)


def pairs_intact(messages: Sequence[BaseMessage]) -> bool:
    """Every tool result follows the call that asked for it, and every call has its result."""
    asked: set[str] = set()
    answered: set[str] = set()
    for m in messages:
        if isinstance(m, AIMessage):
            asked |= {str(c["id"]) for c in m.tool_calls}
        elif isinstance(m, ToolMessage):
            if m.tool_call_id not in asked:
                return False
            answered.add(m.tool_call_id)
    return asked == answered


@dataclass
class Waits:
    """Backoff delays asked for, recorded instead of slept."""

    delays: list[float] = field(default_factory=list)

    def sleep(self, seconds: float) -> None:
        self.delays.append(float(seconds))


@contextlib.contextmanager
def _recorded_backoff(waits: Waits) -> Iterator[None]:
    """ToolRetryMiddleware sleeps through its module's ``time``: record its delays instead."""
    real = _tool_retry.time
    _tool_retry.time = SimpleNamespace(sleep=waits.sleep, monotonic=real.monotonic)  # type: ignore[assignment]
    try:
        yield
    finally:
        _tool_retry.time = real


# --- scenarios --------------------------------------------------------------------------


@dataclass
class Scenario:
    """One scripted agent: the model's behaviour, its tools and the user's turns."""

    name: str
    reply: Callable[[list[BaseMessage]], AIMessage | str]
    tools: Callable[[list[str]], list[BaseTool]]
    turns: list[HumanMessage]
    planning: bool = False
    healthy: bool = False
    context: bool = False


def _counting_search(executed: list[str], result: Callable[[str], str]) -> BaseTool:
    @tool
    def search(q: str) -> str:
        """Search the knowledge base."""
        executed.append("search")
        return result(q)

    return annotate_tool(search, read_only=True)


def _lookup(executed: list[str]) -> BaseTool:
    @tool
    def lookup(record: str) -> str:
        """Read one record by id."""
        executed.append("lookup")
        return "Record R-7: review threshold 500k, owner: risk team."

    return annotate_tool(lookup, read_only=True)


def _stuck(make: Callable[[int], AIMessage | str]) -> Callable[[list[BaseMessage]], Any]:
    """A model that replays ``make(i)`` on its i-th call, whatever the prompt says."""
    counter = itertools.count()
    return lambda _messages: make(next(counter))


def identical_loop() -> Scenario:
    return Scenario(
        "identical-call loop",
        _stuck(lambda _i: tool_call_message("search", {"q": "review limit"})),
        lambda ex: [_counting_search(ex, lambda _q: "Reviews start above 500k (section 4.2).")],
        [HumanMessage("What is the review limit?")],
    )


def alternating_loop() -> Scenario:
    def make(i: int) -> AIMessage:
        if i % 2 == 0:
            return tool_call_message("search", {"q": "review limit"})
        return tool_call_message("lookup", {"record": "R-7"})

    return Scenario(
        "alternating loop",
        _stuck(make),
        lambda ex: [
            _counting_search(ex, lambda _q: "Reviews start above 500k (section 4.2)."),
            _lookup(ex),
        ],
        [HumanMessage("What is the review limit, and who owns it?")],
    )


_PLAN_WORDING = ("Search", "Look up", "Find")


def planner_replanning() -> Scenario:
    def make(i: int) -> AIMessage:
        verb = _PLAN_WORDING[i % len(_PLAN_WORDING)]
        steps = [
            f"{verb} the current mortgage rates",
            "Compare the three banks",
            "Write the answer",
        ]
        return tool_call_message(
            "write_todos", {"todos": [{"content": s, "status": "pending"} for s in steps]}
        )

    return Scenario(
        "planner replanning on critique",
        _stuck(make),
        lambda ex: [_counting_search(ex, lambda q: f"rates for {q}: 3.9%")],
        [HumanMessage("Which bank has the best mortgage rate?")],
        planning=True,
    )


def rate_limit_storm() -> Scenario:
    def tools(executed: list[str]) -> list[BaseTool]:
        @tool
        def fx_rate(pair: str) -> str:
            """Current exchange rate for a currency pair."""
            executed.append("fx_rate")
            request = httpx.Request("GET", f"https://fx.example.com/{pair}")
            response = httpx.Response(429, request=request, headers={"Retry-After": "1"})
            raise httpx.HTTPStatusError("429 Too Many Requests", request=request, response=response)

        return [annotate_tool(fx_rate, read_only=True)]

    return Scenario(
        "429 storm",
        _stuck(lambda _i: tool_call_message("fx_rate", {"pair": "EURUSD"})),
        tools,
        [HumanMessage("What is EUR/USD now?")],
    )


def permission_error() -> Scenario:
    def tools(executed: list[str]) -> list[BaseTool]:
        @tool
        def read_payroll(employee: str) -> str:
            """Read an employee's payroll record."""
            executed.append("read_payroll")
            raise PermissionError(f"permission denied: user-7 may not read payroll of {employee}")

        return [annotate_tool(read_payroll, read_only=True)]

    return Scenario(
        "permission error",
        _stuck(lambda _i: tool_call_message("read_payroll", {"employee": "E-42"})),
        tools,
        [HumanMessage("What does E-42 earn?")],
    )


def healthy(n: int) -> Scenario:
    def make(i: int) -> AIMessage | str:
        return tool_call_message("search", {"q": f"topic {i}"}) if i < n else FINAL

    return Scenario(
        f"healthy, {n} distinct calls",
        _stuck(make),
        lambda ex: [
            _counting_search(ex, lambda q: f"{q}: finding {len(ex)} (source doc-{len(ex)})")
        ],
        [HumanMessage(f"Survey {n} topics, then summarize.")],
        healthy=True,
    )


_HOTEL_TEXT = (
    "{name}位于朝阳区，距国贸步行约{walk}分钟，标准间每晚{price}元，{breakfast}。"
    "房间面积二十八平方米，含免费无线网络、健身房与洗衣服务，前台二十四小时提供服务。"
    "近期住客评价提到隔音一般，早高峰电梯需要等待，商务中心可以打印和复印文件。"
    "周边有地铁一号线与十号线换乘站，步行可达多家餐厅与便利店，适合短期商务出差入住。"
    "取消政策为入住前一天十八点前免费取消，之后收取首晚房费；发票可在前台开具增值税普通发票。"
    "停车场位于地下二层，住客每晚收费六十元；行政酒廊开放时间为早上七点至晚上十点。"
)


def long_conversation(turns: int) -> Scenario:
    """Many user turns on one thread: constraints first, then one hotel looked up per turn."""

    def reply(messages: list[BaseMessage]) -> AIMessage | str:
        last = messages[-1]
        if isinstance(last, ToolMessage):
            return f"已查询：{last.text[:40]}……我会按您的要求继续比较。"
        asked = str(last.text)
        name = asked.rsplit("：", maxsplit=1)[-1].rstrip("？") if "：" in asked else "候选酒店"
        return tool_call_message("hotel_info", {"name": name})

    def tools(executed: list[str]) -> list[BaseTool]:
        @tool
        def hotel_info(name: str, call_id: Annotated[str, InjectedToolCallId]) -> ToolMessage:
            """Details of one hotel."""
            executed.append("hotel_info")
            i = len(executed)
            text = _HOTEL_TEXT.format(
                name=name,
                walk=5 + i % 20,
                price=2200 + 97 * i % 1500,
                breakfast="含双早" if i % 3 else "不含早餐",
            )
            # an id of its own (else a random uuid): a summary that names the message
            # then weighs the same in every run
            return ToolMessage(text, tool_call_id=call_id, name="hotel_info", id=f"tool-{i}")

        return [annotate_tool(hotel_info, read_only=True)]

    first = HumanMessage(CONSTRAINTS + "先查第一家：酒店1？", id="turn-1")
    rest = [HumanMessage(f"再查一家：酒店{i}？", id=f"turn-{i}") for i in range(2, turns + 1)]
    return Scenario("long Chinese conversation", reply, tools, [first, *rest], context=True)


# --- variants ---------------------------------------------------------------------------


def _summary_standin(calls: list[list[BaseMessage]]) -> Callable[[Sequence[BaseMessage]], str]:
    """A summarizer that keeps every user message it is shown, verbatim, and names the calls."""

    def summarize(messages: Sequence[BaseMessage]) -> str:
        calls.append(list(messages))
        lines = [str(m.text) for m in messages if isinstance(m, HumanMessage)]
        tools = [c["name"] for m in messages if isinstance(m, AIMessage) for c in m.tool_calls]
        return "\n".join([*lines, f"({len(tools)} tool calls: {', '.join(sorted(set(tools)))})"])

    return summarize


def trim_to_window(window: int, token_counter: Any) -> Any:
    """``trim_messages`` as its docstring shows it, applied to what the model is sent.

    The docstring counts with the model (``token_counter=ChatOpenAI(...)``) or with
    ``"approximate"``; here the benchmark's own counter stands in for the model's.
    """

    @wrap_model_call
    def trim(request: Any, handler: Callable[[Any], Any]) -> Any:
        system = [request.system_message] if request.system_message is not None else []
        kept = trim_messages(
            [*system, *request.messages],
            max_tokens=window,
            strategy="last",
            token_counter=token_counter,
            start_on="human",
            include_system=True,
        )
        head = kept[0] if kept and isinstance(kept[0], SystemMessage) else None
        return handler(request.override(messages=kept[1:] if head else kept, system_message=head))

    return trim


def _summarization(model: ScriptedChatModel, summaries: list[list[BaseMessage]]) -> Any:
    return SummarizationMiddleware(
        model, trigger=("fraction", 0.8), summarizer=_summary_standin(summaries)
    )


def _middleware(
    variant: str, scenario: Scenario, model: ScriptedChatModel, ctx: dict[str, Any]
) -> list[Any]:
    planning: list[Any] = [TodoListMiddleware()] if scenario.planning else []
    if variant == "no guard":
        return planning
    if variant == "langchain":
        return [
            *planning,
            ModelCallLimitMiddleware(thread_limit=10, run_limit=5, exit_behavior="end"),
            ToolCallLimitMiddleware(thread_limit=20, run_limit=10),
            ToolRetryMiddleware(),
            _summarization(model, ctx["summaries"]),
        ]
    if variant == "SummarizationMiddleware":
        return [*planning, _summarization(model, ctx["summaries"])]
    if variant == TRIM_APPROX:
        return [*planning, trim_to_window(ctx["window"], "approximate")]
    if variant == TRIM_COUNTED:
        return [*planning, trim_to_window(ctx["window"], prompt_tokens)]
    gate = [PlannerGateMiddleware()] if scenario.planning else []
    return [
        *planning,
        *gate,
        ContextGuardMiddleware(max_tokens=ctx["window"], pinned=[scenario.turns[0].id or ""]),
        LoopGuardMiddleware(),
        RetryRouterMiddleware(sleep=ctx["waits"].sleep),
    ]


# --- running ----------------------------------------------------------------------------


class _PlanWrites(BaseCallbackHandler):
    """Counts ``write_todos`` executions (TodoListMiddleware's tool cannot count itself)."""

    def __init__(self) -> None:
        self.count = 0

    def on_tool_start(self, serialized: Any, input_str: str, **kwargs: Any) -> None:
        if (serialized or {}).get("name") == "write_todos":
            self.count += 1


@dataclass
class Result:
    """What one scenario cost under one variant."""

    scenario: str
    variant: str
    model_calls: int
    tool_executions: int
    tokens: int
    outcome: str
    completed: bool
    prompts: list[list[BaseMessage]]
    waited: float
    summary_calls: int
    plans_written: int
    turns: int
    turns_answered: int


_NOT_A_STOP = frozenset({"continue", "reuse", "nudge", "repair"})


def _outcome(out: dict[str, Any], model_texts: set[str]) -> tuple[str, bool]:
    """How one turn ended: the model's own answer, or who stopped it and why."""
    last = out["messages"][-1]
    if isinstance(last, AIMessage) and not last.tool_calls and last.text in model_texts:
        return "completed", True
    stops = [d for d in out.get("guard_log") or () if d.verdict.value not in _NOT_A_STOP]
    if stops:
        return f"stopped: {stops[-1].guard} {stops[-1].reason}", False
    return f"stopped: {' '.join(str(last.text).split())[:48]}", False


def _numbered(reply: Callable[[list[BaseMessage]], Any], texts: set[str]) -> Callable[..., Any]:
    """The scenario's replies with message and call ids numbered per run (a count that reads
    ids is then the same in every run), remembering the texts the model itself wrote."""
    counter = itertools.count(1)

    def numbered(messages: list[BaseMessage]) -> AIMessage:
        item = reply(messages)
        message = AIMessage(item) if isinstance(item, str) else item
        n = next(counter)
        calls = [{**c, "id": f"call_{n:04d}_{k}"} for k, c in enumerate(message.tool_calls)]
        texts.add(str(message.text))
        return message.model_copy(update={"tool_calls": calls, "id": f"ai_{n:04d}"})

    return numbered


def _converse(
    agent: Any, turns: Sequence[HumanMessage], config: Any, texts: set[str]
) -> tuple[str, bool, int]:
    """Send every turn on one thread: (outcome, completed, turns the model answered)."""
    outcome, completed, answered = "completed", True, 0
    for turn in turns:
        try:
            out = agent.invoke({"messages": [turn]}, config)
        except GraphRecursionError:
            return f"GraphRecursionError (limit {config['recursion_limit']})", False, answered
        except Exception as err:  # what the user's run ends with
            return f"error: {type(err).__name__}", False, answered
        turn_outcome, turn_done = _outcome(out, texts)
        answered += turn_done
        if not turn_done and completed:
            outcome, completed = turn_outcome, False
    return outcome, completed, answered


def run_case(
    scenario: Scenario,
    variant: str,
    *,
    window: int = WINDOW,
    recursion_limit: int = RECURSION_LIMIT,
    callbacks: Sequence[Any] = (),
) -> Result:
    """Run ``scenario`` under ``variant`` and measure it (``callbacks`` watch the runs)."""
    # ToolRetryMiddleware jitters its backoff with ``random``: seeded per case, every run
    # of the benchmark waits (and prints) the same
    random.seed(f"{scenario.name}|{variant}")
    executed: list[str] = []
    summaries: list[list[BaseMessage]] = []
    waits, plans, texts = Waits(), _PlanWrites(), set[str]()
    model = ScriptedChatModel(
        script=[_numbered(scenario.reply, texts)],
        repeat_last=True,
        profile={"max_input_tokens": window},
    )
    ctx = {"window": window, "summaries": summaries, "waits": waits}
    agent = create_agent(
        model,
        tools=scenario.tools(executed),
        system_prompt=SYSTEM,
        middleware=_middleware(variant, scenario, model, ctx),
        # as the README sets one up: the guard types load back without LangGraph's warning
        checkpointer=InMemorySaver(serde=guard_serializer()),
    )
    config: Any = {
        "configurable": {"thread_id": "t"},
        "recursion_limit": recursion_limit,
        "callbacks": [*callbacks, plans],
    }
    with _recorded_backoff(waits):
        outcome, completed, answered = _converse(agent, scenario.turns, config, texts)
    prompts = [list(p) for p in model.calls]
    return Result(
        scenario=scenario.name,
        variant=variant,
        model_calls=len(prompts) + len(summaries),
        tool_executions=len(executed),
        tokens=sum(prompt_tokens(p) for p in [*prompts, *summaries]),
        outcome=outcome,
        completed=completed,
        prompts=prompts,
        waited=sum(waits.delays),
        summary_calls=len(summaries),
        plans_written=plans.count,
        turns=len(scenario.turns),
        turns_answered=answered,
    )


def constraint_kept(result: Result) -> bool:
    """The pinned constraints are in the last prompt the model was sent, verbatim."""
    if not result.prompts:
        return False
    text = "\n".join(str(m.text) for m in result.prompts[-1])
    return all(t in text for t in PINNED_TEXTS)


def scenarios(quick: bool) -> list[Callable[[], Scenario]]:
    """Scenario factories: each run gets a fresh scripted model."""
    small, large, turns = SIZES[quick]
    return [
        identical_loop,
        alternating_loop,
        planner_replanning,
        rate_limit_storm,
        permission_error,
        lambda: healthy(small),
        lambda: healthy(large),
        lambda: long_conversation(turns),
    ]


def _context(r: Result, window: int) -> dict[str, Any]:
    largest = max((prompt_tokens(p) for p in r.prompts), default=0)
    return {
        "constraint_kept": constraint_kept(r),
        "max_prompt_tokens": largest,
        "window": window,
        "fits_window": largest <= window,
    }


def _row(r: Result, window: int, *, context: bool) -> dict[str, Any]:
    row: dict[str, Any] = {
        "name": f"savings: {r.scenario} / {r.variant}",
        "value": r.model_calls,
        "unit": "calls",
        "scenario": r.scenario,
        "variant": r.variant,
        "model_calls": r.model_calls,
        "tool_executions": r.tool_executions,
        "tokens": r.tokens,
        "token_counter": COUNTER,
        "outcome": r.outcome,
        "completed": r.completed,
        "turns_answered": r.turns_answered,
        "summary_calls": r.summary_calls,
        "plans_written": r.plans_written,
        "backoff_s": round(r.waited, 2),
        "pairs_intact": all(pairs_intact(p) for p in r.prompts),
    }
    outcome = r.outcome + (f"; {r.waited:.0f} s of backoff" if r.waited else "")
    if r.summary_calls:
        outcome += f"; {r.summary_calls} of the calls summarize"
    if r.plans_written:
        outcome += f"; write_todos ran {r.plans_written}x"
    kept = ""
    if context:
        row.update(_context(r, window))
        outcome += f" ({r.turns_answered}/{r.turns} turns answered)"
        kept = (
            f"constraints {'kept' if row['constraint_kept'] else 'LOST'}, "
            f"pairs {'intact' if row['pairs_intact'] else 'BROKEN'}, "
            f"largest prompt {row['max_prompt_tokens']:,} / {window:,}"
        )
    row["matrix"] = {
        "scenario": r.scenario,
        "variant": r.variant,
        "model calls": r.model_calls,
        "tool executions": r.tool_executions,
        f"tokens sent ({COUNTER})": r.tokens,
        "outcome": outcome,
        "context": kept,
    }
    row["note"] = f"tools {r.tool_executions}; tokens {r.tokens:,}; {outcome}" + (
        f"; {kept}" if kept else ""
    )
    return row


LIMIT_CHECK = 200


def run(quick: bool = False) -> list[dict[str, Any]]:
    """One row per scenario and variant (model calls in ``value``, the rest beside it)."""
    window = QUICK_WINDOW if quick else WINDOW
    rows = []
    for make in scenarios(quick):
        context = make().context
        for variant in CONTEXT_VARIANTS if context else VARIANTS:
            result = run_case(make(), variant, window=window)
            rows.append(_row(result, window, context=context))
    # Each middleware hook is a super-step: the longest healthy run at a common lower limit.
    longest = healthy(SIZES[quick][1])
    result = run_case(longest, "agent-guards", window=window, recursion_limit=LIMIT_CHECK)
    result.variant = f"agent-guards, recursion_limit {LIMIT_CHECK}"
    rows.append(_row(result, window, context=False))
    return rows
