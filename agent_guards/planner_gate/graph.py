"""The planner_gate adapter: state channels, the Command node, and human approval.

The node reads the plan versions and the progress counters from graph state, calls
:func:`gate_plan`, records the decision, marks the newest version accepted or rejected,
resets the counters, and routes with ``Command(goto=...)``. Nothing is kept on Python
objects: a resume, a fork or another worker decides the same way from the checkpoint.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Annotated, Any, get_args

from langchain_core.runnables import RunnableConfig, RunnableLambda
from langgraph.constants import END
from langgraph.errors import GraphBubbleUp
from langgraph.graph import StateGraph
from langgraph.types import Command, Overwrite

from agent_guards.core.decision import GuardDecision, PlannerRoute, Verdict
from agent_guards.core.errors import InvalidInputError, check_choice
from agent_guards.core.state import GuardState, StateKeys, add_count
from agent_guards.core.texts import TEXTS_EN, Texts
from agent_guards.graph import (
    ask_human,
    invalid_input,
    require_channels,
    require_nodes,
    runnable,
    stamp,
    state_value,
)
from agent_guards.planner_gate.approval import (
    Approval,
    _after_approval,
    needs_approval,
)
from agent_guards.planner_gate.checks import check_count
from agent_guards.planner_gate.core import coerce_versions, gate_checked
from agent_guards.planner_gate.goal import Goal
from agent_guards.planner_gate.model import PlanStatus, PlanStep, PlanVersion, RiskLevel
from agent_guards.planner_gate.ops import next_step
from agent_guards.planner_gate.policy import DEFAULT_POLICY, GUARD, PlannerPolicy

__all__ = [
    "EXECUTED_KEY",
    "OBSERVED_KEY",
    "PlanState",
    "add_planner_gate",
    "approval_question",
    "create_planner_gate",
    "merge_plans",
    "progress_update",
    "request_approval",
]

EXECUTED_KEY = "executed_since_plan"
OBSERVED_KEY = "observations_since_plan"
ROUTES: tuple[str, ...] = get_args(PlannerRoute)
_LOG = logging.getLogger("agent_guards.planner_gate")
DEFAULT_DESTINATIONS: dict[str, str] = {
    "execute": "execute",
    "replan": "execute",  # REPLAN accepts the newest version; its first step runs next
    "clarify": "clarify",
    "escalate": "escalate",
    "stop": END,
}


def merge_plans(current: Sequence[Any] | None, update: Any) -> list[PlanVersion]:
    """Reducer for ``plans``: upsert by version number, keep versions sorted.

    Write a new version to add it, or a changed copy of an existing one (a step marked
    done) to replace it. Mappings are accepted and validated. A reducer that raises leaves
    its write pending on the checkpoint, so every later read of the thread fails: an
    invalid write (a dangling dependency, a junk value from ``update_state``) is dropped
    instead, and a ``planner_gate`` REFUSE decision naming its position in the write and
    the field is logged to the ``agent_guards.planner_gate`` logger (``extra={"decision":
    ...}``). Nodes that must see the rejection validate with ``PlanVersion.from_dict``
    before writing.

    >>> from agent_guards.planner_gate import mark_step
    >>> v1 = PlanVersion.linear(1, ["a"])
    >>> plans = merge_plans([v1], [mark_step(v1, "s1", "done")])
    >>> len(plans), plans[0].step("s1").status.value
    (1, 'done')
    >>> [p.id for p in merge_plans([v1], [{"version": 2, "steps": "junk"}])]
    ['v1']
    """
    items = {v.version: v for v in _valid_versions(current or (), "current value")}
    if update is not None:
        updates = update if isinstance(update, (list, tuple)) else [update]
        for v in _valid_versions(updates, "write"):
            items[v.version] = v
    return [items[k] for k in sorted(items)]


def _valid_versions(raws: Any, where: str) -> list[PlanVersion]:
    """The items of ``raws`` that are plan versions; each other one is logged and dropped."""
    if not isinstance(raws, (list, tuple)):
        raws = [raws]
    out: list[PlanVersion] = []
    for position, raw in enumerate(raws):
        try:
            out.append(PlanVersion.from_dict(raw))
        except (InvalidInputError, TypeError, ValueError, OverflowError) as err:
            _log_dropped(err, position, where)
    return out


def _log_dropped(err: Exception, position: int, where: str) -> None:
    problem = getattr(err, "problem", None) or type(err).__name__
    field = getattr(err, "field", None)
    item = getattr(err, "item", None) or f"#{position}"
    detail = f"plans {where} #{position} dropped: {err}"
    decision = GuardDecision(
        guard=GUARD,
        verdict=Verdict.REFUSE,
        reason="invalid_input",
        detail=detail[:500],
        data={"field": field, "item": item, "position": position, "problem": str(problem)[:200]},
    )
    _LOG.warning("%s", decision.detail, extra={"decision": decision})


class PlanState(GuardState, total=False):
    """State mixin for planner_gate: plan versions, the goal, and progress since the last plan.

    Nodes that execute a step return ``progress_update(executed=1, observations=n)``; a node
    that takes a user message returns ``progress_update(observations=1)``. The gate resets
    both counters to 0 each time it decides on a proposed version.

    Example:
        >>> from langgraph.graph import START
        >>> builder = StateGraph(PlanState).add_node("run", lambda s: progress_update(executed=1))
        >>> app = builder.add_edge(START, "run").compile()
        >>> out = app.invoke({"plans": [PlanVersion.linear(1, ["a"])], "executed_since_plan": 2})
        >>> [p.id for p in out["plans"]], out["executed_since_plan"]
        (['v1'], 3)
    """

    plans: Annotated[list[PlanVersion], merge_plans]
    goal: Goal
    executed_since_plan: Annotated[int, add_count]
    observations_since_plan: Annotated[int, add_count]


def progress_update(*, executed: int = 0, observations: int = 0) -> dict[str, int]:
    """The state update that counts executed steps and observations since the last plan.

    >>> progress_update(executed=1, observations=2)
    {'executed_since_plan': 1, 'observations_since_plan': 2}
    """
    return {
        EXECUTED_KEY: check_count(executed, item=None, name="executed"),
        OBSERVED_KEY: check_count(observations, item=None, name="observations"),
    }


def _check_destinations(destinations: Mapping[str, str] | None) -> dict[str, str]:
    if destinations is not None and not isinstance(destinations, Mapping):
        raise TypeError(f"destinations must be a mapping route -> node, got {destinations!r}")
    out = dict(DEFAULT_DESTINATIONS)
    for route, node in (destinations or {}).items():
        check_choice("destinations key", route, ROUTES)
        if not isinstance(node, str) or not node:
            raise ValueError(f"destinations[{route!r}] must be a node name, got {node!r}")
        out[route] = node
    if "replan" not in (destinations or {}):
        out["replan"] = out["execute"]
    return out


def _check_policy(policy: PlannerPolicy | None) -> PlannerPolicy:
    return PlannerPolicy.coerce(policy, default=DEFAULT_POLICY)


def _check_risk(approval_risk: RiskLevel | str | None) -> RiskLevel | None:
    if approval_risk is None:
        return None
    levels = [r.value for r in RiskLevel]
    return RiskLevel(check_choice("approval_risk", str(approval_risk), levels))


def _check_names(**names: str) -> None:
    for key, value in names.items():
        if not isinstance(value, str) or not value:
            raise ValueError(f"{key} must be a non-empty string, got {value!r}")


def _mark_newest(
    versions: Sequence[PlanVersion],
    decision: GuardDecision,
    executed: int,
    observed: int,
    *,
    count_replans: bool,
) -> tuple[dict[int, PlanVersion], set[int], dict[str, Any]]:
    """Mark a proposed newest version accepted or rejected and reset the counters.

    Returns every version by number, the numbers changed, and the state update so far.
    """
    update: dict[str, Any] = {}
    written: dict[int, PlanVersion] = {v.version: v for v in versions}
    changed: set[int] = set()
    new = versions[-1]
    if new.status is PlanStatus.PROPOSED:
        accepted = decision.selected_ids[:1] == (new.id,)
        status = PlanStatus.ACCEPTED if accepted else PlanStatus.REJECTED
        written[new.version] = replace(
            new, status=status, executed_steps=executed, observations=observed
        )
        changed.add(new.version)
        update[EXECUTED_KEY], update[OBSERVED_KEY] = Overwrite(0), Overwrite(0)
        if count_replans and decision.verdict is Verdict.REPLAN:
            update["usage"] = {"replans": 1}
    return written, changed, update


def _ask_approval(
    decision: GuardDecision,
    written: Mapping[int, PlanVersion],
    *,
    risk: RiskLevel | None,
    pol: PlannerPolicy,
    on_rejected: str,
) -> tuple[int, PlanVersion, GuardDecision] | None:
    """Ask a human about the chosen plan's next step if its risk needs it.

    Returns the version number, the plan with the answer recorded and the answer's
    decision, or None when no approval is needed.
    """
    chosen = decision.data.get("version")
    if risk is None or decision.verdict not in (Verdict.EXECUTE, Verdict.REPLAN) or not chosen:
        return None
    plan = written[chosen]
    step = next_step(plan)
    if step is None or not needs_approval(step, risk):
        return None
    answer = request_approval(step, version=plan.version, texts=pol.texts)
    marked, answered = _after_approval(
        plan,
        step,
        answer,
        then=decision.verdict,
        policy=pol.label,
        guard=GUARD,
        on_rejected=on_rejected,
    )
    return chosen, marked, answered


def create_planner_gate(
    *,
    policy: PlannerPolicy | None = None,
    destinations: Mapping[str, str] | None = None,
    name: str = GUARD,
    tools: Sequence[str] | None = None,
    approval_risk: RiskLevel | str | None = None,
    on_rejected: str = "stop",
    plans_key: str = "plans",
    goal_key: str = "goal",
    count_replans: bool = True,
    keys: StateKeys | None = None,
) -> RunnableLambda[Any, Command[Any]]:
    """Build the planner_gate node (sync + async). Add it with :func:`add_planner_gate`.

    Args:
        policy: The gate's rules (``PlannerPolicy()`` by default).
        destinations: Route label -> node name. Defaults: execute -> "execute", replan ->
            the execute node (the accepted version's first step runs next), clarify ->
            "clarify", escalate -> "escalate", stop -> END. Every node named must exist.
        name: The runnable's name (decisions always record ``guard="planner_gate"``).
        tools: Tool names a step may use; a step naming another tool is not valid.
        approval_risk: If set (``"high"``, ``"medium"``...), the next step at or above this
            risk is sent to a human with :func:`request_approval` before it runs.
        on_rejected: Route when the human rejects the step: "stop", "clarify" or "escalate".
        plans_key: State key holding the plan versions.
        goal_key: State key holding the :class:`Goal` (optional in state).
        count_replans: Add 1 to ``usage["replans"]`` for each accepted replan.

    Returns:
        A runnable node returning ``Command(goto=<node>, update=...)``.

    Example:
        >>> gate = create_planner_gate(destinations={"execute": "run"})
        >>> cmd = gate.invoke({"plans": [PlanVersion.linear(1, ["search", "write"])]})
        >>> cmd.goto, cmd.update["plans"][0].status.value, cmd.update["guard_log"][0].reason
        ('run', 'accepted', 'initial_plan')
    """
    pol = _check_policy(policy)
    dest = _check_destinations(destinations)
    risk = _check_risk(approval_risk)
    check_choice("on_rejected", on_rejected, ["stop", "clarify", "escalate"])
    tool_names = None if tools is None else frozenset(str(t) for t in tools)
    _check_names(name=name, plans_key=plans_key, goal_key=goal_key)

    def decide(state: Any, config: RunnableConfig) -> Command[Any]:
        versions = coerce_versions(state_value(state, plans_key) or [])
        executed, observed = (
            state_value(state, EXECUTED_KEY, 0),
            state_value(state, OBSERVED_KEY, 0),
        )
        decision = gate_checked(
            versions,
            pol,
            executed_steps=executed,
            observations=observed,
            goal=state_value(state, goal_key),
            tools=tool_names,
        )
        written, changed, update = _mark_newest(
            versions, decision, executed, observed, count_replans=count_replans
        )
        decisions = [stamp(decision, config)]
        route = decision.verdict.value
        asked = _ask_approval(decision, written, risk=risk, pol=pol, on_rejected=on_rejected)
        if asked is not None:
            chosen, written[chosen], answered = asked
            changed.add(chosen)
            decisions.append(stamp(answered, config))
            route = answered.verdict.value
        if changed:
            update[plans_key] = [written[v] for v in sorted(changed)]
        update["guard_log"] = decisions
        return Command(goto=dest[route], update=update)

    def node(state: Any, config: RunnableConfig) -> Command[Any]:
        try:  # as guarded() wraps a node, without building the wrapper on every call
            return decide(state, config)
        except GraphBubbleUp:
            raise
        except InvalidInputError as err:
            bad = invalid_input(GUARD, err, policy=pol.label, verdict=Verdict.ESCALATE)
            return Command(goto=dest["escalate"], update={"guard_log": [stamp(bad, config)]})

    return runnable(name, node, keys=keys, mixin="PlanState", channels=(plans_key,))


def add_planner_gate(
    builder: StateGraph[Any, Any, Any, Any], *, name: str = GUARD, **options: Any
) -> StateGraph[Any, Any, Any, Any]:
    """Add the planner_gate node to ``builder`` with its possible destinations declared.

    ``options`` are those of :func:`create_planner_gate`. Returns ``builder``.

    Example:
        >>> from langgraph.graph import START
        >>> builder = StateGraph(PlanState).add_node("run", lambda s: progress_update(executed=1))
        >>> _ = add_planner_gate(builder, destinations={"execute": "run", "clarify": END,
        ...                                            "escalate": END})
        >>> app = builder.add_edge(START, "planner_gate").compile()
        >>> out = app.invoke({"plans": [PlanVersion.linear(1, ["search", "write"])]})
        >>> out["plans"][0].status.value, [d.reason for d in out["guard_log"]]
        ('accepted', ['initial_plan'])
    """
    node = create_planner_gate(name=name, **options)
    dest = _check_destinations(options.get("destinations"))
    require_channels(
        builder, "add_planner_gate", "PlanState", ("plans", "guard_log"), options.get("keys")
    )
    given = options.get("destinations") or {}
    # a route you did not name goes to its default node: that node must exist (LangGraph
    # would only say "unknown node" when compiling); the ones you named may come later
    if "replan" not in given and "execute" in given:
        _require_replan_node(builder, dest["execute"])
    defaults = {r: n for r, n in dest.items() if r not in given and r != "replan"}
    require_nodes(builder, "add_planner_gate", defaults)
    labels: dict[str, list[str]] = {}
    for route, target in dest.items():
        labels.setdefault(target, []).append(route)
    builder.add_node(name, node, destinations={k: "/".join(v) for k, v in labels.items()})
    return builder


def _require_replan_node(builder: StateGraph[Any, Any, Any, Any], node: str) -> None:
    # replan follows the execute route unless named, so the node must exist already
    if node != END and node not in builder.nodes:
        raise ValueError(
            f"add_planner_gate: destinations['execute']={node!r} is not a node of the graph, "
            f"and replan follows it by default; fix the name, add the node {node!r} first, "
            "or name destinations['replan'] too"
        )


def approval_question(step: PlanStep, texts: Texts | None = None) -> str:
    """The approval question for ``step``, from ``texts`` (English by default).

    Example:
        >>> from agent_guards import PlanStep
        >>> from agent_guards.core.texts import TEXTS_ZH
        >>> step = PlanStep("s1", "wire money", tool="pay", risk="high")
        >>> approval_question(step)
        "Approve step 's1' (wire money), risk high?"
        >>> approval_question(step, TEXTS_ZH)
        '是否批准执行步骤“s1”（wire money）？风险等级：高。'
    """
    texts = texts or TEXTS_EN
    return texts.render(
        "approval_question",
        step=step.id,
        description=step.description or step.tool or step.id,
        risk=getattr(texts, f"risk_{step.risk.value}"),
    )


def request_approval(
    step: PlanStep,
    *,
    version: int | None = None,
    question: str | None = None,
    texts: Texts | None = None,
) -> Approval:
    """Pause the graph (``interrupt``) until a human approves or rejects ``step``.

    Call it inside a node; the graph needs a checkpointer. Resume with
    ``graph.invoke(Command(resume=True), config)`` (or ``"reject"``, or a mapping, see
    :meth:`Approval.from_resume`). On resume the node runs again from the top, so keep
    what precedes this call deterministic (the gate's decision is). ``question`` is what the
    person reads; without one it is ``texts.approval_question`` (the gate passes its
    policy's texts).

    Example:
        >>> from langgraph.checkpoint.memory import InMemorySaver
        >>> from langgraph.graph import START, StateGraph
        >>> from langgraph.types import Command
        >>> from agent_guards import PlanStep
        >>> from agent_guards.planner_gate import request_approval
        >>> step = PlanStep("s1", "wire money", tool="pay", risk="high")
        >>> app = (StateGraph(dict).add_node("ask", lambda s: {"by": request_approval(step).by})
        ...        .add_edge(START, "ask").compile(checkpointer=InMemorySaver()))
        >>> cfg = {"configurable": {"thread_id": "1"}}
        >>> app.invoke({}, cfg)["__interrupt__"][0].value["question"]
        "Approve step 's1' (wire money), risk high?"
        >>> app.invoke(Command(resume={"approved": True, "by": "ops"}), cfg)
        {'by': 'ops'}
    """
    payload = {
        "type": "plan_step_approval",
        "version": version,
        "step": step.to_dict(),
        "risk": step.risk.value,
        "question": question or approval_question(step, texts),
    }
    return Approval.from_resume(ask_human(payload), step_id=step.id)
