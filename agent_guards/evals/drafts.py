"""Rebuilding a guard's input from checkpointed state, one decision at a time. Private.

Used by :mod:`agent_guards.evals.traces`; see its docstring for what each guard's draft
case holds.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from typing import Any

from agent_guards.core.decision import GuardDecision
from agent_guards.evals.cases import Case
from agent_guards.evals.jsonform import messages_to_json, to_jsonable
from agent_guards.evals.runners import decision_fields
from agent_guards.evidence_resolve.core import coerce_evidence
from agent_guards.memory_resolve.node import fact_record
from agent_guards.memory_resolve.store import load_memories, memory_namespace

__all__ = ["DEFAULT_KEYS", "Drafter", "new_decisions", "written_decisions"]

DEFAULT_KEYS: dict[str, str] = {
    "evidence": "evidence",
    "evidence_query": "evidence_query",
    "memory_records": "memory_records",
    "memory_facts": "memory_facts",
    "plans": "plans",
    "executed": "executed_since_plan",
    "observations": "observations_since_plan",
    "goal": "goal",
    "messages": "messages",
    "principal": "principal",
}
"""State keys (and the config key of the principal) the rebuild reads."""
_APPROVAL_REASONS = frozenset({"approved", "approval_rejected", "cancelled"})


def _decision(entry: Any) -> GuardDecision | None:
    if isinstance(entry, GuardDecision):
        return entry
    if isinstance(entry, Mapping):
        try:
            return GuardDecision.from_dict(entry)
        except (TypeError, ValueError):
            return None
    return None


def new_decisions(before: Any, after: Any) -> list[GuardDecision]:
    """Decisions in ``after``'s log that ``before``'s log does not hold (the log is bounded)."""
    seen = Counter(json.dumps(to_jsonable(e), sort_keys=True) for e in before or ())
    out = []
    for entry in after or ():
        key = json.dumps(to_jsonable(entry), sort_keys=True)
        if seen[key]:
            seen[key] -= 1
            continue
        decision = _decision(entry)
        if decision is not None:
            out.append(decision)
    return out


def written_decisions(pending_writes: Any, channel: str = "guard_log") -> list[GuardDecision]:
    """The decisions a step wrote to ``channel`` (the checkpoint's pending writes), in order.

    Reading the writes, not the channel, also works for a ``delta_log`` channel (LangGraph's
    ``DeltaChannel`` keeps no full value in each checkpoint).
    """
    out: list[GuardDecision] = []
    for write in pending_writes or ():
        if len(write) < 3 or write[1] != channel:
            continue
        value = write[2]
        for entry in value if isinstance(value, (list, tuple)) else [value]:
            decision = _decision(entry)
            if decision is not None:
                out.append(decision)
    return out


def _compact(data: dict[str, Any]) -> dict[str, Any]:
    """Drop empty and default fields so a drafted case stays readable."""
    defaults = {"status": "active", "source": "memory", "persist": False, "text": ""}
    return {
        k: v
        for k, v in data.items()
        if v not in (None, [], {}, ()) and not (k in defaults and v == defaults[k])
    }


def _evidence_case(
    d: GuardDecision,
    state: Mapping[str, Any],
    meta: Mapping[str, Any],
    keys: Mapping[str, str],
    principal: Any,
) -> tuple[dict[str, Any], dict[str, Any]]:
    items = []
    for raw in state.get(keys["evidence"]) or ():
        try:
            items.append(_compact(coerce_evidence(raw).to_dict()))
        except ValueError:
            items.append(to_jsonable(raw))
    query = dict(to_jsonable(state.get(keys["evidence_query"]) or {}))
    data: dict[str, Any] = {"items": items, **{k: v for k, v in query.items() if v is not None}}
    data.setdefault("as_of", d.at or meta.get("agent_guards_now"))
    if principal is not None:
        data["principal"] = principal
    expect = _expect(d)
    if "value" in d.data:
        expect["value"] = to_jsonable(d.data["value"])
    who = set(_identities(principal))
    hidden = [
        i["id"]
        for i in items
        if isinstance(i, Mapping)
        and i.get("allowed") is not None
        and not who & set(_identities(i["allowed"]))
    ]
    if hidden:
        expect["absent_ids"] = hidden  # the guarantee: what the caller may not see stays out
    return data, expect


def _expect(d: GuardDecision) -> dict[str, Any]:
    """What a drafted case expects: the decision's fields, without the policy and raw record."""
    observed = decision_fields(d)
    return {key: observed[key] for key in observed if key not in ("policy", "decision")}


def _identities(principal: Any) -> list[str]:
    if principal is None:
        return []
    return [principal] if isinstance(principal, str) else [str(p) for p in principal]


def _memory_case(
    d: GuardDecision, state: Mapping[str, Any], keys: Mapping[str, str], principal: Any, store: Any
) -> tuple[dict[str, Any], dict[str, Any]]:
    scopes = _identities(principal)
    now = d.at
    facts = []
    for f in state.get(keys["memory_facts"]) or ():
        rec = fact_record(f, now=_when(now), scope=scopes[0] if scopes else None, field="facts")
        facts.append(
            _compact({"id": rec.id, "key": rec.key, "value": rec.value, "persist": rec.persist})
        )
    fact_ids = {f["id"] for f in facts}
    records = [to_jsonable(r) for r in state.get(keys["memory_records"]) or ()]
    written = set(d.data.get("writes") or ())
    if store is not None and scopes:
        for rec in load_memories(store, memory_namespace(scopes[0])):
            if rec.id in fact_ids:
                continue  # written back by this very decision
            row = rec.to_dict()
            if rec.id in written and rec.status == "superseded":
                row["status"] = "active"  # superseded by this decision's write-back
            records.append(row)
    data: dict[str, Any] = {"now": now, "records": [_compact(r) for r in records]}
    if facts:
        data["facts"] = facts
    if scopes:
        data["scopes"] = scopes
    reasons: dict[str, str] = dict(d.data.get("reasons") or {})
    expect = {
        "verdict": d.verdict.value,
        "reason": d.reason,
        "inject_ids": list(d.selected_ids),
        "superseded_ids": sorted(i for i, w in reasons.items() if w.startswith("superseded")),
        "expired_ids": sorted(i for i, w in reasons.items() if w == "expired"),
        "excluded": {
            i: w
            for i, w in sorted(reasons.items())
            if w != "expired" and not w.startswith("superseded")
        },
        "clarify_keys": list(d.data.get("clarify_keys") or []),
    }
    return data, expect


def _when(value: Any) -> Any:
    from agent_guards.core.fields import to_datetime

    return to_datetime(value, item=None, field="now")


def _planner_case(
    d: GuardDecision, state: Mapping[str, Any], keys: Mapping[str, str]
) -> tuple[dict[str, Any], dict[str, Any]]:
    data: dict[str, Any] = {
        "versions": [to_jsonable(v) for v in state.get(keys["plans"]) or ()],
        "executed_steps": int(state.get(keys["executed"]) or 0),
        "observations": int(state.get(keys["observations"]) or 0),
    }
    if state.get(keys["goal"]) is not None:
        data["goal"] = to_jsonable(state[keys["goal"]])
    expect = _expect(d)
    del expect["conflicting_ids"]
    return data, expect


def _tool_calls(message: Any) -> list[Any]:
    if isinstance(message, Mapping):
        return list(message.get("tool_calls") or ())
    return list(getattr(message, "tool_calls", None) or ())


def _reused_before(messages: list[dict[str, Any]]) -> list[str]:
    return [
        m["tool_call_id"]
        for m in messages
        if m.get("type") == "tool" and (m.get("meta") or {}).get("reused_from")
    ]


def _answered_turn(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The history up to the answers of the latest assistant turn with tool calls."""
    last_ai = max((i for i, m in enumerate(messages) if m.get("tool_calls")), default=-1)
    end = last_ai + 1
    while end < len(messages) and messages[end].get("type") == "tool":
        end += 1
    return messages[:end]


class Drafter:
    """Builds the draft cases of one thread; collects what it skipped."""

    def __init__(
        self, thread_id: str, slice_: str, keys: Mapping[str, str], principal: Any, store: Any
    ) -> None:
        self.thread_id, self.slice, self.keys = thread_id, slice_, {**DEFAULT_KEYS, **keys}
        self.principal, self.store = principal, store
        self.cases: list[Case] = []
        self.skipped: Counter[str] = Counter()

    def add(
        self, d: GuardDecision, kind: str, data: dict[str, Any], expect: dict[str, Any], where: str
    ) -> None:
        n = len(self.cases) + 1
        case_id = f"{self.thread_id}-{n:03d}-{d.guard}"
        recorded = f" Recorded under {d.policy}: replay it under that policy." if d.policy else ""
        note = (
            f"Drafted from thread {self.thread_id!r}, {where}: {d.guard} {d.verdict.value} "
            f"({d.reason}). {d.detail}{recorded} Edit expect to what it should have decided."
        )
        self.cases.append(Case(case_id, self.slice, kind, data, expect, note=note.strip()))

    def _messages(self, state: Mapping[str, Any], ids: list[str]) -> list[dict[str, Any]]:
        """The message channel holding the decision's tool calls (``keys["messages"]`` first;
        a graph may keep a sub-loop's messages in another channel)."""
        names = [self.keys["messages"], *sorted(k for k in state if k != self.keys["messages"])]
        for name in names:
            value = state.get(name)
            if not isinstance(value, list) or not value:
                continue
            calls = {c.get("id") for m in value for c in _tool_calls(m)}
            if name == self.keys["messages"] and not ids:
                break
            if calls & set(ids):
                return messages_to_json(value)
        return messages_to_json(state.get(self.keys["messages"]) or [])

    def step(
        self,
        before: Mapping[str, Any],
        after: Mapping[str, Any],
        meta: Mapping[str, Any],
        where: str,
        new: list[GuardDecision],
    ) -> None:
        """Draft the cases of the decisions ``new`` made between ``before`` and ``after``."""
        principal = self.principal
        if principal is None:
            principal = meta.get(self.keys["principal"])
        reuse = [d for d in new if d.guard == "loop_check" and d.verdict.value == "reuse"]
        if reuse:
            ids = [i for d in reuse for i in d.selected_ids]
            msgs = self._messages(before, ids)
            expect = {"reused_ids": list(dict.fromkeys(_reused_before(msgs) + ids))}
            self.add(reuse[0], "loop", {"messages": msgs}, expect, where)
        for d in new:
            if d.guard == "evidence_resolve":
                data, expect = _evidence_case(d, before, meta, self.keys, principal)
                self.add(d, "evidence", data, expect, where)
            elif d.guard == "memory_resolve":
                data, expect = _memory_case(d, before, self.keys, principal, self.store)
                self.add(d, "memory", data, expect, where)
            elif d.guard == "planner_gate" and d.reason not in _APPROVAL_REASONS:
                data, expect = _planner_case(d, before, self.keys)
                self.add(d, "planner", data, expect, where)
            elif d.guard == "loop_check" and d.verdict.value in ("nudge", "stop", "escalate"):
                msgs = self._messages(before, list(d.selected_ids))
                stop = {"verdict": d.verdict.value, "reason": d.reason}
                self.add(d, "loop", {"messages": msgs}, stop, where)
            elif d.guard == "retry_router" and d.reason != "invalid_input":
                self._retry(d, before, after, where)
            elif not (d.guard == "loop_check" and d.verdict.value == "reuse"):
                self.skipped[d.guard] += 1

    def _retry(
        self, d: GuardDecision, before: Mapping[str, Any], after: Mapping[str, Any], where: str
    ) -> None:
        expect = {"route": d.data.get("route"), "kind": d.data.get("kind"), "reason": d.reason}
        expect = {k: v for k, v in expect.items() if v is not None}
        call_id = d.data.get("call_id")
        if call_id:
            msgs = _answered_turn(self._messages(after, [str(call_id)]))
            self.add(d, "retry", {"messages": msgs, "call_id": call_id}, expect, where)
        else:
            msgs = self._messages(before, list(d.selected_ids))
            self.add(d, "retry", {"messages": msgs}, expect, where)
