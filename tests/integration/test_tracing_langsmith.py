"""Guard decisions reach LangSmith: the real exporter, pointed at a fake endpoint on 127.0.0.1."""

from __future__ import annotations

import gzip
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph

from agent_guards import LoopPolicy, LoopState, create_retry_router
from agent_guards.core import GuardDecision, GuardState, Verdict
from agent_guards.graph import stamp


class _Capture(BaseHTTPRequestHandler):
    bodies: list[bytes]

    def _body(self) -> bytes:
        raw = self.rfile.read(int(self.headers.get("content-length") or 0))
        encoding = (self.headers.get("content-encoding") or "").lower()
        if encoding == "gzip":
            raw = gzip.decompress(raw)
        elif encoding == "zstd":
            import zstandard

            raw = zstandard.ZstdDecompressor().decompressobj().decompress(raw)
        return raw

    def _reply(self, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        self._reply({"version": "0.0-fake", "batch_ingest_config": {}})

    def do_POST(self) -> None:
        self.server.bodies.append(self._body())  # type: ignore[attr-defined]
        self._reply({})

    do_PATCH = do_POST

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def fake_langsmith(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[bytes]]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Capture)
    server.bodies = []  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setenv("LANGSMITH_TRACING", "true")
    monkeypatch.setenv("LANGSMITH_API_KEY", "fake-key")
    monkeypatch.setenv("LANGSMITH_ENDPOINT", f"http://127.0.0.1:{server.server_address[1]}")
    monkeypatch.setenv("LANGSMITH_PROJECT", "agent-guards-tests")
    try:
        yield server.bodies  # type: ignore[attr-defined]
    finally:
        server.shutdown()
        server.server_close()


def test_decision_is_posted_as_run_metadata_and_tag(fake_langsmith: list[bytes]) -> None:
    from langchain_core.tracers.langchain import wait_for_all_tracers
    from langsmith import Client

    decision = GuardDecision(
        guard="loop_check", verdict=Verdict.STOP, reason="repeated_call", selected_ids=["c1"]
    )

    def guard(state: GuardState, config: RunnableConfig) -> dict[str, Any]:
        return {"guard_log": [stamp(decision, config)]}

    builder = StateGraph(GuardState)
    builder.add_node("loop_check", guard)
    builder.add_edge(START, "loop_check")
    builder.add_edge("loop_check", END)
    graph = builder.compile()

    client = Client()
    from langchain_core.tracers.langchain import LangChainTracer

    tracer = LangChainTracer(client=client, project_name="agent-guards-tests")
    out = graph.invoke({}, {"callbacks": [tracer]})
    assert out["guard_log"][0].verdict is Verdict.STOP
    wait_for_all_tracers()
    client.flush()

    payload = b"\n".join(fake_langsmith)
    assert b"guard:loop_check:stop" in payload
    assert b"repeated_call" in payload
    assert b"guard_decisions" in payload


@pytest.mark.parametrize("loop", [None, LoopPolicy()])
def test_a_healthy_turn_s_route_decisions_reach_the_trace(
    fake_langsmith: list[bytes], loop: LoopPolicy | None
) -> None:
    """The route's decisions on a healthy turn, which only the trace keeps, are posted with
    the traced run (``trace_only``: an untraced run makes no copy of them)."""
    from langchain_core.tracers.langchain import LangChainTracer, wait_for_all_tracers
    from langsmith import Client

    router = create_retry_router(loop_policy=loop)
    routes: list[str] = []

    def tools(state: LoopState, config: RunnableConfig) -> dict[str, Any]:
        routes.append(router.invoke(state, config))
        return {}

    graph = StateGraph(LoopState).add_node("tools", tools)
    graph = graph.add_edge(START, "tools").add_edge("tools", END).compile()
    call = {"name": "search", "args": {"q": "x"}, "id": "c1"}
    turn = {"messages": [AIMessage("", tool_calls=[call]), ToolMessage("found", tool_call_id="c1")]}

    client = Client()
    graph.invoke(turn, {"callbacks": [LangChainTracer(client=client)]})
    wait_for_all_tracers()
    client.flush()

    assert routes == ["continue"]
    payload = b"\n".join(fake_langsmith)
    assert b"guard:retry_router:continue" in payload and b"no_failure" in payload
    assert (b"no_loop" in payload) is (loop is not None)


def test_no_trace_no_error() -> None:
    """Outside a traced run, stamping is a no-op for tracing."""
    decision = GuardDecision(guard="g", verdict="nudge", reason="r")
    stamped = stamp(decision, {"metadata": {"langgraph_step": 3}})
    assert stamped.step == 3
    assert stamped.at is not None
    assert stamped == decision.with_context(step=3)
