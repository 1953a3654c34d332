"""retry_router's pure core: decide_failure and route_failures.

Nothing here imports LangGraph; attempt counts come from the message history
(``ToolMessage.response_metadata["agent_guards"]["attempt"]``), so a replay or a resume
sees the same counts and never a fresh quota.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, cast

from langchain_core.messages import AIMessage, ToolMessage

from agent_guards.core.decision import GuardDecision, RetryRoute, Verdict
from agent_guards.core.effects import Effect
from agent_guards.core.errors import InvalidInputError
from agent_guards.core.history import Action, latest_batch, scan_actions, with_declared
from agent_guards.core.signatures import is_guard_message
from agent_guards.retry_router.classify import describe_failure
from agent_guards.retry_router.model import Failure, FailureKind
from agent_guards.retry_router.policy import GUARD, PRECEDENCE, ROUTES, RetryRouterPolicy

__all__ = ["decide_failure", "may_repeat_a_write", "retryable", "route_failures"]

_VERDICTS = {r: Verdict(r) for r in ROUTES}


_MALFORMED = Failure(FailureKind.UNKNOWN, message="malformed failure artifact")


def _failure(a: Action, policy: RetryRouterPolicy) -> Failure | None:
    """The failure an earlier result reports; a malformed artifact there counts as a
    failure of unknown kind (its own turn reported it), never as an error here."""
    if a.message is None:
        return None
    try:
        return policy.failure_of(a.message)
    except InvalidInputError:
        return _MALFORMED


def _since_last_ok(prior: Sequence[Action], match: Any, policy: RetryRouterPolicy) -> list[Action]:
    out: list[Action] = []
    for a in reversed(prior):
        if a.kind != "tool" or not match(a):
            continue
        if a.status == "ok" and _failure(a, policy) is None:
            break
        if a.status == "error" or a.message is not None:
            out.append(a)
    return out


def _kind(a: Action, policy: RetryRouterPolicy) -> FailureKind | None:
    failure = _failure(a, policy)
    return failure.kind if failure is not None else None


def may_repeat_a_write(failure: Failure, effect: Effect | str | None) -> bool:
    """A retry could repeat a write: the call may write and may have run anyway."""
    kind = Effect(effect) if effect is not None else Effect.UNKNOWN
    return kind in (Effect.WRITE, Effect.UNKNOWN) and failure.may_have_run


def _declared_write(effect: Effect | str | None) -> bool:
    """The tool is declared a write (an undeclared one keeps the replan its failure has)."""
    return effect is not None and Effect(effect) is Effect.WRITE


def _retry(
    failure: Failure, policy: RetryRouterPolicy, attempts: int, key: str, effect: Any
) -> tuple[RetryRoute, str, float | None]:
    """A retry route checked against the effect, Retry-After and the attempt cap."""
    cap = float(policy.backoff.max_delay)  # type: ignore[arg-type]
    if may_repeat_a_write(failure, effect):
        return policy.on_unknown_outcome, "outcome_unknown", None
    if failure.retry_after is not None and failure.retry_after > cap:
        return policy.on_retry_exhausted, "retry_after_too_long", None
    if attempts >= policy.backoff.max_attempts:
        return policy.on_retry_exhausted, "retries_exhausted", None
    delay = policy.backoff.delay(attempts, retry_after=failure.retry_after, key=key)
    return "retry", failure.kind.value, delay


def _repair(
    policy: RetryRouterPolicy,
    same: Sequence[Action],
    prior: Sequence[Action],
    tool: str,
    reason: str,
) -> tuple[RetryRoute, str]:
    """A repair route, unless the model already sent these invalid args, or too often."""
    if any(_kind(a, policy) is FailureKind.INVALID_ARGS for a in same):
        return policy.on_repair_exhausted, "same_invalid_args"
    streak = _since_last_ok(prior, lambda a: a.tool == tool, policy)
    invalid = 1 + sum(1 for a in streak if _kind(a, policy) is FailureKind.INVALID_ARGS)
    if invalid > policy.max_repairs:
        return policy.on_repair_exhausted, "repairs_exhausted"
    return "repair", reason


def decide_failure(
    failure: Failure,
    *,
    call_id: str,
    tool: str,
    signature: str,
    attempt: int = 1,
    prior: Sequence[Action] = (),
    policy: RetryRouterPolicy | None = None,
    effect: Effect | str | None = None,
) -> GuardDecision:
    """The recovery for one failed call, given the actions before it.

    ``attempt`` is how many times this call id was executed; failed earlier calls with the
    same signature add to it (a re-issued call gets no fresh quota). ``effect`` is the
    tool's effect class (None: unknown, a possible write): a call that may write and may
    have run despite its failure (:attr:`Failure.may_have_run`) is never retried blindly;
    it takes ``policy.on_unknown_outcome`` instead.

    Example:
        >>> from agent_guards.retry_router import decide_failure, describe_failure
        >>> failure = describe_failure(TimeoutError("upstream slow"))
        >>> call = dict(call_id="c1", tool="quote", signature="quote:{}", effect="read")
        >>> d = decide_failure(failure, **call)
        >>> d.verdict.value, d.detail
        ('retry', 'quote failed (transient): upstream slow; retry 2 of 3 in ...s')
        >>> decide_failure(failure, **call, attempt=3)
        GuardDecision(guard='retry_router', verdict=<Verdict.FALLBACK: 'fallback'>,
                      reason='retries_exhausted', ...)
        >>> pay = dict(call_id="c2", tool="pay", signature="pay:{}", effect="write")
        >>> decide_failure(failure, **pay).reason  # it may have paid: never retried blindly
        'outcome_unknown'
        >>> decide_failure(describe_failure(429), **pay).verdict.value  # turned away: retry
        'retry'
    """
    policy = RetryRouterPolicy() if policy is None else policy
    route: RetryRoute = policy.routes[failure.kind]
    reason = failure.kind.value
    same = _since_last_ok(prior, lambda a: a.signature == signature, policy)
    attempts = attempt + sum(a.attempts for a in same)
    delay: float | None = None
    if failure.circuit_open:  # not called: the breaker, or no retry token left
        budget = failure.error_type.endswith("RetryBudget")
        route, reason = "fallback", "retry_budget_exhausted" if budget else "circuit_open"
    elif route == "retry":
        route, reason, delay = _retry(failure, policy, attempts, f"{call_id}:{signature}", effect)
    elif route == "repair" and failure.kind is FailureKind.INVALID_ARGS:
        route, reason = _repair(policy, same, prior, tool, reason)
    elif route == "replan" and failure.may_have_run and _declared_write(effect):
        # a write that failed for no known reason may have done its work: a new plan could
        # do it again, so it is checked first, as a timeout is
        route, reason = policy.on_unknown_outcome, "outcome_unknown"
    elif route == "replan" and attempts >= policy.backoff.max_attempts:
        # the model keeps re-issuing a call that keeps failing: replanning is not working
        route, reason = policy.on_retry_exhausted, "same_failure_repeated"
    detail = f"{tool} failed ({failure.kind.value}): {failure.message[:160] or 'no message'}"
    if delay is not None:
        detail += f"; retry {attempts + 1} of {policy.backoff.max_attempts} in {delay:.2f}s"
    elif reason == "outcome_unknown":
        detail += (
            f"; it may have run, so it was not retried (a retry could do it twice): check "
            f"whether it happened; mark {tool} idempotent or read-only to allow retries"
        )
    elif reason != failure.kind.value:
        detail += f"; {reason.replace('_', ' ')}"
    data: dict[str, Any] = {
        "route": route,
        "kind": failure.kind.value,
        "tool": tool,
        "message": failure.message[:160],
        "call_id": call_id,
        "attempt": attempts,
        "delay": delay,
        "retry_after": failure.retry_after,
    }
    if failure.field_errors:
        data["field_errors"] = dict(failure.field_errors)
    if failure.question or failure.options:
        data["question"] = failure.question
        data["options"] = list(failure.options)
    return GuardDecision(
        guard=GUARD,
        verdict=_VERDICTS[route],
        reason=reason,
        detail=detail,
        selected_ids=(call_id,),
        policy=policy.label,
        data=data,
    )


def _malformed(a: Action, err: InvalidInputError, policy: RetryRouterPolicy) -> GuardDecision:
    """The decision for one call whose failure artifact cannot be read: ``invalid_input``,
    route ``continue`` (the lowest precedence, so a sibling's failure still routes)."""
    return GuardDecision(
        guard=GUARD,
        verdict=Verdict.CONTINUE,
        reason="invalid_input",
        detail=f"{a.tool}: {err}",
        dropped_ids=(a.call_id,),
        policy=policy.label,
        data={"route": "continue", "kind": "invalid_input", "tool": a.tool, "call_id": a.call_id,
              "field": err.field, "item": err.item, "problem": err.problem},
    )  # fmt: skip


def route_failures(
    messages: Sequence[Any],
    *,
    policy: RetryRouterPolicy | None = None,
    effects: Mapping[str, Effect | str] | None = None,
) -> GuardDecision:
    """Route the latest tool results: retry, repair, replan, clarify, abstain, refuse, fallback.

    Reads the ToolMessages answering the most recent assistant turn, classifies each
    failure (structured artifact first, else the error text) and picks one route for the
    turn (see :data:`PRECEDENCE`). No failure gives CONTINUE with reason ``no_failure``;
    a turn whose results all succeeded is read from the end of the history alone (earlier
    turns count only to route a failure), so a healthy turn costs the same however long
    the history is.
    ``effects`` are the tools' effect classes by name (``effects_of_tools(tools)``; the
    tool wrapper also records each executed call's effect on its result): a write that
    may have run despite its failure is not retried (see :func:`decide_failure`).

    Raises:
        InvalidInputError: an item is not a message, or a failure artifact is malformed.

    Example:
        >>> from agent_guards.testing import tool_call_message
        >>> from langchain_core.messages import ToolMessage
        >>> history = [tool_call_message("pay", {"amount": 5}, id="c1"),
        ...            ToolMessage("403 Forbidden", tool_call_id="c1", status="error")]
        >>> d = route_failures(history)
        >>> d.verdict.value, d.data["route"], d.data["kind"]
        ('refuse', 'refuse', 'permission')
    """
    policy = RetryRouterPolicy.coerce(policy)
    if all_succeeded(messages, policy):
        return no_failure(policy)
    actions = scan_actions(messages, with_declared(policy.scan_options(), effects))
    decisions = []
    for a in latest_batch(actions):
        if a.message is None:
            continue
        try:
            failure = policy.failure_of(a.message)
        except InvalidInputError as err:  # reported; the siblings still route
            decisions.append(_malformed(a, err, policy))
            continue
        if failure is None:
            continue
        prior = [p for p in actions if p.ai_position < a.ai_position]
        decisions.append(
            decide_failure(
                failure,
                call_id=a.call_id,
                tool=a.tool,
                signature=a.signature,
                attempt=a.attempts,
                prior=prior,
                policy=policy,
                effect=a.effect,
            )
        )
    if not decisions:
        return no_failure(policy)
    chosen = min(decisions, key=lambda d: PRECEDENCE.index(cast(str, d.data["route"])))
    route = chosen.data["route"]
    return replace(
        chosen,
        selected_ids=tuple(d.data["call_id"] for d in decisions if d.data["route"] == route),
        data={
            **chosen.data,
            "failures": [
                {k: d.data[k] for k in ("call_id", "tool", "kind", "route")} | {"reason": d.reason}
                for d in decisions
            ],
        },
    )


def all_succeeded(messages: Sequence[Any], policy: RetryRouterPolicy) -> bool:
    """Whether every result of the latest assistant turn reports success, read from the
    end of the history alone: the scan of earlier turns (attempts, the effects recorded
    there) only matters to route a failure. False whenever the end of the history is not
    a plain assistant turn and its results (the scan then reads it as ever)."""
    if not isinstance(messages, Sequence) or isinstance(messages, (str, bytes)):
        return False
    for position in range(len(messages) - 1, -1, -1):
        message = messages[position]
        if isinstance(message, ToolMessage):
            try:
                if policy.failure_of(message) is not None:
                    return False
            except InvalidInputError:
                return False
            continue
        if (
            not isinstance(message, AIMessage)
            or is_guard_message(message, policy.guard_names)
            or "agent_guards" in (message.additional_kwargs or {})  # a summary: the scan reads it
        ):
            return False
        calls = [*message.tool_calls, *message.invalid_tool_calls]
        return bool(calls) and all(isinstance(c.get("name"), str) and c["name"] for c in calls)
    return False


def no_failure(policy: RetryRouterPolicy) -> GuardDecision:
    """What :func:`route_failures` decides when nothing failed."""
    return GuardDecision(
        guard=GUARD,
        verdict=Verdict.CONTINUE,
        reason="no_failure",
        detail="the latest tool results report no failure",
        policy=policy.label,
        data={"route": "continue", "failures": []},
    )


def retryable(
    error: BaseException, *, policy: RetryRouterPolicy | None = None, effect: Effect | str = "read"
) -> bool:
    """Whether ``policy`` retries ``error``: its kind routes ``retry`` (TRANSIENT,
    EMPTY_ERROR by default), the call cannot be repeating a write, and a ``Retry-After``
    fits under the backoff cap. A model call reads (``effect="read"``).

    The ``retry_on`` of LangGraph's ``RetryPolicy`` and LangChain's ``ModelRetryMiddleware``
    (see :func:`model_retry_policy`), so a model call gets the tool calls' taxonomy.

    Example:
        >>> from langchain_core.exceptions import ModelAPIError, ModelPermissionDeniedError
        >>> retryable(ModelAPIError("502 from the provider")), retryable(TimeoutError())
        (True, True)
        >>> retryable(ModelPermissionDeniedError("no access")), retryable(KeyError("x"))
        (False, False)
    """
    policy = RetryRouterPolicy.coerce(policy)
    try:
        failure = describe_failure(error)
    except InvalidInputError:
        return False
    if policy.routes[failure.kind] != "retry" or failure.circuit_open:
        return False
    cap = float(policy.backoff.max_delay)  # type: ignore[arg-type]
    if failure.retry_after is not None and failure.retry_after > cap:
        return False
    return not may_repeat_a_write(failure, effect)
