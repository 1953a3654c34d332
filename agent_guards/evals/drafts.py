"""Rebuilding a guard's input from checkpointed state, one decision at a time. Private.

Used by :mod:`agent_guards.evals.traces`; see its docstring for what each guard's draft
case holds.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from agent_guards.core.decision import GuardDecision
from agent_guards.core.policy import Policy
from agent_guards.evals.cases import Case
from agent_guards.evals.jsonform import messages_to_json, to_jsonable
from agent_guards.evals.policies import POLICY_TYPES, with_options
from agent_guards.evals.runners import decision_fields
from agent_guards.evidence_resolve.core import coerce_evidence
from agent_guards.evidence_resolve.policy import EvidencePolicy
from agent_guards.memory_resolve.node import fact_record
from agent_guards.memory_resolve.policy import MemoryPolicy
from agent_guards.memory_resolve.store import load_memories, memory_namespace

__all__ = [
    "DEFAULT_KEYS",
    "Drafter",
    "GraphSettings",
    "NodeSettings",
    "graph_settings",
    "new_decisions",
    "policy_options",
    "written_decisions",
]

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


# -- what the graph's guard nodes were built with ------------------------------------------

# node attribute -> logical key (see DEFAULT_KEYS), per guard whose node reads the config
_NODE_KEYS: dict[str, dict[str, str]] = {
    "memory_resolve": {"facts_key": "memory_facts", "records_key": "memory_records"},
    "evidence_resolve": {"evidence_key": "evidence", "query_key": "evidence_query"},
}
# the packages whose objects are walked to find a node's options (not models, tools, graphs)
_WALKED = ("agent_guards.", "langgraph.prebuilt.", "langchain_core.runnables.", "langgraph._")


@dataclass(frozen=True)
class NodeSettings:
    """What one memory_resolve / evidence_resolve node was built with."""

    guard: str
    """The guard the node runs (``memory_resolve`` or ``evidence_resolve``)."""
    principal_key: str = "principal"
    """``configurable`` key the node reads the caller's identities from."""
    namespace: Callable[[str], Sequence[str]] | None = None
    """memory_resolve: principal -> store namespace."""
    store: Any = None
    """memory_resolve: the node's own store (None: the graph's)."""
    keys: Mapping[str, str] = field(default_factory=dict)
    """State keys the node reads (logical name -> key, see :data:`DEFAULT_KEYS`)."""


@dataclass(frozen=True)
class GraphSettings:
    """The guard nodes of a graph (by decision ``guard`` name) and the policies it holds."""

    nodes: Mapping[str, NodeSettings] = field(default_factory=dict)
    policies: Mapping[str, tuple[Any, ...]] = field(default_factory=dict)
    """Policy label -> the distinct policies with that label."""


def _children(obj: Any) -> list[Any]:
    """What the walk looks into: containers, methods, closures, this package's objects."""
    if isinstance(obj, (str, bytes, int, float, Policy)) or obj is None:
        return []
    if isinstance(obj, Mapping):
        return list(obj.values())
    if isinstance(obj, (list, tuple, set, frozenset)):
        return list(obj)
    if inspect.ismethod(obj):
        return [obj.__self__, obj.__func__]
    if inspect.isfunction(obj):
        cells = obj.__closure__ or ()
        return [c.cell_contents for c in cells if c.cell_contents is not None]
    if not f"{type(obj).__module__}.".startswith(_WALKED):
        return []
    if dataclasses.is_dataclass(obj):
        return [getattr(obj, f.name) for f in dataclasses.fields(obj)]
    return list(getattr(obj, "__dict__", {}).values())


def _reachable(root: Any, depth: int = 6) -> Iterator[Any]:
    seen: set[int] = set()
    stack = [(root, 0)]
    while stack:
        obj, level = stack.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        yield obj
        if level < depth:
            stack.extend((child, level + 1) for child in _children(obj))


def _node_settings(obj: Any) -> tuple[str, NodeSettings] | None:
    policy = getattr(obj, "policy", None)
    name, key = getattr(obj, "name", None), getattr(obj, "principal_key", None)
    if not isinstance(name, str) or not isinstance(key, str):
        return None
    guard = {MemoryPolicy: "memory_resolve", EvidencePolicy: "evidence_resolve"}.get(
        type(policy), ""
    )
    if not guard:
        return None
    keys = {logical: getattr(obj, attr) for attr, logical in _NODE_KEYS[guard].items()}
    namespace = getattr(obj, "namespace", None)
    store = getattr(obj, "store", None)
    return name, NodeSettings(guard, key, namespace if callable(namespace) else None, store, keys)


def graph_settings(graph: Any) -> GraphSettings:
    """Read the guard nodes' options and the policies out of a compiled graph.

    Walks each node and conditional edge (the functions, their closures and this package's
    node objects): memory_resolve and evidence_resolve nodes give their ``principal_key``,
    namespace, store and state keys; every guard policy found is indexed by its label.
    """
    builder = getattr(graph, "builder", None)
    roots: list[Any] = [spec.runnable for spec in getattr(builder, "nodes", {}).values()]
    for branches in getattr(builder, "branches", {}).values():
        roots.extend(branch.path for branch in branches.values())
    nodes: dict[str, NodeSettings] = {}
    policies: dict[str, list[Any]] = {}
    for obj in (o for root in roots for o in _reachable(root)):
        if isinstance(obj, Policy):
            same = policies.setdefault(obj.label, [])
            if not any(obj == p for p in same):
                same.append(obj)
        found = _node_settings(obj)
        if found is not None:
            nodes[found[0]] = found[1]
    return GraphSettings(nodes, {label: tuple(ps) for label, ps in policies.items()})


def _changed(value: Any, default: Any) -> Any:
    """The JSON form of ``value``; of a nested policy part, only the fields that changed."""
    if not (dataclasses.is_dataclass(value) and type(value) is type(default)):
        return to_jsonable(value)
    return {
        f.name: to_jsonable(getattr(value, f.name))
        for f in dataclasses.fields(value)
        if getattr(value, f.name) != getattr(default, f.name)
    }


def policy_options(policy: Any, kind: str) -> tuple[dict[str, Any], list[str]]:
    """A case's ``input.policy`` for ``policy``: the fields that differ from the default.

    Returns the options and the fields that a case cannot carry (their JSON form does not
    rebuild the value); both are empty for a default policy.

    Example:
        >>> from agent_guards import LoopPolicy
        >>> policy_options(LoopPolicy(nudge_at=3, stop_at=4), "loop")
        ({'nudge_at': 3, 'stop_at': 4}, [])
    """
    base = POLICY_TYPES[kind]()
    changed = {
        f.name: _changed(getattr(policy, f.name), getattr(base, f.name, None))
        for f in dataclasses.fields(policy)
        if getattr(policy, f.name) != getattr(base, f.name, None)
    }
    if _rebuilds(base, changed, policy):
        return changed, []
    options: dict[str, Any] = {}
    lost: list[str] = []
    for name, option in changed.items():  # one field at a time: keep those that rebuild
        if _rebuilds(base, {**options, name: option}, policy, name):
            options[name] = option
        else:
            lost.append(name)
    return options, lost


def _rebuilds(base: Any, options: dict[str, Any], policy: Any, name: str = "") -> bool:
    """Whether ``options`` on ``base`` give ``policy`` (or its field ``name``)."""
    try:
        rebuilt = with_options(base, options)
    except (ValueError, TypeError):
        return False
    return bool(getattr(rebuilt, name) == getattr(policy, name) if name else rebuilt == policy)


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
    d: GuardDecision,
    state: Mapping[str, Any],
    keys: Mapping[str, str],
    principal: Any,
    store: Any,
    *,
    namespace: Callable[[str], Sequence[str]] = memory_namespace,
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
        for rec in load_memories(store, tuple(namespace(scopes[0]))):
            if rec.id in fact_ids:
                continue  # written back by this very decision
            row = rec.to_dict()
            mine = row.get("turn") in fact_ids  # a write-back names the turn it came from
            if mine or (rec.id in written and rec.status == "superseded"):
                # superseded by this decision's write-back: the record as it was before
                row["status"] = row.pop("prior_status", None) or "active"
                row.pop("turn", None)
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
    """Builds the draft cases of one thread; collects what it skipped.

    ``settings`` (from :func:`graph_settings`) gives each node's principal key, namespace,
    store and state keys, and the policies behind the labels decisions record; ``keys``
    (the caller's overrides), ``principal``, ``store`` and ``namespace`` win over them.
    """

    def __init__(
        self,
        thread_id: str,
        slice_: str,
        keys: Mapping[str, str],
        principal: Any,
        store: Any,
        *,
        settings: GraphSettings | None = None,
        namespace: Callable[[str], Sequence[str]] | None = None,
    ) -> None:
        self.thread_id, self.slice, self.keys = thread_id, slice_, {**DEFAULT_KEYS, **keys}
        self.overrides = dict(keys)
        self.principal, self.store, self.namespace = principal, store, namespace
        self.settings = settings or GraphSettings()
        self.cases: list[Case] = []
        self.skipped: Counter[str] = Counter()

    def add(
        self, d: GuardDecision, kind: str, data: dict[str, Any], expect: dict[str, Any], where: str
    ) -> None:
        n = len(self.cases) + 1
        case_id = f"{self.thread_id}-{n:03d}-{d.guard}"
        recorded = self._policy(d, kind, data)
        note = (
            f"Drafted from thread {self.thread_id!r}, {where}: {d.guard} {d.verdict.value} "
            f"({d.reason}). {d.detail}{recorded} Edit expect to what it should have decided."
        )
        self.cases.append(Case(case_id, self.slice, kind, data, expect, note=note.strip()))

    def _policy(self, d: GuardDecision, kind: str, data: dict[str, Any]) -> str:
        """Put the recorded policy's options in ``data["policy"]``; the note's sentence."""
        if not d.policy:
            return ""
        found = [
            p for p in self.settings.policies.get(d.policy, ()) if isinstance(p, POLICY_TYPES[kind])
        ]
        if len(found) != 1:
            return f" Recorded under {d.policy}: replay it under that policy."
        options, lost = policy_options(found[0], kind)
        if options:
            data["policy"] = options
        if lost:
            return (
                f" Recorded under {d.policy}; input.policy cannot carry {', '.join(lost)}: "
                "replay it under that policy."
            )
        return f" Recorded under {d.policy} (its options are in input.policy)." if options else ""

    def _node(self, d: GuardDecision) -> tuple[str, Mapping[str, str], Any]:
        """The decision's guard, the state keys its node reads and the caller's identities."""
        node = self.settings.nodes.get(d.guard)
        keys = {**self.keys, **(node.keys if node else {}), **self.overrides}
        principal_key = self.overrides.get("principal") or (
            node.principal_key if node else keys["principal"]
        )
        return (node.guard if node else d.guard), keys, principal_key

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
        reuse = [d for d in new if d.guard == "loop_check" and d.verdict.value == "reuse"]
        if reuse:
            ids = [i for d in reuse for i in d.selected_ids]
            msgs = self._messages(before, ids)
            expect = {"reused_ids": list(dict.fromkeys(_reused_before(msgs) + ids))}
            self.add(reuse[0], "loop", {"messages": msgs}, expect, where)
        for d in new:
            guard = self._node(d)[0]
            if guard in ("evidence_resolve", "memory_resolve"):
                self._resolve(d, before, meta, where)
            elif guard == "planner_gate" and d.reason not in _APPROVAL_REASONS:
                data, expect = _planner_case(d, before, self.keys)
                self.add(d, "planner", data, expect, where)
            elif guard == "loop_check" and d.verdict.value in ("nudge", "stop", "escalate"):
                msgs = self._messages(before, list(d.selected_ids))
                stop = {"verdict": d.verdict.value, "reason": d.reason}
                self.add(d, "loop", {"messages": msgs}, stop, where)
            elif guard == "retry_router" and d.reason not in ("invalid_input", "model_failed"):
                self._retry(d, before, after, where)
            elif not (guard == "loop_check" and d.verdict.value == "reuse"):
                self.skipped[d.guard] += 1

    def _resolve(
        self, d: GuardDecision, before: Mapping[str, Any], meta: Mapping[str, Any], where: str
    ) -> None:
        """An evidence or memory case, read with the node's keys, principal and namespace."""
        guard, keys, principal_key = self._node(d)
        principal = self.principal if self.principal is not None else meta.get(principal_key)
        if guard == "evidence_resolve":
            data, expect = _evidence_case(d, before, meta, keys, principal)
            self.add(d, "evidence", data, expect, where)
            return
        node = self.settings.nodes.get(d.guard)
        namespace = self.namespace or (node.namespace if node else None) or memory_namespace
        store = self.store if self.store is not None else (node.store if node else None)
        data, expect = _memory_case(d, before, keys, principal, store, namespace=namespace)
        self.add(d, "memory", data, expect, where)

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
