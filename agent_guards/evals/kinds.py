"""Case kinds: each turns a case's JSON ``input`` into what the guard observably did.

``KINDS`` maps a kind name to a runner ``(input, *, policies=None) -> observed``. The observed
dict always has ``verdict`` (a string) and ``reason``, plus the ids and kind-specific keys
that :func:`~agent_guards.evals.cases.check` compares:

* ``evidence``: input ``items`` (Evidence dicts), ``principal``, ``entity``, ``basis``,
  ``as_of``, ``claim_key``; observed ``value``, ``values``, selected / conflicting /
  dropped ids, ``conflicting`` and ``dropped`` (id -> reason), ``candidates``, ``caveats``.
* ``memory``: input ``records`` (MemoryRecord dicts), ``facts`` (this turn's, as the node
  reads them), ``now``, ``scopes``; observed ``inject_ids``, ``injected`` (key -> value),
  ``superseded_ids``, ``expired_ids``, ``excluded`` (id -> reason), ``clarify_keys``,
  ``writes``.
* ``planner``: input ``rounds`` (one plan version each: ``steps``, ``trigger``,
  ``executed``, ``observations``), or ``versions`` with ``executed_steps`` /
  ``observations``; ``goal``, ``tools``; observed ``verdicts``, ``reasons``, ``replans``,
  ``rounds``, ``aborted``, ``statuses``, ``similarity``.
* ``loop``: input ``messages`` (the JSON form of :mod:`agent_guards.evals._jsonform`);
  observed ``verdicts``, ``aborted``, ``executions``, ``reused_ids``, ``model_calls``,
  ``unguarded_tool_calls``.
* ``retry``: input ``error`` (``{"exception": ...}``, ``{"status": 429, "headers": ...}``,
  ``{"tool_message": ...}``, see :mod:`agent_guards.evals._errors`), or ``messages``
  (+ ``call_id``); observed ``route``, ``kind``, ``attempt``, ``delay``, ``retry_after``.
* ``context``: input ``messages``, ``max_tokens``, ``pinned``; observed kept / summarized /
  truncated / archived ids, ``flagged``, ``usage``.

Every input may carry ``"policy": {...}``: field overrides applied with
``dataclasses.replace`` to the run's policy for that guard (e.g. ``{"high_risk": true}``).
The run's policies come from :class:`EvalPolicies`, so a test can break one on purpose::

    run_cases(cases, policies=EvalPolicies(evidence=EvidencePolicy(source_weights={...})))

Input the *guard* rejects (``InvalidInputError`` from its core) is observed the way its node
records it: reason ``invalid_input`` with the node's verdict, and ``item`` / ``field``.
A malformed *case* (an unknown input key) raises ``ValueError`` and the case fails.

Example:
    >>> out = KINDS["evidence"]({"items": [
    ...     {"id": "p24", "claim_key": "limit", "value": "100w", "updated_at": "2024-06-01"},
    ...     {"id": "p26", "claim_key": "limit", "value": "50w", "updated_at": "2026-01-01"}]})
    >>> out["verdict"], out["value"], out["selected_ids"], out["conflicting_ids"]
    ('answer', '50w', ['p26'], ['p24'])
    >>> policy_versions()["evidence_resolve"]
    'EvidencePolicy@1'
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable, Mapping
from typing import Any

from agent_guards.context_guard.core import fit_context
from agent_guards.context_guard.summary import pin_message
from agent_guards.core.decision import Verdict
from agent_guards.core.effects import Effect
from agent_guards.core.errors import InvalidInputError
from agent_guards.evals.errors import build_failure
from agent_guards.evals.jsonform import messages_from_json, to_jsonable
from agent_guards.evals.policies import (
    POLICY_TYPES,
    EvalPolicies,
    check_input,
    invalid,
    with_options,
)
from agent_guards.evals.runners import (
    decision_fields,
    retry_fields,
    run_loop,
    run_planner,
    run_retry_history,
)
from agent_guards.evidence_resolve.core import resolve_evidence
from agent_guards.memory_resolve.core import resolve_memory

__all__ = [
    "KINDS",
    "KindRunner",
    "policy_versions",
    "register_kind",
    "run_kind",
]

KindRunner = Callable[..., dict[str, Any]]
"""``runner(input) -> observed``; it also gets ``policies=`` when its signature accepts it."""


def policy_versions(policies: EvalPolicies | None = None) -> dict[str, str]:
    """Each guard's policy label (``"EvidencePolicy@1"``), as a run records them."""
    return (policies or EvalPolicies()).labels()


def run_evidence(
    data: Mapping[str, Any], *, policies: EvalPolicies | None = None
) -> dict[str, Any]:
    """``resolve_evidence`` over ``input.items`` (see the module table)."""
    keys = ("items", "principal", "entity", "basis", "as_of", "claim_key", "policy")
    check_input(data, keys, "evidence")
    policy = with_options((policies or EvalPolicies()).evidence, data.get("policy"))
    try:
        v = resolve_evidence(
            data.get("items") or [],
            policy=policy,
            principal=data.get("principal"),
            entity=data.get("entity"),
            basis=data.get("basis"),
            as_of=data.get("as_of"),
            claim_key=data.get("claim_key"),
        )
    except InvalidInputError as err:
        return invalid(err, Verdict.ABSTAIN, policy.label)
    extra = v.decision.data
    return decision_fields(v.decision) | {
        "value": to_jsonable(v.value),
        "values": to_jsonable(v.values),
        "claim_key": v.claim_key,
        "conflicting": dict(extra.get("conflicting", {})),
        "dropped": dict(extra.get("dropped", {})),
        "candidates": to_jsonable(extra.get("candidates", [])),
        "caveats": list(v.caveats),
    }


def run_memory(data: Mapping[str, Any], *, policies: EvalPolicies | None = None) -> dict[str, Any]:
    """``resolve_memory`` over stored ``records`` plus this turn's ``facts``."""
    from agent_guards.core.fields import to_datetime
    from agent_guards.memory_resolve.node import fact_record

    check_input(data, ("records", "facts", "now", "scopes", "policy"), "memory")
    policy = with_options((policies or EvalPolicies()).memory, data.get("policy"))
    scopes = data.get("scopes")
    first = scopes if isinstance(scopes, str) else next(iter(scopes or ()), None)
    try:
        now = to_datetime(data.get("now"), item=None, field="now")
        if now is None:
            raise InvalidInputError("is required (the run's clock)", field="now")
        facts = [
            fact_record(f, now=now, scope=first, field="facts") for f in data.get("facts") or ()
        ]
        v = resolve_memory(
            [*(data.get("records") or ()), *facts], now=now, scopes=scopes, policy=policy
        )
    except InvalidInputError as err:
        return invalid(err, Verdict.ABSTAIN, policy.label)
    return decision_fields(v.decision) | {
        "inject_ids": [r.id for r in v.inject],
        "injected": to_jsonable(v.facts),
        "superseded_ids": list(v.superseded_ids),
        "expired_ids": list(v.expired_ids),
        "excluded": dict(v.excluded),
        "clarify_keys": list(v.clarify_keys),
        "writes": [
            {"id": w.id, "status": w.status, "supersedes": list(w.supersedes)} for w in v.writes
        ],
    }


def _effect(value: Any) -> Effect | None:
    """``input.effect``: the failed tool's effect class (absent: unknown, a possible write)."""
    if value is None:
        return None
    try:
        return Effect(value)
    except ValueError:
        allowed = ", ".join(e.value for e in Effect)
        raise InvalidInputError(f"{value!r} is not an effect; allowed: {allowed}",
                                field="input.effect") from None  # fmt: skip


def run_retry(data: Mapping[str, Any], *, policies: EvalPolicies | None = None) -> dict[str, Any]:
    """Classify one failure (``error``) or route a history (``messages``), then decide."""
    from agent_guards.core.signatures import call_signature
    from agent_guards.retry_router.core import decide_failure

    keys = ("error", "messages", "call_id", "tool", "args", "attempt", "now", "policy", "effect",
            "effects")  # fmt: skip
    check_input(data, keys, "retry")
    policy = with_options((policies or EvalPolicies()).retry, data.get("policy"))
    if ("error" in data) == ("messages" in data):
        raise ValueError("a retry case needs exactly one of input.error or input.messages")
    if "messages" in data:
        return run_retry_history(data, policy)
    tool = str(data.get("tool", "tool"))
    try:
        failure = build_failure(data["error"], now=data.get("now"))
        decision = decide_failure(
            failure,
            call_id="c1",
            tool=tool,
            signature=call_signature(tool, data.get("args") or {}),
            attempt=int(data.get("attempt", 1)),
            policy=policy,
            effect=_effect(data.get("effect")),
        )
    except InvalidInputError as err:
        return invalid(err, Verdict.CONTINUE, policy.label)
    return decision_fields(decision) | retry_fields(decision)


def run_context(data: Mapping[str, Any], *, policies: EvalPolicies | None = None) -> dict[str, Any]:
    """``fit_context`` over ``messages`` with a ``max_tokens`` window."""
    check_input(data, ("messages", "max_tokens", "pinned", "policy"), "context")
    policy = with_options((policies or EvalPolicies()).context, data.get("policy"))
    if not isinstance(data.get("max_tokens"), int):
        raise ValueError("a context case needs input.max_tokens (an int)")
    pinned: list[Any] = []
    for pin in data.get("pinned") or ():
        pinned.append(pin_message(pin["key"], pin["value"]) if isinstance(pin, Mapping) else pin)
    try:
        v = fit_context(
            messages_from_json(data.get("messages") or []),
            max_tokens=data["max_tokens"],
            policy=policy,
            pinned=pinned,
        )
    except InvalidInputError as err:
        return invalid(err, Verdict.STOP, policy.label)
    assert v.decision is not None
    return decision_fields(v.decision) | {
        "kept_ids": list(v.kept_ids),
        "summarized_ids": list(v.summarized_ids),
        "truncated_ids": list(v.truncated_ids),
        "archived_ids": list(v.archived_ids),
        "flagged": {k: list(f) for k, f in v.flagged.items()},
        "usage": round(v.usage, 4),
        "usage_before": round(v.usage_before, 4),
    }


KINDS: dict[str, KindRunner] = {
    "evidence": run_evidence,
    "memory": run_memory,
    "planner": run_planner,
    "loop": run_loop,
    "retry": run_retry,
    "context": run_context,
}
"""Kind name -> runner. Add your own with :func:`register_kind`."""


def register_kind(name: str, runner: KindRunner, *, replace: bool = False) -> KindRunner:
    """Register ``runner`` for cases of kind ``name`` (e.g. ``"graph"``); returns it.

    Raises:
        ValueError: ``name`` is empty, or already registered and ``replace`` is False.
        TypeError: ``runner`` is not callable.
    """
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"kind name must be a non-empty string, got {name!r}")
    if not callable(runner):
        raise TypeError(f"runner for kind {name!r} must be callable, got {runner!r}")
    if name in KINDS and not replace and KINDS[name] is not runner:
        raise ValueError(f"kind {name!r} is already registered; pass replace=True to replace it")
    KINDS[name] = runner
    return runner


def _accepts_policies(runner: KindRunner) -> bool:
    try:
        params = inspect.signature(runner).parameters
    except (TypeError, ValueError):  # pragma: no cover - builtins without a signature
        return False
    kinds = {p.kind for p in params.values()}
    return "policies" in params or inspect.Parameter.VAR_KEYWORD in kinds


def run_kind(
    kind: str, data: Mapping[str, Any], *, policies: EvalPolicies | None = None
) -> dict[str, Any]:
    """Run one input through the runner of ``kind``.

    Raises:
        ValueError: ``kind`` is not registered (the message lists the registered kinds).
    """
    runner = KINDS.get(kind)
    if runner is None:
        raise ValueError(f"unknown kind {kind!r}; registered: {sorted(KINDS)}")
    if _accepts_policies(runner):
        return runner(dict(data), policies=policies)
    return runner(dict(data))


def policy_fields(kind: str) -> tuple[str, ...]:
    """Field names a case of ``kind`` may set in ``input.policy``."""
    return tuple(f.name for f in dataclasses.fields(POLICY_TYPES[kind]))
