"""Permission at the boundary: what a principal may not see never leaves the tool.

``resolve_evidence`` removes evidence the caller may not see from its verdict, but a tool
result carries that evidence further: the ``ToolMessage`` (its content and its artifact)
goes into the message channel, every checkpoint, the next model prompt, the trace, the run
ledger and, when long, the context archive. :func:`withhold` filters a tool result before
any of that: it removes the artifact items the principal may not see and every line of the
content that names one of them (its id, its text, its value). :func:`permission_filtered`
wraps a tool so that its result is filtered inside the tool's own run, before LangChain's
callbacks (and so LangSmith) see it.

An item whose access list cannot be read (``allowed=[["legal"]]``) is withheld too (fail
closed): nobody can tell whether the caller may see it. Nothing here names a withheld item.

Example:
    >>> content = "p26: Over 50w needs review.\\nd27: (legal only) 30w."
    >>> artifact = [{"id": "p26", "claim_key": "limit", "value": "50w"},
    ...             {"id": "d27", "claim_key": "limit", "value": "30w", "allowed": ["legal"]}]
    >>> out = withhold(content, artifact, frozenset({"analyst"}))
    >>> out.content, [d["id"] for d in out.artifact], out.withheld
    ('p26: Over 50w needs review.', ['p26'], 1)
    >>> withhold(content, artifact, frozenset({"legal"})).withheld
    0
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agent_guards.core.fields import normalize_text
from agent_guards.evidence_resolve.model import Evidence
from agent_guards.evidence_resolve.policy import fold_typography, normalize_value

__all__ = ["ACL_KEYS", "Withheld", "acl_of", "may_see", "withhold"]

ACL_KEYS: tuple[str, ...] = ("allowed", "allowed_principals", "acl")
"""Where an item's access list is read from (dict keys, then ``Document`` metadata keys)."""

# A value shorter than this is too common to scrub lines by ("1", "no"); ids and texts are not.
_MIN_VALUE_CHARS = 3
_NOTICE = "[withheld: {n} item(s) the caller may not see]"
_THOUSANDS = re.compile(r"(?<=\d)[,_' \u2019\u00a0\u202f](?=\d{3}(?!\d))")


def _form(text: str) -> str:
    """How text is compared with what names a withheld item: case, spacing, typography and
    thousands separators do not matter, as in the resolver ("1,250,000" names 1250000,
    "D27" names d27)."""
    return _THOUSANDS.sub("", normalize_text(fold_typography(text)))


def acl_of(raw: Any) -> Any:
    """The raw access list of an ``Evidence``, a dict or a ``Document`` (None: everyone)."""
    if isinstance(raw, Evidence):
        return raw.allowed
    holder = raw if isinstance(raw, Mapping) else getattr(raw, "metadata", None)
    if isinstance(holder, Mapping):
        for key in ACL_KEYS:
            if holder.get(key) is not None:
                return holder[key]
    return None


def may_see(raw: Any, identities: frozenset[str]) -> bool | None:
    """Whether ``identities`` may see ``raw``; None when its access list is malformed.

    >>> may_see({"id": "a", "acl": ["hr"]}, frozenset({"hr"})), may_see({"id": "a"}, frozenset())
    (True, True)
    >>> may_see({"id": "a", "allowed": [["hr"]]}, frozenset({"hr"})) is None
    True
    """
    allowed = acl_of(raw)
    if allowed is None:
        return True
    names = (allowed,) if isinstance(allowed, str) else allowed
    if isinstance(names, Mapping) or not isinstance(names, Iterable):
        return None
    try:
        listed = tuple(names)
    except Exception:  # an iterable that fails while read is not an access list
        return None
    if not all(isinstance(n, str) and n for n in listed):
        return None
    return not identities.isdisjoint(listed)


@dataclass(frozen=True)
class Withheld:
    """A tool result with what the caller may not see removed."""

    content: Any
    """The content, without the lines that name a withheld item."""
    artifact: Any
    """The artifact, without the withheld items (same shape: a list, or a mapping's list)."""
    withheld: int
    """How many items were removed (never which)."""


def withhold(content: Any, artifact: Any, identities: frozenset[str]) -> Withheld:
    """``content`` and ``artifact`` without the evidence ``identities`` may not see.

    The artifact is a list of evidence dicts, ``Evidence`` or ``Document``s, or a mapping
    with such a list under ``"evidence"``; anything else is returned unchanged. Content
    (a string or a list of content blocks) loses every line naming a withheld item's id,
    text or value (values under three characters excepted), in any case, spacing or
    thousands separators; content that still names one after that is replaced by a notice.

    >>> artifact = [{"id": "x9", "claim_key": "pay", "value": 1250000, "allowed": ["hr"]}]
    >>> withhold("team: 80,000\\nX9 executive pay: 1,250,000", artifact, frozenset()).content
    'team: 80,000'
    """
    items = artifact.get("evidence") if isinstance(artifact, Mapping) else artifact
    if not isinstance(items, (list, tuple)):
        return Withheld(content, artifact, 0)
    kept: list[Any] = []
    secrets: set[str] = set()
    for raw in items:
        if may_see(raw, identities):
            kept.append(raw)
        else:
            secrets.update(_secrets(raw))
    if len(kept) == len(items):
        return Withheld(content, artifact, 0)
    removed = len(items) - len(kept)
    shaped = {**artifact, "evidence": kept} if isinstance(artifact, Mapping) else kept
    return Withheld(_scrub(content, sorted(secrets), removed), shaped, removed)


def _secrets(raw: Any) -> Iterable[str]:
    """The strings that would reveal a withheld item (its id, text lines and value)."""
    if isinstance(raw, Evidence):
        fields: dict[str, Any] = {"id": raw.id, "value": raw.value, "text": raw.text}
    elif isinstance(raw, Mapping):
        fields = {k: raw.get(k) for k in ("id", "value", "text", "claim_value")}
    else:
        meta = getattr(raw, "metadata", None)
        meta = meta if isinstance(meta, Mapping) else {}
        fields = {
            "id": getattr(raw, "id", None) or meta.get("id"),
            "value": meta.get("value"),
            "text": getattr(raw, "page_content", None),
        }
    for name, value in fields.items():
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            continue
        text = str(value).strip()
        if name == "text":
            yield from (_form(line) for line in text.splitlines() if line.strip())
        elif name == "id" and text:
            yield _form(text)
        elif len(text) >= _MIN_VALUE_CHARS:
            yield normalize_value(value)  # one spelling per value, numbers canonical


def _scrub(content: Any, secrets: Sequence[str], removed: int) -> Any:
    if isinstance(content, str):
        return _scrub_text(content, secrets, removed)
    if isinstance(content, list):
        return [_scrub_block(block, secrets, removed) for block in content]
    return _NOTICE.format(n=removed)


def _scrub_block(block: Any, secrets: Sequence[str], removed: int) -> Any:
    if isinstance(block, str):
        return _scrub_text(block, secrets, removed)
    if isinstance(block, Mapping) and isinstance(block.get("text"), str):
        return {**block, "text": _scrub_text(block["text"], secrets, removed)}
    if isinstance(block, Mapping) and block.get("type") == "text":
        return block
    return {"type": "text", "text": _NOTICE.format(n=removed)}


def _scrub_text(text: str, secrets: Sequence[str], removed: int) -> str:
    lines = [line for line in text.splitlines() if not any(s in _form(line) for s in secrets)]
    out = "\n".join(lines)
    if any(s in _form(out) for s in secrets):  # a secret spanning lines: say nothing at all
        return _NOTICE.format(n=removed)
    return out


def identities_of(config: Mapping[str, Any] | None) -> frozenset[str]:
    """The run's principal (``configurable["principal"]``: a string or several), as ids.

    Anything that is not a string or an iterable of strings is nobody (fail closed).

    >>> sorted(identities_of({"configurable": {"principal": ["u1", "finance"]}}))
    ['finance', 'u1']
    >>> identities_of({"configurable": {"principal": 7}}), identities_of(None)
    (frozenset(), frozenset())
    """
    configurable = (config or {}).get("configurable") or {}
    principal = configurable.get("principal") if isinstance(configurable, Mapping) else None
    if isinstance(principal, str):
        return frozenset([principal]) if principal else frozenset()
    if isinstance(principal, Mapping) or not isinstance(principal, Iterable):
        return frozenset()
    try:
        return frozenset(p for p in principal if isinstance(p, str) and p)
    except Exception:  # an iterable that fails while read names nobody
        return frozenset()
