"""From a recorded run to regression cases (seed 000, trap 6: trace -> badcase -> slice).

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
* retry_router: the messages after the tools node, one case per failed call. Expect: route,
  kind, reason.

The run's config is read from the checkpoint metadata (LangGraph copies ``configurable``
values there): ``principal`` and ``agent_guards_now``. Other guards' decisions
(context_guard, budgets) are skipped and counted. Node options that are not in state are not
known here: a planner gate's ``tools=``, custom state keys (pass ``keys=``) and the policies
(run the drafts under the graph's own :class:`~agent_guards.evals.EvalPolicies`).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator, Mapping
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any

from ..serde import guard_serializer, serde_allowlist
from ._drafts import DEFAULT_KEYS, Drafter, new_decisions, written_decisions
from .cases import Case

__all__ = ["DEFAULT_KEYS", "cases_from_thread", "draft_cases", "open_checkpointer", "write_cases"]


def _root_tuples(checkpointer: Any, thread_id: str) -> list[Any]:
    saver = checkpointer
    if hasattr(saver, "with_allowlist"):
        saver = saver.with_allowlist(serde_allowlist())
    config = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
    tuples = list(saver.list(config))
    tuples.reverse()  # oldest first
    return tuples


def draft_cases(
    checkpointer: Any,
    thread_id: str,
    *,
    slice: str = "from_thread",
    principal: Any = None,
    store: Any = None,
    keys: Mapping[str, str] | None = None,
) -> tuple[list[Case], dict[str, int]]:
    """Like :func:`cases_from_thread`, also returning the skipped decisions per guard."""
    tuples = _root_tuples(checkpointer, thread_id)
    if not tuples:
        raise ValueError(f"thread {thread_id!r} has no checkpoints in this checkpointer")
    children: dict[str, Any] = {}
    for t in tuples:
        parent_id = ((t.parent_config or {}).get("configurable") or {}).get("checkpoint_id")
        if parent_id is not None:
            children.setdefault(parent_id, t)  # the first run from it (a fork comes later)
    drafter = Drafter(thread_id, slice, keys or {}, principal, store)
    for parent in tuples:
        pid = parent.config["configurable"]["checkpoint_id"]
        child = children.get(pid)
        before = parent.checkpoint.get("channel_values") or {}
        after = child.checkpoint.get("channel_values") or {} if child is not None else before
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
    checkpointer: Any,
    thread_id: str,
    *,
    slice: str = "from_thread",
    principal: Any = None,
    store: Any = None,
    keys: Mapping[str, str] | None = None,
) -> list[Case]:
    """Draft regression cases from the guard decisions recorded in a thread.

    Args:
        checkpointer: The graph's checkpointer (SqliteSaver, PostgresSaver, InMemorySaver...).
        thread_id: The thread to read.
        slice: The slice the drafts belong to.
        principal: The caller's identities; default: ``principal`` from the checkpoint
            metadata (the run's ``configurable``).
        store: The graph's store, to rebuild memory_resolve inputs from stored memories.
        keys: State key overrides (see :data:`DEFAULT_KEYS`), for nodes built with other keys.

    Returns:
        One case per rebuildable decision, in the order they were made.

    Raises:
        ValueError: the thread has no checkpoints.
    """
    cases, _ = draft_cases(
        checkpointer, thread_id, slice=slice, principal=principal, store=store, keys=keys
    )
    return cases


@contextmanager
def open_checkpointer(db: str) -> Iterator[tuple[Any, Any]]:
    """``(checkpointer, store)`` for reading a SQLite file or a ``postgresql://`` URL.

    The store is None when the database has no store tables.

    Raises:
        FileNotFoundError: a SQLite path that does not exist.
    """
    if db.startswith(("postgresql://", "postgres://")):
        from langgraph.checkpoint.postgres import PostgresSaver
        from langgraph.store.postgres import PostgresStore
        from psycopg import Connection
        from psycopg.rows import dict_row

        with (
            Connection.connect(
                db, autocommit=True, prepare_threshold=0, row_factory=dict_row
            ) as pg,
            PostgresStore.from_conn_string(db) as pg_store,
        ):
            yield PostgresSaver(pg, serde=guard_serializer()), pg_store
        return
    from langgraph.checkpoint.sqlite import SqliteSaver
    from langgraph.store.sqlite import SqliteStore

    if not Path(db).is_file():
        raise FileNotFoundError(f"no SQLite database at {db!r}")
    with closing(sqlite3.connect(db, check_same_thread=False)) as conn:
        tables = {row[0] for row in conn.execute("select name from sqlite_master")}
        saver = SqliteSaver(conn, serde=guard_serializer())
        if "store" not in tables:
            yield saver, None
            return
        with SqliteStore.from_conn_string(db) as store:  # its own autocommit connection
            yield saver, store


def write_cases(cases: list[Case], path: str | Path | None = None) -> str:
    """The cases as JSONL (one per line); written to ``path`` when given."""
    text = "".join(json.dumps(c.to_dict(), ensure_ascii=False) + "\n" for c in cases)
    if path is not None:
        Path(path).write_text(text, encoding="utf-8")
    return text
