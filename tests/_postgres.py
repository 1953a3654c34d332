"""A throwaway PostgreSQL server on 127.0.0.1 for the test session.

Started with the server binaries on the machine (``/usr/lib/postgresql/*/bin``, or on PATH),
in a temporary directory, on a free port, with trust auth; stopped and removed afterwards.
As root, the server runs as the ``postgres`` user (initdb refuses root).
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def _bin(name: str) -> str | None:
    candidates = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"), reverse=True)
    return candidates[0] if candidates else shutil.which(name)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _run(cmd: list[str], as_postgres: bool) -> None:
    if as_postgres:
        cmd = ["su", "postgres", "-s", "/bin/sh", "-c", " ".join(cmd)]
    subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=60)


@contextmanager
def throwaway_postgres() -> Iterator[str]:
    """Yield a ``postgresql://`` URL of a fresh server; stop it on exit."""
    initdb, pg_ctl = _bin("initdb"), _bin("pg_ctl")
    if not initdb or not pg_ctl:
        raise RuntimeError(
            "PostgreSQL server binaries not found (initdb, pg_ctl); install them with "
            "`apt-get install -y postgresql` (.ci/run does this when they are missing)"
        )
    as_postgres = os.geteuid() == 0
    root = Path(tempfile.mkdtemp(prefix="agent-guards-pg-"))
    data = root / "data"
    if as_postgres:
        shutil.chown(root, user="postgres")
    port = _free_port()
    _run([initdb, "-D", str(data), "-U", "postgres", "--auth=trust", "-E", "UTF8"], as_postgres)
    opts = f"'-p {port} -k {root} -c listen_addresses=127.0.0.1 -c fsync=off'"
    _run([pg_ctl, "-D", str(data), "-o", opts, "-l", str(root / "log"), "-w", "start"], as_postgres)
    try:
        yield f"postgresql://postgres@127.0.0.1:{port}/postgres?sslmode=disable"
    finally:
        try:
            _run([pg_ctl, "-D", str(data), "-m", "immediate", "-w", "stop"], as_postgres)
        finally:
            shutil.rmtree(root, ignore_errors=True)
