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
from agent_guards.core.state import merge_ledger
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

    # Four channels get other channels than their mixins give them (LangGraph reads the
    # most derived annotation): the log, the plan versions, the evidence (which accumulates
    # across steps) and the run ledger (below) are delta channels, so a checkpoint stores
    # what a step wrote, not the whole value again (a long plan would make the run's
    # storage O(N^2)).
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
    goal_start: int
    """Where the versions of the goal being worked on begin in ``plans`` (0 until a run
    answers). A turn after an answer is a new request: its plan runs every step again, as
    asked, instead of taking the done steps of an earlier request's plan, whose results
    may be stale. A turn after a clarifying question, a stop or an escalation continues
    its goal: a step done there is not run again."""
    outcome: dict[str, Any]
    # The run ledger, kept here when the graph runs without a store: deltas too, so the
    # record of a long run is not copied into every checkpoint again
    run_ledger: Annotated[dict[str, dict[str, Any]], delta_channel(merge_ledger)]  # type: ignore[misc]
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
        self._check_types()
        if self.max_context_tokens < 256:
            raise ValueError(f"max_context_tokens must be >= 256, got {self.max_context_tokens}")
        if self.guards and self.budget.max_steps is None:
            raise ValueError("Policies.budget needs max_steps: recursion_limit is only a backstop")
        if self.guards:
            _check_runnable(self.budget)

    def _check_types(self) -> None:
        """Each field holds what it says (a dict where a policy belongs fails here, naming
        the field and the class to build, not deep inside a run)."""
        kinds: dict[str, type | tuple[type, ...]] = {
            "budget": Budget, "evidence": EvidencePolicy, "memory": MemoryPolicy,
            "planner": PlannerPolicy, "loop": LoopPolicy, "retry": RetryRouterPolicy,
            "breaker": (CircuitBreaker, type(None)), "context": ContextPolicy, "texts": Texts,
            "guards": bool,
        }  # fmt: skip
        for name, kind in kinds.items():
            value = getattr(self, name)
            if not isinstance(value, kind):
                want = kind.__name__ if isinstance(kind, type) else f"{kind[0].__name__} or None"
                raise TypeError(
                    f"Policies.{name} must be a {want}, got {type(value).__name__}"
                    + (f": Policies({name}={want}(...))" if isinstance(kind, type) else "")
                )
        tokens = self.max_context_tokens
        if isinstance(tokens, bool) or not isinstance(tokens, int):
            raise TypeError(f"Policies.max_context_tokens must be an int, got {tokens!r}")
        if self.approval_risk not in ("low", "medium", "high", None):
            raise ValueError(
                "Policies.approval_risk must be 'low', 'medium', 'high' or None, got "
                f"{self.approval_risk!r}"
            )
        if self.stop_request is not None and not callable(self.stop_request):
            raise TypeError(
                f"Policies.stop_request must be callable or None, got {self.stop_request!r}"
            )
        required = self.required_constraints
        if isinstance(required, str) or not all(isinstance(c, str) and c for c in required):
            raise TypeError(
                f"Policies.required_constraints must be constraint names, got {required!r}"
            )
        object.__setattr__(self, "required_constraints", tuple(required))


# The least a run needs before the first tool call of its first plan step can run: the
# goal, the plan and the step's first turn are a model call and a counted step each, and
# start_step counts one more (each limit is checked before it is spent).
MIN_BUDGET = {"max_steps": 4, "max_model_calls": 3}


def _check_runnable(budget: Budget) -> None:
    """Refuse a budget under which no plan step could ever run: every run would stop on it
    before doing any work."""
    for name, least in MIN_BUDGET.items():
        limit = getattr(budget, name)
        if limit is not None and limit < least:
            raise ValueError(
                f"Policies.budget {name}={limit} leaves no room for a plan step: the goal, the "
                f"plan and the step's first model call need {name} >= {least}"
            )


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
