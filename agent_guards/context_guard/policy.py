"""ContextPolicy: the window budget and what context_guard may drop, archive or summarize."""

from __future__ import annotations

from dataclasses import dataclass, field

from agent_guards.context_guard.injection import InjectionPolicy
from agent_guards.core.policy import Policy, check_bool, check_int, check_ratio

__all__ = ["ContextPolicy"]


GUARD = "context_guard"


MARKER = "agent_guards"


"""Key in ``additional_kwargs`` where the guard marks the messages it wrote or rewrote."""


@dataclass(frozen=True, kw_only=True)
class ContextPolicy(Policy):
    """How the context guard budgets the window.

    By default it nudges at 70% and 85% of the input budget, summarizes the middle of the
    history at 90% and brings it back to 50%.

    Ratios are of the *input budget*: ``max_tokens`` minus the room reserved for the answer.
    The usage counts every message plus the tool schemas bound to the model.

    Example:
        >>> ContextPolicy().label
        'ContextPolicy@1'
        >>> ContextPolicy(warn_ratio=0.9, critical_ratio=0.8)
        Traceback (most recent call last):
        ...
        ValueError: ContextPolicy needs warn_ratio <= critical_ratio <= compress_ratio, got ...
    """

    warn_ratio: float = 0.70
    """At or above this usage the verdict is NUDGE (reason ``warning``)."""
    critical_ratio: float = 0.85
    """At or above this usage the verdict is NUDGE (reason ``critical``)."""
    compress_ratio: float = 0.90
    """At or above this usage (or over the budget) the middle of the history is summarized."""
    target_ratio: float = 0.50
    """Compression keeps recent messages until the context is back at this usage."""
    reserve_tokens: int | None = None
    """Tokens kept free for the model's answer; ``None`` reserves 10% of ``max_tokens``."""
    archive_over_tokens: int | None = 2000
    """Tool results longer than this move to the store, replaced by a reference; None: never."""
    archive_dropped: bool = True
    """Also archive the text of messages that compression removes, so it stays readable by id."""
    archive_preview_chars: int = 200
    """Characters of an archived tool result left in its reference (0: none; never if flagged)."""
    archive_exempt_tools: tuple[str, ...] = ("read_archived",)
    """Tool names whose results are never archived (the archive reader's own pages)."""
    summary_max_tokens: int = 600
    """Upper bound on the summary message that replaces the middle of the history."""
    pin_last_human: bool = True
    """Always keep the latest human message (the current question) verbatim."""
    scan_tool_output: bool = True
    """Scan tool results for injected instructions and quote the flagged ones."""
    injection: InjectionPolicy = field(default_factory=InjectionPolicy)
    """Patterns used to flag injected instructions."""
    name: str = "ContextPolicy"
    """Policy name, recorded in decisions as ``name@version``."""
    version: int = 1
    """Bump when you change the policy, so decisions say which rules made them."""

    def __post_init__(self) -> None:
        warn, critical, compress, target = (
            check_ratio(f"ContextPolicy.{name}", getattr(self, name), need="a number in (0, 1]")
            for name in ("warn_ratio", "critical_ratio", "compress_ratio", "target_ratio")
        )
        if not warn <= critical <= compress:
            raise ValueError(
                "ContextPolicy needs warn_ratio <= critical_ratio <= compress_ratio, "
                f"got {warn}, {critical}, {compress}"
            )
        if target > compress:
            raise ValueError(
                f"ContextPolicy.target_ratio must be <= compress_ratio ({compress}), got {target}"
            )
        check_int("ContextPolicy.reserve_tokens", self.reserve_tokens, minimum=0, optional=True)
        check_int(
            "ContextPolicy.archive_over_tokens", self.archive_over_tokens, minimum=1, optional=True
        )
        check_int("ContextPolicy.archive_preview_chars", self.archive_preview_chars, minimum=0)
        check_int("ContextPolicy.summary_max_tokens", self.summary_max_tokens, minimum=40)
        for flag in ("archive_dropped", "pin_last_human", "scan_tool_output"):
            check_bool(f"ContextPolicy.{flag}", getattr(self, flag))
        exempt = self.archive_exempt_tools
        if isinstance(exempt, str) or not all(isinstance(t, str) for t in exempt):
            raise TypeError(
                f"ContextPolicy.archive_exempt_tools must be tool names, got {exempt!r}"
            )
        object.__setattr__(self, "archive_exempt_tools", tuple(exempt))
        if not isinstance(self.injection, InjectionPolicy):
            raise TypeError(
                f"ContextPolicy.injection must be an InjectionPolicy, got {self.injection!r}"
            )
        self.check_label()

    def reserve_for(self, max_tokens: int) -> int:
        """Tokens reserved for the answer out of ``max_tokens``."""
        return max_tokens // 10 if self.reserve_tokens is None else self.reserve_tokens
