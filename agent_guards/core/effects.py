"""What a tool does to the world: read-only, idempotent write, write, or unknown. Pure.

Guards that only read the message history get the world wrong when a tool changes it: an
identical call after a write is not a repeat, and a repeated write is not a harmless read.
Every guard therefore knows each tool's *effect*. It comes from, in order:

1. the policy: explicit tool sets in a :class:`ToolEffects`;
2. the tool's own metadata, in the MCP convention (``readOnlyHint``, ``destructiveHint``,
   ``idempotentHint``, ``openWorldHint``) that ``langchain-mcp-adapters`` puts in
   ``BaseTool.metadata`` (:func:`annotate_tool` writes it for a plain ``@tool``);
3. the default, :attr:`Effect.UNKNOWN`: treated as a possible write, so a guard never
   answers from a result that a write may have made stale.

Example:
    >>> effects = ToolEffects(read_only={"get_balance"}, writes={"transfer"})
    >>> effects.of("get_balance"), effects.of("transfer"), effects.of("search")
    (<Effect.READ: 'read'>, <Effect.WRITE: 'write'>, <Effect.UNKNOWN: 'unknown'>)
    >>> effects.of("search", {"readOnlyHint": True})
    <Effect.READ: 'read'>
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

__all__ = [
    "EFFECT_KEY",
    "Effect",
    "ToolEffects",
    "annotate_tool",
    "effect_from_metadata",
    "effects_of_tools",
]

EFFECT_KEY = "effect"
"""Key under ``ToolMessage.response_metadata["agent_guards"]`` where the tool wrapper
records the effect of the call it executed, so guards that read only messages know it."""


class Effect(StrEnum):
    """What one call of a tool may do to the world."""

    READ = "read"
    """Reads only: running it again after nothing changed gives the same answer."""
    IDEMPOTENT = "idempotent_write"
    """Changes the world, but repeating it with the same arguments changes nothing more."""
    WRITE = "write"
    """Changes the world; repeating it repeats the change."""
    UNKNOWN = "unknown"
    """Not declared: treated as a possible write."""

    @property
    def changes_world(self) -> bool:
        """True for everything but :attr:`READ` (an unknown tool may write).

        >>> Effect.UNKNOWN.changes_world, Effect.READ.changes_world
        (True, False)
        """
        return self is not Effect.READ

    @property
    def declared_write(self) -> bool:
        """True for the two write classes: the tool says it changes the world.

        >>> Effect.IDEMPOTENT.declared_write, Effect.UNKNOWN.declared_write
        (True, False)
        """
        return self in (Effect.WRITE, Effect.IDEMPOTENT)


_HINTS = ("readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint")


def effect_from_metadata(metadata: Mapping[str, Any] | None) -> Effect | None:
    """A tool's effect from its MCP annotations in ``BaseTool.metadata`` (None: not declared).

    ``readOnlyHint: true`` is a read. Otherwise, when any hint is given, the tool writes:
    idempotently with ``idempotentHint: true``. ``destructiveHint`` and ``openWorldHint``
    do not make a write safer to repeat, so they do not change the class.

    Example:
        >>> effect_from_metadata({"readOnlyHint": True, "openWorldHint": True})
        <Effect.READ: 'read'>
        >>> effect_from_metadata({"readOnlyHint": False, "idempotentHint": True})
        <Effect.IDEMPOTENT: 'idempotent_write'>
        >>> effect_from_metadata({"destructiveHint": True}), effect_from_metadata({"title": "x"})
        (<Effect.WRITE: 'write'>, None)
    """
    if not isinstance(metadata, Mapping):
        return None
    if metadata.get("readOnlyHint") is True:
        return Effect.READ
    if all(metadata.get(hint) is None for hint in _HINTS):
        return None
    return Effect.IDEMPOTENT if metadata.get("idempotentHint") is True else Effect.WRITE


def annotate_tool(
    tool: Any,
    *,
    read_only: bool = False,
    idempotent: bool = False,
    destructive: bool | None = None,
    open_world: bool | None = None,
) -> Any:
    """Give a plain LangChain tool the MCP annotations MCP tools carry; returns the tool.

    Example:
        >>> from langchain_core.tools import tool
        >>> @tool
        ... def get_balance(account: str) -> str:
        ...     '''The balance of an account.'''
        ...     return "100"
        >>> effect_from_metadata(annotate_tool(get_balance, read_only=True).metadata)
        <Effect.READ: 'read'>
    """
    if read_only and idempotent:
        raise ValueError("annotate_tool: a read-only tool is not an idempotent write; pick one")
    hints: dict[str, Any] = {"readOnlyHint": read_only}
    if not read_only:
        hints["idempotentHint"] = idempotent
        hints["destructiveHint"] = (not idempotent) if destructive is None else destructive
    if open_world is not None:
        hints["openWorldHint"] = open_world
    tool.metadata = {**(getattr(tool, "metadata", None) or {}), **hints}
    return tool


def effects_of_tools(tools: Iterable[Any]) -> dict[str, Effect]:
    """The declared effect of each tool, by name (tools without annotations are left out).

    Example:
        >>> from langchain_core.tools import tool
        >>> @tool
        ... def search(q: str) -> str:
        ...     '''Search.'''
        ...     return q
        >>> effects_of_tools([annotate_tool(search, read_only=True)])
        {'search': <Effect.READ: 'read'>}
    """
    out: dict[str, Effect] = {}
    for tool in tools:
        effect = effect_from_metadata(getattr(tool, "metadata", None))
        name = getattr(tool, "name", None)
        if effect is not None and isinstance(name, str):
            out[name] = effect
    return out


def _names(owner: str, value: Any) -> frozenset[str]:
    if isinstance(value, str) or not isinstance(value, Iterable):
        raise TypeError(f"ToolEffects.{owner} must be a set of tool names, got {value!r}")
    names = frozenset(value)
    bad = sorted(repr(n) for n in names if not isinstance(n, str) or not n)
    if bad:
        raise TypeError(f"ToolEffects.{owner} must hold non-empty names, got {', '.join(bad)}")
    return names


@dataclass(frozen=True, kw_only=True)
class ToolEffects:
    """The effect classes a policy declares: explicit tool sets, then a default.

    Explicit sets win over the tools' own annotations, which win over ``default``.

    >>> ToolEffects(read_only={"a"}, writes={"a"})
    Traceback (most recent call last):
    ...
    ValueError: ToolEffects: 'a' is in more than one set (read_only, writes)
    """

    read_only: frozenset[str] = frozenset()
    """Tools that only read."""
    idempotent: frozenset[str] = frozenset()
    """Tools that write, where a repeat with the same arguments changes nothing more."""
    writes: frozenset[str] = frozenset()
    """Tools that write; a repeat repeats the change."""
    default: Effect = Effect.UNKNOWN
    """The effect of a tool no set names and no annotation declares."""

    def __post_init__(self) -> None:
        seen: dict[str, list[str]] = {}
        for owner in ("read_only", "idempotent", "writes"):
            names = _names(owner, getattr(self, owner))
            object.__setattr__(self, owner, names)
            for name in names:
                seen.setdefault(name, []).append(owner)
        clash = sorted(n for n, owners in seen.items() if len(owners) > 1)
        if clash:
            owners = ", ".join(seen[clash[0]])
            raise ValueError(f"ToolEffects: {clash[0]!r} is in more than one set ({owners})")
        object.__setattr__(self, "default", Effect(self.default))

    def of(self, tool: str, declared: Mapping[str, Any] | Effect | str | None = None) -> Effect:
        """The effect of ``tool``: a set naming it, else ``declared`` (an effect or the
        tool's metadata), else ``default``."""
        if tool in self.read_only:
            return Effect.READ
        if tool in self.idempotent:
            return Effect.IDEMPOTENT
        if tool in self.writes:
            return Effect.WRITE
        if isinstance(declared, Mapping):
            return effect_from_metadata(declared) or self.default
        if declared is not None:
            try:
                return Effect(declared)
            except ValueError:
                return self.default
        return self.default
