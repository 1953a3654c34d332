"""loop_check's pure core: detect_loop. Private: import from ``agent_guards.loop_check``.

Nothing here imports LangGraph. ``detect_loop`` reads only the messages it is given, so a
replay from any checkpoint makes the same decision.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from langchain_core.messages import ToolMessage
from rapidfuzz import fuzz

from agent_guards.core.decision import GuardDecision, Verdict
from agent_guards.core.effects import Effect
from agent_guards.core.history import (
    Action,
    ScanOptions,
    answer_failure,
    latest_batch,
    lone_call,
    scan_actions,
    with_declared,
)
from agent_guards.core.signatures import content_text
from agent_guards.core.texts import lead as _lead
from agent_guards.core.texts import stop_leads
from agent_guards.loop_check.content import repeated_chunk
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


@dataclass(frozen=True)
class View:
    """The history as the detectors read it."""

    turn: Sequence[Action]
    """Tool calls and replies that a new user message resets (the current turn in
    interactive mode, the whole window in headless mode)."""
    all: Sequence[Action]
    """Tool calls and replies across user turns (each knows its ``turns_ago``)."""
    raw: Sequence[Action]
    """``all`` with the markers: context summaries and sub-agent stops."""
    messages: Sequence[Any]


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


def _changed(a: Action, seen: set[str], writes: set[str], *, reads: bool = True) -> bool:
    """Did ``a`` change the picture? A new write (:func:`_new_write`), or (with ``reads``)
    a successful call whose result was not seen before in the window: new information, so
    a repeat after it may be informed by it. A failure or an answer seen before changes
    nothing."""
    key = a.result_key if a.kind == "tool" and a.status == "ok" and not a.reused else None
    new = key is not None and key not in seen
    if key is not None:
        seen.add(key)
    return _new_write(a, writes) or (reads and new)


class _Streak(NamedTuple):
    ids: list[str]
    """The occurrences since the picture last changed, the call's own result included."""
    failing: bool
    run_ids: list[str]
    """The occurrences since the picture last changed, whatever the call itself returned."""


def _streak(actions: Sequence[Action], signature: str, *, reads: bool = True) -> _Streak:
    """Occurrences of ``signature`` since the picture last changed (``reads=False``: only
    a new write changes it, for a call that may write itself).

    Identical calls of one assistant turn are one action: they are asked together, and
    the turn answers its duplicates itself (each runs once, the rest are told so)."""
    last, failed = None, True
    ids: list[str] = []
    run_ids: list[str] = []
    writes: set[str] = set()
    seen: set[str] = set()
    turn: int | None = None  # the turn of the latest occurrence counted
    for a in actions:
        if a.signature != signature:
            if _changed(a, seen, writes, reads=reads):  # what it sees may differ: restart
                ids, last, failed, turn, run_ids = [], None, True, None, []
            continue
        if a.ai_position == turn:
            continue
        turn = a.ai_position
        key = None if a.status == "pending" or a.reused else a.result_key
        if key is not None:
            seen.add(key)
        if key is not None and last is not None and key != last:
            ids, failed = [], True
        ids.append(a.call_id)
        run_ids.append(a.call_id)
        if key is not None:
            last = key
            failed = failed and key == "error"
    return _Streak(ids, failed and last == "error", run_ids)


def _repeated_call(view: View, policy: LoopPolicy) -> Finding | None:
    actions = view.turn
    best: Finding | None = None
    for a in latest_batch(actions):
        if a.tool in policy.exempt_tools:
            continue
        ids, failing, _ = _streak(actions, a.signature, reads=not a.effect.changes_world)
        count = len(ids)
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


def _repeated_effect(view: View, policy: LoopPolicy) -> Finding | None:
    """The same call of a tool that may write, run again and again with a new result each
    time. A read whose result changes is the world moving (a job from running to done);
    a call that may write and answers anew each time (a new ticket number) may be the
    write done again, so its runs are counted whatever it returns, with more room than a
    repeat of the same result (a changing answer may still be progress)."""
    best: Finding | None = None
    for a in latest_batch(view.turn):
        if a.tool in policy.exempt_tools or not a.effect.changes_world:
            continue
        repeats, _, runs = _streak(view.turn, a.signature, reads=False)
        if len(runs) > len(repeats) and (best is None or len(runs) > best.count):
            best = Finding(
                "repeated_effect",
                "repeated_effect",
                len(runs),
                tuple(runs),
                f"{a.tool} ran {len(runs)} times with the same arguments, with a new "
                "result each time (it may be doing its work again)",
                a.tool,
                a.signature,
            )
    return best


def _same(a: Action, b: Action) -> bool:
    if a.signature != b.signature:
        return False
    return a.result_key is None or b.result_key is None or a.result_key == b.result_key


def _cycle(view: View, policy: LoopPolicy) -> Finding | None:
    seq = [a for a in view.turn if a.tool not in policy.exempt_tools]
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


def _no_progress(view: View, policy: LoopPolicy) -> Finding | None:
    actions = view.turn
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
        # another scope (region, period) or another entity (an order id) is progress
        keys, evidence = seen.setdefault((*a.scope, *a.entities), (set(), set()))
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


def _reply_streak(view: View, policy: LoopPolicy, *, across: bool) -> list[Action]:
    """The latest reply and the similar replies right before it. A tool call in between
    breaks the streak (the assistant did something); a user message does too, unless
    ``across`` and the reply asks the user something."""
    actions = view.all
    if not actions or actions[-1].kind != "text":
        return []
    last = actions[-1].text.casefold()
    across = across and "?" in last
    cutoff = policy.text_similarity * 100
    streak: list[Action] = []
    for a in reversed(actions):
        if a.kind != "text" or (a.turns_ago != actions[-1].turns_ago and not across):
            break
        text = a.text.casefold()
        if text == last or fuzz.ratio(text, last, score_cutoff=cutoff):
            streak.append(a)
    return streak[::-1]


def _repeated_message(view: View, policy: LoopPolicy) -> Finding | None:
    """The assistant saying the same thing again within one turn."""
    streak = _reply_streak(view, policy, across=False)
    if not streak:
        return None
    n = len(streak)
    detail = f"the assistant said the same thing {n} times without a tool call"
    ids = tuple(a.call_id for a in streak)
    return Finding("repeated_message", "repeated_message", n, ids, detail)


def _conversation_loop(view: View, policy: LoopPolicy) -> Finding | None:
    """The assistant asking the user the same thing turn after turn, no tool call between
    (repeating an answer to a user who insists, a refusal held, is no loop)."""
    streak = _reply_streak(view, policy, across=True)
    turns = len({a.turns_ago for a in streak})
    if turns < 2:
        return None
    n = len(streak)
    detail = f"the assistant asked the same thing {n} times over {turns} user turns"
    ids = tuple(a.call_id for a in streak)
    return Finding("conversation_loop", "conversation_loop", n, ids, f"{detail}, no tool call")


def _near(a: Action, b: Action, similarity: float) -> bool:
    """Identical, or near-identical arguments of the same tool in the same scope."""
    if a.signature == b.signature:
        return True
    if a.tool != b.tool or a.scope != b.scope or similarity >= 1:
        return False
    return bool(fuzz.ratio(a.signature, b.signature, score_cutoff=similarity * 100))


def _same_failures(actions: Sequence[Action], last: Action, policy: LoopPolicy) -> list[Action]:
    """Failures like ``last`` (tool, failure shape, near-identical arguments) since the
    tool last worked or something new came in; user messages do not reset."""
    run: list[Action] = []
    writes: set[str] = set()
    seen: set[str] = set()
    for a in actions:
        if a.kind != "tool":
            continue
        if a.failure is not None:
            if a.failure == last.failure and _near(a, last, policy.failure_similarity):
                run.append(a)
            continue
        if a.status != "ok":
            continue
        if _changed(a, seen, writes) or a.tool == last.tool:
            run = []
    return run


def _failure_loop(view: View, policy: LoopPolicy) -> Finding | None:
    best: Finding | None = None
    for a in latest_batch(view.all):
        if a.failure is None or a.tool in policy.exempt_tools:
            continue
        run = _same_failures(view.all, a, policy)
        if best is None or len(run) > best.count:
            turns = len({r.turns_ago for r in run})
            shape = a.failure.split("|", 1)[-1][:80]
            best = Finding(
                "failure_loop",
                "failure_loop",
                len(run),
                tuple(r.call_id for r in run),
                f"{a.tool} failed {len(run)} times the same way ({shape}) over {turns} "
                "user turn(s)",
                a.tool,
                a.signature,
            )
    return best


def _text_at(messages: Sequence[Any], position: int) -> str:
    message = messages[position]
    content = message.get("content") if isinstance(message, Mapping) else message.content
    return content_text(content)


def _content_loop(view: View, policy: LoopPolicy) -> Finding | None:
    """The latest reply repeats itself inside (a content loop); the count is how many
    replies in a row did so."""
    positions = list(dict.fromkeys(a.ai_position for a in reversed(view.all)))
    ids: list[str] = []
    repeats = 0
    for position in positions:
        found = repeated_chunk(
            _text_at(view.messages, position),
            chunk=policy.content_chunk,
            repeats=policy.content_repeats,
        )
        if not found:
            break
        repeats = repeats or found
        ids.append(f"messages[{position}]")
    if not ids:
        return None
    detail = f"one reply repeated the same text {repeats} times"
    if len(ids) > 1:
        detail += f" ({len(ids)} replies in a row repeated themselves)"
    return Finding("content_loop", "content_loop", len(ids), tuple(reversed(ids)), detail)


def _condensation(view: View, policy: LoopPolicy) -> Finding | None:
    """Context summaries in a row with no action in between (OpenHands' context window
    error loop). In interactive mode only those after the latest user message count."""
    ids: list[str] = []
    for a in reversed(view.raw):
        if a.kind != "condense" or (policy.mode == "interactive" and a.turns_ago):
            break
        ids.append(a.call_id)
    if not ids:
        return None
    n = len(ids)
    detail = f"the context was condensed {n} times in a row with nothing done in between"
    return Finding("condensation", "condensation", n, tuple(reversed(ids)), detail)


STOP_LEADS: tuple[str, ...] = ("loop_check stopped the run", *stop_leads())
"""How a worker's final answer starts when its loop_check stopped it, read by its parent
from a tool result's text: the shipped ``loop_stop`` texts, and the wording of earlier
releases (threads checkpointed before the texts table). A custom ``loop_stop`` is spotted
when the parent's policy carries the same texts."""


@functools.lru_cache(maxsize=64)
def _stop_leads(loop_stop: str) -> tuple[str, ...]:
    """:data:`STOP_LEADS` and the lead of the policy's own ``loop_stop`` text (a memo)."""
    return (*STOP_LEADS, _lead(loop_stop))


def _says_stop(result: ToolMessage, policy: LoopPolicy) -> bool:
    """A tool result that is a sub-agent's final answer after its loop_check stopped it."""
    leads = _stop_leads(policy.texts.loop_stop)
    return content_text(result.content).lstrip().startswith(leads)


def _worker_stop(view: View, policy: LoopPolicy) -> Action | None:
    last = view.raw[-1] if view.raw else None
    if last is None or last.turns_ago:
        return None
    if last.kind == "worker_stop":
        return last
    for a in latest_batch(view.all):
        if a.message is not None and _says_stop(a.message, policy):
            return a
    return None


def _subagent(view: View, policy: LoopPolicy) -> Finding | None:
    """A sub-agent whose own loop_check stopped it, seen in this run's messages (its final
    message, or a tool result that is that message's text): the parent is stuck too."""
    stopped = _worker_stop(view, policy)
    if stopped is None:
        return None
    _, stop_at = policy.limits("subagent")
    what = stopped.tool or "a sub-agent"
    return Finding(
        "subagent",
        "subagent_stuck",
        stop_at,
        (stopped.call_id,),
        f"{what} stopped in a loop of its own",
        stopped.tool,
        stopped.signature,
    )


_DETECTORS: dict[str, Callable[[View, LoopPolicy], Finding | None]] = {
    "subagent": _subagent,
    "content_loop": _content_loop,
    "repeated_call": _repeated_call,
    "repeated_effect": _repeated_effect,
    "cycle": _cycle,
    "failure_loop": _failure_loop,
    "no_progress": _no_progress,
    "repeated_message": _repeated_message,
    "conversation_loop": _conversation_loop,
    "condensation": _condensation,
}


def read_history(
    messages: Sequence[Any], policy: LoopPolicy, effects: Mapping[str, Effect | str] | None
) -> View:
    """The history as :func:`detect_loop` reads it."""
    return _view(messages, policy, with_declared(policy.loop_scan_options(), effects))


def _view(messages: Sequence[Any], policy: LoopPolicy, opts: ScanOptions) -> View:
    raw = scan_actions(messages, opts)
    both = [a for a in raw if a.kind in ("tool", "text")]
    turn = [a for a in both if not a.turns_ago] if policy.mode == "interactive" else both
    return View(turn, both, raw, messages)


def quiet_turn(messages: Sequence[Any], policy: LoopPolicy, opts: ScanOptions) -> bool:
    """Whether :func:`detect_loop` finds nothing, read from the end of the history alone.

    Its fast path, for a turn whose only action is one answered call (:func:`lone_call`):
    then every detector but two counts that call once or not at all (a call counts once
    per turn; a cycle or a stale result needs more calls; a reply or summary streak needs
    the history to end with one; a failure loop needs a failure, checked here), and a count
    of one is no finding unless ``repeated_call`` nudges at 1. The two left are checked as
    their detectors check them: the call's message repeating itself inside
    (``content_loop``) and a result that is a sub-agent's loop stop (``subagent``).
    Custom normalizers run in the scan (and may raise there): the scan decides then.
    """
    if policy.normalizers or (
        "repeated_call" in policy.patterns and _first_level("repeated_call", policy) < 2
    ):
        return False
    turn = lone_call(messages, opts)
    if turn is None:
        return False
    message, result = turn
    if answer_failure(result, opts) is not None or _says_stop(result, policy):
        return False
    text = content_text(message.content)  # a call's message is mostly empty: nothing repeats
    return not text or not repeated_chunk(
        text, chunk=policy.content_chunk, repeats=policy.content_repeats
    )


def _first_level(pattern: str, policy: LoopPolicy) -> int:
    nudge_at, stop_at = policy.limits(pattern)
    return stop_at if nudge_at is None else nudge_at


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
    ``repeated_failure`` when each one failed, whatever the error text), the same failure
    of near-identical calls across user turns (``failure_loop``), cycles such as A-B-A-B
    (``cycle``), different calls that bring back results or evidence ids already seen in
    the same scope (``no_progress``), the assistant repeating itself (``repeated_message``)
    or asking the user the same thing turn after turn (``conversation_loop``), one reply
    repeating itself inside (``content_loop``), context summaries in a row
    (``condensation``) and a sub-agent stopped by its own loop check (``subagent_stuck``).
    A count equal to ``nudge_at`` nudges, once per streak; a count reaching ``stop_at``
    stops (or escalates). The decision depends on the counts alone, never on seeing an
    earlier nudge, so trimmed contexts decide the same.

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
    progress. Between two identical reads, a different call whose result was new starts
    the count again too. Identical calls with nothing new in between are repeats, writes
    included; the identical calls of one assistant turn are one action. A user message
    starts a fresh count in interactive mode, except for failure and conversation loops
    (a user message is new information, not progress).

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
    opts = with_declared(policy.loop_scan_options(), effects)
    if quiet_turn(messages, policy, opts):
        return no_loop(policy)
    view = _view(messages, policy, opts)
    found: list[tuple[Verdict, Finding]] = []
    for pattern in PATTERNS:
        if pattern in policy.patterns:
            finding = _DETECTORS[pattern](view, policy)
            if finding is not None and finding.count >= min(2, _first_level(pattern, policy)):
                found.append((_level(finding, policy), finding))
    counts = {f.pattern: f.count for _, f in found}
    if not found:
        return no_loop(policy)
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


def no_loop(policy: LoopPolicy) -> GuardDecision:
    """What :func:`detect_loop` decides when nothing repeats."""
    return GuardDecision(
        guard=GUARD,
        verdict=Verdict.CONTINUE,
        reason="no_loop",
        detail="no repeated action",
        policy=policy.label,
        data={"pattern": None, "count": 0, "counts": {}},
    )
