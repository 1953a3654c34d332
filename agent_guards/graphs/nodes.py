"""The reference graph's own nodes (the guards' nodes come from agent_guards)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, cast

from langchain_core.exceptions import ModelError
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.runnables import RunnableConfig
from langgraph.config import get_store
from langgraph.errors import NodeError
from langgraph.graph import END
from langgraph.graph.message import REMOVE_ALL_MESSAGES
from langgraph.types import Command

from agent_guards import GuardDecision, PlanStep, PlanVersion, Verdict
from agent_guards.budget import StopReason, step_overdue
from agent_guards.context_guard import flag_evidence, tool_result_flags
from agent_guards.context_guard.graph import context_guard_node
from agent_guards.core import Effect, now_from_config
from agent_guards.core.errors import InvalidInputError
from agent_guards.core.policy import is_number
from agent_guards.core.signatures import canonical_args
from agent_guards.core.stopping import answer_pending
from agent_guards.core.texts import Texts
from agent_guards.evidence_resolve import evidence_from_messages
from agent_guards.evidence_resolve.boundary import identities_of
from agent_guards.evidence_resolve.messages import artifact_evidence, superseding
from agent_guards.graph import ask_human, stamp
from agent_guards.planner_gate import (
    Goal,
    PlanTrigger,
    StepStatus,
    current_plan,
    keep_done_writes,
    mark_step,
    next_step,
    progress_update,
)
from agent_guards.retry_router import FailureKind, describe_failure
from agent_guards.retry_router.classify import failure_of
from agent_guards.tool_guard.ledger import CANCEL_KEY, RunLedger
from agent_guards.tool_guard.plan import Plan, cancelled
from agent_guards.tool_guard.state_ledger import StateLedger
from agent_guards.tool_guard.wrapper import settle

from .outcomes import (
    blend_outcome,
    compensation,
    ran_writes,
    respond_outcome,
    step_outcome,
    to_undo,
)
from .prompts import (
    PARSE_PROMPT,
    PLAN_PROMPT,
    REVIEW_PROMPT,
    STEP_PROMPT,
    GoalSpec,
    PlanSpec,
    ReviewSpec,
    last_human,
    plan_context,
    step_brief,
    to_steps,
    usage_of,
)
from .repair import malformed_outcome, structured_call
from .state import PlanExecuteState, Policies

__all__ = ["Nodes", "accept_every_plan", "keep_all_evidence", "no_facts"]


class Nodes:
    """The graph's own nodes. Subclass and override one to change a step of the template.

    Nodes hold no run state: everything they know comes from graph state and config, so a
    replay from a checkpoint runs them the same way.
    """

    def __init__(
        self,
        model: BaseChatModel,
        tools: Sequence[Any],
        policies: Policies,
        compensations: Mapping[str, Callable[[PlanStep], str]],
        *,
        ledger: RunLedger | None = None,
    ) -> None:
        self.pol = policies
        self.ledger = ledger  # where the tool node records what each call really did
        self.first = "agent"  # the node each step starts at
        # fits step_messages into the window inside the agent's super-step, before the call
        self.context = (
            context_guard_node(
                policies.max_context_tokens,
                policy=policies.context,
                tools=tools,
                messages_key="step_messages",
            )
            if policies.guards
            else None
        )
        self.undo = dict(compensations)
        # tools that only read: a replan may run their steps again; any other may write
        self.reads = frozenset(
            t.name
            for t in tools
            if policies.loop.effects.of(t.name, getattr(t, "metadata", None)) is Effect.READ
        )
        self.agent_model = model.bind_tools(tools)
        # with the raw reply, for the tokens it reports (usage["tokens"], Budget.max_tokens)
        self.goal_model = model.with_structured_output(GoalSpec, include_raw=True)
        self.plan_model = model.with_structured_output(PlanSpec, include_raw=True)
        self.review_model = model.with_structured_output(ReviewSpec, include_raw=True)

    def keep_done(self, versions: Sequence[PlanVersion], new: PlanVersion) -> PlanVersion:
        """A new version never re-runs a write that is done (a read may run again)."""
        return keep_done_writes(versions, new, reads=self.reads) if self.pol.guards else new

    def stop_now(
        self,
        state: Mapping[str, Any],
        config: RunnableConfig,
        *,
        needs_tools: bool = True,
        needs_replan: bool = False,
    ) -> dict[str, Any] | None:
        """The outcome to end on before doing more work: a cancel the caller asked for
        between steps (``cancel_run``), or a spent budget; None to go on.

        ``needs_tools=False`` for a model call that may finish without a tool (a step's
        next turn, the review): ``max_tool_calls`` bounds executions, and the tool node
        checks it per call, so a spent tool budget alone does not stop it. A run whose
        last tool call spent the budget exactly still gets its answer.

        ``needs_replan=True`` for work whose plan would be one more replan (a plan after
        the first, a later turn's goal): ``max_replans`` is checked before it. Elsewhere the
        replans counted so far were accepted and may run: ``max_replans=N`` runs N of them."""
        cancel = (config.get("configurable") or {}).get(CANCEL_KEY)
        if cancel:
            return {"route": "cancelled", "reason": "cancelled", "detail": str(cancel)}
        usage = state.get("usage")
        if not needs_tools and isinstance(usage, Mapping):
            state = _usage_set(state, tool_calls=0)
        replans: Any = usage.get("replans") if isinstance(usage, Mapping) else None
        if not needs_replan and is_number(replans) and replans > 0:
            state = _usage_set(state, replans=replans - 1)  # the last accepted one may run
        reason = self.over_budget(state, config)
        return _stopped(reason, self.pol.texts) if reason is not None else None

    def asked_to_stop(self, state: Mapping[str, Any]) -> dict[str, Any] | None:
        """A new user message that only asks to stop a run that has not finished (paused,
        interrupted, or crashed, before its first plan too, or waiting for a reviewer at
        an escalation): the cancel outcome; None otherwise."""
        if not _unfinished(state) or self.pol.stop_request is None:
            return None
        text = last_human(state["messages"])
        if not self.pol.stop_request(text):
            return None
        return {"route": "cancelled", "reason": "cancelled", "detail": f"the user said {text!r}"}

    def cancel_in_flight(
        self, state: Mapping[str, Any], config: RunnableConfig, detail: str
    ) -> dict[str, Any]:
        """Answer the step's tool calls that never got a result, each one recorded: the
        update for ``step_messages`` and ``guard_log``. A call the run ledger saw finish
        (a crash after the tool returned) is answered with its outcome; one it saw start
        and never report back is asked about (:meth:`RunLedger.ask`); any other is
        cancelled, not executed."""
        where = self.ledger_view(state, config)
        plans = []
        for m in answer_pending(state.get("step_messages") or [], ""):
            call = {"id": m.tool_call_id, "name": m.name}
            entry = self.ledger.entry(*where, m.tool_call_id) if where and self.ledger else None
            plans.append(self.in_flight(call, entry, where, detail))
        update: dict[str, Any] = {
            "step_messages": [p.message for p in plans],
            "guard_log": [stamp(d, config) for p in plans for d in p.decisions],
        }
        if where is not None and isinstance(where[0], StateLedger) and where[0].writes:
            update["run_ledger"] = where[0].writes
        return update

    def in_flight(
        self,
        call: Mapping[str, Any],
        entry: Mapping[str, Any] | None,
        where: tuple[Any, str] | None,
        detail: str,
    ) -> Plan:
        """The answer to one call a cancel found without a result, from its ledger entry:
        what it did, or (never run, or it did not happen) cancelled."""
        if entry is None or where is None or self.ledger is None:
            return cancelled(call, detail)
        settled = settle(self.ledger, *where, call, entry)
        return settled if isinstance(settled, Plan) else cancelled(call, detail)

    def over_budget(self, state: Mapping[str, Any], config: RunnableConfig) -> StopReason | None:
        """Why the run must stop now (cumulative usage vs the budget), or None."""
        if not self.pol.guards:
            return None
        return self.pol.budget.check(state, now_from_config(config))

    def start_clock(
        self, state: Mapping[str, Any], config: RunnableConfig
    ) -> tuple[dict[str, float], list[GuardDecision]]:
        """The ``usage`` update that starts ``Budget.max_seconds`` (the run's clock, at the
        first node of the thread's first run) and its decision; ``({}, [])`` when there is
        no time limit or the clock already runs (``merge_usage`` keeps the earliest)."""
        if not self.pol.guards:
            return {}, []
        now = now_from_config(config)
        started = self.pol.budget.start(state, now)
        if not started:
            return {}, []
        limit = self.pol.budget.max_seconds
        decision = GuardDecision(
            guard="budget",
            verdict=Verdict.CONTINUE,
            reason="clock_started",
            detail=f"max_seconds={limit} counts from {now.isoformat()}",
            policy=f"Budget(max_seconds={limit})",
            data={"started_at": started["started_at"], "limit": limit},
        )
        return started, [stamp(decision, config)]

    def step_late(
        self, state: Mapping[str, Any], config: RunnableConfig
    ) -> tuple[PlanStep, float] | None:
        """The running step and how long it ran, once it reached its ``timeout_s`` (the
        run's clock since ``start_step``); None when it has time left or no limit."""
        current = current_plan(state.get("plans") or [])
        step = _step_of(current, state.get("current_step"))
        if not self.pol.guards or step is None or step.timeout_s is None:
            return None  # no limit: the run's clock is not read
        started = state.get("step_started_at")
        elapsed = step_overdue(step.timeout_s, started, now_from_config(config))
        return (step, elapsed) if elapsed is not None else None

    def tool_time_limit(self, request: Any) -> float | None:
        """Seconds a tool call of the running step may take: what is left of the step's
        ``timeout_s`` (the run's clock since ``start_step``); None without a limit. The tool
        node holds it even when the tool blocks (``ToolCallGuard(timeout=...)``)."""
        state = getattr(request, "state", None)
        if not self.pol.guards or not isinstance(state, Mapping):
            return None
        step = _step_of(current_plan(state.get("plans") or []), state.get("current_step"))
        started = state.get("step_started_at")
        if step is None or step.timeout_s is None or not isinstance(started, int | float):
            return None
        config = cast("RunnableConfig | None", getattr(request.runtime, "config", None))
        elapsed = now_from_config(config).timestamp() - float(started)
        return max(_MIN_TOOL_TIME, float(step.timeout_s) - max(0.0, elapsed))

    def step_fallback(
        self,
        state: Mapping[str, Any],
        config: RunnableConfig,
        update: dict[str, Any],
        route: str,
    ) -> Command[Any] | None:
        """A step that failed or timed out takes the fallback it declares (``use_cache``,
        ``skip``, ``ask_user``; any other value asks the user), recorded as a decision; a
        timeout without a fallback is recorded too. None: the usual routes apply.

        A refusal (permission) and a spent budget never take a fallback."""
        marked = (update.get("plans") or [None])[0]
        step = _step_of(marked, state.get("current_step"))
        stopped = _outcome_of(state).get("route") == "stopped"
        if not self.pol.guards or step is None or route in ("done", "refuse") or stopped:
            return None
        late = self.step_late(state, config)
        timed_out = late is not None or _timed_out(state.get("step_messages") or [])
        why = "step_timeout" if timed_out else "step_failed"
        if step.fallback is None:
            if timed_out:
                decision = _fallback_decision(step, why, "none", late, Verdict.STOP)
                update["guard_log"] = [*update.get("guard_log", ()), stamp(decision, config)]
            return None
        assert marked is not None
        kind = step.fallback if step.fallback in ("use_cache", "skip") else "ask_user"
        cached = self.cached_result(state, config, marked, step) if kind == "use_cache" else None
        decision = _fallback_decision(step, why, kind, late, Verdict.FALLBACK, cached=cached)
        update["guard_log"] = [*update.get("guard_log", ()), stamp(decision, config)]
        if kind == "ask_user":
            text = f"Step {step.id} ({step.description}) {decision.detail}. How should I go on?"
            update["outcome"] = {"route": "clarify", "reason": why, "text": text}
            return Command(goto="respond", update=update)
        status = StepStatus.DONE if cached is not None else StepStatus.SKIPPED
        evidence = cached.evidence_ids if cached is not None else ()
        update["plans"] = [
            mark_step(marked, step.id, status, evidence_ids=evidence, note=decision.detail)
        ]
        return Command(goto="review", update=update)

    def parse_goal(self, state: PlanExecuteState, config: RunnableConfig) -> Command[Any]:
        later = bool(state.get("plans"))  # a later turn: its plan would be one more replan
        stop = self.stop_now(state, config, needs_replan=later)
        if (outcome := stop or self.asked_to_stop(state)) is not None:
            # a cancel, or a later turn on a thread whose budget is spent: no new model call
            stopped: dict[str, Any] = {"outcome": outcome}
            if outcome["route"] == "cancelled":
                stopped |= self.cancel_in_flight(state, config, outcome["detail"])
            return Command(goto="respond", update=stopped)
        text = last_human(state["messages"])
        prompt = [SystemMessage(PARSE_PROMPT), HumanMessage(text)]

        def build(spec: GoalSpec) -> tuple[GoalSpec, Goal]:
            dims = tuple(spec.dimensions)
            goal = Goal(spec.intent, spec.constraints, required=self.pol.required_constraints,
                        dimensions=dims)  # fmt: skip
            return spec, goal

        tried = structured_call(self.goal_model, GoalSpec, prompt, build, what="goal")
        ended, malformed = malformed_outcome("goal", tried)
        usage: dict[str, float] = {"model_calls": tried.calls, "steps": 1, "tokens": tried.tokens}
        started, decisions = self.start_clock(state, config)
        if started:  # the first run of the thread: max_seconds counts from now
            usage |= started
        logged = [*decisions, *(stamp(d, config) for d in malformed)]
        if ended is not None:  # the run ends on a clarify that says why, not an exception
            update: dict[str, Any] = {"outcome": ended, "usage": usage, "guard_log": logged}
            return Command(goto="respond", update=update)
        spec, goal = tried.value
        update = {
            "goal": goal,
            "memory_facts": [f.model_dump() for f in spec.facts],
            "outcome": {},
            "usage": usage,
            **progress_update(observations=1),
        }
        if logged:
            update["guard_log"] = logged
        if state.get("plans"):  # a new turn on this thread: its plan answers user input
            update["replan_trigger"] = "user_input"
            if _outcome_of(state).get("route") == "answer":  # a new request, not a reply
                update["goal_start"] = len(state["plans"])
        if self.pol.guards and goal.missing():
            update["outcome"] = {
                "route": "clarify",
                "reason": "missing_constraints",
                "missing": list(goal.missing()),
            }
            return Command(goto="respond", update=update)
        return Command(goto="memory_resolve", update=update)

    def plan(self, state: PlanExecuteState, config: RunnableConfig) -> Command[Any]:
        versions = state.get("plans") or []
        if (outcome := self.stop_now(state, config, needs_replan=bool(versions))) is not None:
            return Command(goto="evidence_resolve", update={"outcome": outcome})
        current = current_plan(versions)
        prompt = [SystemMessage(PLAN_PROMPT), HumanMessage(plan_context(state, current))]
        trigger = PlanTrigger(
            (state.get("replan_trigger") or "critique") if versions else "initial"
        )

        def build(spec: PlanSpec) -> PlanVersion:
            version = PlanVersion(
                len(versions) + 1,
                to_steps(spec.steps),
                trigger=trigger,
                reason=spec.reason,
                parent=current.version if current else None,
            )
            return self.keep_done(versions[_goal_start(state) :], version)

        tried = structured_call(self.plan_model, PlanSpec, prompt, build, what="plan")
        ended, decisions = malformed_outcome("plan", tried)
        update: dict[str, Any] = {
            "usage": {"model_calls": tried.calls, "steps": 1, "tokens": tried.tokens}
        }
        if decisions:
            update["guard_log"] = [stamp(d, config) for d in decisions]
        if ended is not None:  # the run ends on a clarify that says why, not an exception
            return Command(goto="evidence_resolve", update={**update, "outcome": ended})
        update |= {"plans": [tried.value], "replan_trigger": None}
        return Command(goto="planner_gate", update=update)

    def start_step(self, state: PlanExecuteState, config: RunnableConfig) -> Command[Any]:
        current = current_plan(state.get("plans") or [])
        step = next_step(current) if current else None
        if current is None or step is None:
            return Command(goto="evidence_resolve")
        if (outcome := self.stop_now(state, config)) is not None:
            return Command(goto="evidence_resolve", update={"outcome": outcome})
        # The brief is sent once, as the step's human turn, and context_guard keeps it
        # verbatim by its id (a compression never summarizes it away).
        brief = HumanMessage(step_brief(state, step), id=f"agent_guards-brief-{step.id}")
        update: dict[str, Any] = {
            "plans": [mark_step(current, step.id, StepStatus.RUNNING)],
            "current_step": step.id,
            "step_messages": [
                RemoveMessage(id=REMOVE_ALL_MESSAGES),
                SystemMessage(STEP_PROMPT),
                brief,
            ],
            "usage": {"steps": 1},
            "step_started_at": now_from_config(config).timestamp(),  # timeout_s from here
        }
        if self.context is not None and self.context.pinned_ids_key:
            update[self.context.pinned_ids_key] = [brief.id]
        pins = state.get("context_pins")
        if isinstance(pins, Mapping) and "goal" in pins:  # 0.1 pinned each step's brief there
            update["context_pins"] = {k: v for k, v in pins.items() if k != "goal"}
        return Command(goto=self.first, update=update)

    def agent(self, state: PlanExecuteState, config: RunnableConfig) -> Command[Any]:
        """The step's model call, after context_guard fitted ``step_messages`` (its
        decision and rewrite are part of this node's update)."""
        fitted: dict[str, Any] = {}
        messages: Sequence[Any] = state["step_messages"]
        if self.context is not None:
            fitted, messages = self.context.run(state, config)
        if (outcome := self.stop_now(state, config, needs_tools=False)) is not None:
            note = AIMessage(
                f"Stopped before the next model call: {outcome['detail']}.", name="budget"
            )
            update = {"step_messages": [note], "outcome": outcome}
            return Command(goto="record_step", update=_after(fitted, update))
        if (late := self.step_late(state, config)) is not None:
            step, elapsed = late
            meta = {"agent_guards": {"reason": "step_timeout", "verdict": "fallback"}}
            note = AIMessage(f"Stopped before the next model call: step {step.id} ran {elapsed}s, "
                             f"over its timeout_s={step.timeout_s}.", name="budget",
                             response_metadata=meta)  # fmt: skip
            return Command(goto="record_step", update=_after(fitted, {"step_messages": [note]}))
        reply = self.agent_model.invoke(messages)
        calls = isinstance(reply, AIMessage) and bool(reply.tool_calls)
        update = {"step_messages": [reply], "usage": usage_of(reply)}
        if calls and (refusal := self.not_approved(state, config, reply)) is not None:
            return Command(goto="record_step", update=_after(fitted, {**update, **refusal}))
        if calls and (outcome := self.stop_now(state, config)) is not None:
            # the tool budget is spent and the model asks for more: the step ends here,
            # its calls answered as not run
            detail = f"Stopped before the next tool call: {outcome['detail']}."
            refused = answer_pending([reply], f"[budget] Not executed. {detail}", name="budget")
            note = AIMessage(detail, name="budget")
            update = {**update, "step_messages": [reply, *refused, note], "outcome": outcome}
            return Command(goto="record_step", update=_after(fitted, update))
        return Command(goto="tools" if calls else "record_step", update=_after(fitted, update))

    def not_approved(
        self, state: Mapping[str, Any], config: RunnableConfig, reply: AIMessage
    ) -> dict[str, Any] | None:
        """The refusal of a turn that asks for a call a human did not approve; None when
        the running step needs no approval or every call is the approved one.

        A human approved a step's tool with its arguments (as they corrected them), not
        whatever the model asks for next: in an approved step, a turn with any other call
        (another tool, other arguments) runs none of its calls. Each is answered as not
        executed, the refusal is a decision, and the step ends refused (the run does not
        ask the model again, nor the human about a call they never saw)."""
        current = current_plan(state.get("plans") or [])
        step = _step_of(current, state.get("current_step"))
        if not self.pol.guards or step is None or step.approved is not True:
            return None
        approved = canonical_args(step.args)
        other = [
            c
            for c in reply.tool_calls
            if c.get("name") != step.tool or canonical_args(c.get("args") or {}) != approved
        ]
        if not other:
            return None
        asked = ", ".join(f"{c.get('name')}({canonical_args(c.get('args') or {})})" for c in other)
        allowed = f"{step.tool}({approved})" if step.tool else "no tool call"
        detail = f"step {step.id} was approved for {allowed}; not approved: {asked}"
        decision = GuardDecision(
            guard="planner_gate",
            verdict=Verdict.REFUSE,
            reason="not_approved",
            detail=detail,
            selected_ids=(step.id,),
            dropped_ids=tuple(str(c.get("id")) for c in other if c.get("id")),
            data={"step": step.id, "tool": step.tool, "args": dict(step.args),
                  "calls": [{"name": c.get("name"), "args": c.get("args")} for c in other]},
        )  # fmt: skip
        refused = answer_pending(
            [reply], f"[planner_gate] Not executed: {detail}.", name="planner_gate"
        )
        meta = {"agent_guards": {"reason": "not_approved", "verdict": "refuse"}}
        note = AIMessage(f"Stopped: {detail}.", name="planner_gate", response_metadata=meta)
        return {
            "step_messages": [reply, *refused, note],
            "guard_log": [stamp(decision, config)],
        }

    def record_step(self, state: PlanExecuteState, config: RunnableConfig) -> Command[Any]:
        current = current_plan(state.get("plans") or [])
        step_id = state.get("current_step")
        messages = state.get("step_messages") or []
        results = [m for m in messages if isinstance(m, ToolMessage)]
        found, left_out = (
            _step_evidence(results, identities_of(config))
            if self.pol.guards
            else (evidence_from_messages(results), [])
        )
        status, note, route = step_outcome(messages, self.pol.retry)
        if self.pol.guards and current is not None and found:
            found = _read_again(found, state, current, _step_of(current, step_id))
        update: dict[str, Any] = {
            "evidence": found,
            "current_step": None,
            # no step counted here: bookkeeping of a step already counted (and checked) by
            # start_step, so usage["steps"] never passes Budget.max_steps
            **progress_update(executed=1, observations=len(results)),
        }
        if left_out:
            update["guard_log"] = [stamp(d, config) for d in left_out]
        # the writes that really ran, for a cancel to undo (always written: a state with
        # no record at all is one from before it existed)
        update["executed_writes"] = ran_writes(
            messages, self.undo, seq=len(state.get("executed_writes") or {})
        )
        if current is not None and step_id:
            marked = mark_step(
                current,
                step_id,
                status,
                evidence_ids=[e.id for e in found],
                call_ids=[m.tool_call_id for m in results],
                note=note,
            )
            update["plans"] = [marked]
        if (fallback := self.step_fallback(state, config, update, route)) is not None:
            return fallback
        if route == "refuse":
            update["outcome"] = {"route": "refuse", "reason": note}
            return Command(goto="respond", update=update)
        if route == "replan" and self.pol.guards:
            update["replan_trigger"] = "execution_feedback"
            return Command(goto="plan", update=update)
        if _outcome_of(state).get("route") == "stopped":
            return Command(goto="evidence_resolve", update=update)
        return Command(goto="review", update=update)

    def review(self, state: PlanExecuteState, config: RunnableConfig) -> Command[Any]:
        if (outcome := self.stop_now(state, config, needs_tools=False)) is not None:
            return Command(goto="evidence_resolve", update={"outcome": outcome})
        current = current_plan(state.get("plans") or [])
        prompt = [SystemMessage(REVIEW_PROMPT), HumanMessage(plan_context(state, current))]
        versions = state.get("plans") or []

        def build(spec: ReviewSpec) -> tuple[ReviewSpec, PlanVersion | None]:
            if spec.action != "revise" or not spec.steps:
                return spec, None
            revised = PlanVersion(
                len(versions) + 1,
                to_steps(spec.steps),
                trigger=PlanTrigger(spec.trigger),
                reason=spec.reason,
                parent=current.version if current else None,
            )
            return spec, self.keep_done(versions, revised)

        tried = structured_call(self.review_model, ReviewSpec, prompt, build, what="review")
        ended, decisions = malformed_outcome("review", tried)
        update: dict[str, Any] = {
            "usage": {"model_calls": tried.calls, "steps": 1, "tokens": tried.tokens}
        }
        if decisions:
            update["guard_log"] = [stamp(d, config) for d in decisions]
        if ended is not None:
            return Command(goto="evidence_resolve", update={**update, "outcome": ended})
        spec, revised = tried.value
        if spec.action == "finish":
            return Command(goto="evidence_resolve", update=update)
        if revised is not None:
            if (outcome := self.stop_now(state, config, needs_replan=True)) is not None:
                # a revision is one replan more than the budget allows: not proposed
                return Command(goto="evidence_resolve", update={**update, "outcome": outcome})
            update["plans"] = [revised]
        return Command(goto="planner_gate", update=update)

    def respond(self, state: PlanExecuteState, config: RunnableConfig) -> Command[Any]:
        if self.pol.guards:
            outcome = respond_outcome(state, texts=self.pol.texts)
        else:
            outcome = blend_outcome(state)
        update: dict[str, Any] = {}
        if outcome["route"] == "cancelled":
            update = self.compensate(state, config, outcome)
        message = AIMessage(outcome["text"], name="respond")
        goto = "escalate" if outcome["route"] == "escalate" else END
        return Command(goto=goto, update={"messages": [message], "outcome": outcome, **update})

    def compensate(
        self, state: PlanExecuteState, config: RunnableConfig, outcome: dict[str, Any]
    ) -> dict[str, Any]:
        """Undo every completed write of the thread, newest first, once each: each
        compensation is recorded in state (``executed_writes``) and, with a store, in the
        ledger's namespace, so neither a later cancel on the thread nor a replay of a
        checkpoint from before this one runs the hook again (without a store only the
        state's record holds, on the branch that ran the cancel)."""
        where = self.ledger_view(state, config)
        store: Any = None
        ns: tuple[str, ...] = ()
        if where is not None and self.ledger is not None and not isinstance(where[0], StateLedger):
            store, ns = where[0], (*self.ledger.scope(where[1]), "compensated")
        undone: list[tuple[str, PlanStep, str]] = []
        for call_id, step in to_undo(state, self.undo, self.ledger_writes(state, config)):
            if store is not None and store.get(ns, call_id) is not None:
                continue  # undone by a cancel this state does not know of (a replay)
            line = self.undo[str(step.tool)](step)
            if store is not None:
                store.put(ns, call_id, {"tool": step.tool, "step": step.id, "line": line},
                          index=False)  # fmt: skip
            undone.append((call_id, step, line))
        if not undone:
            return {}
        outcome["compensated"] = [line for *_, line in undone]
        outcome["text"] += "\nUndone: " + "; ".join(outcome["compensated"])
        return {
            "guard_log": [stamp(compensation(*c), config) for c in undone],
            "executed_writes": {cid: {"compensated": line} for cid, _, line in undone},
        }

    def ledger_writes(
        self, state: PlanExecuteState, config: RunnableConfig
    ) -> list[dict[str, Any]]:
        """The thread's completed writes the ledger holds (newest first), in the store or
        in state, for a cancel to undo those no plan step lists; [] without a ledger."""
        if self.ledger is None or not self.undo:
            return []
        where = self.ledger_view(state, config)
        return self.ledger.done_writes(*where) if where is not None else []

    def cached_result(
        self,
        state: Mapping[str, Any],
        config: RunnableConfig,
        current: PlanVersion,
        step: PlanStep,
    ) -> PlanStep | None:
        """The done step a ``use_cache`` fallback may answer with: the newest one with this
        step's tool and arguments, and, for a read, only while nothing that may write ran
        after it (on the ledger's clock; without a ledger, while no write step is done at
        all). A stale read is no cache: the step is skipped instead."""
        versions = state.get("plans") or []
        cached = _cached(versions, current, step)
        if cached is None or cached.tool not in self.reads:
            return cached  # a done write stays done (its result carries over)
        where = self.ledger_view(state, config)
        if self.ledger is None or where is None:
            writes = (s for v in versions for s in v.steps if s.tool and s.tool not in self.reads)
            return None if any(s.status is StepStatus.DONE for s in writes) else cached
        started = [
            float(entry.get("started_at", 0))
            for cid in cached.call_ids
            if (entry := self.ledger.entry(*where, cid)) is not None
        ]
        since = min(started, default=float("-inf"))  # not in the ledger: any write is later
        later = [
            w for w in self.ledger.done_writes(*where) if float(w.get("started_at", 0)) > since
        ]
        return None if later else cached

    def ledger_view(
        self, state: Mapping[str, Any], config: RunnableConfig
    ) -> tuple[Any, str] | None:
        """Where the tool node keeps this thread's ledger: (the store, the thread id), or a
        view of the state's ``run_ledger`` without a store; None without a ledger."""
        if self.ledger is None:
            return None
        store = get_store()
        if store is None:  # the tool node keeps the ledger in state
            return StateLedger(state.get("run_ledger")), "state"
        thread = (config.get("configurable") or {}).get("thread_id")
        return (store, str(thread)) if thread is not None else None

    def model_failed(self, state: PlanExecuteState, error: NodeError) -> Command[Any]:
        """The error handler of the nodes that call the model: a model call that failed for
        good (its retryable failures after ``model_retry_policy``'s attempts, any other at
        once) ends the run with a reason and the confirmed partial result, never a crash.
        An error retry_router cannot classify (a bug, not a model failure) is raised."""
        failure = describe_failure(error.error)
        if failure.kind is FailureKind.UNKNOWN and not isinstance(error.error, ModelError):
            raise error.error
        detail = f"the model call in {error.node} failed ({failure.kind.value}): " + (
            failure.message[:160] or failure.error_type
        )
        outcome = {"route": "stopped", "reason": "model_failed", "detail": detail,
                   "kind": failure.kind.value}  # fmt: skip
        decision = GuardDecision(guard="retry_router", verdict=Verdict.STOP,
                                 reason="model_failed", detail=detail, policy=self.pol.retry.label,
                                 data={"node": error.node, "kind": failure.kind.value})  # fmt: skip
        update: dict[str, Any] = {"outcome": outcome, "guard_log": [decision]}
        if error.node == "agent":  # inside a step: the step ends, then the run
            meta = {"agent_guards": {"reason": "model_failed", "verdict": "stop"}}
            note = AIMessage(f"Stopped: {detail}.", name="retry_router", response_metadata=meta)
            return Command(goto="record_step", update={**update, "step_messages": [note]})
        goto = "respond" if error.node == "parse_goal" else "evidence_resolve"
        return Command(goto=goto, update=update)

    def escalate(self, state: PlanExecuteState) -> dict[str, Any]:
        outcome = dict(_outcome_of(state))
        answer = ask_human(
            {"type": "escalation", "reason": outcome.get("reason"), "question": outcome.get("text")}
        )
        outcome["human"] = answer
        reply = AIMessage(f"A reviewer decided: {answer}", name="escalate")
        return {"outcome": outcome, "messages": [reply]}


def _usage_set(state: Mapping[str, Any], **counters: Any) -> dict[str, Any]:
    """``state`` with these ``usage`` counters replaced (for a check, never written)."""
    return {**state, "usage": {**state["usage"], **counters}}


def _after(fitted: Mapping[str, Any], update: dict[str, Any]) -> dict[str, Any]:
    """``update`` written after context_guard's own (its rewrite of the messages first)."""
    if not fitted:
        return update
    merged = {**fitted, **update}
    merged["step_messages"] = [*fitted.get("step_messages", ()), *update["step_messages"]]
    if "guard_log" in fitted and "guard_log" in update:
        merged["guard_log"] = [*fitted["guard_log"], *update["guard_log"]]
    return merged


def _unfinished(state: Mapping[str, Any]) -> bool:
    """Whether the thread's latest run has not ended: its goal is parsed and it has no
    outcome yet, or it waits for the reviewer's answer to an escalation."""
    if not (state.get("plans") or state.get("goal")):
        return False  # a new thread, or one whose first run never got past its goal
    outcome = _outcome_of(state)
    route = outcome.get("route")
    return not route or (route == "escalate" and "human" not in outcome)


def _goal_start(state: Mapping[str, Any]) -> int:
    """Where the current goal's plan versions begin (``goal_start``; 0 when unset or junk)."""
    start = state.get("goal_start")
    return start if isinstance(start, int) and not isinstance(start, bool) and start > 0 else 0


def _outcome_of(state: Mapping[str, Any]) -> Mapping[str, Any]:
    """The run's ``outcome`` so far; a value that is no mapping (a client's junk) is none."""
    outcome = state.get("outcome")
    return outcome if isinstance(outcome, Mapping) else {}


def _step_evidence(
    results: Sequence[ToolMessage], who: frozenset[str]
) -> tuple[list[Any], list[GuardDecision]]:
    """The evidence a step's tool results yield, each item flagged when it addresses the model,
    and a decision for each malformed item left out.

    The tools already withheld what the caller may not see (``permission_filtered``); it is
    checked again here, before an item is read, for tools a subclass adds around that
    boundary. An item is flagged for an instruction in its own text or value, or carries its
    tool result's flag when the result's content holds one that no item accounts for.
    """
    found: list[Any] = []
    left_out: list[GuardDecision] = []
    for message in results:
        read = artifact_evidence([message], visible_to=who)
        carried = bool(tool_result_flags(message.content, read.evidence))
        found.extend(flag_evidence(read.evidence, carried=carried))
        left_out.extend(read.rejected)
    return found, left_out


def _step_of(version: PlanVersion | None, step_id: Any) -> PlanStep | None:
    if version is None or not isinstance(step_id, str):
        return None
    for step in version.steps:  # a loop: the tool node and the agent ask on every call
        if step.id == step_id:
            return step
    return None


def _timed_out(messages: Sequence[Any]) -> bool:
    """A tool of the step reported a timeout (``TimeoutError`` and its kin)."""
    for message in messages:
        if not isinstance(message, ToolMessage) or message.status != "error":
            continue
        try:
            failure = failure_of(message)
        except InvalidInputError:
            continue
        if failure is not None and "timeout" in (failure.error_type or "").lower():
            return True
    return False


def _cached(
    versions: Sequence[PlanVersion], current: PlanVersion, step: PlanStep
) -> PlanStep | None:
    """The newest done step of any plan version with this step's tool and args (not the
    step itself): the cached result a ``use_cache`` fallback answers with."""
    return next(_same_reads(versions, current, step), None)


def _same_reads(
    versions: Sequence[PlanVersion], current: PlanVersion, step: PlanStep
) -> Iterator[PlanStep]:
    """The done steps of every plan version with this step's tool and args (not the step
    itself), newest first: later versions first, and in a version the later steps first
    (a plan runs its steps in order)."""
    if step.tool is None:
        return
    for version in reversed(versions):
        for old in reversed(version.steps):
            if old.tool != step.tool or old.status is not StepStatus.DONE:
                continue
            if version.version == current.version and old.id == step.id:
                continue  # the step itself
            if old.args_key == step.args_key:
                yield old


def _read_again(
    found: list[Any], state: Mapping[str, Any], current: PlanVersion, step: PlanStep | None
) -> list[Any]:
    """``found`` superseding what the same source said before: the items that every earlier
    done step with this step's tool and args brought back under the same claim. A read done
    again reads the world as it is now (a write, or a later request, came in between), so
    the answer is not a mix of the reads, nor a question about which one is meant."""
    earlier = _same_reads(state.get("plans") or [], current, step) if step is not None else ()
    stale = {i for old in earlier for i in old.evidence_ids} - {e.id for e in found}
    if not stale:
        return found
    before = [e for e in state.get("evidence") or [] if getattr(e, "id", None) in stale]
    return [superseding(e, [old.id for old in before if old.claim_key == e.claim_key])
            for e in found]  # fmt: skip


def _fallback_decision(
    step: PlanStep,
    why: str,
    kind: str,
    late: tuple[PlanStep, float] | None,
    verdict: Verdict,
    *,
    cached: PlanStep | None = None,
) -> GuardDecision:
    """The decision a failed or timed-out step's fallback records."""
    what = f"timed out (timeout_s={step.timeout_s})" if why == "step_timeout" else "failed"
    taken = {
        "none": "no fallback declared",
        "skip": "skipped (fallback skip)",
        "ask_user": "the user is asked (fallback ask_user)",
        "use_cache": f"answered from the cached result of {cached.id}"
        if cached is not None
        else "skipped: no cached result (fallback use_cache)",
    }[kind]
    return GuardDecision(
        guard="planner_gate",
        verdict=verdict,
        reason=why,
        detail=f"{what}: {taken}",
        selected_ids=(step.id,),
        data={
            "fallback": step.fallback,
            "taken": kind,
            "risk": step.risk.value,
            "timeout_s": step.timeout_s,
            "elapsed": late[1] if late is not None else None,
            "cached_from": cached.id if cached is not None else None,
        },
    )


_MIN_TOOL_TIME = 0.001  # seconds: an overdue step's call still gets an answer, at once


def _stopped(reason: StopReason, texts: Texts) -> dict[str, Any]:
    """The outcome of a spent budget: the code in ``reason`` and ``detail``, and ``why`` in
    the words the user reads (``budget_spent``)."""
    return {
        "route": "stopped",
        "reason": reason.reason,
        "detail": str(reason),
        "why": reason.describe(texts),
    }


def accept_every_plan(state: PlanExecuteState) -> Command[Any]:
    """The unguarded baseline: every proposal becomes the plan, nothing is ever refused."""
    versions = list(state.get("plans") or [])
    newest = versions[-1]
    update: dict[str, Any] = {}
    if newest.status.value == "proposed":
        update["plans"] = [PlanVersion.from_dict({**newest.to_dict(), "status": "accepted"})]
    return Command(goto="start_step", update=update)


def no_facts(state: Any, config: RunnableConfig) -> list[Any]:
    return []


def keep_all_evidence(state: PlanExecuteState) -> dict[str, Any]:
    """The unguarded baseline for evidence_resolve: nothing is arbitrated."""
    return {}
