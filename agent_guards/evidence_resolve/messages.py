"""Getting evidence into state: from tool results, accumulated across steps (pure)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from langchain_core.messages import BaseMessage, ToolMessage

from agent_guards.evidence_resolve.core import coerce_evidence
from agent_guards.evidence_resolve.model import Evidence

__all__ = ["evidence_from_messages", "merge_evidence"]


def _id(item: Any) -> str:
    return str(
        item["id"]
        if isinstance(item, Mapping)
        else getattr(item, "id", None) or item.metadata["id"]
    )


def merge_evidence(current: Iterable[Any] | None, update: Iterable[Any] | None) -> list[Any]:
    """Reducer for an evidence channel: add items, an item with a known id replaces it.

    Use it when several steps retrieve evidence:
    ``evidence: Annotated[list[Evidence], merge_evidence]``. Order is first-seen.

    >>> merge_evidence([Evidence("a", "k", 1)], [Evidence("b", "k", 2), Evidence("a", "k", 3)])
    [Evidence(id='a', claim_key='k', value=3, ...), Evidence(id='b', claim_key='k', value=2, ...)]
    """
    items: dict[str, Any] = {}
    for item in (*(current or ()), *(update or ())):
        items[_id(item)] = item
    return list(items.values())


def evidence_from_messages(messages: Iterable[BaseMessage]) -> list[Evidence]:
    """Evidence that tools returned as their artifact, in message order.

    A tool with ``response_format="content_and_artifact"`` returns ``(text, items)``, where
    ``items`` is a list of evidence dicts, ``Evidence`` or LangChain ``Document``s (or a
    mapping with an ``"evidence"`` list). Other tool results are ignored.

    >>> from langchain_core.messages import ToolMessage
    >>> msg = ToolMessage("1 doc", tool_call_id="c1",
    ...                   artifact=[{"id": "d1", "claim_key": "limit", "value": "50w"}])
    >>> [e.id for e in evidence_from_messages([msg])]
    ['d1']
    """
    found: list[Evidence] = []
    for message in messages:
        if not isinstance(message, ToolMessage):
            continue
        artifact = message.artifact
        if isinstance(artifact, Mapping):
            artifact = artifact.get("evidence")
        if isinstance(artifact, (list, tuple)):
            found.extend(coerce_evidence(item) for item in artifact)
    return found
