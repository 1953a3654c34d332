"""The reference graph's state and policies (one frozen value for every guard)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from langchain_core.messages import AnyMessage
from langchain_core.runnables import RunnableConfig
from langgraph.graph import MessagesState

from agent_guards import (
    Budget,
    CircuitBreaker,
    ContextPolicy,
    ContextState,
    Evidence,
    EvidencePolicy,
    EvidenceState,
    GuardDecision,
    LoopPolicy,
    MemoryPolicy,
    MemoryState,
    PlannerPolicy,
    PlanState,
    PlanVersion,
    RetryRouterPolicy,
)
from agent_guards.budget import recursion_limit_for
from agent_guards.core.cancel import StopRequest, is_stop_request
from agent_guards.core.texts import TEXTS_EN, Texts
from agent_guards.evidence_resolve import merge_evidence
from agent_guards.planner_gate import merge_plans
from agent_guards.serde import delta_channel, delta_log, delta_messages

from .outcomes import merge_writes

__all__ = ["SUPERSTEPS_PER_STEP", "PlanExecuteState", "Policies", "run_config"]

# How many super-steps one counted step may take (context_guard, agent, tools, a nudge).
SUPERSTEPS_PER_STEP = 4


class PlanExecuteState(MessagesState, PlanState, EvidenceState, MemoryState, ContextState):
    """Conversation, plan versions, evidence, memories and the guard channels."""

    # Three channels get other channels than their mixins give them (LangGraph reads the
    # most derived annotation): the log, the plan versions and the evidence (which
    # accumulates across steps) are delta channels, so a checkpoint stores what a step
    # wrote, not the whole value again (a long plan would make the run's storage O(N^2)).
    guard_log: Annotated[list[GuardDecision], delta_log()]  # type: ignore[misc]
    plans: Annotated[list[PlanVersion], delta_channel(merge_plans)]  # type: ignore[misc]
    evidence: Annotated[list[Evidence], delta_channel(merge_evidence)]  # type: ignore[misc]
    # The step's ReAct messages as deltas too: a large tool result is stored once (in the
    # write of the tools step), not in every checkpoint until the step ends.
    step_messages: Annotated[list[AnyMessage], delta_messages()]
    current_step: str | None
    step_started_at: float | None
    """When the running step started (POSIX seconds, the run's clock): its ``timeout_s``
    counts from here."""
    replan_trigger: str | None
    outcome: dict[str, Any]
    executed_writes: Annotated[dict[str, dict[str, Any]], delta_channel(merge_writes)]
    """The thread's tool calls that ran and have an undo hook, by call id (tool, args, when),
    and the line of their compensation once a cancel undid them: what a cancel undoes, each
    execution once (see ``outcomes.to_undo``)."""


@dataclass(frozen=True, kw_only=True)
class Policies:
    """Every guard's policy for the reference graph, in one frozen value.

    ``guards=False`` builds the same graph with every guard removed (no budget, plain
    ToolNode, every plan accepted, all evidence blended): the baseline the demo and the
    benchmarks compare against. Never ship it.
    """

    # Per thread, across turns: each turn's accepted plan counts as a replan (the gate's
    # own per-goal replan budget is PlannerPolicy.max_replans).
    budget: Budget = field(
        default_factory=lambda: Budget(
            max_steps=120, max_replans=8, max_tool_calls=40, max_model_calls=80
        )
    )
    evidence: EvidencePolicy = field(default_factory=EvidencePolicy)
    memory: MemoryPolicy = field(default_factory=MemoryPolicy)
    planner: PlannerPolicy = field(default_factory=PlannerPolicy)
    loop: LoopPolicy = field(default_factory=LoopPolicy)
    retry: RetryRouterPolicy = field(default_factory=RetryRouterPolicy)
    breaker: CircuitBreaker | None = field(default_factory=CircuitBreaker)
    context: ContextPolicy = field(default_factory=ContextPolicy)
    max_context_tokens: int = 16_000
    required_constraints: tuple[str, ...] = ()
    approval_risk: Literal["low", "medium", "high"] | None = "high"
    texts: Texts = field(default=TEXTS_EN, compare=False)
    """What the user reads (``agent_guards.core.texts``: ``TEXTS_EN``, ``TEXTS_ZH`` or your
    own): the final answer's wording, and loop_check's and retry_router's endings unless
    their policies carry texts of their own."""
    stop_request: StopRequest | None = is_stop_request
    """How a new user message that asks to stop an unfinished run is recognized (it is
    cancelled: completed writes undone, pending calls answered); None: never."""
    guards: bool = True

    def __post_init__(self) -> None:
        if self.max_context_tokens < 256:
            raise ValueError(f"max_context_tokens must be >= 256, got {self.max_context_tokens}")
        if self.guards and self.budget.max_steps is None:
            raise ValueError("Policies.budget needs max_steps: recursion_limit is only a backstop")


def run_config(
    policies: Policies | None = None, *, thread_id: str | None = None, **configurable: Any
) -> RunnableConfig:
    """A run config whose ``recursion_limit`` is derived from the budget (a backstop only)."""
    pol = policies or Policies()
    config: RunnableConfig = {"configurable": dict(configurable)}
    if thread_id is not None:
        config["configurable"]["thread_id"] = thread_id
    if pol.guards and pol.budget.max_steps is not None:
        config["recursion_limit"] = recursion_limit_for(
            pol.budget, nodes_per_step=SUPERSTEPS_PER_STEP
        )
    return config
