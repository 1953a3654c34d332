"""The evidence policy: source weights, arbitration thresholds, value spellings. Pure values.

Public names are re-exported from :mod:`agent_guards.evidence_resolve`.

Example:
    >>> p = EvidencePolicy(close_days=30, high_risk=True)
    >>> p.label, p.weight("official") > p.weight("forum"), p.weight("blog")
    ('EvidencePolicy@1', True, 0.0)
    >>> p.normalize("2019\u201320") == p.normalize("2019-20"), normalize_value("\uff11\uff10\uff10")
    (True, '100')
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

from agent_guards.core.fields import normalize_text
from agent_guards.core.fields import normalize_value as _normalize_plain
from agent_guards.core.policy import (
    Policy,
    check_bool,
    check_duration,
    check_number,
    check_ratio,
)

__all__ = ["DEFAULT_SOURCE_WEIGHTS", "EvidencePolicy", "fold_typography", "normalize_value"]

DEFAULT_SOURCE_WEIGHTS: Mapping[str, float] = MappingProxyType(
    {"official": 4.0, "internal": 3.0, "memory": 2.0, "forum": 1.0}
)

# Typographic variants of one character: dashes and minus signs, full-width ASCII, the
# ideographic and other fixed-width spaces, curly quotes.
_FOLD: dict[int, str] = {
    **dict.fromkeys((*range(0x2010, 0x2016), 0x2212, 0xFE58, 0xFE63, 0xFF0D), "-"),
    **{code: chr(code - 0xFEE0) for code in range(0xFF01, 0xFF5F) if code != 0xFF0D},
    **dict.fromkeys((0x3000, 0x2002, 0x2003, 0x2007, 0x2009, 0x200A), " "),
    **dict.fromkeys((0x2018, 0x2019, 0x201A, 0x201B, 0x2032), "'"),
    **dict.fromkeys((0x201C, 0x201D, 0x201E, 0x201F, 0x2033), '"'),
}


def fold_typography(text: str) -> str:
    """``text`` with typographic variants folded: dashes, full-width forms, spaces, quotes.

    >>> fold_typography("２０１９\u201320 \u201cfinal\u201d")
    '2019-20 "final"'
    """
    return text.translate(_FOLD)


def _name(text: Any) -> str:
    return normalize_text(fold_typography(str(text)))


def normalize_value(value: Any) -> str:
    """The default value normalizer: one spelling per value.

    Case, whitespace and typography do not matter (en dash and hyphen, full-width and ASCII
    digits, curly and straight quotes), thousands separators are dropped and numbers are
    written canonically (``"1,000.50"``, ``"1000.5"`` and ``1000.5`` are one value).

    >>> normalize_value("  Fifty   Thousand ") == normalize_value("fifty thousand")
    True
    >>> normalize_value("1\uff0c000"), normalize_value("50w"), normalize_value(True)
    ('1000', '50w', 'true')
    """
    return _normalize_plain(fold_typography(value) if isinstance(value, str) else value)


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
        >>> usa = EvidencePolicy(aliases={"USA": "United States", "U.S.": "United States"})
        >>> usa.normalize("U.S.") == usa.normalize("united states")
        True
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
    """Update dates closer than this many days (or a timedelta) cannot order equal-authority
    values. Only ``updated_at`` has this window: effective dates are a timeline, ordered at
    the precision they have (``"2019"`` vs ``"2019-04-07"``: unordered; 27 days apart: ordered).
    """
    high_risk: bool = False
    """An unresolvable conflict escalates (ESCALATE) instead of asking (CLARIFY), and a value
    backed only by sources under ``min_answer_weight`` is not answered (ABSTAIN)."""
    min_answer_weight: float = 2.0
    """The source weight a value needs to be answered plainly. A value whose best source
    weighs less (by default a forum post, or a source of unknown type) is answered with the
    caveat ``weak_source``, or abstained on (reason ``weak_source``) under ``high_risk``.
    ``0`` turns the caveat off."""
    group_entities: bool = False
    """When the question names no entity and the values differ by entity, answer with every
    entity's value side by side (``values``, reason ``per_entity``) instead of asking which
    one is meant; only when each entity's own evidence answers."""
    aliases: Mapping[str, str] = field(default_factory=dict, hash=False)
    """Other spellings of one name: ``{"USA": "United States"}``. Applied to values (after the
    normalizer) and to entity names, both sides compared normalized."""
    disqualifying_flags: frozenset[str] = frozenset({"injection"})
    """Items carrying any of these flags are never selected (dropped with the flag as reason)."""
    normalizer: Callable[[Any], str] | None = field(default=None, compare=False)
    """Maps a value to its comparison key (default: ``normalize_value``, which folds case,
    whitespace, typography and thousands separators)."""
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
        check_number("EvidencePolicy.min_answer_weight", self.min_answer_weight, minimum=0)
        check_bool("EvidencePolicy.group_entities", self.group_entities)
        flags = self.disqualifying_flags
        if isinstance(flags, str) or not all(isinstance(f, str) and f for f in flags):
            raise TypeError(f"disqualifying_flags must be a set of strings, got {flags!r}")
        object.__setattr__(self, "disqualifying_flags", frozenset(flags))
        if self.normalizer is not None and not callable(self.normalizer):
            raise TypeError(f"normalizer must be callable, got {self.normalizer!r}")
        self._check_aliases()
        self.check_label()

    def _check_aliases(self) -> None:
        aliases = self.aliases
        if not isinstance(aliases, Mapping):
            raise TypeError(f"EvidencePolicy.aliases must be a mapping, got {aliases!r}")
        for spelling, name in aliases.items():
            if not (isinstance(spelling, str) and spelling.strip()):
                raise ValueError(
                    f"EvidencePolicy.aliases keys must be non-empty strings, got {spelling!r}"
                )
            if not (isinstance(name, str) and name.strip()):
                raise ValueError(
                    f"EvidencePolicy.aliases[{spelling!r}] must be a non-empty string, got {name!r}"
                )
        object.__setattr__(self, "aliases", MappingProxyType(dict(aliases)))
        # Lookup tables (not fields: replace() and serialization see only `aliases`).
        values = {self._plain(k): self._plain(v) for k, v in aliases.items()}
        names = {_name(k): _name(v) for k, v in aliases.items()}
        self.__dict__["_value_aliases"] = MappingProxyType(values)
        self.__dict__["_name_aliases"] = MappingProxyType(names)

    def _plain(self, value: Any) -> str:
        return (self.normalizer or normalize_value)(value)

    @property
    def close_window_days(self) -> float:
        """``close_days`` as a float number of days."""
        return check_duration("EvidencePolicy.close_days", self.close_days, unit="days")

    def weight(self, source_type: str | None) -> float:
        """The credibility weight of ``source_type``, matched as written, else ignoring case
        and surrounding spaces (``"Official"`` is ``"official"``).

        Example:
            >>> EvidencePolicy().weight(" Official "), EvidencePolicy().weight("blog")
            (4.0, 0.0)
        """
        if source_type is None:
            return float(self.unknown_source_weight)
        weights = self.source_weights
        found = weights.get(source_type)
        if found is None:
            folded = source_type.strip().casefold()
            found = next((w for k, w in weights.items() if k.strip().casefold() == folded), None)
        return float(found if found is not None else self.unknown_source_weight)

    def normalize(self, value: Any) -> str:
        """The comparison key of ``value``: the normalizer's, then the alias map's."""
        key = self._plain(value)
        return str(self.__dict__["_value_aliases"].get(key, key))

    def name_key(self, name: str) -> str:
        """The comparison key of an entity name (case, spacing, typography and aliases)."""
        key = _name(name)
        return str(self.__dict__["_name_aliases"].get(key, key))
