"""loop_check for ``langchain.agents.create_agent``: LoopGuardMiddleware."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any, Literal

from langchain.agents.middleware import AgentMiddleware, hook_config
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langgraph.errors import GraphBubbleUp
from langgraph.runtime import Runtime
from langgraph.types import Command

from agent_guards import graph as _node
from agent_guards.core.decision import GuardDecision, Verdict
from agent_guards.core.errors import LoopDetected, check_choice
from agent_guards.core.stopping import answer_pending, final_message
from agent_guards.loop_check.core import detect_loop
from agent_guards.loop_check.graph import nudge_update
from agent_guards.loop_check.judge import ajudge_loop, judge_due, judge_loop
from agent_guards.loop_check.policy import LoopPolicy
from agent_guards.loop_check.recovery import after_cut
from agent_guards.middleware.state import GuardAgentState, refuse_clash, safe_decision
from agent_guards.tool_guard.plan import Plan
from agent_guards.tool_guard.wrapper import ToolCallGuard, record_effect

__all__ = ["LoopGuardMiddleware"]


class LoopGuardMiddleware(AgentMiddleware[GuardAgentState, Any, Any]):
    """loop_check for ``create_agent``: reuse repeats, nudge once, then stop.

    A reply without tool calls is checked too (``after_model``): a reply that repeats
    itself inside, or repeats the replies before it (across user turns too), is nudged
    and the model answers again, or the run stops.

    Args:
        policy: Thresholds and what counts as the same call (default :class:`LoopPolicy`).
        exit_behavior: ``"end"`` finishes the run with the partial result and the reason;
            ``"error"`` raises :class:`~agent_guards.core.errors.LoopDetected` instead.
        judge: A chat model for the optional LLM-judged loop check (off when None); it
            is asked on ``LoopPolicy``'s schedule and can only nudge.

    Example:
        >>> from langchain_core.messages import ToolMessage
        >>> from agent_guards import LoopGuardMiddleware
        >>> def turn(call_id):
        ...     call = AIMessage("", tool_calls=[{"name": "fx", "args": {}, "id": call_id}])
        ...     return [call, ToolMessage("1.08", tool_call_id=call_id)]
        >>> history = [*turn("c1"), *turn("c2")]
        >>> update = LoopGuardMiddleware().before_model({"messages": history}, runtime=None)
        >>> update["guard_log"][0].verdict.value, update["messages"][0].content
        ('nudge', '[loop_check] fx was called 2 times with the same arguments. ...')
    """

    state_schema = GuardAgentState

    def __init__(
        self,
        *,
        policy: LoopPolicy | None = None,
        exit_behavior: Literal["end", "error"] = "end",
        judge: BaseChatModel | None = None,
    ) -> None:
        super().__init__()
        policy = LoopPolicy.coerce(policy)
        self.policy = policy
        self.exit_behavior = check_choice("exit_behavior", exit_behavior, ("end", "error"))
        if judge is not None and not isinstance(judge, BaseChatModel):
            raise TypeError(f"judge must be a chat model, got {type(judge).__name__}")
        self.judge = judge
        self._guard = ToolCallGuard(loop=policy, retry=None, count_usage=False)

    def _decide(self, state: Any, runtime: Runtime[Any]) -> GuardDecision:
        messages = list(state.get("messages") or ())
        decision = safe_decision(
            "loop_check", self.policy.label, lambda: detect_loop(messages, policy=self.policy)
        )
        if self.policy.on_loop == "truncate":
            escalate = self.policy.on_stop == "escalate"
            decision = after_cut(decision, state.get("guard_log"), escalate=escalate)
        return _node.stamp(decision, getattr(runtime, "config", None))

    def _judge_due(self, state: Any) -> bool:
        return self.judge is not None and judge_due(state.get("messages") or (), self.policy)

    def _judged(self, decision: GuardDecision, runtime: Runtime[Any]) -> dict[str, Any] | None:
        decision = _node.stamp(decision, getattr(runtime, "config", None))
        if decision.verdict is not Verdict.NUDGE:
            return {"guard_log": [decision]}
        note = HumanMessage(f"[loop_check] {decision.detail}.", name="loop_check")
        return {"messages": [note], "guard_log": [decision]}

    def _stop(self, decision: GuardDecision, state: Any) -> dict[str, Any]:
        decision = replace(decision, verdict=Verdict.STOP)
        if self.exit_behavior == "error":
            raise LoopDetected(
                guard="loop_check",
                reason=decision.reason,
                limit=decision.data.get("stop_at"),
                value=decision.data.get("count"),
                detail=decision.detail,
            )
        messages = list(state.get("messages") or ())
        pending = answer_pending(
            messages, f"Not executed: loop_check stopped the run ({decision.reason})."
        )
        final = final_message(decision, [*messages, *pending], texts=self.policy.texts)
        return {"messages": [*pending, final], "guard_log": [decision], "jump_to": "end"}

    def _escalate(self, decision: GuardDecision, state: Any) -> dict[str, Any] | None:
        answer = _node.ask_human(
            {
                "guard": "loop_check",
                "decision": decision.to_dict(),
                "question": self.policy.texts.render("stuck_question", detail=decision.detail),
            }
        )
        text = answer.get("message") if isinstance(answer, dict) else answer
        action = answer.get("action") if isinstance(answer, dict) else answer
        if action == "stop" or action is False:
            return self._stop(decision, state)
        if isinstance(text, str) and text.strip() and text.strip().lower() != "continue":
            return {"messages": [HumanMessage(text.strip())], "guard_log": [decision]}
        return {"guard_log": [decision]}

    def _handle(self, state: Any, runtime: Runtime[Any], *, nudge: bool) -> dict[str, Any] | None:
        refuse_clash(state, type(self).__name__)
        decision = self._decide(state, runtime)
        if decision.verdict is Verdict.STOP:
            return self._stop(decision, state)
        if decision.verdict is Verdict.ESCALATE:
            return self._escalate(decision, state)
        if decision.verdict is Verdict.NUDGE and nudge:
            return nudge_update(decision, list(state.get("messages") or ()), self.policy)
        return None

    @hook_config(can_jump_to=["end"])
    def before_model(self, state: GuardAgentState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Nudge once, or stop, from the history as it stands before the model is called."""
        if _nudged(state):
            return None  # after_model nudged this reply already
        update = self._handle(state, runtime, nudge=True)
        if update is None and self._judge_due(state):
            assert self.judge is not None
            messages = list(state.get("messages") or ())
            judge = self.judge
            decision = _judge(lambda: judge_loop(messages, judge, policy=self.policy), self.policy)
            return self._judged(decision, runtime)
        return update

    @hook_config(can_jump_to=["end"])
    async def abefore_model(
        self, state: GuardAgentState, runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        """Async :meth:`before_model` (the judging model, if any, is awaited)."""
        if _nudged(state):
            return None
        update = self._handle(state, runtime, nudge=True)
        if update is None and self._judge_due(state):
            assert self.judge is not None
            messages = list(state.get("messages") or ())
            try:
                decision = await ajudge_loop(messages, self.judge, policy=self.policy)
            except GraphBubbleUp:
                raise
            except Exception as err:  # a failing judge is no loop: the run goes on
                decision = _judge_failed(err, self.policy)
            return self._judged(decision, runtime)
        return update

    @hook_config(can_jump_to=["end", "model"])
    def after_model(self, state: GuardAgentState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Stop before executing a call that reaches ``stop_at`` (its pending calls answered);
        for a reply without tool calls that loops, nudge and let the model answer again,
        or stop."""
        messages = state.get("messages") or []
        last = messages[-1] if messages else None
        if not isinstance(last, AIMessage):
            return None
        if last.tool_calls:
            return self._handle(state, runtime, nudge=False)
        update = self._handle(state, runtime, nudge=True)
        if update is not None and "jump_to" not in update:
            update["jump_to"] = "model"
        return update

    @hook_config(can_jump_to=["end", "model"])
    async def aafter_model(
        self, state: GuardAgentState, runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        """Async :meth:`after_model`."""
        return self.after_model(state, runtime)

    def wrap_tool_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        """Answer an identical earlier call from its result (verdict REUSE)."""
        plan = self._guard.plan(request)
        if plan.kind == "reuse":
            return self._guard.finish(request, self._guard.run_once(request, handler, plan))
        return _recorded(handler(request), plan)

    async def awrap_tool_call(self, request: Any, handler: Callable[[Any], Awaitable[Any]]) -> Any:
        """Async :meth:`wrap_tool_call`."""
        plan = self._guard.plan(request)
        if plan.kind == "reuse":
            return self._guard.finish(request, await self._guard.arun_once(request, handler, plan))
        return _recorded(await handler(request), plan)


def _judge_failed(err: Exception, policy: LoopPolicy) -> GuardDecision:
    return GuardDecision(
        guard="loop_check",
        verdict=Verdict.CONTINUE,
        reason="judge_failed",
        detail=f"the judging model failed: {type(err).__name__}: {err}"[:300],
        policy=policy.label,
        data={"pattern": "llm_judge", "count": 0, "judged": False},
    )


def _judge(call: Callable[[], GuardDecision], policy: LoopPolicy) -> GuardDecision:
    """The judging model's decision; CONTINUE (``judge_failed``) when it raises."""
    try:
        return call()
    except GraphBubbleUp:
        raise
    except Exception as err:  # a failing judge is no loop: the run goes on
        return _judge_failed(err, policy)


def _nudged(state: Any) -> bool:
    """The history ends with loop_check's note: the model has not answered it yet."""
    last = (state.get("messages") or [None])[-1]
    return isinstance(last, BaseMessage) and last.type == "human" and last.name == "loop_check"


def _recorded(result: Any, plan: Plan) -> Any:
    """The executed call's result, with its effect recorded for the history scans (also
    inside the ``Command`` an inner middleware, such as RetryRouterMiddleware, returns)."""
    effect = plan.effect
    if effect is None:
        return result
    if isinstance(result, ToolMessage):
        return record_effect(result, effect)
    if isinstance(result, Command) and isinstance(result.update, dict):
        update = {
            key: [record_effect(m, effect) if isinstance(m, ToolMessage) else m for m in value]
            if key == "messages" and isinstance(value, list)
            else value
            for key, value in result.update.items()
        }
        return Command(graph=result.graph, goto=result.goto, resume=result.resume, update=update)
    return result
