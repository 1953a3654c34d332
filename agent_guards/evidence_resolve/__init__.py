"""evidence_resolve: arbitrate conflicting RAG evidence.

The verdict is answer, clarify, abstain or escalate, with the ids chosen and flagged."""

from agent_guards.core.decision import EvidenceRoute
from agent_guards.core.fields import normalize_value
from agent_guards.evidence_resolve.core import coerce_evidence, resolve_evidence
from agent_guards.evidence_resolve.graph import (
    EvidenceQuery,
    EvidenceState,
    add_evidence_resolve,
    create_evidence_resolve,
    create_evidence_route,
)
from agent_guards.evidence_resolve.messages import evidence_from_messages, merge_evidence
from agent_guards.evidence_resolve.model import (
    EVIDENCE_STATUSES,
    ClaimVerdict,
    Evidence,
    EvidenceVerdict,
)
from agent_guards.evidence_resolve.policy import DEFAULT_SOURCE_WEIGHTS, EvidencePolicy

__all__ = [
    "DEFAULT_SOURCE_WEIGHTS",
    "EVIDENCE_STATUSES",
    "ClaimVerdict",
    "Evidence",
    "EvidencePolicy",
    "EvidenceQuery",
    "EvidenceRoute",
    "EvidenceState",
    "EvidenceVerdict",
    "add_evidence_resolve",
    "coerce_evidence",
    "create_evidence_resolve",
    "create_evidence_route",
    "evidence_from_messages",
    "merge_evidence",
    "normalize_value",
    "resolve_evidence",
]
