"""What the reference graph's model sees and returns: schemas, prompts, context text.

Each node's system prompt opens with a ``[role]`` tag (``parse_goal``, ``plan``, ``agent``,
``review``) so logs, traces and scripted test models can tell the roles apart.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal, TypeVar

from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, HumanMessage
from langchain_core.runnables import Runnable
from pydantic import BaseModel, Field

from agent_guards import PlanStep, PlanVersion
from agent_guards.core.errors import InvalidInputError
from agent_guards.memory_resolve import format_memories
from agent_guards.planner_gate import Goal, RiskLevel

Spec = TypeVar("Spec", bound=BaseModel)


class FactSpec(BaseModel):
    """A fact the user stated in this turn (a preference, a correction)."""

    key: str
    value: Any
    persist: bool = Field(False, description="True if the user wants it remembered")


class GoalSpec(BaseModel):
    """The goal layer: intent, constraints, output dimensions, explicit facts."""

    intent: str
    constraints: dict[str, Any] = Field(default_factory=dict)
    dimensions: list[str] = Field(default_factory=list, description="claims the answer covers")
    facts: list[FactSpec] = Field(default_factory=list)


class StepSpec(BaseModel):
    id: str
    description: str
    tool: str | None = None
    args: dict[str, Any] = Field(default_factory=dict)
    depends_on: list[str] = Field(default_factory=list)
    risk: Literal["low", "medium", "high"] = "low"
    timeout_s: float | None = Field(default=None, gt=0, description="time limit in seconds")
    fallback: Literal["use_cache", "skip", "ask_user"] | None = Field(
        default=None, description="what to do when the step fails or times out"
    )


class PlanSpec(BaseModel):
    steps: list[StepSpec]
    reason: str = ""


class ReviewSpec(BaseModel):
    """After a step: go on, revise the plan (saying why), or finish early."""

    action: Literal["continue", "revise", "finish"] = "continue"
    reason: str = ""
    trigger: Literal["critique", "execution_feedback"] = "critique"
    steps: list[StepSpec] = Field(default_factory=list)


PARSE_PROMPT = (
    "[parse_goal] Extract the user's goal: intent, constraints (region, period, entity, ...),"
    " the dimensions the answer must cover, and facts the user stated about this request."
)
PLAN_PROMPT = (
    "[plan] Write a short plan: steps with ids, a tool and its args when a tool is needed,"
    " and dependencies. Only execution feedback or new user input justifies a new plan."
)
STEP_PROMPT = "[agent] Execute the current plan step with the tools. Stop when it is done."
REVIEW_PROMPT = (
    "[review] The step finished. Continue with the plan, finish early, or revise it"
    " (say whether the revision comes from execution feedback or from critique)."
)


def last_human(messages: Sequence[AnyMessage]) -> str:
    for message in reversed(messages):
        if isinstance(message, HumanMessage):
            return str(message.content)
    return ""


def ask(
    model: Runnable[Any, Any],
    schema: type[Spec],
    messages: list[BaseMessage],
    spent: list[int] | None = None,
) -> Spec:
    """One structured-output call, validated into ``schema`` (some providers return dicts).

    ``model`` may be built with ``include_raw=True``: the raw reply's tokens are then
    added to ``spent`` (before a malformed reply raises, so a failed attempt counts too)."""
    out = model.invoke(messages)
    if isinstance(out, Mapping) and {"raw", "parsed", "parsing_error"} <= set(out):
        if spent is not None and isinstance(out["raw"], AIMessage):
            spent.append(tokens_of(out["raw"]))
        if out["parsing_error"] is not None:
            raise out["parsing_error"]
        out = out["parsed"]
    return out if isinstance(out, schema) else schema.model_validate(out)


def tokens_of(reply: AIMessage) -> int:
    """The tokens the model reports for ``reply`` (0 when it reports none)."""
    usage: Mapping[str, Any] = reply.usage_metadata or {}
    tokens = usage.get("total_tokens", 0)
    return int(tokens) if isinstance(tokens, int | float) and not isinstance(tokens, bool) else 0


def usage_of(reply: AIMessage) -> dict[str, int]:
    return {"model_calls": 1, "steps": 1, "tokens": tokens_of(reply)}


def to_steps(specs: Sequence[StepSpec]) -> tuple[PlanStep, ...]:
    return tuple(
        PlanStep(
            s.id,
            s.description,
            tool=s.tool,
            args=s.args,
            depends_on=tuple(s.depends_on),
            risk=RiskLevel(s.risk),
            timeout_s=s.timeout_s,
            fallback=s.fallback,
        )
        for s in specs
    )


def goal_in(state: Mapping[str, Any]) -> Goal | None:
    """The goal in state, in its JSON form too (LangGraph Studio, an SDK client or
    ``update_state`` may write a mapping); one that cannot be read counts as none."""
    raw = state.get("goal")
    try:
        return None if raw is None else Goal.coerce(raw)
    except InvalidInputError:
        return None


def plan_context(state: Mapping[str, Any], current: PlanVersion | None) -> str:
    goal = goal_in(state)
    lines = [f"Request: {last_human(state.get('messages') or [])}"]
    if goal is not None:
        lines.append(
            f"Goal: {goal.intent}; constraints: {goal.constraints}; covers: {list(goal.dimensions)}"
        )
    verdict = state.get("memory_verdict")
    if verdict is not None and verdict.inject:
        lines.append("Memories:\n" + format_memories(verdict))
    lines.append(f"Plan versions so far: {len(state.get('plans') or [])}")
    if current is not None:
        lines.append(f"Current plan v{current.version}:")
        lines.extend(
            f"- {s.id} [{s.status.value}] {s.description} {s.note}".rstrip() for s in current.steps
        )
    return "\n".join(lines)


def step_brief(state: Mapping[str, Any], step: PlanStep) -> str:
    goal = goal_in(state)
    text = f"Step {step.id}: {step.description}"
    if step.tool:
        text += f"\nSuggested call: {step.tool}({step.args})"
    if goal is not None and goal.constraints:
        text += f"\nConstraints (always apply): {goal.constraints}"
    return text
