"""loop_check's pure core: detect_loop. Private: import from ``agent_guards.loop_check``.

Nothing here imports LangGraph. ``detect_loop`` reads only the messages it is given, so a
replay from any checkpoint makes the same decision.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rapidfuzz import fuzz

from agent_guards.core.decision import GuardDecision, Verdict
from agent_guards.core.effects import Effect
from agent_guards.core.history import Action, latest_batch, scan_actions, with_declared
from agent_guards.loop_check.policy import PATTERNS, LoopPolicy

__all__ = [
    "detect_loop",
]

GUARD = "loop_check"


@dataclass(frozen=True)
class Finding:
    """One pattern's count at the end of the history."""

    pattern: str
    reason: str
    count: int
    ids: tuple[str, ...]
    detail: str
    tool: str = ""
    signature: str = ""
    boundary: bool = True
    """False while a cycle's next round is under way (the count has not moved yet)."""


def _new_write(a: Action, writes: set[str]) -> bool:
    """A call that may have changed the world in a way not seen before in this window.

    An executed call that may write, whose exact signature has not run before: only then
    can a later read see something new. Repeating the same write is the loop itself (a
    parse -> generate -> parse ping-pong), so it is no fresh start.
    """
    if a.kind != "tool" or not a.effect.changes_world or a.reused or a.signature in writes:
        return False
    writes.add(a.signature)
    return True


def _streak(actions: Sequence[Action], signature: str) -> tuple[int, list[str], bool]:
    count, last, failed = 0, None, True
    ids: list[str] = []
    writes: set[str] = set()
    for a in actions:
        if a.signature != signature:
            if _new_write(a, writes):  # what this call sees may have changed: a fresh start
                count, ids, last, failed = 0, [], None, True
            continue
        key = None if a.status == "pending" or a.reused else a.result_key
        if key is not None and last is not None and key != last:
            count, ids, failed = 0, [], True
        count += 1
        ids.append(a.call_id)
        if key is not None:
            last = key
            failed = failed and key == "error"
    return count, ids, failed and last == "error"


def _repeated_call(actions: Sequence[Action], policy: LoopPolicy) -> Finding | None:
    best: Finding | None = None
    for a in latest_batch(actions):
        if a.tool in policy.exempt_tools:
            continue
        count, ids, failing = _streak(actions, a.signature)
        if best is None or count > best.count:
            what = "failed" if failing else "was called"
            best = Finding(
                "repeated_call",
                "repeated_failure" if failing else "repeated_call",
                count,
                tuple(ids),
                f"{a.tool} {what} {count} times with the same arguments",
                a.tool,
                a.signature,
            )
    return best


def _same(a: Action, b: Action) -> bool:
    if a.signature != b.signature:
        return False
    return a.result_key is None or b.result_key is None or a.result_key == b.result_key


def _cycle(actions: Sequence[Action], policy: LoopPolicy) -> Finding | None:
    seq = [a for a in actions if a.tool not in policy.exempt_tools]
    n, best = len(seq), None
    for period in range(2, policy.max_cycle + 1):
        if n < 2 * period:
            break
        block = seq[n - period :]
        if len({a.signature for a in block}) < 2:
            continue
        m = 0
        while n - 1 - m - period >= 0 and _same(seq[n - 1 - m], seq[n - 1 - m - period]):
            m += 1
        reps = (m + period) // period
        if reps >= 2 and (best is None or reps > best.count):
            names = " -> ".join(a.tool or "reply" for a in block)
            ids = tuple(a.call_id for a in seq[n - reps * period :])
            detail = f"the cycle {names} repeated {reps} times"
            boundary = (m + period) % period == 0
            best = Finding("cycle", "cycle", reps, ids, detail, boundary=boundary)
    return best


def _no_progress(actions: Sequence[Action], policy: LoopPolicy) -> Finding | None:
    if not actions or actions[-1].kind != "tool":
        return None
    seen_sigs: set[str] = set()
    seen: dict[tuple[tuple[str, str], ...], tuple[set[str], set[str]]] = {}
    run: list[str] = []
    writes: set[str] = set()
    for a in actions:
        if _new_write(a, writes):  # progress, and what was read before it may have changed
            seen_sigs, seen, run = set(), {}, []
            continue
        if a.kind != "tool" or a.status != "ok" or a.reused or a.tool in policy.exempt_tools:
            continue
        if a.signature in seen_sigs:
            continue
        keys, evidence = seen.setdefault(a.scope, (set(), set()))
        if a.evidence is not None:
            stale = bool(keys) and a.evidence <= evidence
        else:
            stale = a.result_len >= policy.no_progress_min_chars and a.result_key in keys
        run = [*run, a.call_id] if stale else []
        seen_sigs.add(a.signature)
        keys.add(a.result_key or "")
        evidence.update(a.evidence or ())
    if not run:
        return None
    count = len(run) + 1
    return Finding(
        "no_progress",
        "no_progress",
        count,
        tuple(run),
        f"{count} different calls in a row brought back nothing new (same results or evidence ids)",
    )


def _repeated_message(actions: Sequence[Action], policy: LoopPolicy) -> Finding | None:
    if not actions or actions[-1].kind != "text":
        return None
    last = actions[-1].text.casefold()
    cutoff = policy.text_similarity * 100
    ids = [
        a.call_id
        for a in actions
        if a.kind == "text"
        and (a.text.casefold() == last or fuzz.ratio(a.text.casefold(), last, score_cutoff=cutoff))
    ]
    return Finding(
        "repeated_message",
        "repeated_message",
        len(ids),
        tuple(ids),
        f"the assistant said the same thing {len(ids)} times without a tool call",
    )


_DETECTORS = {
    "repeated_call": _repeated_call,
    "cycle": _cycle,
    "no_progress": _no_progress,
    "repeated_message": _repeated_message,
}


def _level(finding: Finding, policy: LoopPolicy) -> Verdict:
    nudge_at, stop_at = policy.limits(finding.pattern)
    if finding.count >= stop_at:
        return Verdict.ESCALATE if policy.on_stop == "escalate" else Verdict.STOP
    if nudge_at is not None and finding.count == nudge_at and finding.boundary:
        return Verdict.NUDGE
    return Verdict.CONTINUE


@functools.lru_cache(maxsize=1)
def _default_policy() -> LoopPolicy:
    return LoopPolicy()


_SEVERITY = {Verdict.CONTINUE: 0, Verdict.NUDGE: 1, Verdict.STOP: 2, Verdict.ESCALATE: 2}


def detect_loop(
    messages: Sequence[Any],
    *,
    policy: LoopPolicy | None = None,
    effects: Mapping[str, Effect | str] | None = None,
) -> GuardDecision:
    """Decide from a message history whether the run is looping: continue, nudge or stop.

    Looks at the most recent actions (tool calls with their results, assistant replies) and
    counts, for the latest action: identical calls (``repeated_call``, or
    ``repeated_failure`` when each one failed, whatever the error text), cycles such as
    A-B-A-B (``cycle``), different calls that bring back results or evidence ids already
    seen in the same scope (``no_progress``), and the assistant repeating itself
    (``repeated_message``). A count equal to ``nudge_at`` nudges, once per streak; a count
    reaching ``stop_at`` stops (or escalates). The decision depends on the counts alone,
    never on seeing an earlier nudge, so trimmed contexts decide the same.

    Args:
        messages: The history as a graph holds it (``AIMessage`` with ``tool_calls``,
            ``ToolMessage``, ``HumanMessage``; dicts are converted).
        policy: Thresholds, what counts as the same action, and the tools' effects.
        effects: Effects the tools declare, by name (``effects_of_tools(tools)``), for
            histories not written through :class:`ToolCallGuard` (which records each
            executed call's effect on its result). The policy's sets win over both.

    A call that may change the world (a write, or a tool of unknown effect) between two
    identical calls starts their count again, and makes the results seen before it
    stale, so a read after a write and different writes with alike confirmations are
    progress. Identical calls with nothing written in between are repeats, writes
    included.

    Returns:
        A GuardDecision with verdict CONTINUE, NUDGE, STOP or ESCALATE, reason the pattern
        (``no_loop`` when nothing repeats), the call ids involved in ``selected_ids`` and
        ``data = {"pattern", "count", "tool", "signature", "counts"}``.

    Raises:
        InvalidInputError: an item is not a message, or a tool call has no name.

    Example:
        >>> from agent_guards.testing import tool_call_message
        >>> from langchain_core.messages import HumanMessage, ToolMessage
        >>> history = [HumanMessage("rates?")]
        >>> for i in range(3):
        ...     history.append(tool_call_message("search", {"q": "rates"}, id=f"c{i}"))
        ...     history.append(ToolMessage("rate is 4%", tool_call_id=f"c{i}"))
        ...     print(i + 1, detect_loop(history).verdict.value)
        1 continue
        2 nudge
        3 stop
        >>> detect_loop(history).reason, detect_loop(history).data["count"]
        ('repeated_call', 3)
    """
    policy = LoopPolicy.coerce(policy, default=_default_policy())
    actions = scan_actions(messages, with_declared(policy.scan_options(), effects))
    found: list[tuple[Verdict, Finding]] = []
    for pattern in PATTERNS:
        if pattern in policy.patterns:
            finding = _DETECTORS[pattern](actions, policy)
            if finding is not None and finding.count >= 2:
                found.append((_level(finding, policy), finding))
    counts = {f.pattern: f.count for _, f in found}
    if not found:
        return GuardDecision(
            guard=GUARD,
            verdict=Verdict.CONTINUE,
            reason="no_loop",
            detail="no repeated action",
            policy=policy.label,
            data={"pattern": None, "count": 0, "counts": {}},
        )
    verdict, top = max(found, key=lambda vf: (_SEVERITY[vf[0]], vf[1].count))
    nudge_at, stop_at = policy.limits(top.pattern)
    return GuardDecision(
        guard=GUARD,
        verdict=verdict,
        reason=top.reason,
        detail=top.detail,
        selected_ids=top.ids,
        policy=policy.label,
        data={
            "pattern": top.pattern,
            "count": top.count,
            "tool": top.tool,
            "signature": top.signature[:200],
            "counts": counts,
            "nudge_at": nudge_at,
            "stop_at": stop_at,
        },
    )
