"""Getting evidence into state: from tool results, accumulated across steps (pure)."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, fields, replace
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from agent_guards.core.decision import GuardDecision, Verdict
from agent_guards.core.errors import InvalidInputError
from agent_guards.core.fields import named
from agent_guards.core.signatures import call_signature, safe_str
from agent_guards.evidence_resolve.boundary import ACL_KEYS, may_see
from agent_guards.evidence_resolve.core import coerce_evidence
from agent_guards.evidence_resolve.model import Evidence

__all__ = [
    "ARTIFACT_GUARD",
    "ArtifactEvidence",
    "artifact_evidence",
    "evidence_from_messages",
    "evidence_read_again",
    "merge_evidence",
    "superseding",
]

ARTIFACT_GUARD = "evidence_artifact"
"""The guard named by the decision recorded for an artifact item left out as malformed."""


_LOG = logging.getLogger("agent_guards.evidence_resolve")
# what an artifact dict is read by: the fields, and every spelling of the access list
_READ_KEYS = frozenset(f.name for f in fields(Evidence)) | frozenset(ACL_KEYS)


def _id(item: Any) -> str | None:
    """The item's id (a dict's ``id``, an attribute, a Document's ``metadata["id"]``)."""
    if isinstance(item, Mapping):
        raw = item.get("id")
    else:
        raw = getattr(item, "id", None)
        meta = getattr(item, "metadata", None)
        if not raw and isinstance(meta, Mapping):
            raw = meta.get("id")
    if raw is None or raw == "" or isinstance(raw, (bool, Mapping, list, tuple, set)):
        return None
    return safe_str(raw)


def _listed(value: Any) -> Iterable[Any]:
    if value is None:
        return ()
    if isinstance(value, (list, tuple)):
        return value
    one = isinstance(value, (str, bytes, Mapping)) or hasattr(value, "id")
    return (value,) if one or not isinstance(value, Iterable) else list(value)


def merge_evidence(current: Iterable[Any] | None, update: Iterable[Any] | None) -> list[Any]:
    """Reducer for an evidence channel: add items, an item with a known id replaces it.

    Use it when several steps retrieve evidence:
    ``evidence: Annotated[list[Evidence], merge_evidence]``. Order is first-seen. A reducer
    that raises leaves its write pending on the checkpoint, so every later read of the
    thread fails: an item with no readable id (a junk value from ``update_state``) is
    dropped instead, and logged to the ``agent_guards.evidence_resolve`` logger naming its
    position and the field.

    >>> merge_evidence([Evidence("a", "k", 1)], [Evidence("b", "k", 2), Evidence("a", "k", 3)])
    [Evidence(id='a', claim_key='k', value=3, ...), Evidence(id='b', claim_key='k', value=2, ...)]
    >>> [e.id for e in merge_evidence([Evidence("a", "k", 1)], [{"value": 2}, 7])]
    ['a']
    """
    items: dict[str, Any] = {}
    for where, part in (("current value", current), ("write", update)):
        for position, item in enumerate(_listed(part)):
            key = _id(item)
            if key is None:
                _LOG.warning(
                    "evidence %s #%d dropped: field 'id': missing or not an id (%s)",
                    where,
                    position,
                    type(item).__name__,
                )
                continue
            items[key] = item
    return list(items.values())


@dataclass(frozen=True)
class ArtifactEvidence:
    """The evidence tool results carried, and the items left out as malformed."""

    evidence: list[Evidence]
    """The items read, in message order."""
    rejected: list[GuardDecision]
    """One ``invalid_input`` decision per item left out, naming it (its id, else its place
    ``<tool_call_id>.artifact[<n>]``) and the field."""


def artifact_evidence(
    messages: Iterable[BaseMessage], *, visible_to: Iterable[str] | None = None
) -> ArtifactEvidence:
    """Evidence that tools returned as their artifact, in message order, and what was left out.

    A tool with ``response_format="content_and_artifact"`` returns ``(text, items)``, where
    ``items`` is a list of evidence dicts, ``Evidence`` or LangChain ``Document``s (or a
    mapping with an ``"evidence"`` list). Other tool results are ignored. A dict's keys that
    are no ``Evidence`` field (a retriever's ``url`` or ``title``) are ignored, as a
    ``Document``'s other metadata is (``resolve_evidence`` and ``Evidence.from_dict``, given
    a dict directly, reject them by name). An item that is no evidence (no id, a value that is no
    scalar, a string) is left out with an ``invalid_input`` decision in ``rejected``: the tool
    has already run, so one bad item must not cost the others or the run.

    With ``visible_to`` (the caller's identities), an item they may not see, or whose access
    list is malformed, is skipped before anything else of it is read: it is never validated,
    so no decision names it.

    >>> from langchain_core.messages import ToolMessage
    >>> msg = ToolMessage("2 docs", tool_call_id="c1", artifact=[
    ...     {"id": "d1", "claim_key": "limit", "value": "50w", "url": "https://wiki/d1"},
    ...     {"claim_key": "limit", "value": "40w"},
    ...     {"id": "d3", "claim_key": "limit", "value": "30w", "allowed": ["legal"]}])
    >>> read = artifact_evidence([msg], visible_to={"analyst"})
    >>> [e.id for e in read.evidence], [d.detail for d in read.rejected]
    (['d1'], ["item 'c1.artifact[1]' field 'id': missing required key 'id'"])
    """
    if not isinstance(messages, Iterable) or isinstance(messages, (str, bytes, Mapping)):
        raise InvalidInputError(
            f"expected a list of messages, got {type(messages).__name__}", field="messages"
        )
    who = None if visible_to is None else frozenset(visible_to)
    found: list[Evidence] = []
    rejected: list[GuardDecision] = []
    for i, message in enumerate(messages):
        if not isinstance(message, ToolMessage):
            continue
        artifact = message.artifact
        if isinstance(artifact, Mapping):
            artifact = artifact.get("evidence")
        if not isinstance(artifact, (list, tuple)):
            continue
        source = message.tool_call_id or f"messages[{i}]"
        for j, item in enumerate(artifact):
            if who is not None and not _visible(item, who):
                continue
            try:
                found.append(_read_item(item, f"{source}.artifact[{j}]"))
            except InvalidInputError as err:
                rejected.append(_left_out(err))
    return ArtifactEvidence(found, rejected)


def _visible(raw: Any, who: frozenset[str]) -> bool:
    """Whether ``who`` may see ``raw``; an access list that cannot be read is not (fail closed)."""
    try:
        return may_see(raw, who) is True
    except Exception:  # an item whose metadata fails while read tells no one who may see it
        return False


def _read_item(raw: Any, place: str) -> Evidence:
    """``raw`` as evidence; any failure to read it is an error naming it (else ``place``)."""
    try:
        if isinstance(raw, Mapping):
            raw = {k: v for k, v in raw.items() if k in _READ_KEYS}
        item: Evidence = named(coerce_evidence, raw, place, field="items")
        return item
    except InvalidInputError:
        raise
    except (TypeError, ValueError, OverflowError, RecursionError, AttributeError) as err:
        raise InvalidInputError(
            f"cannot be read: {type(err).__name__}", item=place, field="items"
        ) from None


def _left_out(err: InvalidInputError) -> GuardDecision:
    """The decision for an artifact item left out (the shape of a node's ``invalid_input``)."""
    return GuardDecision(
        guard=ARTIFACT_GUARD,
        verdict=Verdict.CONTINUE,
        reason="invalid_input",
        detail=str(err),
        dropped_ids=(err.item,) if err.item else (),
        data={"field": err.field, "item": err.item, "problem": err.problem},
    )


def evidence_from_messages(
    messages: Iterable[BaseMessage], *, visible_to: Iterable[str] | None = None
) -> list[Evidence]:
    """Evidence that tools returned as their artifact, in message order.

    A tool with ``response_format="content_and_artifact"`` returns ``(text, items)``, where
    ``items`` is a list of evidence dicts, ``Evidence`` or LangChain ``Document``s (or a
    mapping with an ``"evidence"`` list). Other tool results are ignored. Read as
    :func:`artifact_evidence` reads them: an item left out as malformed is logged to the
    ``agent_guards.evidence_resolve`` logger, naming it and the field.

    >>> from langchain_core.messages import ToolMessage
    >>> msg = ToolMessage("1 doc", tool_call_id="c1",
    ...                   artifact=[{"id": "d1", "claim_key": "limit", "value": "50w"}, 7])
    >>> [e.id for e in evidence_from_messages([msg])]
    ['d1']
    """
    read = artifact_evidence(messages, visible_to=visible_to)
    for decision in read.rejected:
        _LOG.warning("evidence artifact item left out: %s", decision.detail)
    return read.evidence


def evidence_read_again(messages: Sequence[BaseMessage], sources: Iterable[str]) -> list[Evidence]:
    """The evidence of the ``sources`` tools' results in ``messages``, where a call made
    again with the same arguments supersedes what its earlier run brought back under the
    same claim: a read done again reads the world as it is now (a write may have come in
    between), so two reads of one source are neither blended nor a conflict to ask about.
    Items of one result never supersede each other.

    >>> from langchain_core.messages import AIMessage, ToolMessage
    >>> def read(n, value):
    ...     call = AIMessage("", tool_calls=[{"name": "balance", "args": {}, "id": f"c{n}"}])
    ...     item = {"id": f"read-{n}", "claim_key": "balance", "value": value}
    ...     return [call, ToolMessage(str(value), tool_call_id=f"c{n}", name="balance",
    ...                               artifact=[item])]
    >>> items = evidence_read_again([*read(1, 100), *read(2, 250)], ["balance"])
    >>> [(e.id, e.supersedes) for e in items]
    [('read-1', ()), ('read-2', ('read-1',))]
    """
    names = frozenset(sources)
    calls = {
        str(call.get("id")): call_signature(call["name"], call.get("args"))
        for m in messages
        if isinstance(m, AIMessage)
        for call in m.tool_calls
    }
    seen: dict[tuple[str, str], list[str]] = {}  # (call signature, claim) -> ids read
    found: list[Evidence] = []
    for m in messages:
        if not isinstance(m, ToolMessage) or m.name not in names:
            continue
        items = evidence_from_messages([m])
        signature = calls.get(str(m.tool_call_id))
        if signature is not None:
            items = [superseding(e, seen.get((signature, e.claim_key), ())) for e in items]
            for e in items:
                seen.setdefault((signature, e.claim_key), []).append(e.id)
        found.extend(items)
    return found


def superseding(item: Evidence, ids: Iterable[str]) -> Evidence:
    """``item``, superseding ``ids`` (but itself) as well as what it already supersedes."""
    added = tuple(dict.fromkeys(i for i in ids if i != item.id and i not in item.supersedes))
    return replace(item, supersedes=(*item.supersedes, *added)) if added else item
