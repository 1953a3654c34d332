"""Test session setup shared by unit and integration tests."""

from __future__ import annotations

import os

# Strict msgpack must be on before langgraph's serializer is imported: every state value
# a guard writes has to survive it unchanged.
os.environ.setdefault("LANGGRAPH_STRICT_MSGPACK", "true")
os.environ.setdefault("LANGSMITH_TRACING", "false")
os.environ.setdefault("LANGSMITH_TEST_TRACKING", "false")

from collections.abc import Iterator

import pytest

from tests._postgres import throwaway_postgres


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """URL of a throwaway PostgreSQL server on 127.0.0.1, started once per session."""
    with throwaway_postgres() as url:
        yield url
