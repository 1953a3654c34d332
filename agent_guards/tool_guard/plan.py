"""Planning one guarded tool call (pure): execute, reuse, retry or skip. Private.

Used by :class:`agent_guards.loop_check.ToolCallGuard`. Reads only the request's state (the
message history), so the same state always gives the same plan.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from agent_guards import graph as _node
from agent_guards.core.decision import GuardDecision, Verdict
from agent_guards.core.effects import EFFECT_KEY, Effect, ToolEffects, effect_from_metadata
from agent_guards.core.errors import InvalidInputError
from agent_guards.core.history import Action, recorded_effect, scan_actions
from agent_guards.core.signatures import (
    DEFAULT_IGNORED_ARG_KEYS,
    REUSE_LINE,
    REUSE_PREFIX,
    call_signature,
    content_text,
    signature_keys,
)
from agent_guards.graph import state_messages, state_value
from agent_guards.loop_check.policy import LoopPolicy
from agent_guards.retry_router.classify import failure_of
from agent_guards.retry_router.core import decide_failure
from agent_guards.retry_router.model import FailureKind, failure_artifact
from agent_guards.retry_router.policy import RetryRouterPolicy

if TYPE_CHECKING:
    from langgraph.prebuilt.tool_node import ToolCallRequest

__all__ = ["Plan", "cancelled", "from_ledger", "missing_id", "over_budget", "plan_call"]


@dataclass(frozen=True)
class Plan:
    """What to do with one tool call."""

    kind: Literal["execute", "retry", "reuse", "skip"]
    attempt: int = 1
    delay: float = 0.0
    replace_id: str | None = None
    message: ToolMessage | None = None
    decisions: tuple[GuardDecision, ...] = ()
    prior: tuple[Action, ...] | None = None
    """The actions before the call's turn, as a retry decision counts them; None until read
    (a first execution reads them only if it fails: see :func:`prior_actions`)."""
    effect: Effect | None = None
    """The call's effect class; the wrapper records it on the result it executes."""
    recorded: Mapping[str, Any] | None = None
    """The call's run-ledger entry as read while planning ({}: none; None: not read)."""
    counted: bool = False
    """A reuse that answers with an execution this history has not counted yet: it ran in a
    lost checkpoint, on another branch, or in another worker (``usage`` counts it once)."""
    ledger: tuple[Any, str] | None = None
    """Where the call's run-ledger entries live, ``(store, thread id)``, as planned: the
    graph's store, or the view of the ledger kept in state whose writes the call returns."""
    signature: str | None = field(default=None, compare=False)
    """The call's :func:`retry_signature`, when planning made it (None: not made). A memo,
    so plans are equal whether they carry it or not."""


def replaced(plan: Plan, **changes: Any) -> Plan:
    """``dataclasses.replace(plan, **changes)`` for the tool node's every call: a Plan runs
    no checks when made, so the copy takes its fields as they are (``replace`` would look
    them all up and build it through ``__init__``)."""
    copy = object.__new__(Plan)
    copy.__dict__.update(plan.__dict__, **changes)
    return copy


def _latest_ai(messages: Sequence[Any]) -> tuple[int, AIMessage | None]:
    for i in range(len(messages) - 1, -1, -1):
        if isinstance(messages[i], AIMessage):
            return i, messages[i]
    return -1, None


def missing_id(request: ToolCallRequest, *, messages_key: str = "messages") -> Plan | None:
    """The answer for a call without an id, or None when the call has one.

    Such a call cannot be told apart from its twins, paired with its result, reused,
    retried or recorded in the ledger, so it is not executed: it is answered with an
    ``invalid_input`` decision naming its position in the latest assistant message, under
    a deterministic placeholder id (``missing-id-<position>``).
    """
    call = request.tool_call
    if isinstance(call.get("id"), str) and call["id"]:
        return None
    _, ai = _latest_ai(state_messages(request.state, messages_key))
    calls = list(ai.tool_calls) if ai is not None else []
    position = next((i for i, c in enumerate(calls) if c is call), None)
    if position is None:  # the request carries a copy: the first call without an id
        position = next((i for i, c in enumerate(calls) if not c.get("id")), 0)
    tool = str(call.get("name"))
    err = InvalidInputError(
        f"tool call #{position} ({tool}) of the latest assistant message has no id, so "
        "it cannot be paired with its result; it was not executed",
        item=f"#{position}",
        field="id",
    )
    message = ToolMessage(
        content=f"Not executed: tool call #{position} ({tool}) has no id, so its result "
        "could not be paired with it. Call the tool again with an id.",
        tool_call_id=f"missing-id-{position}",
        name=tool,
        status="error",
        response_metadata={"agent_guards": {"invalid_input": "missing_tool_call_id"}},
    )
    decision = replace(
        _node.invalid_input("loop_check", err, verdict=Verdict.REFUSE),
        data={"field": "id", "item": f"#{position}", "problem": err.problem, "tool": tool},
    )
    return Plan("reuse", message=message, decisions=(decision,))


def plan_call(
    request: ToolCallRequest,
    *,
    loop: LoopPolicy | None,
    retry: RetryRouterPolicy | None,
    messages_key: str = "messages",
    effects: ToolEffects | None = None,
) -> Plan:
    """Plan a call; malformed history falls back to executing (with an invalid_input note).
    ``effects`` are the tools' effect classes when there is no loop policy to carry them."""
    try:
        return _plan(request, loop, retry, messages_key, effects)
    except InvalidInputError as err:
        policy = loop.label if loop is not None else ""
        decision = _node.invalid_input("loop_check", err, policy=policy, verdict=Verdict.CONTINUE)
        return Plan("execute", decisions=(decision,))


def _plan(
    request: ToolCallRequest,
    loop: LoopPolicy | None,
    retry: RetryRouterPolicy | None,
    key: str,
    effects: ToolEffects | None = None,
) -> Plan:
    messages = state_messages(request.state, key)
    call = request.tool_call
    position, ai = _latest_ai(messages)
    answered = {m.tool_call_id: m for m in messages[position + 1 :] if isinstance(m, ToolMessage)}
    existing = answered.get(call["id"] or "")
    declared = loop.effects if loop is not None else effects or ToolEffects()
    effect = _effect(request, messages, declared)
    if existing is not None:  # a re-entry: its answer failed, the earlier attempts count
        attempts = prior_actions(messages, position, retry)
        return replace(_plan_retry(call, existing, attempts, retry, effect), effect=effect)
    # a poller exempt from loop counting must really run again, so it is never reused either
    if loop is None or call["name"] in loop.exempt_tools:
        return Plan("execute", effect=effect)
    # reuse off (for this tool, or at all) means results are never reused; a repeated
    # identical write is still refused, which is not a reuse but a change done twice
    no_reuse = not loop.reuse_results or call["name"] in loop.no_reuse_tools
    if no_reuse and effect is not Effect.WRITE:
        return Plan("execute", effect=effect)
    keys = signature_keys(loop.ignore_arg_keys, effect.declared_write)
    signature = call_signature(call["name"], call.get("args"), ignore_keys=keys)
    if _alone_in_a_new_turn(messages, position, ai, call):
        # the policy ignoring retry_router's keys, this signature is the retry signature
        same = loop.ignore_arg_keys == DEFAULT_IGNORED_ARG_KEYS
        return Plan("execute", effect=effect, signature=signature if same else None)
    before = _earlier_in_turn(ai, call)
    same_turn = _same_turn(call, before, effect, signature, loop)
    if same_turn is not None:
        return replace(same_turn, effect=effect)
    opts = replace(loop.scan_options(), declared={call["name"]: effect})
    actions = scan_actions(messages, opts)
    earlier = _earlier_turn(
        actions, signature, position, {str(c.get("id")) for c in before},
        call=call, effect=effect, loop=loop,
    )  # fmt: skip
    if earlier is None:
        return Plan("execute", effect=effect)
    match, previous = earlier
    if effect is Effect.WRITE:
        return _refuse_repeat(call, match, signature, loop)
    if effect is Effect.UNKNOWN and not _settled(match, previous):
        return Plan("execute", effect=effect)
    assert match.message is not None
    return _reuse(
        call,
        match.call_id,
        original=match.message,
        signature=signature,
        loop=loop,
        effect=effect,
    )


def _alone_in_a_new_turn(
    messages: Sequence[Any], position: int, ai: AIMessage | None, call: Any
) -> bool:
    """Whether the history has nothing to answer ``call`` from, so it simply executes:
    it is the one call of the last message, and no assistant message or tool result
    comes before it (a step's or a thread's first tool turn).

    The history scan of the general path would then read only this call (the signature
    above has just read it), find no earlier turn and so no match: the same plan, without
    building the scan's actions. Anything else (siblings, answers, earlier turns, a call
    without a name, which the scan reports) goes the general way.
    """
    if ai is None or position != len(messages) - 1 or ai.invalid_tool_calls:
        return False
    calls = ai.tool_calls
    if len(calls) != 1 or calls[0] is not call:
        return False
    name = call.get("name")
    if not isinstance(name, str) or not name:
        return False
    for i in range(position):
        m = messages[i]
        if not isinstance(m, BaseMessage) or isinstance(m, AIMessage | ToolMessage):
            return False
    return True


def prior_actions(
    messages: Sequence[Any], position: int, retry: RetryRouterPolicy | None
) -> tuple[Action, ...]:
    """The actions before the assistant turn at ``position``: the attempts a retry decision
    counts (none without a retry policy)."""
    if retry is None:
        return ()
    return tuple(
        a for a in scan_actions(messages, retry.scan_options()) if a.ai_position < position
    )


def earlier_attempts(
    request: ToolCallRequest, retry: RetryRouterPolicy | None, messages_key: str = "messages"
) -> tuple[Action, ...]:
    """:func:`prior_actions` of the request's turn (the latest assistant message)."""
    messages = state_messages(request.state, messages_key)
    return prior_actions(messages, _latest_ai(messages)[0], retry)


def _effect(request: ToolCallRequest, messages: Sequence[Any], effects: ToolEffects) -> Effect:
    """The call's effect: the policy's sets, else the tool's annotations, else what the
    wrapper recorded on this tool's earlier results (a replayed history), else the default."""
    name = request.tool_call["name"]
    tool = getattr(request, "tool", None)  # None when the tool is not registered
    declared: Effect | str | None = effect_from_metadata(getattr(tool, "metadata", None))
    if declared is None:
        declared = next(
            (
                recorded
                for m in reversed(messages)
                if isinstance(m, ToolMessage)
                and m.name == name
                and (recorded := recorded_effect(m)) is not None
            ),
            None,
        )
    return effects.of(name, declared)


def _earlier_in_turn(ai: AIMessage | None, call: Any) -> list[Any]:
    """The calls the same assistant message made before ``call``."""
    out: list[Any] = []
    for earlier in ai.tool_calls if ai is not None else ():
        if earlier.get("id") == call.get("id"):
            break
        out.append(earlier)
    return out


def _same_turn(
    call: Any, before: list[Any], effect: Effect, signature: str, loop: LoopPolicy
) -> Plan | None:
    """An identical call earlier in the same turn: answered as a duplicate, never run twice.

    The calls of one turn run together, so a duplicate reads the same world; a duplicate
    write is refused (it would do the change twice). A read with a call that may write
    between it and its twin runs again: the model asked for the state after that call.
    """
    keys = signature_keys(loop.ignore_arg_keys, effect.declared_write)
    for i, earlier in enumerate(before):
        if call_signature(earlier["name"], earlier.get("args"), ignore_keys=keys) != signature:
            continue
        source = str(earlier.get("id"))
        if effect is Effect.WRITE:
            return _refuse_duplicate(call, source, signature, loop)
        between = before[i + 1 :]
        if effect is Effect.READ and any(_may_write(b, call, effect, loop) for b in between):
            return None
        return _reuse(call, source, original=None, signature=signature, loop=loop, effect=effect)
    return None


def _may_write(sibling: Any, call: Any, effect: Effect, loop: LoopPolicy) -> bool:
    """Whether a sibling call of the turn may write. Only this call's tool is at hand
    (a sibling's annotations are not), so a sibling no policy set names may write, even
    under a read-only default: its tool may declare a write."""
    if sibling["name"] == call["name"]:
        return effect.changes_world
    return loop.effects.of(sibling["name"], Effect.UNKNOWN).changes_world


def _earlier_turn(
    actions: Sequence[Action],
    signature: str,
    position: int,
    before_ids: set[str],
    *,
    call: Any,
    effect: Effect,
    loop: LoopPolicy,
) -> tuple[Action, Action | None] | None:
    """The latest identical call of an earlier turn whose result still holds, and the
    identical call before it (or None): nothing that may write ran since the match."""
    since_changed = False
    match: Action | None = None
    for a in reversed(actions):
        current_turn = a.ai_position == position
        if current_turn and a.call_id not in before_ids:
            continue  # this call and the ones after it in the turn have not run yet
        if current_turn and a.status == "pending":
            # a sibling of this turn that has not answered yet: judged as the same-turn
            # rule judges it, since its tool's own annotations are not at hand
            if _may_write({"name": a.tool}, call, effect, loop):
                return None
            continue
        if a.signature == signature and not current_turn:
            if match is None:
                if since_changed or not _answer_holds(a):
                    return None
                match = a
                continue
            return match, a
        if a.kind == "tool" and a.effect.changes_world and not a.reused:
            if match is not None:
                return match, None
            since_changed = True
    return (match, None) if match is not None else None


def _answer_holds(a: Action) -> bool:
    """An executed (or reused) answer that reports no failure other than a real "no data"."""
    return (
        a.message is not None and not (a.reused and a.result_key is None) and (_reusable(a.message))
    )


def _settled(match: Action, previous: Action | None) -> bool:
    """An unknown-effect tool answered the same thing twice in a row with nothing written in
    between: this call may be answered from the last result (at most two executions)."""
    return (
        previous is not None
        and not match.reused
        and not previous.reused
        and match.result_key is not None
        and match.result_key == previous.result_key
    )


def _reusable(message: ToolMessage) -> bool:
    try:
        failure = failure_of(message)
    except InvalidInputError:
        return False
    return failure is None or failure.kind is FailureKind.EMPTY_BUSINESS


def retry_signature(call: Any, effect: Effect | None) -> str:
    """The signature retry_router uses (default ignored keys, as its history scan does)."""
    keys = signature_keys(DEFAULT_IGNORED_ARG_KEYS, effect is not None and effect.declared_write)
    return call_signature(call["name"], call.get("args"), ignore_keys=keys)


def signature_of(call: Any, plan: Plan) -> str:
    """``retry_signature(call, plan.effect)``, the one planning made if it did."""
    return plan.signature if plan.signature is not None else retry_signature(call, plan.effect)


def _plan_retry(
    call: Any,
    existing: ToolMessage,
    prior: tuple[Action, ...],
    retry: RetryRouterPolicy | None,
    effect: Effect,
) -> Plan:
    if retry is None:
        return Plan("skip")
    try:
        failure = failure_of(existing)
    except InvalidInputError:
        return Plan("skip")
    if failure is None:
        return Plan("skip")
    meta = (existing.response_metadata or {}).get("agent_guards") or {}
    attempt = meta.get("attempt", 1) if isinstance(meta, Mapping) else 1
    decision = decide_failure(
        failure,
        call_id=str(call["id"]),
        tool=call["name"],
        signature=retry_signature(call, effect),
        attempt=attempt,
        prior=prior,
        policy=retry,
        effect=effect,
    )
    if decision.data["route"] != "retry":
        return Plan("skip")
    return Plan(
        "retry",
        attempt=attempt + 1,
        delay=float(decision.data["delay"] or 0.0),
        replace_id=existing.id,
        prior=prior,
    )


def _answer(
    call: Any, content: str, meta: dict[str, Any], original: ToolMessage | None
) -> ToolMessage:
    """The ToolMessage that answers ``call`` without running the tool."""
    return ToolMessage(
        content=content,
        tool_call_id=call["id"],
        name=call["name"],
        artifact=original.artifact if original is not None else None,
        status=original.status if original is not None else "success",
        response_metadata={"agent_guards": meta},
    )


def _refused(
    call: Any, message: ToolMessage, reason: str, *, source: str, signature: str, loop: LoopPolicy
) -> Plan:
    tool = call["name"]
    decision = GuardDecision(
        guard="loop_check",
        verdict=Verdict.REFUSE,
        reason=reason,
        detail=f"{tool} was not run again: it writes, and {source} already ran it with the "
        "same arguments with nothing changed since",
        selected_ids=(str(call["id"]),),
        policy=loop.label,
        data={"tool": tool, "reused_from": source, "signature": signature[:200]},
    )
    return Plan("reuse", message=message, decisions=(decision,), effect=Effect.WRITE)


def _refuse_duplicate(call: Any, source: str, signature: str, loop: LoopPolicy) -> Plan:
    """A write asked twice in one turn: the second is not run (it would do the change twice)."""
    content = (
        f"{REUSE_PREFIX}Not executed: {call['name']} with these arguments is already call "
        f"{source} in this turn, and running it twice would make the change twice. If it "
        "really must happen twice, ask the user to confirm first."
    )
    meta = {"reused_from": source, "duplicate": True, "refused": "duplicate_write"}
    return _refused(
        call,
        _answer(call, content, meta, None),
        "duplicate_write",
        source=source,
        signature=signature,
        loop=loop,
    )


def _refuse_repeat(call: Any, match: Action, signature: str, loop: LoopPolicy) -> Plan:
    """A write repeated with nothing changed since: not run again; the model sees the
    earlier result, so it can tell the user what was done."""
    assert match.message is not None
    body = REUSE_LINE.sub("", content_text(match.message.content))
    content = (
        f"{REUSE_PREFIX}Not executed: {call['name']} already ran with these arguments as "
        f"call {match.call_id} and nothing has changed since, so running it again would "
        "repeat the change. Its result is below; use it. If it really must run again, ask "
        f"the user to confirm first.\n{body}"
    )
    meta = {"reused_from": match.call_id, "refused": "repeated_write"}
    message = _answer(call, content, meta, match.message)
    return _refused(
        call, message, "repeated_write", source=match.call_id, signature=signature, loop=loop
    )


def _reuse(
    call: Any,
    source: str,
    *,
    original: ToolMessage | None,
    signature: str,
    loop: LoopPolicy,
    effect: Effect = Effect.READ,
) -> Plan:
    tool = call["name"]
    if original is None:
        content = (
            f"{REUSE_PREFIX}Duplicate of call {source} in this turn: not executed "
            "again; use that call's result."
        )
        meta: dict[str, Any] = {"reused_from": source, "duplicate": True}
    elif effect is Effect.IDEMPOTENT:
        body = REUSE_LINE.sub("", content_text(original.content))
        content = (
            f"{REUSE_PREFIX}Already done: {tool} ran with these arguments as call {source} "
            f"and nothing has changed since, so it was not run again. Its result:\n{body}"
        )
        meta = {"reused_from": source}
    else:
        body = REUSE_LINE.sub("", content_text(original.content))
        content = (
            f"{REUSE_PREFIX}Same call as {source}: answered from that result, not "
            f"executed again. Repeating it will not change the answer.\n{body}"
        )
        meta = {"reused_from": source}
    decision = GuardDecision(
        guard="loop_check",
        verdict=Verdict.REUSE,
        reason="duplicate_call" if original is None else "repeated_call",
        detail=f"{tool} was called again with the same arguments; answered from {source}",
        selected_ids=(str(call["id"]),),
        policy=loop.label,
        data={
            "tool": tool,
            "reused_from": source,
            "signature": signature[:200],
            "effect": effect.value,
        },
    )
    # the answer stands for the result it repeats, effect included, so counting reads it
    # as that call again, not as a call of unknown effect
    message = _answer(call, content, {**meta, EFFECT_KEY: effect.value}, original)
    return Plan("reuse", message=message, decisions=(decision,), effect=effect)


def over_budget(
    request: ToolCallRequest,
    plan: Plan,
    limit: int,
    *,
    messages_key: str = "messages",
    spent: int = 0,
    usage_key: str = "usage",
    loop: LoopPolicy | None = None,
) -> Plan | None:
    """The budget answer for a call that would pass ``limit`` executions, or None.

    Spent = the larger of ``spent`` (the run ledger's count, shared by every checkpoint of
    the thread, this turn's claims included) and the state's ``usage["tool_calls"]`` plus
    the calls of this turn before this one that may run too (see :func:`_may_run`): the
    count can only be high, so a turn never runs more than the budget allows. (Added to
    the ledger's count, the turn's calls that already claimed would count twice.)
    """
    usage = state_value(request.state, usage_key) or {}
    counted = int(usage.get("tool_calls", 0)) if isinstance(usage, Mapping) else 0
    messages = state_messages(request.state, messages_key)
    _, ai = _latest_ai(messages)
    call = request.tool_call
    before = _earlier_in_turn(ai, call)
    if plan.kind == "retry" and before:  # a re-entry: only the failed calls run again
        answered = {m.tool_call_id: m for m in messages if isinstance(m, ToolMessage)}
        before = [c for c in before if _failed(answered.get(str(c.get("id"))))]
    spent = max(spent, counted + _may_run(before, loop))
    if spent < limit:
        return None
    content = (
        f"[budget] Not executed: this thread's tool budget is spent ({spent} of "
        f"max_tool_calls={limit} already used or running). Answer with what you have and "
        "say what is missing."
    )
    message = ToolMessage(
        content=content,
        tool_call_id=call["id"],
        name=call["name"],
        id=plan.replace_id,  # a retry's budget answer replaces the failed answer in place
        status="error",
        artifact=failure_artifact(FailureKind.QUOTA, f"max_tool_calls={limit} reached"),
        response_metadata={"agent_guards": {"budget": "max_tool_calls"}},
    )
    decision = GuardDecision(
        guard="budget",
        verdict=Verdict.STOP,
        reason="max_tool_calls",
        detail=f"{call['name']} was not run: {spent} of max_tool_calls={limit} used",
        selected_ids=(str(call["id"]),),
        policy=f"Budget(max_tool_calls={limit})",
        data={"limit": limit, "value": spent, "tool": call["name"]},
    )
    return Plan("reuse", message=message, decisions=(decision,), prior=plan.prior)


def _may_run(before: Sequence[Any], loop: LoopPolicy | None) -> int:
    """How many of a turn's earlier calls may execute, counted without planning them: all
    but a call identical in every argument to an earlier one with only calls of its tool
    between, which the loop policy answers in the turn without running it. Trace
    keys and anything else that may tell calls apart count, so the estimate is high."""
    count, tool, run = 0, None, set[str]()  # run: the signatures of the current tool's run
    for c in before:
        signature = call_signature(c["name"], c.get("args"), ignore_keys=frozenset())
        if c["name"] != tool:
            tool, run = c["name"], set()
        if signature not in run or not _answered_in_turn(c["name"], loop):
            count += 1
        run.add(signature)
    return count


def _answered_in_turn(tool: str, loop: LoopPolicy | None) -> bool:
    """Whether the loop policy answers a duplicate of ``tool`` in a turn without running it."""
    if loop is None or tool in loop.exempt_tools:
        return False
    reuse = loop.reuse_results and tool not in loop.no_reuse_tools
    return reuse or loop.effects.of(tool) is Effect.WRITE


def _failed(message: ToolMessage | None) -> bool:
    return message is not None and message.status == "error"


def from_ledger(
    call: Any,
    content: str,
    reason: str,
    *,
    policy: str,
    failed: bool = False,
    artifact: Any = None,
) -> Plan:
    """Answer a call from its recorded outcome: it already ran (before a crash, on a fork,
    or in another worker), so running it again would repeat what it did. The answer
    carries the recorded artifact, and counts as this history's execution of the call."""
    message = ToolMessage(
        content=content,
        artifact=artifact,
        tool_call_id=call["id"],
        name=call["name"],
        status="error" if failed else "success",
        response_metadata={"agent_guards": {"reused_from": str(call["id"]), "ledger": reason}},
    )
    decision = GuardDecision(
        guard="loop_check",
        verdict=Verdict.REUSE,
        reason=reason,
        detail=f"{call['name']} (call {call['id']}) already ran: answered from the run ledger",
        selected_ids=(str(call["id"]),),
        policy=policy,
        data={"tool": call["name"], "ledger": reason},
    )
    return Plan("reuse", message=message, decisions=(decision,), counted=True)


def cancelled(call: Any, reason: str, *, replace_id: str | None = None) -> Plan:
    """Answer a call planned after the run was cancelled: it is never executed."""
    message = ToolMessage(
        content=f"[cancel] Not executed: the run was cancelled ({reason}).",
        tool_call_id=call["id"],
        name=call["name"],
        id=replace_id,  # not a failure: nothing to retry or repair, the run is over
        response_metadata={"agent_guards": {"cancelled": reason}},
    )
    decision = GuardDecision(
        guard="cancel",
        verdict=Verdict.STOP,
        reason="cancelled",
        detail=f"{call['name']} (call {call['id']}) was not run: {reason}",
        selected_ids=(str(call["id"]),),
        data={"tool": call["name"]},
    )
    return Plan("reuse", message=message, decisions=(decision,))
