"""A checkpointer and a store on a SQLite file or a PostgreSQL URL, with the guard serializer.

SQLite needs the ``sqlite`` extra, PostgreSQL the ``postgres`` extra. The checkpointer
uses :func:`agent_guards.guard_serializer`, so the guard types load back without
"unregistered type" warnings.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any

from agent_guards.serde import guard_serializer

__all__ = ["open_persistence"]


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
