"""The evidence policy: source weights and arbitration thresholds. Pure values.

Public names are re-exported from :mod:`agent_guards.evidence_resolve`.

Example:
    >>> p = EvidencePolicy(close_days=30, high_risk=True)
    >>> p.label, p.weight("official") > p.weight("forum"), p.weight("blog")
    ('EvidencePolicy@1', True, 0.0)
    >>> EvidencePolicy(close_confidence=2)
    Traceback (most recent call last):
    ...
    ValueError: EvidencePolicy.close_confidence must be in 0..1, got 2
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from types import MappingProxyType
from typing import Any

from agent_guards.core.fields import normalize_value
from agent_guards.core.policy import (
    Policy,
    check_bool,
    check_duration,
    check_number,
    check_ratio,
)

__all__ = ["DEFAULT_SOURCE_WEIGHTS", "EvidencePolicy"]

DEFAULT_SOURCE_WEIGHTS: Mapping[str, float] = MappingProxyType(
    {"official": 4.0, "internal": 3.0, "memory": 2.0, "forum": 1.0}
)


@dataclass(frozen=True, kw_only=True)
class EvidencePolicy(Policy):
    """How ``resolve_evidence`` arbitrates. Frozen; vary it with ``dataclasses.replace``.

    Raises:
        ValueError: A weight, ratio or window is out of range, e.g.
            ``EvidencePolicy.close_days must be days >= 0 or a timedelta, got -1``.
        TypeError: A field has the wrong type (a number's wrong type is also a ValueError).

    Example:
        >>> from agent_guards import Evidence, EvidencePolicy, resolve_evidence
        >>> docs = [Evidence("a", "sla", "99.9%"), Evidence("b", "sla", "99.5%")]
        >>> strict = EvidencePolicy(high_risk=True, version=2)
        >>> [resolve_evidence(docs, policy=p).verdict.value for p in (EvidencePolicy(), strict)]
        ['clarify', 'escalate']
        >>> strict.label, strict.weight("official"), strict.weight("blog")
        ('EvidencePolicy@2', 4.0, 0.0)
    """

    source_weights: Mapping[str, float] = field(
        default_factory=lambda: dict(DEFAULT_SOURCE_WEIGHTS), hash=False
    )
    """Credibility per ``source_type``; a higher weight always beats a lower one."""
    unknown_source_weight: float = 0.0
    """Weight of a ``source_type`` missing from ``source_weights`` (or None)."""
    min_relevance: float = 0.0
    """Items whose ``relevance`` is below it are dropped as noise (None relevance is kept)."""
    close_confidence: float = 0.08
    """Confidences closer than this (or unknown) cannot separate equal-authority values."""
    close_days: float | timedelta = 90
    """Dates closer than this many days (or a timedelta) cannot order equal-authority values."""
    high_risk: bool = False
    """An unresolvable conflict escalates (ESCALATE) instead of asking (CLARIFY)."""
    disqualifying_flags: frozenset[str] = frozenset({"injection"})
    """Items carrying any of these flags are never selected (dropped with the flag as reason)."""
    normalizer: Callable[[Any], str] | None = field(default=None, compare=False)
    """Maps a value to its comparison key (default: ``normalize_value``)."""
    name: str = "EvidencePolicy"
    """Policy name recorded in decisions."""
    version: int = 1
    """Policy version recorded in decisions (``EvidencePolicy@1``)."""

    def __post_init__(self) -> None:
        weights = self.source_weights
        if not isinstance(weights, Mapping) or not weights:
            raise TypeError(f"source_weights must be a non-empty mapping, got {weights!r}")
        for key, weight in weights.items():
            if not isinstance(key, str) or not key:
                raise ValueError(f"source_weights keys must be non-empty strings, got {key!r}")
            check_number(f"EvidencePolicy.source_weights[{key!r}]", weight, minimum=0)
        object.__setattr__(self, "source_weights", MappingProxyType(dict(weights)))
        check_number("EvidencePolicy.unknown_source_weight", self.unknown_source_weight, minimum=0)
        check_number("EvidencePolicy.min_relevance", self.min_relevance)
        check_ratio("EvidencePolicy.close_confidence", self.close_confidence, zero=True)
        check_duration("EvidencePolicy.close_days", self.close_days, unit="days")
        check_bool("EvidencePolicy.high_risk", self.high_risk)
        flags = self.disqualifying_flags
        if isinstance(flags, str) or not all(isinstance(f, str) and f for f in flags):
            raise TypeError(f"disqualifying_flags must be a set of strings, got {flags!r}")
        object.__setattr__(self, "disqualifying_flags", frozenset(flags))
        if self.normalizer is not None and not callable(self.normalizer):
            raise TypeError(f"normalizer must be callable, got {self.normalizer!r}")
        self.check_label()

    @property
    def close_window_days(self) -> float:
        """``close_days`` as a float number of days."""
        return check_duration("EvidencePolicy.close_days", self.close_days, unit="days")

    def weight(self, source_type: str | None) -> float:
        """The credibility weight of ``source_type``."""
        if source_type is None:
            return float(self.unknown_source_weight)
        return float(self.source_weights.get(source_type, self.unknown_source_weight))

    def normalize(self, value: Any) -> str:
        """The comparison key of ``value`` under this policy."""
        return (self.normalizer or normalize_value)(value)
