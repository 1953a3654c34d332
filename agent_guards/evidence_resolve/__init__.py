"""evidence_resolve: arbitrate conflicting RAG evidence.

The verdict is answer, clarify, abstain or escalate, with the ids chosen and flagged.
:class:`ClaimExtractor` turns retrieved text into evidence with a chat model (it only
extracts; the resolver decides)."""

from agent_guards.core.decision import EvidenceRoute
from agent_guards.evidence_resolve.core import coerce_evidence, resolve_evidence
from agent_guards.evidence_resolve.extract import (
    ClaimExtractor,
    ExtractedClaim,
    ExtractedClaims,
    Extraction,
)
from agent_guards.evidence_resolve.graph import (
    EvidenceQuery,
    EvidenceState,
    add_evidence_resolve,
    create_evidence_resolve,
    create_evidence_route,
)
from agent_guards.evidence_resolve.messages import (
    ArtifactEvidence,
    artifact_evidence,
    evidence_from_messages,
    merge_evidence,
)
from agent_guards.evidence_resolve.model import (
    EVIDENCE_STATUSES,
    ClaimVerdict,
    Evidence,
    EvidenceVerdict,
)
from agent_guards.evidence_resolve.policy import (
    DEFAULT_SOURCE_WEIGHTS,
    EvidencePolicy,
    fold_typography,
    normalize_value,
)
from agent_guards.evidence_resolve.timeline import Span

__all__ = [
    "DEFAULT_SOURCE_WEIGHTS",
    "EVIDENCE_STATUSES",
    "ArtifactEvidence",
    "ClaimExtractor",
    "ClaimVerdict",
    "Evidence",
    "EvidencePolicy",
    "EvidenceQuery",
    "EvidenceRoute",
    "EvidenceState",
    "EvidenceVerdict",
    "ExtractedClaim",
    "ExtractedClaims",
    "Extraction",
    "Span",
    "add_evidence_resolve",
    "artifact_evidence",
    "coerce_evidence",
    "create_evidence_resolve",
    "create_evidence_route",
    "evidence_from_messages",
    "fold_typography",
    "merge_evidence",
    "normalize_value",
    "resolve_evidence",
]
