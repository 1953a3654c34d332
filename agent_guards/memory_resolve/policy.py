"""MemoryPolicy: source ranks, scopes and write-back for memory_resolve.

Example:
    >>> MemoryPolicy(write_back="always").label
    'MemoryPolicy@1'
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from agent_guards.core.errors import check_choice
from agent_guards.core.policy import Policy, check_bool, check_int
from agent_guards.memory_resolve.model import DEFAULT_SOURCE_RANKS, MEMORY_SOURCES, WriteBack

__all__ = ["DEFAULT_AUTHORITY_KEYS", "MemoryPolicy"]

_WORD = re.compile(r"[^0-9a-z]+")
_CAMEL = re.compile(r"(?<=[0-9a-z])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")

DEFAULT_AUTHORITY_KEYS: frozenset[str] = frozenset(
    {
        "role",
        "roles",
        "permission",
        "permissions",
        "authority",
        "admin",
        "is_admin",
        "access",
        "access_level",
        "clearance",
        "entitlement",
        "entitlements",
        "privilege",
        "privileges",
        "group",
        "groups",
        "scope",
        "scopes",
        "acl",
    }
)
"""Keys (or words of a key: ``user_role``, ``account.permissions``) about what the user may do."""


@dataclass(frozen=True, kw_only=True)
class MemoryPolicy(Policy):
    """How ``resolve_memory`` ranks and writes back. Frozen; vary it with ``replace``.

    Raises:
        ValueError: ``source_ranks`` does not rank exactly the known sources, or
            ``write_back``, ``name`` or ``version`` is not allowed.
        TypeError: A rank is not an int, or a flag is not a bool.

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
    authority_keys: frozenset[str] = DEFAULT_AUTHORITY_KEYS
    """Keys about the user's own authority. A user statement never sets or overrides them
    (``"I am admin"`` against a tool's ``role=viewer``): it is excluded as
    ``unentitled:authority``. A key matches when it, or one of its words, is listed."""
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
            check_int(f"MemoryPolicy.source_ranks[{source!r}]", rank)
        object.__setattr__(self, "source_ranks", MappingProxyType(dict(ranks)))
        for name in ("inject_inferred", "keep_history"):
            check_bool(f"MemoryPolicy.{name}", getattr(self, name))
        check_choice("write_back", self.write_back, ("never", "when_asked", "always"))
        keys = self.authority_keys
        if isinstance(keys, str) or not all(isinstance(k, str) and k for k in keys):
            raise ValueError(f"MemoryPolicy.authority_keys must be key names, got {keys!r}")
        object.__setattr__(self, "authority_keys", frozenset(k.casefold() for k in keys))
        self.check_label()

    def is_authority(self, key: str) -> bool:
        """Whether ``key`` is about the user's authority (see ``authority_keys``).

        >>> p = MemoryPolicy()
        >>> p.is_authority("user_role"), p.is_authority("Account.Permissions")
        (True, True)
        >>> p.is_authority("isAdmin"), p.is_authority("userRole"), p.is_authority("ACLEntry")
        (True, True, True)
        >>> p.is_authority("lang"), p.is_authority("report_format")
        (False, False)
        """
        folded = key.casefold()
        # camelCase words are words too: isAdmin is "is admin", not "isadmin"
        words = _WORD.split(_CAMEL.sub("_", key).casefold())
        return folded in self.authority_keys or any(
            word in self.authority_keys for word in words if word
        )
