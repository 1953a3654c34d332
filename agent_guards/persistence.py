"""A checkpointer and a store on a SQLite file or a PostgreSQL URL, with the guard serializer.

SQLite needs the ``sqlite`` extra, PostgreSQL the ``postgres`` extra. The checkpointer
uses :func:`agent_guards.guard_serializer`, so the guard types load back without
"unregistered type" warnings.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Mapping
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any

from agent_guards.serde import guard_serializer

__all__ = ["open_persistence", "replay_config"]


@contextmanager
def open_persistence(db: str, *, create: bool = True) -> Iterator[tuple[Any, Any]]:
    """``(checkpointer, store)`` for a SQLite path or a ``postgresql://`` URL.

    With ``create`` (the default) the tables are set up and a SQLite file is made if
    missing. Without it the database is only read: a missing SQLite file raises
    ``FileNotFoundError``, and the store is None when the file has no store tables.

    Example:
        >>> import tempfile, os
        >>> path = os.path.join(tempfile.mkdtemp(), "run.sqlite")
        >>> with open_persistence(path) as (saver, store):
        ...     type(saver).__name__, type(store).__name__
        ('SqliteSaver', 'SqliteStore')
        >>> with open_persistence(path, create=False) as (saver, store):
        ...     store is not None
        True
    """
    if db.startswith(("postgresql://", "postgres://")):
        with _postgres(db, create=create) as pair:
            yield pair
        return
    with _sqlite(db, create=create) as pair:
        yield pair


@contextmanager
def _postgres(db: str, *, create: bool) -> Iterator[tuple[Any, Any]]:
    from langgraph.checkpoint.postgres import PostgresSaver
    from langgraph.store.postgres import PostgresStore
    from psycopg import Connection
    from psycopg.rows import dict_row

    with (
        Connection.connect(db, autocommit=True, prepare_threshold=0, row_factory=dict_row) as conn,
        PostgresStore.from_conn_string(db) as store,
    ):
        saver = PostgresSaver(conn, serde=guard_serializer())
        if create:
            saver.setup()
            store.setup()
        yield saver, store


@contextmanager
def _sqlite(db: str, *, create: bool) -> Iterator[tuple[Any, Any]]:
    from langgraph.checkpoint.sqlite import SqliteSaver
    from langgraph.store.sqlite import SqliteStore

    if create:
        Path(db).parent.mkdir(parents=True, exist_ok=True)
    elif not Path(db).is_file():
        raise FileNotFoundError(f"no SQLite database at {db!r}")
    with closing(sqlite3.connect(db, check_same_thread=False)) as conn:
        saver = SqliteSaver(conn, serde=guard_serializer())
        if not create and "store" not in _tables(conn):
            yield saver, None
            return
        with SqliteStore.from_conn_string(db) as store:  # its own autocommit connection
            if create:
                store.setup()
            yield saver, store


def _tables(conn: sqlite3.Connection) -> set[str]:
    return {row[0] for row in conn.execute("select name from sqlite_master")}


_CHECKPOINT_KEYS = ("thread_id", "checkpoint_ns", "checkpoint_id")


def replay_config(point: Any, run_config: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The config to replay or fork a run from a past checkpoint with.

    ``point`` is a ``StateSnapshot`` (from ``get_state_history`` or ``get_state``) or the
    config ``update_state`` returned; ``run_config`` is the config the run was started with.
    ``snapshot.config`` alone carries only the checkpoint's ids: a replay with it loses the
    run's ``configurable`` (the pinned clock ``agent_guards_now``, the ``principal``, your
    own keys) and can decide differently. This keeps everything of the run's config and
    points it at the checkpoint. Without ``run_config``, the ``configurable`` is read back
    from the snapshot's metadata, where LangGraph copies the run's configurable keys (plain
    values only: callbacks, tags and ``recursion_limit`` are not in a checkpoint).

    Raises:
        ValueError: ``point`` has no checkpoint id, or belongs to another thread.

    Example:
        >>> run = {"configurable": {"thread_id": "t1", "principal": "analyst-1"},
        ...        "recursion_limit": 50}
        >>> past = {"configurable": {"thread_id": "t1", "checkpoint_ns": "",
        ...                          "checkpoint_id": "1f0-abc"}}
        >>> replay_config(past, run)
        {'configurable': {'thread_id': 't1', 'principal': 'analyst-1', 'checkpoint_ns': '', 'checkpoint_id': '1f0-abc'}, 'recursion_limit': 50}
    """  # noqa: E501
    target = getattr(point, "config", point)
    at = (target.get("configurable") or {}) if isinstance(target, Mapping) else {}
    if not at.get("checkpoint_id"):
        raise ValueError(
            "replay_config needs a checkpoint: pass a StateSnapshot from get_state_history() "
            f"or the config update_state() returned, got {type(point).__name__}"
        )
    if run_config is None:
        run_config = {"configurable": _recorded_configurable(point)}
    own = dict(run_config.get("configurable") or {})
    if own.get("thread_id") not in (None, at.get("thread_id")):
        raise ValueError(
            f"replay_config: the checkpoint is on thread {at.get('thread_id')!r}, the run config "
            f"on thread {own['thread_id']!r}; pass the config of the run that made the checkpoint"
        )
    own.update({key: at[key] for key in _CHECKPOINT_KEYS if key in at})
    return {**run_config, "configurable": own}


_NOT_CONFIGURABLE = frozenset({"source", "step", "parents", "writes", "run_id"})


def _recorded_configurable(point: Any) -> dict[str, Any]:
    """The run's configurable keys LangGraph copied into a checkpoint's metadata."""
    metadata = getattr(point, "metadata", None)
    if not isinstance(metadata, Mapping):
        raise ValueError(
            "replay_config without run_config needs a StateSnapshot (its metadata holds the "
            "run's configurable); pass the run's config for a plain checkpoint config"
        )
    return {k: v for k, v in metadata.items() if k not in _NOT_CONFIGURABLE}
