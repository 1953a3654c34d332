"""The evidence policy: source weights and arbitration thresholds. Pure values.

Public names are re-exported from :mod:`agent_guards.evidence_resolve`.

Example:
    >>> p = EvidencePolicy(close_days=30, high_risk=True)
    >>> p.label, p.weight("official") > p.weight("forum"), p.weight("blog")
    ('EvidencePolicy@1', True, 0.0)
    >>> EvidencePolicy(close_confidence=2)
    Traceback (most recent call last):
    ...
    ValueError: close_confidence must be in 0..1, got 2
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from types import MappingProxyType
from typing import Any

from agent_guards.core.fields import normalize_value

__all__ = ["DEFAULT_SOURCE_WEIGHTS", "EvidencePolicy"]

DEFAULT_SOURCE_WEIGHTS: Mapping[str, float] = MappingProxyType(
    {"official": 4.0, "internal": 3.0, "memory": 2.0, "forum": 1.0}
)


def _days(value: Any) -> float:
    if isinstance(value, timedelta):
        return value.total_seconds() / 86400
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"close_days must be a number of days or a timedelta, got {value!r}")
    return float(value)


@dataclass(frozen=True, kw_only=True)
class EvidencePolicy:
    """How ``resolve_evidence`` arbitrates. Frozen; vary it with ``dataclasses.replace``.

    Raises:
        ValueError: A field is out of range (the message names the field and value).
        TypeError: A field has the wrong type.

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
            number = _finite("source_weights[" + repr(key) + "]", weight)
            if number < 0:
                raise ValueError(f"source_weights[{key!r}] must be >= 0, got {weight!r}")
        object.__setattr__(self, "source_weights", MappingProxyType(dict(weights)))
        if _finite("unknown_source_weight", self.unknown_source_weight) < 0:
            raise ValueError(
                f"unknown_source_weight must be >= 0, got {self.unknown_source_weight}"
            )
        _finite("min_relevance", self.min_relevance)
        conf = _finite("close_confidence", self.close_confidence)
        if not 0 <= conf <= 1:
            raise ValueError(f"close_confidence must be in 0..1, got {self.close_confidence!r}")
        days = _days(self.close_days)
        if not math.isfinite(days) or days < 0:
            raise ValueError(f"close_days must be >= 0 days, got {self.close_days!r}")
        if not isinstance(self.high_risk, bool):
            raise TypeError(f"high_risk must be a bool, got {self.high_risk!r}")
        flags = self.disqualifying_flags
        if isinstance(flags, str) or not all(isinstance(f, str) and f for f in flags):
            raise TypeError(f"disqualifying_flags must be a set of strings, got {flags!r}")
        object.__setattr__(self, "disqualifying_flags", frozenset(flags))
        if self.normalizer is not None and not callable(self.normalizer):
            raise TypeError(f"normalizer must be callable, got {self.normalizer!r}")
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"name must be a non-empty string, got {self.name!r}")
        if isinstance(self.version, bool) or not isinstance(self.version, int) or self.version < 1:
            raise ValueError(f"version must be an int >= 1, got {self.version!r}")

    @property
    def label(self) -> str:
        """``name@version``, as recorded in decisions."""
        return f"{self.name}@{self.version}"

    @property
    def close_window_days(self) -> float:
        """``close_days`` as a float number of days."""
        return _days(self.close_days)

    def weight(self, source_type: str | None) -> float:
        """The credibility weight of ``source_type``."""
        if source_type is None:
            return float(self.unknown_source_weight)
        return float(self.source_weights.get(source_type, self.unknown_source_weight))

    def normalize(self, value: Any) -> str:
        """The comparison key of ``value`` under this policy."""
        return (self.normalizer or normalize_value)(value)


def _finite(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a number, got {value!r}")
    if not math.isfinite(float(value)):
        raise ValueError(f"{name} must be finite, got {value!r}")
    return float(value)
