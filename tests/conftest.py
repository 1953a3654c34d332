"""Test session setup shared by unit and integration tests."""

from __future__ import annotations

import os

# Strict msgpack must be on before langgraph's serializer is imported: every state value
# a guard writes has to survive it unchanged.
os.environ.setdefault("LANGGRAPH_STRICT_MSGPACK", "true")
os.environ.setdefault("LANGSMITH_TRACING", "false")
os.environ.setdefault("LANGSMITH_TEST_TRACKING", "false")
