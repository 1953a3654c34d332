"""LoopPolicy: loop_check's thresholds and what counts as the same action. Private.

Import it from ``agent_guards.loop_check``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from types import MappingProxyType
from typing import Any, Literal

from agent_guards.core.effects import ToolEffects
from agent_guards.core.errors import check_choice
from agent_guards.core.history import ScanOptions
from agent_guards.core.policy import Policy, check_int, check_ratio
from agent_guards.core.signatures import (
    DEFAULT_GUARD_NAMES,
    DEFAULT_IGNORED_ARG_KEYS,
    DEFAULT_SCOPE_KEYS,
    _key,
)
from agent_guards.core.texts import TEXTS_EN, Texts

__all__ = ["PATTERNS", "PATTERN_LIMITS", "LoopPolicy"]

PATTERNS: tuple[str, ...] = (
    "subagent",
    "content_loop",
    "cycle",
    "repeated_call",
    "repeated_effect",
    "failure_loop",
    "no_progress",
    "repeated_message",
    "conversation_loop",
    "condensation",
)
"""The loop patterns, in tie-break order (``repeated_call`` also reports
``repeated_failure``)."""

PATTERN_LIMITS: Mapping[str, tuple[int | None, int]] = MappingProxyType(
    {
        "content_loop": (1, 2),
        "failure_loop": (3, 4),
        "conversation_loop": (3, 4),
        "repeated_effect": (None, 5),
    }
)
"""Default ``(nudge_at, stop_at)`` of the patterns that do not use the policy's own pair:
one chanting reply is already a loop (nudge), a second stops; what repeats across user
turns gets more room (the user may change what comes next): the same failure, or the same
question to the user, is nudged at 3 and stopped at 4. A call that may write, repeated with a
new result each time, is stopped at its 5th run (a changing answer may still be progress;
gemini-cli stops a tool call repeated 5 times whatever it returns)."""


def _names(name: str, value: Any) -> frozenset[str]:
    if isinstance(value, str) or not isinstance(value, Iterable):
        raise TypeError(f"LoopPolicy.{name} must be a set of strings, got {value!r}")
    items = list(value)
    bad = [v for v in items if not isinstance(v, str) or not v]
    if bad:
        raise TypeError(f"LoopPolicy.{name} must hold non-empty strings, got {bad!r}")
    return frozenset(items)


@dataclass(frozen=True, kw_only=True)
class LoopPolicy(Policy):
    """When loop_check nudges and stops, and what counts as the same action.

    Counts are *occurrences*: with the defaults the 2nd identical call gets a nudge (and is
    answered from the first call's result, never executed again) and the 3rd stops the run.
    That beats the anchors: OpenHands stops at the 4th identical action+observation,
    gemini-cli at the 5th identical call, an A-B cycle at the 10th call.

    >>> LoopPolicy().label
    'LoopPolicy@1'
    >>> LoopPolicy(nudge_at=3, stop_at=3)
    Traceback (most recent call last):
    ...
    ValueError: LoopPolicy.nudge_at must be < stop_at (3), got 3; use None to disable nudges
    """

    nudge_at: int | None = 2
    """Occurrence count that earns one nudge per streak (None: never nudge)."""
    stop_at: int = 3
    """Occurrence count that stops the run (or escalates, see ``on_stop``)."""
    thresholds: Mapping[str, tuple[int | None, int]] = field(default_factory=dict)
    """Per-pattern ``(nudge_at, stop_at)`` overrides, keyed by a name in ``PATTERNS``."""
    on_stop: Literal["stop", "escalate"] = "stop"
    """``"escalate"`` asks a human (``interrupt``) instead of stopping."""
    mode: Literal["interactive", "headless"] = "interactive"
    """Interactive: a new user message starts a fresh count. Headless: the whole run counts."""
    window: int = 50
    """How many recent actions are read (bounds the cost; older ones are not seen)."""
    max_cycle: int = 4
    """Longest cycle detected (A-B is 2, A-B-C is 3)."""
    patterns: frozenset[str] = frozenset(PATTERNS)
    """Patterns to detect; drop one to switch it off."""
    scope_keys: frozenset[str] = DEFAULT_SCOPE_KEYS
    """Argument keys naming a scope (region, period, version): another scope is progress.
    A call about another entity (a key named ``id`` or ending ``_id``/``_ids``, not one of
    ``ignore_arg_keys``) is never ``no_progress`` either, even when its text is the same."""
    ignore_arg_keys: frozenset[str] = DEFAULT_IGNORED_ARG_KEYS
    """Argument keys left out of call signatures (request ids, timestamps, nonces)."""
    normalizers: tuple[Callable[[str], str], ...] = ()
    """Extra result normalizers, applied after the built-in ones (uuids, times, ids...)."""
    no_progress_min_chars: int = 40
    """Shorter results ("ok", "done") never count as evidence seen before."""
    text_similarity: float = 0.9
    """Two assistant replies at least this similar (rapidfuzz ratio, 0..1) are the same."""
    reuse_results: bool = True
    """Answer an identical call from the earlier result instead of running the tool again."""
    no_reuse_tools: frozenset[str] = frozenset()
    """Tools whose results go stale (clocks, live prices): always executed, never reused."""
    exempt_tools: frozenset[str] = frozenset()
    """Tools left out of loop counting altogether (pollers waiting on a job); always
    executed, never answered from an earlier result."""
    guard_names: frozenset[str] = DEFAULT_GUARD_NAMES
    """``name`` of guard-added messages: never counted, never a reset."""
    effects: ToolEffects = field(default_factory=ToolEffects)
    """What each tool does to the world (explicit sets win over the tools' annotations).
    Only a read-only call is answered from an earlier result, and only while no other
    call that may write ran since; an identical write is never run twice silently."""
    failure_prefixes: tuple[str, ...] = ("Error:",)
    """Text results starting with one of these (case-insensitive) are failures, as tools
    that report errors in their text do (tau-bench's ``"Error: ..."``). ``()``: only
    ``status="error"`` and retry_router's failure artifacts are failures."""
    failure_similarity: float = 0.95
    """Two failing calls of one tool are near-identical when their canonical arguments are
    at least this similar (rapidfuzz ratio, 0..1); 1 means identical arguments only."""
    content_chunk: int = 50
    """Length of the text chunks compared inside one reply (``content_loop``)."""
    content_repeats: int = 10
    """A chunk repeated this often, close together, inside one reply is a content loop."""
    on_loop: Literal["nudge", "truncate"] = "nudge"
    """What the nudge level does: add a note (``"nudge"``), or cut the history back to where
    the loop started, keeping its first round, then add the note (``"truncate"``). A loop
    that comes back after a cut is stopped."""
    judge_after: int = 30
    """With a judging model (off by default): assistant messages before the first
    LLM-judged loop check (gemini-cli: 30 turns)."""
    judge_every: int = 10
    """With a judging model: assistant messages between two judgements."""
    judge_confidence: float = 0.9
    """With a judging model: the confidence its "loop" must reach to nudge (never stop)."""
    texts: Texts = field(default=TEXTS_EN, compare=False)
    """The texts users read when this guard ends a run (:class:`~agent_guards.core.texts.Texts`;
    ``TEXTS_ZH`` ships too). Decisions keep the guard's name and reason code either way."""
    name: str = "LoopPolicy"
    """Policy name recorded in decisions."""
    version: int = 1
    """Policy version recorded in decisions (``LoopPolicy@1``)."""

    def __post_init__(self) -> None:
        stop = check_int("LoopPolicy.stop_at", self.stop_at, minimum=2)
        if (
            self.nudge_at is not None
            and check_int("LoopPolicy.nudge_at", self.nudge_at, minimum=1) >= stop
        ):
            raise ValueError(
                f"LoopPolicy.nudge_at must be < stop_at ({stop}), got {self.nudge_at}; "
                "use None to disable nudges"
            )
        check_choice("LoopPolicy.on_stop", self.on_stop, ("stop", "escalate"))
        check_choice("LoopPolicy.mode", self.mode, ("interactive", "headless"))
        check_choice("LoopPolicy.on_loop", self.on_loop, ("nudge", "truncate"))
        check_int("LoopPolicy.window", self.window, minimum=2)
        check_int("LoopPolicy.max_cycle", self.max_cycle, minimum=2)
        check_int("LoopPolicy.no_progress_min_chars", self.no_progress_min_chars, minimum=0)
        check_int("LoopPolicy.content_chunk", self.content_chunk, minimum=8)
        check_int("LoopPolicy.content_repeats", self.content_repeats, minimum=3)
        check_ratio("LoopPolicy.text_similarity", self.text_similarity)
        check_ratio("LoopPolicy.failure_similarity", self.failure_similarity)
        check_int("LoopPolicy.judge_after", self.judge_after, minimum=1)
        check_int("LoopPolicy.judge_every", self.judge_every, minimum=1)
        check_ratio("LoopPolicy.judge_confidence", self.judge_confidence)
        self._check_sets()
        object.__setattr__(self, "thresholds", MappingProxyType(_thresholds(self.thresholds)))
        if not all(callable(f) for f in self.normalizers):
            raise TypeError(f"LoopPolicy.normalizers must be callables, got {self.normalizers!r}")
        object.__setattr__(self, "normalizers", tuple(self.normalizers))
        if not isinstance(self.effects, ToolEffects):
            raise TypeError(f"LoopPolicy.effects must be a ToolEffects, got {self.effects!r}")
        if not isinstance(self.texts, Texts):
            raise TypeError(f"LoopPolicy.texts must be a Texts, got {self.texts!r}")
        self.check_label()

    def _check_sets(self) -> None:
        for name in (
            "patterns",
            "scope_keys",
            "ignore_arg_keys",
            "no_reuse_tools",
            "exempt_tools",
            "guard_names",
        ):
            object.__setattr__(self, name, _names(name, getattr(self, name)))
        for name in ("scope_keys", "ignore_arg_keys"):
            object.__setattr__(self, name, frozenset(map(_key, getattr(self, name))))
        unknown = sorted(self.patterns - set(PATTERNS))
        if unknown:
            raise ValueError(f"LoopPolicy.patterns has unknown {unknown}; allowed: {PATTERNS}")
        prefixes = self.failure_prefixes
        if isinstance(prefixes, str) or not all(isinstance(p, str) and p for p in prefixes):
            raise TypeError(
                "LoopPolicy.failure_prefixes must be a tuple of non-empty strings, "
                f"got {prefixes!r}"
            )
        object.__setattr__(self, "failure_prefixes", tuple(prefixes))

    def limits(self, pattern: str) -> tuple[int | None, int]:
        """``(nudge_at, stop_at)`` for one pattern: ``thresholds``, else
        :data:`PATTERN_LIMITS`, else the policy's own pair."""
        if pattern in self.thresholds:
            return self.thresholds[pattern]
        return PATTERN_LIMITS.get(pattern, (self.nudge_at, self.stop_at))

    def scan_options(self) -> ScanOptions:
        """How this policy reads a history."""
        return self._scan

    def loop_scan_options(self) -> ScanOptions:
        """How :func:`detect_loop` reads a history: across user turns (each action knows
        its turn), with context summaries and sub-agent stops, and text failures."""
        return self._loop_scan

    # made once per policy (both are frozen; every tool turn reads them)
    @cached_property
    def _scan(self) -> ScanOptions:
        return ScanOptions(**self._scan_fields())

    @cached_property
    def _loop_scan(self) -> ScanOptions:
        return ScanOptions(**self._scan_fields(), across_turns=True, markers=True,
                           failure_prefixes=self.failure_prefixes)  # fmt: skip

    def _scan_fields(self) -> dict[str, Any]:
        return {
            "window": self.window,
            "interactive": self.mode == "interactive",
            "guard_names": self.guard_names,
            "ignore_keys": self.ignore_arg_keys,
            "scope_keys": self.scope_keys,
            "normalizers": self.normalizers,
            "effects": self.effects,
        }


def _thresholds(raw: Mapping[str, Any]) -> dict[str, tuple[int | None, int]]:
    thresholds = {}
    for pattern, pair in dict(raw).items():
        check_choice("LoopPolicy.thresholds key", pattern, PATTERNS)
        if not isinstance(pair, tuple) or len(pair) != 2:
            raise ValueError(f"LoopPolicy.thresholds[{pattern!r}] must be (nudge_at, stop_at)")
        nudge_at, stop_at = pair
        try:
            check_int(f"LoopPolicy.thresholds[{pattern!r}] stop_at", stop_at, minimum=2)
            if nudge_at is not None:
                check_int(f"LoopPolicy.thresholds[{pattern!r}] nudge_at", nudge_at, minimum=1)
                if nudge_at >= stop_at:
                    raise ValueError(f"nudge_at must be < stop_at ({stop_at}), got {nudge_at}")
        except ValueError as err:
            raise ValueError(f"LoopPolicy.thresholds[{pattern!r}]={pair!r}: {err}") from None
        thresholds[pattern] = pair
    return thresholds
