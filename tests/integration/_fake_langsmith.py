"""A stateful fake of the LangSmith API on 127.0.0.1: datasets, examples, sessions, runs.

Just enough for ``Client.create_dataset`` / ``create_examples`` / ``langsmith.evaluate``
offline: datasets and examples are kept in memory and served back; run and feedback
payloads are recorded (decompressed) so tests can look at what was uploaded.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import threading
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest


class FakeLangSmith(ThreadingHTTPServer):
    """The server; ``datasets``, ``examples``, ``sessions`` and ``posted`` hold the state."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.datasets: dict[str, dict[str, Any]] = {}
        self.examples: dict[str, list[dict[str, Any]]] = {}
        self.sessions: dict[str, dict[str, Any]] = {}
        self.posted: list[tuple[str, bytes]] = []
        self.lock = threading.Lock()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def payload(self) -> bytes:
        """Everything posted (runs, feedback, examples), concatenated."""
        return b"\n".join(body for _, body in self.posted)


@contextlib.contextmanager
def tracing_to(server: FakeLangSmith) -> Iterator[FakeLangSmith]:
    """LangSmith tracing on, sent to ``server`` (serving meanwhile), for the block.

    LangSmith caches its client and the environment it read, per process: both are reset on
    the way in (no test that ran before points it elsewhere) and out (no test after runs
    traced, to the default endpoint, once the variables are restored)."""
    import langsmith.utils as ls_utils
    from langchain_core.tracers.langchain import wait_for_all_tracers
    from langsmith import run_trees

    def forget() -> None:
        ls_utils.get_env_var.cache_clear()  # type: ignore[attr-defined]
        ls_utils.get_tracer_project.cache_clear()

    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("LANGSMITH_TRACING", "true")
        patch.setenv("LANGSMITH_API_KEY", "fake-key")
        patch.setenv("LANGSMITH_ENDPOINT", server.url)
        patch.setenv("LANGSMITH_PROJECT", "agent-guards-tests")
        patch.setattr(run_trees, "_CLIENT", None)
        forget()
        try:
            yield server
        finally:
            wait_for_all_tracers()
            server.shutdown()
            server.server_close()
    forget()


def _now() -> str:
    return datetime.now(UTC).isoformat()


class _Handler(BaseHTTPRequestHandler):
    server: FakeLangSmith

    def _body(self) -> bytes:
        raw = self.rfile.read(int(self.headers.get("content-length") or 0))
        encoding = (self.headers.get("content-encoding") or "").lower()
        if encoding == "gzip":
            raw = gzip.decompress(raw)
        elif encoding == "zstd":
            import zstandard

            raw = zstandard.ZstdDecompressor().decompressobj().decompress(raw)
        return raw

    def _reply(self, payload: Any, status: int = 200) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        with self.server.lock:
            payload, status = self._get()
        self._reply(payload, status)

    def do_POST(self) -> None:
        body = self._body()
        path = urlparse(self.path).path
        with self.server.lock:
            self.server.posted.append((path, body))
            payload = self._post(path, body)
        self._reply(payload)

    def do_PATCH(self) -> None:
        body = self._body()
        path = urlparse(self.path).path
        parts = [p for p in path.split("/") if p]
        payload: Any = {}
        with self.server.lock:
            self.server.posted.append((path, body))
            if parts[:1] == ["sessions"] and len(parts) == 2 and parts[1] in self.server.sessions:
                payload = self.server.sessions[parts[1]]
                payload.update(
                    {k: v for k, v in json.loads(body or b"{}").items() if v is not None}
                )
        self._reply(payload)

    def _get(self) -> tuple[Any, int]:
        url = urlparse(self.path)
        query = {k: v[0] for k, v in parse_qs(url.query).items()}
        parts = [p for p in url.path.split("/") if p]
        state = self.server
        if parts[:1] == ["datasets"]:
            if len(parts) == 2:
                found = state.datasets.get(parts[1])
                return (found, 200) if found else ({"detail": "not found"}, 404)
            rows = [
                d
                for d in state.datasets.values()
                if query.get("name") in (None, d["name"]) and query.get("id") in (None, d["id"])
            ]
            return rows, 200
        if parts[:1] == ["examples"]:
            rows = state.examples.get(query.get("dataset", ""), [])
            offset, limit = int(query.get("offset", 0)), int(query.get("limit", 100))
            return rows[offset : offset + limit], 200
        if parts[:1] == ["sessions"]:
            if len(parts) == 2 and parts[1] in state.sessions:
                return state.sessions[parts[1]], 200
            name = query.get("name")
            return [s for s in state.sessions.values() if name in (None, s["name"])], 200
        return {"version": "0.0-fake", "instance_flags": {}, "batch_ingest_config": {}}, 200

    def _post(self, path: str, body: bytes) -> Any:
        state = self.server
        if path == "/datasets":
            data = json.loads(body)
            row = {
                "id": str(uuid.uuid4()),
                "name": data["name"],
                "description": data.get("description"),
                "data_type": data.get("data_type", "kv"),
                "created_at": _now(),
                "metadata": (data.get("extra") or {}).get("metadata"),
            }
            state.datasets[row["id"]] = row
            return row
        if path == "/examples/bulk":
            rows = []
            for ex in json.loads(body):
                row = {
                    "id": ex.get("id") or str(uuid.uuid4()),
                    "dataset_id": ex["dataset_id"],
                    "inputs": ex.get("inputs"),
                    "outputs": ex.get("outputs"),
                    "metadata": ex.get("metadata"),
                    "created_at": _now(),
                }
                state.examples.setdefault(row["dataset_id"], []).append(row)
                rows.append(row)
            return rows
        if path == "/sessions":
            data = json.loads(body)
            row = {
                "id": data.get("id") or str(uuid.uuid4()),
                "name": data.get("name"),
                "start_time": data.get("start_time") or _now(),
                "extra": data.get("extra"),
                "reference_dataset_id": data.get("reference_dataset_id"),
                "tenant_id": str(uuid.UUID(int=0)),
            }
            state.sessions[row["id"]] = row
            return row
        return {}

    def log_message(self, *args: Any) -> None:
        pass
