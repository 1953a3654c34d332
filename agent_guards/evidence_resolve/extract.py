"""Claims from text: retrieved ``Document``s to :class:`Evidence` with a chat model.

Retrievers return chunks of text; :func:`resolve_evidence` needs claims (``claim_key``,
``value``). :class:`ClaimExtractor` asks any chat model with structured output for the value
each chunk states for the claims you name, many chunks per call (bounded by a token
budget), and turns the answers into ``Evidence``. The design rule holds: **the model only
extracts**. It says what a chunk states (value, entity, basis, a date the text gives); where
the chunk comes from (source type, dates, version, status, who may see it) is read from the
document's metadata, never from the model, and the resolver still decides.

* **Batched**: chunks are packed into calls of at most ``max_batch_tokens`` of chunk text
  (and ``max_batch_docs`` chunks); :meth:`ClaimExtractor.cost` says what a set of documents
  costs before you spend it.
* **Cached** by document id and content hash (plus the claims asked and the prompt) in a
  LangGraph ``BaseStore`` (the node uses the graph's store) or an explicit ``cache=``
  mapping, never on the extractor itself, so a replay reads the same claims back.
* **Failures are model failures**: a call that raises (timeout, rate limit, a reply that does
  not parse) raises out of :meth:`~ClaimExtractor.extract` unchanged, for the graph's retry
  policy or ``retry_router`` to handle; nothing of a failed call is cached.
* **Validated** before arbitration: a claim naming a chunk or a claim key that was not asked
  for, an empty value or a date that does not parse is rejected (``Extraction.rejected``).

Example:
    >>> from langchain_core.documents import Document
    >>> from langchain_core.runnables import RunnableLambda
    >>> class StubModel:  # stands in for a chat model (offline)
    ...     def with_structured_output(self, schema):
    ...         claim = {"doc": "p26", "claim_key": "approval_limit", "value": "50w",
    ...                  "effective_at": "2026-01"}
    ...         return RunnableLambda(lambda messages: schema(claims=[claim]))
    >>> doc = Document("From January 2026, contracts over 50w need review.", id="p26",
    ...                metadata={"source_type": "official"})
    >>> cache = {}
    >>> out = ClaimExtractor(StubModel(), cache=cache).extract([doc], claims=["approval_limit"])
    >>> [(e.id, e.value, e.effective_at, e.source_type) for e in out.evidence], out.calls
    ([('p26', '50w', '2026-01', 'official')], 1)
    >>> ClaimExtractor(StubModel(), cache=cache).extract([doc], claims=["approval_limit"]).cached
    1
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from langchain_core.messages.utils import count_tokens_approximately
from pydantic import BaseModel, Field

from agent_guards.core.errors import InvalidInputError
from agent_guards.core.fields import normalize_text
from agent_guards.evidence_resolve.model import Evidence
from agent_guards.evidence_resolve.timeline import canonical_date

__all__ = ["ClaimExtractor", "ExtractedClaim", "ExtractedClaims", "Extraction"]

NAMESPACE: tuple[str, ...] = ("agent_guards", "evidence_claims")
"""Default store namespace of the extraction cache."""
_NO_VALUE = frozenset({"", "unknown", "none", "n/a", "na", "not stated", "not mentioned", "null"})
_MAX_VALUE = 200

_PROMPT = (
    "You extract claims from retrieved text chunks. For each chunk and each claim listed, "
    "report the value the chunk itself states, copied as briefly as possible from its text. "
    "Report nothing for a claim the chunk does not state; never guess or use outside "
    "knowledge. If the chunk gives values for several entities (people, products, places "
    "with one name), report one claim per entity and name it. Set basis only when the chunk "
    "says which definition or measurement basis the value is stated in, and effective_at "
    "only when the chunk says when the value takes (or took) effect, written YYYY, YYYY-MM "
    "or YYYY-MM-DD as precisely as the text says and no more."
)


class ExtractedClaim(BaseModel):
    """One claim the model found in one chunk (the structured-output schema)."""

    doc: str = Field(description="the id of the chunk, exactly as given")
    claim_key: str = Field(description="one of the claim keys asked for, exactly as given")
    value: str = Field(description="the value the chunk states, brief, copied from the text")
    entity: str | None = Field(default=None, description="the entity the value is about")
    basis: str | None = Field(default=None, description="the basis the value is stated in")
    effective_at: str | None = Field(
        default=None, description="when the value takes effect: YYYY, YYYY-MM or YYYY-MM-DD"
    )


class ExtractedClaims(BaseModel):
    """What one extraction call returns."""

    claims: list[ExtractedClaim] = Field(default_factory=list)


@dataclass(frozen=True)
class Extraction:
    """What :meth:`ClaimExtractor.extract` made of the documents.

    Example:
        >>> Extraction(documents=1, empty=("d1",), calls=1).summary()
        {'documents': 1, 'evidence': 0, 'calls': 1, 'cached': 0, 'empty': ['d1'], 'rejected': {}}
    """

    documents: int = 0
    """Documents given to the extractor."""

    evidence: tuple[Evidence, ...] = ()
    """The claims as evidence, sorted by id (a chunk with several claims: ``id#1``, ...)."""
    empty: tuple[str, ...] = ()
    """Documents that state none of the claims asked for."""
    rejected: dict[str, str] = field(default_factory=dict)
    """``"<doc id>/<claim key>"`` (or the model's unknown id) -> why it was not used."""
    calls: int = 0
    """Model calls made (cached documents cost none)."""
    cached: int = 0
    """Documents answered from the cache."""

    def summary(self) -> dict[str, Any]:
        """A JSON-ready summary (the node puts it in ``decision.data["extraction"]``)."""
        return {
            "documents": self.documents,
            "evidence": len(self.evidence),
            "calls": self.calls,
            "cached": self.cached,
            "empty": list(self.empty),
            "rejected": dict(sorted(self.rejected.items())),
        }


def _doc_id(doc: Any) -> str:
    metadata = getattr(doc, "metadata", None)
    if not isinstance(metadata, Mapping) or not isinstance(getattr(doc, "page_content", None), str):
        raise InvalidInputError(f"expected a Document, got {type(doc).__name__}", field="items")
    found = getattr(doc, "id", None) or metadata.get("id") or metadata.get("doc_id")
    if not isinstance(found, str) or not found:
        raise InvalidInputError("the document has no id (doc.id or metadata 'id')", field="id")
    return found


def _claims_spec(claims: Mapping[str, str] | Iterable[str] | None) -> dict[str, str]:
    if claims is None:
        return {}
    if isinstance(claims, str):
        claims = [claims]
    pairs = claims.items() if isinstance(claims, Mapping) else ((c, c) for c in claims)
    spec: dict[str, str] = {}
    for key, description in pairs:
        if not isinstance(key, str) or not key.strip() or not isinstance(description, str):
            raise ValueError(f"claims must name non-empty claim keys, got {key!r}")
        spec[key] = description
    return spec


class ClaimExtractor:
    """Extract claims from ``Document``s with a chat model; ``resolve_evidence`` decides.

    Args:
        model: Any chat model with ``with_structured_output`` (``BaseChatModel``).
        claims: The claims to look for: claim keys, or ``{claim_key: description}``. A
            call's ``claims=`` (the node passes the query's ``claim_key``) overrides them.
        store: A ``BaseStore`` for the cache (the node passes the graph's store).
        cache: A mutable mapping for the cache, when there is no store. Without either,
            every call asks the model again, and a replay may see other claims.
        namespace: Store namespace of the cache.
        max_batch_tokens: Chunk text per call, in approximate tokens (a longer chunk goes
            alone). The instructions (~200 tokens) come on top of it.
        max_batch_docs: Chunks per call.
        prompt: The instructions (part of the cache key).
        model_id: Names the model in the cache key (default: its ``model_name`` / ``model``
            attribute, else its class name): another model extracts again.

    Raises:
        TypeError: ``model`` has no ``with_structured_output``.
        ValueError: A limit is below 1 or a claim key is empty.

    Example:
        >>> from agent_guards.testing import ScriptedChatModel
        >>> from langchain_core.documents import Document
        >>> docs = [Document("x" * 2000, id=f"d{i}") for i in range(10)]  # ~500 tokens each
        >>> ClaimExtractor(ScriptedChatModel(script=[])).cost(docs)
        {'documents': 10, 'calls': 1, 'input_tokens': 5242, 'per_document': 524.2}
        >>> ClaimExtractor(ScriptedChatModel(script=[]), max_batch_docs=1).cost(docs)
        {'documents': 10, 'calls': 10, 'input_tokens': 6820, 'per_document': 682.0}
    """

    def __init__(
        self,
        model: Any,
        *,
        claims: Mapping[str, str] | Iterable[str] | None = None,
        store: Any = None,
        cache: MutableMapping[str, Any] | None = None,
        namespace: Sequence[str] = NAMESPACE,
        max_batch_tokens: int = 6000,
        max_batch_docs: int = 20,
        prompt: str = _PROMPT,
        model_id: str | None = None,
    ) -> None:
        if not hasattr(model, "with_structured_output"):
            raise TypeError(f"model must support with_structured_output, got {model!r}")
        for name, limit in (
            ("max_batch_tokens", max_batch_tokens),
            ("max_batch_docs", max_batch_docs),
        ):
            if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
                raise ValueError(f"{name} must be an int >= 1, got {limit!r}")
        if not isinstance(prompt, str) or not prompt.strip():
            raise ValueError(f"prompt must be a non-empty string, got {prompt!r}")
        self._chain = model.with_structured_output(ExtractedClaims)
        self.claims = _claims_spec(claims)
        self.store = store
        self.cache = cache
        self.namespace = tuple(namespace)
        self.max_batch_tokens = max_batch_tokens
        self.max_batch_docs = max_batch_docs
        self.prompt = prompt
        self.model_id = model_id or str(
            getattr(model, "model_name", None)
            or getattr(model, "model", None)
            or type(model).__name__
        )

    # -- planning ----------------------------------------------------------------------------
    def _chunk(self, doc: Any) -> str:
        return f'<chunk id="{_doc_id(doc)}">\n{doc.page_content}\n</chunk>'

    def _tokens(self, text: str) -> int:
        return count_tokens_approximately([HumanMessage(text)])

    def batches(self, docs: Iterable[Any]) -> list[list[Any]]:
        """The documents grouped into calls, in id order (so retrieval order changes nothing)."""
        out: list[list[Any]] = []
        size = 0
        for doc in sorted(docs, key=_doc_id):
            tokens = self._tokens(self._chunk(doc))
            full = out and (
                len(out[-1]) >= self.max_batch_docs or size + tokens > self.max_batch_tokens
            )
            if not out or full:
                out.append([])
                size = 0
            out[-1].append(doc)
            size += tokens
        return out

    def _messages(self, batch: Sequence[Any], spec: Mapping[str, str]) -> list[BaseMessage]:
        wanted = "\n".join(
            f"- {key}" + (f": {text}" if text and text != key else "") for key, text in spec.items()
        )
        chunks = "\n\n".join(self._chunk(doc) for doc in batch)
        return [SystemMessage(f"{self.prompt}\n\nClaims:\n{wanted}"), HumanMessage(chunks)]

    def cost(self, docs: Iterable[Any], claims: Any = None) -> dict[str, Any]:
        """Calls and approximate input tokens for ``docs`` (none of them cached).

        Output adds roughly 30-60 tokens per claim found.
        """
        docs = list(docs)
        spec = _claims_spec(claims) or self.claims or {"claim": "claim"}
        batches = self.batches(docs)
        tokens = sum(count_tokens_approximately(self._messages(b, spec)) for b in batches)
        per = round(tokens / len(docs), 1) if docs else 0.0
        return {
            "documents": len(docs),
            "calls": len(batches),
            "input_tokens": tokens,
            "per_document": per,
        }

    # -- the cache -----------------------------------------------------------------------------
    def _key(self, doc: Any, spec: Mapping[str, str]) -> str:
        content = hashlib.sha256(doc.page_content.encode("utf-8")).hexdigest()[:16]
        asked = json.dumps([sorted(spec.items()), self.prompt, self.model_id], ensure_ascii=False)
        return f"{_doc_id(doc)}|{content}|{hashlib.sha256(asked.encode('utf-8')).hexdigest()[:12]}"

    def _cached(self, store: Any, key: str) -> list[dict[str, Any]] | None:
        if store is not None:
            item = store.get(self.namespace, key)
            value = getattr(item, "value", None) if item is not None else None
        else:
            value = self.cache.get(key) if self.cache is not None else None
        return list(value["claims"]) if isinstance(value, Mapping) and "claims" in value else None

    def _remember(self, store: Any, key: str, claims: list[dict[str, Any]]) -> None:
        if store is not None:
            store.put(self.namespace, key, {"claims": claims})
        elif self.cache is not None:
            self.cache[key] = {"claims": claims}

    async def _acached(self, store: Any, key: str) -> list[dict[str, Any]] | None:
        if store is None or not hasattr(store, "aget"):
            return self._cached(store, key)
        item = await store.aget(self.namespace, key)
        value = getattr(item, "value", None) if item is not None else None
        return list(value["claims"]) if isinstance(value, Mapping) and "claims" in value else None

    async def _aremember(self, store: Any, key: str, claims: list[dict[str, Any]]) -> None:
        if store is None or not hasattr(store, "aput"):
            self._remember(store, key, claims)
        else:
            await store.aput(self.namespace, key, {"claims": claims})

    # -- extraction ------------------------------------------------------------------------
    def _plan(
        self, docs: Iterable[Any], claims: Any
    ) -> tuple[dict[str, str], list[Any], dict[str, str]]:
        """The claims asked, the documents, and each document's cache key."""
        spec = _claims_spec(claims) if claims is not None else dict(self.claims)
        if claims is not None:
            spec = {k: self.claims.get(k, v) for k, v in spec.items()}
        if not spec:
            raise InvalidInputError(
                "no claim keys to extract: set the query's claim_key or ClaimExtractor(claims=...)",
                field="claim_key",
            )
        docs = list(docs)
        keys: dict[str, str] = {}
        for doc in docs:
            doc_id = _doc_id(doc)
            if doc_id in keys:
                raise InvalidInputError("duplicate id", item=doc_id, field="id")
            keys[doc_id] = self._key(doc, spec)
        return spec, docs, keys

    def extract(
        self, docs: Iterable[Any], *, claims: Any = None, store: Any = None, config: Any = None
    ) -> Extraction:
        """Claims from ``docs``: cached ones from the cache, the rest from batched calls.

        Raises:
            InvalidInputError: A document has no id, two share one, or no claim key is known.
            Exception: Whatever the model raises (nothing of a failed call is cached).
        """
        store = store if store is not None else self.store
        spec, docs, keys = self._plan(docs, claims)
        found = {i: c for i, k in keys.items() if (c := self._cached(store, k)) is not None}
        batches = self.batches(d for d in docs if _doc_id(d) not in found)
        prompts = [self._messages(b, spec) for b in batches]
        replies = self._chain.batch(prompts, config, return_exceptions=True) if prompts else []
        fresh, failure = _parse(batches, replies)
        for doc_id, raw in fresh.items():
            self._remember(store, keys[doc_id], raw)
        if failure is not None:
            raise failure
        return self._assemble(docs, spec, {**found, **fresh}, calls=len(batches), cached=len(found))

    async def aextract(
        self, docs: Iterable[Any], *, claims: Any = None, store: Any = None, config: Any = None
    ) -> Extraction:
        """:meth:`extract` with ``abatch`` and the store's async API."""
        store = store if store is not None else self.store
        spec, docs, keys = self._plan(docs, claims)
        found = {}
        for doc_id, key in keys.items():
            raw = await self._acached(store, key)
            if raw is not None:
                found[doc_id] = raw
        batches = self.batches(d for d in docs if _doc_id(d) not in found)
        prompts = [self._messages(b, spec) for b in batches]
        replies = (
            await self._chain.abatch(prompts, config, return_exceptions=True) if prompts else []
        )
        fresh, failure = _parse(batches, replies)
        for doc_id, raw in fresh.items():
            await self._aremember(store, keys[doc_id], raw)
        if failure is not None:
            raise failure
        return self._assemble(docs, spec, {**found, **fresh}, calls=len(batches), cached=len(found))

    def _assemble(
        self,
        docs: list[Any],
        spec: Mapping[str, str],
        raw: Mapping[str, list[dict[str, Any]]],
        *,
        calls: int,
        cached: int,
    ) -> Extraction:
        evidence: list[Evidence] = []
        rejected: dict[str, str] = {}
        empty: list[str] = []
        split: dict[str, tuple[str, ...]] = {}  # a document id -> its claims' ids (doc#1, ...)
        for doc in docs:
            made = _evidence(doc, raw.get(_doc_id(doc), []), spec, rejected)
            evidence.extend(made)
            if not made:
                empty.append(_doc_id(doc))
            elif [e.id for e in made] != [_doc_id(doc)]:
                split[_doc_id(doc)] = tuple(e.id for e in made)
        return Extraction(
            documents=len(docs),
            evidence=tuple(sorted(_relinked(evidence, split), key=lambda e: e.id)),
            empty=tuple(sorted(empty)),
            rejected=rejected,
            calls=calls,
            cached=cached,
        )


def _parse(
    batches: list[list[Any]], replies: list[Any]
) -> tuple[dict[str, list[dict[str, Any]]], BaseException | None]:
    """Each answered document's raw claims, and the first failed call (if any)."""
    out: dict[str, list[dict[str, Any]]] = {}
    failure: BaseException | None = None
    for batch, reply in zip(batches, replies, strict=True):
        if isinstance(reply, BaseException):
            failure = failure or reply
            continue
        try:
            parsed = (
                reply
                if isinstance(reply, ExtractedClaims)
                else ExtractedClaims.model_validate(reply)
            )
        except ValueError as err:  # a reply that is not the schema: a model failure
            failure = failure or err
            continue
        ids = [_doc_id(d) for d in batch]
        per: dict[str, list[dict[str, Any]]] = {i: [] for i in ids}
        for claim in parsed.claims:  # a claim naming no chunk of the call stays with the first
            per[claim.doc if claim.doc in per else ids[0]].append(claim.model_dump())
        out.update(per)
    return out, failure


def _relinked(evidence: list[Evidence], split: Mapping[str, tuple[str, ...]]) -> list[Evidence]:
    """A ``supersedes`` naming a document whose claims got ids of their own (``p24#1``,
    ``p24#2``) names those claims: the newer document replaces every claim of the old one."""
    out: list[Evidence] = []
    for e in evidence:
        links = tuple(
            dict.fromkeys(
                i
                for old in e.supersedes
                if e.id not in split.get(old, ())  # a document never replaces itself
                for i in split.get(old, (old,))
            )
        )
        out.append(replace(e, supersedes=links) if links != e.supersedes else e)
    return out


def _check(claim: Mapping[str, Any], doc_id: str, spec: Mapping[str, str]) -> tuple[str, str]:
    """(claim key as asked, "") for a usable claim, else ("", why it is rejected)."""
    if claim.get("doc") != doc_id:
        return "", f"unknown chunk id {claim.get('doc')!r}"
    asked = {normalize_text(k): k for k in spec}
    key = asked.get(normalize_text(str(claim.get("claim_key", ""))))
    if key is None:
        return "", f"claim key {claim.get('claim_key')!r} was not asked for"
    value = str(claim.get("value") or "").strip()
    if value.casefold() in _NO_VALUE:
        return "", "no value stated"
    if len(value) > _MAX_VALUE:
        return "", f"value longer than {_MAX_VALUE} characters"
    return key, ""


def _fields(doc: Any, claim: Mapping[str, Any], item: str) -> dict[str, Any]:
    """What the model may fill in: entity, basis, effective date (metadata wins)."""
    metadata = doc.metadata
    out: dict[str, Any] = {}
    for name, keys in (
        ("entity", ("entity",)),
        ("basis", ("basis",)),
        ("effective_at", ("effective_at", "effective_date", "effective_from")),
    ):
        given = claim.get(name)
        if isinstance(given, str) and given.strip() and all(metadata.get(k) is None for k in keys):
            out[name] = given.strip()
    if "effective_at" in out:
        canonical_date(out["effective_at"], item=item, field="effective_at")
    return out


def _evidence(
    doc: Any, claims: list[dict[str, Any]], spec: Mapping[str, str], rejected: dict[str, str]
) -> list[Evidence]:
    """One document's claims as validated evidence; what fails validation goes to ``rejected``."""
    doc_id = _doc_id(doc)
    usable: list[tuple[str, dict[str, Any]]] = []
    for claim in claims:
        key, why = _check(claim, doc_id, spec)
        if why:
            rejected[f"{claim.get('doc', doc_id)}/{claim.get('claim_key')}"] = why
        else:
            usable.append((key, claim))
    usable.sort(key=lambda kc: (kc[0], str(kc[1].get("entity")), str(kc[1].get("value"))))
    out: list[Evidence] = []
    for n, (key, claim) in enumerate(usable, 1):
        item = doc_id if len(usable) == 1 else f"{doc_id}#{n}"
        try:
            extra = _fields(doc, claim, item)
            made = Evidence.from_document(
                doc, claim_key=key, value=str(claim["value"]).strip(), id=item, **extra
            )
        except InvalidInputError as err:
            rejected[f"{doc_id}/{key}"] = str(err)
            continue
        if all(
            (e.claim_key, e.value, e.entity) != (made.claim_key, made.value, made.entity)
            for e in out
        ):
            out.append(made)
    return out
