"""From a recorded run to regression cases (trace -> bad case -> regression slice).

:func:`cases_from_thread` walks a thread's checkpoints (oldest first), reads the decisions
each step wrote to ``guard_log`` (the checkpoint's pending writes, so a ``delta_log()``
channel, which keeps no full log per checkpoint, works too), rebuilds each guard's input
from the state the decision was made from, and returns draft
:class:`~agent_guards.evals.cases.Case` objects whose ``expect`` is the decision as observed.
Edit ``expect`` to what the guard *should* have decided, add the line to a slice, and the bad
case is a regression case.

* evidence_resolve: ``evidence`` and ``evidence_query`` before the node; the principal and
  the clock (``as_of``) from the run's config. Expect: verdict, reason, value, ids, and
  ``absent_ids`` for items the principal may not see.
* memory_resolve: ``memory_records``, ``memory_facts`` and the store, as it was before the
  decision's own write-back. Expect: verdict, reason, inject / superseded / expired ids,
  ``excluded``, ``clarify_keys``.
* planner_gate: ``plans``, ``executed_since_plan``, ``observations_since_plan``, ``goal``.
  Expect: verdict, reason, selected / dropped ids (approval decisions are not redrafted).
* loop_check: the messages before the node, from the channel that holds the decision's call
  ids (``messages``, or e.g. the reference graph's ``step_messages``). Expect: the
  nudge / stop / escalate verdict and reason, or ``reused_ids`` for REUSE decisions.
* retry_router: the messages after the tools node, one case per failed tool call (a failed
  model call, reason ``model_failed``, has no tool messages to replay: skipped). Expect: route,
  kind, reason.

Delta channels (``delta_log()``, :func:`~agent_guards.delta_channel`, LangGraph's beta
``DeltaChannel``) keep no full value in most checkpoints. Pass ``graph=`` (the compiled graph)
and each state is read through ``graph.get_state_history``, which replays them with the
graph's own reducers. Without it, the channels the drafter reads are rebuilt from the
checkpointer: the value stored in the checkpoint (a snapshot or a plain value) or else the
parent's value plus the writes stored with the parent, as LangGraph's
``BaseCheckpointSaver.get_delta_channel_history`` does; ``plans``, ``evidence``,
``guard_log``, ``messages`` and the reference graph's ``step_messages`` replay with this
package's reducers (``merge_plans``, ``merge_evidence``, ``keep_last``,
``add_messages_stable``), other channels need ``reducers=``.

The run's config is read from the checkpoint metadata (LangGraph copies ``configurable``
values there): the principal and ``agent_guards_now`` (the pinned clock, also stamped on each
decision as ``at``). Other guards' decisions (context_guard, budgets) are skipped and
counted. With ``graph=`` the nodes' own options are read from the graph, so a draft passes on
the thread it came from: a node's ``principal_key``, its memory ``namespace`` and store, its
state keys and the node's name (a renamed node's decisions), and the policy behind each
decision's label, carried as the case's ``input.policy`` (the fields that differ from the
default). Without it, pass ``keys=`` (``{"principal": "user_id"}``), ``namespace=`` and run
the drafts under the graph's own :class:`~agent_guards.evals.EvalPolicies`. Still not known:
a planner gate's ``tools=``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, cast

from typing_extensions import TypedDict, Unpack

from agent_guards.core.state import DEFAULT_LOG_SIZE, keep_last
from agent_guards.evals.cases import Case
from agent_guards.evals.drafts import (
    DEFAULT_KEYS,
    Drafter,
    graph_settings,
    new_decisions,
    written_decisions,
)
from agent_guards.evidence_resolve.messages import merge_evidence
from agent_guards.memory_resolve.store import memory_namespace
from agent_guards.persistence import open_persistence
from agent_guards.planner_gate.graph import merge_plans
from agent_guards.serde import delta_channel, serde_allowlist

__all__ = [
    "cases_from_thread",
    "draft_cases",
    "open_checkpointer",
    "write_cases",
]


def _saver(checkpointer: Any) -> Any:
    if hasattr(checkpointer, "with_allowlist"):
        return checkpointer.with_allowlist(serde_allowlist())
    return checkpointer


def _root_tuples(saver: Any, thread_id: str) -> list[Any]:
    config = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
    tuples = list(saver.list(config))
    tuples.reverse()  # oldest first
    return tuples


def _checkpoint_id(config: Any) -> Any:
    return ((config or {}).get("configurable") or {}).get("checkpoint_id")


def _default_reducers(keys: Mapping[str, str]) -> dict[str, Callable[[Any, Any], Any]]:
    from agent_guards.serde import add_messages_stable  # plain add_messages values are stored

    named = {"plans": merge_plans, "evidence": merge_evidence, "messages": add_messages_stable}
    out: dict[str, Callable[[Any, Any], Any]] = {
        "guard_log": keep_last(DEFAULT_LOG_SIZE),
        "step_messages": add_messages_stable,  # the reference graph's ReAct sub-loop (deltas)
    }
    for logical, reducer in named.items():
        out[keys.get(logical, DEFAULT_KEYS[logical])] = reducer
    return out


def _graph_values(graph: Any, saver: Any, thread_id: str) -> dict[Any, dict[str, Any]]:
    """Checkpoint id -> state values, read through the graph (it replays delta channels)."""
    if getattr(graph, "checkpointer", None) in (None, False, True):
        graph = graph.copy(update={"checkpointer": saver})
    config = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
    return {
        _checkpoint_id(snap.config): dict(snap.values or {})
        for snap in graph.get_state_history(config)
    }


def _replayed_values(
    saver: Any, tuples: list[Any], reducers: Mapping[str, Callable[[Any, Any], Any]]
) -> dict[Any, dict[str, Any]]:
    """Checkpoint id -> channel values, with the channels in ``reducers`` rebuilt.

    A delta channel is absent from most checkpoints' ``channel_values``: its value is the
    nearest stored one (a snapshot every N updates) plus the writes stored since. Walking
    the thread oldest first, each checkpoint's value is the parent's plus the writes stored
    with the parent (one step of ``get_delta_channel_history``); a checkpoint whose parent
    is not in ``tuples`` asks the checkpointer for the whole history.
    """
    specs = {ch: delta_channel(r) for ch, r in reducers.items()}
    specs = {ch: spec for ch, spec in specs.items() if hasattr(spec, "replay_writes")}
    by_id = {_checkpoint_id(t.config): t for t in tuples}
    out: dict[Any, dict[str, Any]] = {}
    for t in tuples:
        cp = t.checkpoint
        stored = cp.get("channel_values") or {}
        values = dict(stored)
        parent_id = _checkpoint_id(t.parent_config)
        parent = by_id.get(parent_id)
        for ch, spec in specs.items():
            if ch in stored:
                channel = spec.from_checkpoint(stored[ch])  # a snapshot or a plain value
            elif ch not in (cp.get("channel_versions") or {}):
                continue  # never written
            elif parent is not None and parent.pending_writes is not None:
                before = out.get(parent_id, {})
                channel = spec.from_checkpoint(before.get(ch))
                channel.replay_writes([w for w in parent.pending_writes if w[1] == ch])
            else:
                history = saver.get_delta_channel_history(config=t.config, channels=[ch])[ch]
                channel = spec.from_checkpoint(history.get("seed"))
                channel.replay_writes(history["writes"])
            values[ch] = channel.get()
        out[_checkpoint_id(t.config)] = values
    return out


def _namespace(value: Any) -> Callable[[str], Sequence[str]] | None:
    """A ``namespace=`` option: a callable, or a prefix for :func:`memory_namespace`."""
    if value is None:
        return None
    if callable(value):
        return cast("Callable[[str], Sequence[str]]", value)
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise TypeError(f"namespace must be a callable or a sequence of labels, got {value!r}")
    prefix = tuple(value)
    return lambda principal: memory_namespace(principal, prefix=prefix)


class DraftOptions(TypedDict, total=False):
    """The keyword options of :func:`cases_from_thread` and :func:`draft_cases`."""

    slice: str
    principal: Any
    store: Any
    keys: Mapping[str, str] | None
    graph: Any
    reducers: Mapping[str, Callable[[Any, Any], Any]] | None
    namespace: Callable[[str], Sequence[str]] | Sequence[str] | None


def draft_cases(
    checkpointer: Any, thread_id: str, **options: Unpack[DraftOptions]
) -> tuple[list[Case], dict[str, int]]:
    """Like :func:`cases_from_thread`, also returning the skipped decisions per guard."""
    unknown = sorted(set(options) - set(DraftOptions.__annotations__))
    if unknown:
        allowed = ", ".join(DraftOptions.__annotations__)
        raise TypeError(f"draft_cases got unknown option(s) {unknown}; allowed: {allowed}")
    keys = options.get("keys") or {}
    graph = options.get("graph")
    saver = _saver(checkpointer)
    tuples = _root_tuples(saver, thread_id)
    if not tuples:
        raise ValueError(f"thread {thread_id!r} has no checkpoints in this checkpointer")
    if graph is not None:
        states = _graph_values(graph, saver, thread_id)
    else:
        states = _replayed_values(
            saver, tuples, {**_default_reducers(keys), **(options.get("reducers") or {})}
        )
    children: dict[str, Any] = {}
    for t in tuples:
        parent_id = _checkpoint_id(t.parent_config)
        if parent_id is not None:
            children.setdefault(parent_id, t)  # the first run from it (a fork comes later)
    drafter = Drafter(
        thread_id,
        options.get("slice", "from_thread"),
        keys,
        options.get("principal"),
        options.get("store", getattr(graph, "store", None)),
        settings=graph_settings(graph) if graph is not None else None,
        namespace=_namespace(options.get("namespace")),
    )
    for parent in tuples:
        pid = parent.config["configurable"]["checkpoint_id"]
        child = children.get(pid)
        before = states.get(pid) or {}
        after = states.get(child.config["configurable"]["checkpoint_id"]) or {} if child else before
        if parent.pending_writes is not None:
            new = written_decisions(parent.pending_writes)
        elif child is not None:
            new = new_decisions(before.get("guard_log"), after.get("guard_log"))
        else:
            continue
        if not new:
            continue
        meta = (child.metadata if child is not None else parent.metadata) or {}
        step = meta.get("step")
        drafter.step(before, after, meta, f"after checkpoint {pid} (step {step})", new)
    return drafter.cases, dict(drafter.skipped)


def cases_from_thread(
    checkpointer: Any, thread_id: str, **options: Unpack[DraftOptions]
) -> list[Case]:
    """Draft regression cases from the guard decisions recorded in a thread.

    Args:
        checkpointer: The graph's checkpointer (SqliteSaver, PostgresSaver, InMemorySaver...).
        thread_id: The thread to read.
        slice: The slice the drafts belong to.
        principal: The caller's identities; default: the value the run's ``configurable``
            held under the node's ``principal_key`` (LangGraph copies it to the checkpoint
            metadata), ``principal`` without ``graph``.
        store: The graph's store, to rebuild memory_resolve inputs from stored memories
            (default: the store ``graph`` was compiled with).
        keys: State key overrides (see :data:`DEFAULT_KEYS`), for nodes built with other keys;
            ``keys={"principal": ...}`` names the config key of the principal.
        graph: The compiled graph that wrote the thread: states are then read with its
            ``get_state_history`` (delta channels replayed with its own reducers), and each
            case carries what its node was built with: the principal key, the memory
            namespace, the state keys, and the recorded policy's options as
            ``input.policy``.
        reducers: Without ``graph``, reducers for delta channels other than ``plans``,
            ``evidence``, ``guard_log`` and ``messages`` (channel name -> reducer).
        namespace: The memory namespace of a principal: a callable (as given to
            ``create_memory_resolve``) or a prefix (``("acme", "memories")``); default: the
            memory node's own (with ``graph``), else :func:`memory_namespace`.

    Returns:
        One case per rebuildable decision, in the order they were made.

    Raises:
        ValueError: the thread has no checkpoints.
    """
    return draft_cases(checkpointer, thread_id, **options)[0]


def open_checkpointer(db: str) -> AbstractContextManager[tuple[Any, Any]]:
    """``(checkpointer, store)`` for reading a SQLite file or a ``postgresql://`` URL.

    The store is None when the database has no store tables.

    Raises:
        FileNotFoundError: a SQLite path that does not exist.
    """
    return open_persistence(db, create=False)


def write_cases(cases: list[Case], path: str | Path | None = None) -> str:
    """The cases as JSONL (one per line); written to ``path`` when given."""
    text = "".join(json.dumps(c.to_dict(), ensure_ascii=False) + "\n" for c in cases)
    if path is not None:
        Path(path).write_text(text, encoding="utf-8")
    return text
