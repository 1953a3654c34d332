"""MemoryPolicy: source ranks, scopes and write-back for memory_resolve.

Example:
    >>> MemoryPolicy(write_back="always").label
    'MemoryPolicy@1'
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from agent_guards.core.errors import check_choice
from agent_guards.memory_resolve.model import DEFAULT_SOURCE_RANKS, MEMORY_SOURCES, WriteBack

__all__ = ["MemoryPolicy"]


@dataclass(frozen=True, kw_only=True)
class MemoryPolicy:
    """How ``resolve_memory`` ranks and writes back. Frozen; vary it with ``replace``.

    Raises:
        ValueError: A field is out of range (the message names the field and value).
        TypeError: A field has the wrong type.

    Example:
        >>> from agent_guards import MemoryPolicy, MemoryRecord, resolve_memory
        >>> guess = [MemoryRecord("g1", "lang", "de", source="inferred")]
        >>> resolve_memory(guess, now="2026-01-01").excluded
        {'g1': 'unconfirmed_inferred'}
        >>> resolve_memory(guess, now="2026-01-01", policy=MemoryPolicy(inject_inferred=True)).facts
        {'lang': 'de'}
    """

    source_ranks: Mapping[str, int] = field(
        default_factory=lambda: dict(DEFAULT_SOURCE_RANKS), hash=False
    )
    """Rank per source (higher wins); must rank every source in ``MEMORY_SOURCES``."""
    inject_inferred: bool = False
    """Inject active inferred records (lowest rank). Default False: they wait for confirmation."""
    keep_history: bool = False
    """Also inject the active records a key's winner overrode, after the winner."""
    write_back: WriteBack = "when_asked"
    """Persist current-turn instructions: never, when_asked (``persist=True``) or always."""
    name: str = "MemoryPolicy"
    """Policy name recorded in decisions."""
    version: int = 1
    """Policy version recorded in decisions."""

    def __post_init__(self) -> None:
        ranks = self.source_ranks
        if not isinstance(ranks, Mapping):
            raise TypeError(f"source_ranks must be a mapping, got {ranks!r}")
        missing = [s for s in MEMORY_SOURCES if s not in ranks]
        unknown = sorted(set(ranks) - set(MEMORY_SOURCES))
        if missing or unknown:
            raise ValueError(
                f"source_ranks must rank exactly {list(MEMORY_SOURCES)}; "
                f"missing {missing}, unknown {unknown}"
            )
        for source, rank in ranks.items():
            if isinstance(rank, bool) or not isinstance(rank, int):
                raise TypeError(f"source_ranks[{source!r}] must be an int, got {rank!r}")
        object.__setattr__(self, "source_ranks", MappingProxyType(dict(ranks)))
        for name in ("inject_inferred", "keep_history"):
            if not isinstance(getattr(self, name), bool):
                raise TypeError(f"{name} must be a bool, got {getattr(self, name)!r}")
        check_choice("write_back", self.write_back, ("never", "when_asked", "always"))
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"name must be a non-empty string, got {self.name!r}")
        if isinstance(self.version, bool) or not isinstance(self.version, int) or self.version < 1:
            raise ValueError(f"version must be an int >= 1, got {self.version!r}")

    @property
    def label(self) -> str:
        """``name@version``, as recorded in decisions."""
        return f"{self.name}@{self.version}"
