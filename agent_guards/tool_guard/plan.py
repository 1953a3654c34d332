"""Planning one guarded tool call (pure): execute, reuse, retry or skip. Private.

Used by :class:`agent_guards.loop_check.ToolCallGuard`. Reads only the request's state (the
message history), so the same state always gives the same plan.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from langchain_core.messages import AIMessage, ToolMessage

from agent_guards import graph as _node
from agent_guards.core.decision import GuardDecision, Verdict
from agent_guards.core.errors import InvalidInputError
from agent_guards.core.history import Action, scan_actions
from agent_guards.core.signatures import REUSE_LINE, REUSE_PREFIX, call_signature, content_text
from agent_guards.graph import state_messages
from agent_guards.loop_check.policy import LoopPolicy
from agent_guards.retry_router.classify import failure_of
from agent_guards.retry_router.core import decide_failure
from agent_guards.retry_router.model import FailureKind
from agent_guards.retry_router.policy import RetryRouterPolicy

if TYPE_CHECKING:
    from langgraph.prebuilt.tool_node import ToolCallRequest

__all__ = ["Plan", "plan_call"]


@dataclass(frozen=True)
class Plan:
    """What to do with one tool call."""

    kind: Literal["execute", "retry", "reuse", "skip"]
    attempt: int = 1
    delay: float = 0.0
    replace_id: str | None = None
    message: ToolMessage | None = None
    decisions: tuple[GuardDecision, ...] = ()
    prior: tuple[Action, ...] = ()


def _latest_ai(messages: Sequence[Any]) -> tuple[int, AIMessage | None]:
    for i in range(len(messages) - 1, -1, -1):
        if isinstance(messages[i], AIMessage):
            return i, messages[i]
    return -1, None


def plan_call(
    request: ToolCallRequest,
    *,
    loop: LoopPolicy | None,
    retry: RetryRouterPolicy | None,
    messages_key: str = "messages",
) -> Plan:
    """Plan a call; malformed history falls back to executing (with an invalid_input note)."""
    try:
        return _plan(request, loop, retry, messages_key)
    except InvalidInputError as err:
        policy = loop.label if loop is not None else ""
        decision = _node.invalid_input("loop_check", err, policy=policy, verdict=Verdict.CONTINUE)
        return Plan("execute", decisions=(decision,))


def _plan(
    request: ToolCallRequest,
    loop: LoopPolicy | None,
    retry: RetryRouterPolicy | None,
    key: str,
) -> Plan:
    messages = state_messages(request.state, key)
    call = request.tool_call
    position, ai = _latest_ai(messages)
    answered = {m.tool_call_id: m for m in messages[position + 1 :] if isinstance(m, ToolMessage)}
    existing = answered.get(call["id"] or "")
    prior: tuple[Action, ...] = ()
    if retry is not None:
        actions = scan_actions(messages, retry.scan_options())
        prior = tuple(a for a in actions if a.ai_position < position)
    if existing is not None:
        return _plan_retry(call, existing, prior, retry)
    # a poller exempt from loop counting must really run again, so it is never reused either
    never_reuse = loop is not None and call["name"] in loop.no_reuse_tools | loop.exempt_tools
    if loop is None or not loop.reuse_results or never_reuse:
        return Plan("execute", prior=prior)
    keys = loop.ignore_arg_keys
    signature = call_signature(call["name"], call.get("args"), ignore_keys=keys)
    for earlier in ai.tool_calls if ai is not None else ():
        if earlier.get("id") == call.get("id"):
            break
        if call_signature(earlier["name"], earlier.get("args"), ignore_keys=keys) == signature:
            return _reuse(
                call,
                str(earlier.get("id")),
                original=None,
                signature=signature,
                prior=prior,
                loop=loop,
            )
    for a in reversed(scan_actions(messages, loop.scan_options())):
        if (
            a.signature == signature
            and a.ai_position < position
            and a.message is not None
            and not (a.reused and a.result_key is None)
            and _reusable(a.message)
        ):
            return _reuse(
                call, a.call_id, original=a.message, signature=signature, prior=prior, loop=loop
            )
    return Plan("execute", prior=prior)


def _reusable(message: ToolMessage) -> bool:
    try:
        failure = failure_of(message)
    except InvalidInputError:
        return False
    return failure is None or failure.kind is FailureKind.EMPTY_BUSINESS


def retry_signature(call: Any) -> str:
    """The signature retry_router uses (default ignored keys, as its history scan does)."""
    return call_signature(call["name"], call.get("args"))


def _plan_retry(
    call: Any, existing: ToolMessage, prior: tuple[Action, ...], retry: RetryRouterPolicy | None
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
        signature=retry_signature(call),
        attempt=attempt,
        prior=prior,
        policy=retry,
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


def _reuse(
    call: Any,
    source: str,
    *,
    original: ToolMessage | None,
    signature: str,
    prior: tuple[Action, ...],
    loop: LoopPolicy,
) -> Plan:
    tool = call["name"]
    if original is None:
        content = (
            f"{REUSE_PREFIX}Duplicate of call {source} in this turn: not executed "
            "again; use that call's result."
        )
        meta: dict[str, Any] = {"reused_from": source, "duplicate": True}
        artifact, status = None, "success"
    else:
        body = REUSE_LINE.sub("", content_text(original.content))
        content = (
            f"{REUSE_PREFIX}Same call as {source}: answered from that result, not "
            f"executed again. Repeating it will not change the answer.\n{body}"
        )
        meta = {"reused_from": source}
        artifact, status = original.artifact, original.status
    message = ToolMessage(
        content=content,
        tool_call_id=call["id"],
        name=tool,
        artifact=artifact,
        status=status,
        response_metadata={"agent_guards": meta},
    )
    decision = GuardDecision(
        guard="loop_check",
        verdict=Verdict.REUSE,
        reason="duplicate_call" if original is None else "repeated_call",
        detail=f"{tool} was called again with the same arguments; answered from {source}",
        selected_ids=(str(call["id"]),),
        policy=loop.label,
        data={"tool": tool, "reused_from": source, "signature": signature[:200]},
    )
    return Plan("reuse", message=message, decisions=(decision,), prior=prior)
