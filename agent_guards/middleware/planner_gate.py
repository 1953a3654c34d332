"""planner_gate for ``langchain.agents.create_agent``: a gate on ``write_todos`` replans.

LangChain's ``TodoListMiddleware`` lets the model plan with the ``write_todos`` tool; every
call replaces the whole list, so a model can rewrite its plan forever without doing any
of it. :class:`PlannerGateMiddleware` reads each todo list the model wrote as a plan version
and runs :func:`~agent_guards.planner_gate.gate_plan` on a call that changes the todos'
contents (a call that only changes statuses is progress, not a replan):

* REPLAN: the new list is written;
* EXECUTE: the new list is not written; the model is told to go on with the current one;
* STOP / CLARIFY / ESCALATE: the new list is not written and the run ends with the reason.

Counts come from the messages: tool results since the list in force are executed steps
and observations, a new user message is user input. Nothing is kept on the instance.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from langchain.agents.middleware import AgentMiddleware, hook_config
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.runtime import Runtime
from langgraph.types import Command

from agent_guards import graph as _node
from agent_guards.core.decision import GuardDecision, Verdict
from agent_guards.core.errors import InvalidInputError
from agent_guards.core.signatures import is_guard_message
from agent_guards.core.stopping import final_message
from agent_guards.middleware.state import GuardAgentState
from agent_guards.planner_gate.core import gate_plan
from agent_guards.planner_gate.model import PlanVersion
from agent_guards.planner_gate.policy import PlannerPolicy

__all__ = ["PlannerGateMiddleware"]

GUARD = "planner_gate"
_ENDING = (Verdict.STOP, Verdict.CLARIFY, Verdict.ESCALATE)


@dataclass(frozen=True)
class _Written:
    """One accepted todo list and what happened before it."""

    contents: tuple[str, ...]
    executed: int
    observed: int
    user_input: bool
    accepted: bool = True


def _contents(args: Any) -> tuple[str, ...]:
    todos = args.get("todos") if isinstance(args, Mapping) else None
    if not isinstance(todos, list):
        raise InvalidInputError("write_todos needs a todos list", item="write_todos", field="todos")
    return tuple(str(t.get("content", "")) if isinstance(t, Mapping) else str(t) for t in todos)


def _rejected(message: Any) -> bool:
    meta = getattr(message, "response_metadata", None) or {}
    ours = meta.get("agent_guards") if isinstance(meta, Mapping) else None
    return isinstance(ours, Mapping) and ours.get("guard") == GUARD


def _history(messages: Sequence[Any], tool: str) -> tuple[list[_Written], int, int, bool]:
    """Every list written or refused (a status-only update is folded into the list it
    updates) and the counts since the last one: executed steps, observations, user input."""
    answers = {m.tool_call_id: m for m in messages if isinstance(m, ToolMessage)}
    written: list[_Written] = []
    executed = observed = 0
    user = False
    for m in messages:
        if isinstance(m, HumanMessage) and not is_guard_message(m):
            observed, user = observed + 1, True
        elif isinstance(m, ToolMessage) and m.name != tool and m.status != "error":
            executed, observed = executed + 1, observed + 1
        if not isinstance(m, AIMessage):
            continue
        for call in m.tool_calls:
            answer = answers.get(str(call.get("id")))
            if call["name"] != tool or answer is None:
                continue
            contents = _contents(call.get("args"))
            current = _current(written)
            if current is not None and contents == current.contents:
                continue
            written.append(_Written(contents, executed, observed, user, not _rejected(answer)))
            executed = observed = 0
            user = False
    return written, executed, observed, user


def _current(written: Sequence[_Written]) -> _Written | None:
    """The list in force: the newest accepted one."""
    return next((w for w in reversed(written) if w.accepted), None)


def _versions(written: list[_Written], new: _Written) -> list[PlanVersion]:
    out: list[PlanVersion] = []
    for i, item in enumerate([*written, new], start=1):
        if i == 1:
            trigger = "initial"
        elif item.user_input:
            trigger = "user_input"
        else:
            trigger = "execution_feedback" if item.executed else "critique"
        out.append(
            PlanVersion.linear(
                i,
                list(item.contents) or ["(empty)"],
                trigger=trigger,
                parent=i - 1 if i > 1 else None,
                status=_status(item) if i <= len(written) else "proposed",
                executed_steps=item.executed,
                observations=item.observed,
            )
        )
    return out


def _status(item: _Written) -> str:
    return "accepted" if item.accepted else "rejected"


class PlannerGateMiddleware(AgentMiddleware[GuardAgentState, Any, Any]):
    """planner_gate for ``create_agent``: accept a ``write_todos`` replan only when earned.

    Add it next to LangChain's ``TodoListMiddleware`` (after it in ``middleware=[...]``, so
    it wraps the ``write_todos`` call). Decisions on replans go to ``guard_log``.

    Args:
        policy: The gate's rules (default :class:`PlannerPolicy`: two replans per goal,
            replans need execution feedback or user input).
        tool_name: The planning tool's name.

    Example:
        >>> from langchain.agents import create_agent
        >>> from langchain.agents.middleware import TodoListMiddleware
        >>> from agent_guards.middleware import PlannerGateMiddleware
        >>> from agent_guards.testing import ScriptedChatModel, tool_call_message
        >>> todo = lambda *steps: tool_call_message(
        ...     "write_todos", {"todos": [{"content": s, "status": "pending"} for s in steps]})
        >>> model = ScriptedChatModel(script=[todo("search", "answer"),
        ...                                   todo("think more", "search", "answer"), "done"])
        >>> agent = create_agent(model, middleware=[TodoListMiddleware(), PlannerGateMiddleware()])
        >>> out = agent.invoke({"messages": [("user", "rates?")]})
        >>> [t["content"] for t in out["todos"]], out["guard_log"][0].reason
        (['search', 'answer'], 'critique_only')
    """

    state_schema = GuardAgentState

    def __init__(self, *, policy: PlannerPolicy | None = None, tool_name: str = "write_todos"):
        super().__init__()
        if not isinstance(tool_name, str) or not tool_name:
            raise ValueError(f"PlannerGateMiddleware.tool_name must be a name, got {tool_name!r}")
        self.policy = PlannerPolicy.coerce(policy)
        self.tool_name = tool_name

    def _gate(self, request: Any) -> GuardDecision | None:
        """The decision on this ``write_todos`` call, or None when it is not a replan."""
        messages = list((request.state or {}).get("messages") or ())
        config = getattr(request.runtime, "config", None)
        try:
            new_contents = _contents(request.tool_call.get("args"))
            written, executed, observed, user = _history(messages, self.tool_name)
            current = _current(written)
            if current is None or new_contents == current.contents:
                return None
            new = _Written(new_contents, executed, observed, user)
            decision = gate_plan(
                _versions(written, new),
                policy=self.policy,
                executed_steps=executed,
                observations=observed,
            )
        except InvalidInputError as err:
            decision = _node.invalid_input(GUARD, err, policy=self.policy.label)
        return _node.stamp(decision, config)

    def _refuse(self, request: Any, decision: GuardDecision) -> Command[Any]:
        ending = decision.verdict in _ENDING
        text = f"Plan change not accepted ({decision.reason}): {decision.detail} " + (
            "The run ends here." if ending else "Go on with the current todo list."
        )
        call = request.tool_call
        answer = ToolMessage(
            text,
            tool_call_id=str(call["id"]),
            name=call["name"],
            status="error",
            response_metadata={"agent_guards": {"guard": GUARD, "verdict": decision.verdict.value}},
        )
        return Command(update={"messages": [answer], "guard_log": [decision]})

    def _accepted(self, result: Any, decision: GuardDecision) -> Any:
        if isinstance(result, Command) and isinstance(result.update, dict):
            log = [*result.update.get("guard_log", []), decision]
            return Command(update={**result.update, "guard_log": log})
        return Command(update={"messages": [result], "guard_log": [decision]})

    def wrap_tool_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        """Gate a ``write_todos`` call that changes the plan."""
        if request.tool_call["name"] != self.tool_name:
            return handler(request)
        decision = self._gate(request)
        if decision is None:
            return handler(request)
        if decision.verdict is not Verdict.REPLAN:
            return self._refuse(request, decision)
        return self._accepted(handler(request), decision)

    async def awrap_tool_call(self, request: Any, handler: Callable[[Any], Awaitable[Any]]) -> Any:
        """Async :meth:`wrap_tool_call`."""
        if request.tool_call["name"] != self.tool_name:
            return await handler(request)
        decision = self._gate(request)
        if decision is None:
            return await handler(request)
        if decision.verdict is not Verdict.REPLAN:
            return self._refuse(request, decision)
        return self._accepted(await handler(request), decision)

    @hook_config(can_jump_to=["end"])
    def before_model(self, state: GuardAgentState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        """End the run after a replan was stopped (stop, clarify or escalate)."""
        messages = list(state.get("messages") or ())
        last = messages[-1] if messages else None
        meta = (getattr(last, "response_metadata", None) or {}).get("agent_guards") or {}
        if not isinstance(last, ToolMessage) or meta.get("guard") != GUARD:
            return None
        if meta.get("verdict") not in {v.value for v in _ENDING}:
            return None
        log = [d for d in state.get("guard_log") or () if isinstance(d, GuardDecision)]
        decision = next((d for d in reversed(log) if d.guard == GUARD), None)
        if decision is None:
            return None
        final = final_message(decision, messages, texts=self.policy.texts)
        return {"messages": [final], "jump_to": "end"}
