"""Replay real recorded agent trajectories through the tool wrapper, one step at a time.

Each trajectory is a recorded tau-bench run (see ``tests/fixtures/trajectories``). At every
assistant turn with tool calls, the recorded history up to that turn goes through a
compiled graph: a real ``ToolNode`` from ``ToolCallGuard(loop=policy).tool_node(tools)``,
then the ``loop_check`` edge with its nudge and stop nodes. Each tool returns the result
the real tool returned for that call (looked up by tool-call id). Whatever the guard
answered, the next step is fed the *recorded* history, so every step is judged on its own.

Per call the replay tells whether the tool ran (executed), the guard answered it from an
earlier result (reused), or refused or stopped it. A reused answer is *stale* when its
content differs from what the real tool returned at that point: the guard's
``[loop_check]`` line is stripped, and the rest is compared with the recorded result.
A stop, refusal or budget decision on a successful run (reward 1.0) is a *false stop*.
"""

from __future__ import annotations

import gzip
import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import InjectedToolCallId, StructuredTool
from langgraph.graph import END, START, StateGraph
from pydantic import BaseModel, ConfigDict

from agent_guards import GuardDecision, LoopPolicy, LoopState, Verdict, add_loop_check, detect_loop
from agent_guards.core.signatures import REUSE_LINE
from agent_guards.tool_guard import ToolCallGuard, ToolEffects

CORPUS = (
    Path(__file__).resolve().parents[2]
    / "tests"
    / "fixtures"
    / "trajectories"
    / "tau_bench_gpt4o.jsonl.gz"
)
READ_PREFIXES = ("get_", "find_", "list_", "search_", "calculate", "think")
"""tau-bench tools that only read; every other tau-bench tool writes."""
STOPPING = (Verdict.STOP, Verdict.REFUSE, Verdict.ESCALATE)


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Trajectory:
    """One recorded run: its reward and its ordered turns (as the fixture stores them)."""

    domain: str
    task_id: int
    trial: int
    reward: float
    turns: tuple[dict[str, Any], ...]

    @property
    def id(self) -> str:
        return f"{self.domain}/task-{self.task_id}/trial-{self.trial}"

    @property
    def success(self) -> bool:
        return self.reward >= 1.0

    def calls(self) -> list[dict[str, Any]]:
        return [c for t in self.turns if t["role"] == "assistant" for c in t.get("calls", ())]


def load(path: Path = CORPUS) -> list[Trajectory]:
    """Every trajectory of a corpus file, in file order."""
    with gzip.open(path, "rt", encoding="utf-8") as lines:
        rows = [json.loads(line) for line in lines if line.strip()]
    return [
        Trajectory(r["domain"], r["task_id"], r["trial"], r["reward"], tuple(r["turns"]))
        for r in rows
    ]


def tool_names(trajectories: Iterable[Trajectory]) -> set[str]:
    return {c["name"] for t in trajectories for c in t.calls()}


def tau_effects(names: Iterable[str]) -> ToolEffects:
    """tau-bench's effects: get_/find_/list_/search_/calculate/think read, the rest write."""
    every = frozenset(names)
    read = frozenset(n for n in every if n.startswith(READ_PREFIXES))
    return ToolEffects(read_only=read, writes=every - read)


class _AnyArgs(BaseModel):
    """Whatever arguments the model sent (the recorded tool accepts them all)."""

    model_config = ConfigDict(extra="allow")
    tool_call_id: Annotated[str, InjectedToolCallId]


class Recorded:
    """Tools that answer with the recorded result of each call, and log what really ran."""

    def __init__(self) -> None:
        self.results: dict[str, str] = {}
        self.executed: list[str] = []

    def tool(self, name: str) -> StructuredTool:
        def run(tool_call_id: str, **_: Any) -> str:
            self.executed.append(tool_call_id)
            return self.results.get(tool_call_id, "")

        return StructuredTool.from_function(
            func=run, name=name, description=f"Recorded tau-bench tool {name}.",
            args_schema=_AnyArgs,
        )  # fmt: skip


def build_graph(policy: LoopPolicy, tools: Sequence[StructuredTool]) -> Any:
    """tools (the guarded ToolNode) -> loop_check -> the recorded model (next step)."""
    builder = StateGraph(LoopState)
    builder.add_node("tools", ToolCallGuard(loop=policy).tool_node(tools))
    builder.add_node("model", lambda state: {})  # the recorded model answers next
    builder.add_edge(START, "tools")
    add_loop_check(builder, "tools", continue_to="model", policy=policy)
    builder.add_edge("model", END)
    return builder.compile()


def to_message(turn: dict[str, Any], index: int) -> BaseMessage:
    """A recorded turn as the LangChain message the agent's graph would hold."""
    if turn["role"] == "user":
        return HumanMessage(turn["text"], id=f"m{index}")
    if turn["role"] == "tool":
        return ToolMessage(
            turn["content"], tool_call_id=turn["tool_call_id"], name=turn["name"], id=f"m{index}"
        )
    calls = [
        {
            "name": c["name"],
            "args": c["args"] if isinstance(c["args"], dict) else {"__raw__": c["args"]},
            "id": c["id"],
            "type": "tool_call",
        }
        for c in turn.get("calls", ())
    ]
    return AIMessage(turn["text"], tool_calls=calls, id=f"m{index}")


@dataclass(frozen=True)
class Call:
    """What the guard did with one recorded call."""

    step: int
    """1-based index of the assistant tool-call turn in the trajectory."""
    call_id: str
    tool: str
    outcome: str
    """executed | reused | refused | stopped | missing"""
    stale: bool = False
    why: str = ""


@dataclass(frozen=True)
class Step:
    step: int
    calls: tuple[Call, ...]
    decisions: tuple[GuardDecision, ...]


def steps_of(trajectory: Trajectory) -> list[tuple[int, list[dict[str, Any]]]]:
    """(turn index, recorded results) per assistant tool-call turn: the tool turns right
    after it. Pairing is by position: tau-bench's recorded call ids repeat within a run."""
    out: list[tuple[int, list[dict[str, Any]]]] = []
    for index, turn in enumerate(trajectory.turns):
        if turn["role"] == "assistant" and turn.get("calls"):
            out.append((index, []))
        elif turn["role"] == "tool" and out:
            out[-1][1].append(turn)
    return out


@dataclass
class Replayer:
    """One compiled graph per configuration, reused for every trajectory."""

    policy: LoopPolicy
    names: Iterable[str]
    recorded: Recorded = field(default_factory=Recorded)

    def __post_init__(self) -> None:
        tools = [self.recorded.tool(n) for n in sorted(set(self.names))]
        self.graph = build_graph(self.policy, tools)

    def replay(self, trajectory: Trajectory) -> list[Step]:
        """Every tool-call step of ``trajectory``, each fed the recorded history, then the
        loop decisions on its replies without tool calls (what ``create_reply_check``, the
        edge after the model, decides), as steps with no calls."""
        messages = [to_message(turn, i) for i, turn in enumerate(trajectory.turns)]
        steps = [
            self._step(n, messages[: index + 1], results)
            for n, (index, results) in enumerate(steps_of(trajectory), start=1)
        ]
        return steps + self._replies(messages)

    def _replies(self, messages: list[BaseMessage]) -> list[Step]:
        out = []
        step = 0
        for i, message in enumerate(messages):
            if isinstance(message, AIMessage) and message.tool_calls:
                step += 1
            elif isinstance(message, AIMessage) and message.content:
                decision = detect_loop(messages[: i + 1], policy=self.policy)
                if decision.verdict is not Verdict.CONTINUE:
                    out.append(Step(step, (), (decision,)))
        return out

    def _step(self, step: int, messages: list[BaseMessage], results: list[dict[str, Any]]) -> Step:
        truth = {t["tool_call_id"]: t for t in results}
        self.recorded.results = {k: t["content"] for k, t in truth.items()}
        self.recorded.executed = []
        out = self.graph.invoke({"messages": messages})
        ai = messages[-1]
        assert isinstance(ai, AIMessage)
        answers = {
            m.tool_call_id: m
            for m in out["messages"][len(messages) :]
            if isinstance(m, ToolMessage)
        }
        decisions = tuple(out.get("guard_log", ()))
        ran = set(self.recorded.executed)
        calls = tuple(
            judge(step, call, answers.get(str(call["id"])), decisions, ran=ran, truth=truth)
            for call in ai.tool_calls
        )
        return Step(step, calls, decisions)


def judge(
    step: int,
    call: Any,
    answer: ToolMessage | None,
    decisions: Sequence[GuardDecision],
    *,
    ran: set[str],
    truth: dict[str, Any],
) -> Call:
    """Classify one call: executed, reused (stale or not), refused, stopped or missing."""
    call_id, tool = str(call["id"]), call["name"]
    mine = [d for d in decisions if call_id in d.selected_ids]
    if call_id in ran:
        return Call(step, call_id, tool, "executed")
    if any(d.verdict is Verdict.REFUSE for d in mine):
        differs = answer is not None and stale_answer(answer, truth, call_id)[0]
        real = "something else" if differs else "the same result"
        why = f"{_reasons(mine)} (the real repeat returned {real})"
        return Call(step, call_id, tool, "refused", why=why)
    if any(d.verdict is Verdict.STOP for d in mine):
        return Call(step, call_id, tool, "stopped", why=_reasons(mine))
    if answer is None or not any(d.verdict is Verdict.REUSE for d in mine):
        return Call(step, call_id, tool, "missing", why="no answer and no decision")
    stale, why = stale_answer(answer, truth, call_id)
    return Call(step, call_id, tool, "reused", stale=stale, why=why)


def _reasons(decisions: Sequence[GuardDecision]) -> str:
    return "; ".join(f"{d.guard}:{d.verdict.value}:{d.reason}: {d.detail}" for d in decisions)


def stale_answer(answer: ToolMessage, truth: dict[str, Any], call_id: str) -> tuple[bool, str]:
    """Did the guard answer something other than what the real tool returned here?

    The guard's answer is its ``[loop_check] ...`` line, then the earlier result it reuses.
    A duplicate in one turn carries no body: it points at the earlier call of the turn,
    whose recorded result is then the answer. Results are stored whole, or cut with the
    full text's sha256 appended, so equal stored texts mean equal real results; the
    digests compared are those of the full recorded results.
    """
    real = truth.get(call_id)
    if real is None:
        return False, "no recorded result to compare"
    meta = (answer.response_metadata or {}).get("agent_guards") or {}
    source = str(meta.get("reused_from", ""))
    text = answer.content if isinstance(answer.content, str) else json.dumps(answer.content)
    body = REUSE_LINE.sub("", text)
    if meta.get("duplicate") and not body and source in truth:
        body = truth[source]["content"]
    answered = real["sha256"] if body == real["content"] else sha256(body)
    if answered == real["sha256"]:
        return False, f"same as the recorded result (answered from {source})"
    return True, (
        f"answered from {source} ({answered[:12]}) but the real tool returned "
        f"{real['sha256'][:12]} ({real['chars']} chars): {real['content'][:160]!r}"
    )


@dataclass(frozen=True)
class Case:
    """A stale answer or a stop, precisely enough to reproduce it."""

    trajectory: str
    success: bool
    step: int
    tool: str
    kind: str
    why: str


@dataclass
class Tally:
    """The corpus metrics of one configuration."""

    config: str
    trajectories: int = 0
    successful: int = 0
    calls: int = 0
    executed: int = 0
    reused: int = 0
    stale: int = 0
    refused: int = 0
    stopped: int = 0
    missing: int = 0
    nudges: int = 0
    false_stops: int = 0
    """Stop, refuse, escalate or budget decisions on successful runs (target 0)."""
    failed_run_stops: int = 0
    """The same decisions on failed runs (not an error: the run may really be stuck)."""
    success_nudges: int = 0
    """Nudges on successful runs (target 0)."""
    loops_stopped: int = 0
    """Failed runs that a stop (or escalation) ended early: real loops stopped."""
    steps_before_end: list[int] = field(default_factory=list)
    """Per loop stopped: recorded tool-call steps after the first stop (steps saved)."""
    cases: list[Case] = field(default_factory=list)

    @property
    def saved(self) -> int:
        """Executions saved: reuses whose answer was what the real tool returned."""
        return self.reused - self.stale

    def add(self, trajectory: Trajectory, steps: Sequence[Step]) -> None:
        self.trajectories += 1
        self.successful += trajectory.success
        self._first_stop(trajectory, steps)
        for step in steps:
            for call in step.calls:
                self.calls += 1
                setattr(self, call.outcome, getattr(self, call.outcome) + 1)
                self.stale += call.stale
                if call.stale or call.outcome in ("refused", "missing"):
                    kind = "stale" if call.stale else call.outcome
                    self._case(trajectory, step.step, call.tool, kind, call.why)
            for d in step.decisions:
                self.nudges += d.verdict is Verdict.NUDGE
                self.success_nudges += d.verdict is Verdict.NUDGE and trajectory.success
                if d.verdict not in STOPPING and d.guard != "budget":
                    continue
                if trajectory.success:
                    self.false_stops += 1
                else:
                    self.failed_run_stops += 1
                if d.verdict is not Verdict.REFUSE:  # refusals are reported per call
                    tool = str(d.data.get("tool", "")) if isinstance(d.data, dict) else ""
                    self._case(trajectory, step.step, tool, d.verdict.value, _reasons([d]))

    def _first_stop(self, trajectory: Trajectory, steps: Sequence[Step]) -> None:
        """A failed run a loop stop ended early: how many recorded steps it saved."""
        stops = [
            s.step
            for s in steps
            if any(d.verdict in (Verdict.STOP, Verdict.ESCALATE) for d in s.decisions)
        ]
        if stops and not trajectory.success:
            total = max((s.step for s in steps if s.calls), default=0)
            self.loops_stopped += 1
            self.steps_before_end.append(total - min(stops))

    @property
    def mean_steps_before_end(self) -> float:
        """Mean recorded tool-call steps after the first stop, over the loops stopped."""
        saved = self.steps_before_end
        return round(sum(saved) / len(saved), 1) if saved else 0.0

    def _case(self, trajectory: Trajectory, step: int, tool: str, kind: str, why: str) -> None:
        self.cases.append(Case(trajectory.id, trajectory.success, step, tool, kind, why))


def configurations(names: Iterable[str], *, headless: bool = False) -> dict[str, LoopPolicy]:
    """(a) tau-bench's effects declared; (b) nothing declared (every tool unknown); and,
    with ``headless``, (a) in headless mode, where a user message does not start afresh
    (tau-bench runs are conversations, so interactive mode is the faithful one)."""
    effects = tau_effects(names)
    out = {"effects declared": LoopPolicy(effects=effects), "no effects": LoopPolicy()}
    if headless:
        out["effects declared, headless"] = LoopPolicy(effects=effects, mode="headless")
    return out


def replay_corpus(
    trajectories: Sequence[Trajectory], policies: dict[str, LoopPolicy] | None = None
) -> list[Tally]:
    """One tally per configuration, over every trajectory."""
    names = tool_names(trajectories)
    out = []
    for config, policy in (policies or configurations(names)).items():
        replayer = Replayer(policy, names)
        tally = Tally(config)
        for trajectory in trajectories:
            tally.add(trajectory, replayer.replay(trajectory))
        out.append(tally)
    return out
