"""The run ledger: what each tool call of a thread really did, kept in the graph's store.

Graph state is what the last checkpoint says; the world is what the tools did. They differ
after a crash between a tool's completion and the checkpoint, and on a fork from an earlier
checkpoint. The ledger records, per thread and per tool call, the intent before the tool
runs and the outcome after (effect, attempts, executions, a digest and the result), in the
graph's ``BaseStore``, which forks, resumes and retries share. So:

- a call whose outcome is recorded is answered from the ledger instead of running again,
  unless it only reads (a read may simply run again);
- a call that may write, started but never reported back, is not blindly re-run: a
  ``reconcile`` hook, or a human through ``interrupt()``, says whether it happened;
- every execution is counted once per thread, whatever checkpoint the run came from, so
  ``max_tool_calls`` is spent from one account;
- two workers serving one thread never both run a call: each execution is claimed with
  an insert only one writer can make, and the loser waits for the winner's outcome.

Example:
    >>> from langgraph.store.memory import InMemoryStore
    >>> ledger, store = RunLedger(), InMemoryStore()
    >>> _ = ledger.start(store, "t1", "c1", tool="transfer", signature="sig", effect="write")
    >>> ledger.finish(store, "t1", "c1", content="transferred 30", ok=True)
    >>> entry = ledger.entry(store, "t1", "c1")
    >>> entry["status"], entry["executions"], ledger.executions(store, "t1")
    ('done', 1, 1)
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

from langchain_core.messages import HumanMessage

from agent_guards.core.decision import GuardDecision, Verdict
from agent_guards.core.effects import Effect
from agent_guards.core.fields import namespace_label
from agent_guards.core.signatures import content_text, is_guard_message
from agent_guards.graph import ask_human, state_value
from agent_guards.tool_guard.claims import (
    aclaim,
    aoverwrite,
    claim,
    count,
    in_process,
    items,
    overwrite,
    size,
)

if TYPE_CHECKING:
    from langgraph.store.base import BaseStore

__all__ = ["CANCEL_KEY", "GRANT_KEY", "Reconcile", "RunLedger", "Turn", "grant", "granted"]

CANCEL_KEY = "agent_guards_cancel"
"""``config["configurable"][CANCEL_KEY] = reason`` cancels the run: a tool call planned under
it is answered as cancelled and never executed (the reference graph also ends the run at
its next step; see ``cancel_run``)."""

GRANT_KEY = "agent_guards_grant"
"""``config["configurable"][GRANT_KEY] = {"tool_calls": N, "reason": "..."}`` raises the
thread's tool budget by N for that run; the grant is recorded as a decision."""

Reconcile = Callable[[Mapping[str, Any]], "str | tuple[str, Any] | None"]
"""Asked about a write that started but never reported back: the ledger entry in; out, when
the write did happen, the result text (or ``(text, artifact)``) the call is answered with;
None when it did not (the call runs)."""

_CONTENT_CHARS = 4000
_ARTIFACT_BYTES = 64_000  # a larger artifact is not kept: the answer comes without it
_POLL = 0.05  # seconds between two looks at a call another worker is running
# ``hashlib.sha256()`` sets up a new OpenSSL digest on each call, dear on the fresh worker
# thread a tool node runs each call on; a copy of one made here is cheaper, same digest
_SHA256 = hashlib.sha256()


class Turn(NamedTuple):
    """The user message a call serves: its id, and where it stands (``"<i>:<digest>"``: at
    position i of the messages, with that text).

    Some models repeat a call id from one user turn to the next, so an id alone cannot tell
    a new request from the same call run again. A resume, a retry or a fork of the same
    turn keeps the message's id; a replay that applies the run's input again gives an
    input written without an id a new random one (``add_messages``), and keeps its place
    and text."""

    id: str | None
    at: str | None

    @classmethod
    def of(cls, state: Any) -> Turn | None:
        """The latest user message of ``state["messages"]`` (a guard's own messages, a
        nudge or a context summary, are no user turn); None without one."""
        messages = state_value(state, "messages")  # a dict state, or an object (pydantic)
        if not isinstance(messages, list):
            return None
        for i in range(len(messages) - 1, -1, -1):  # from the end: the cost is the turn's
            m = messages[i]
            if isinstance(m, HumanMessage) and not _from_a_guard(m):
                return cls(m.id, f"{i}:{_digest(content_text(m.content))}")
        return None

    def served(self, entry: Mapping[str, Any]) -> bool:
        """Whether a recorded execution served this turn (one recorded without a turn did)."""
        recorded = entry.get("turn")
        return (
            recorded is None
            or recorded == self.id
            or (self.at is not None and entry.get("turn_at") == self.at)
        )


def _from_a_guard(message: HumanMessage) -> bool:
    return is_guard_message(message) or "agent_guards" in (message.additional_kwargs or {})


@dataclass(frozen=True, kw_only=True)
class RunLedger:
    """Where and how the ledger is kept. Holds configuration only; the entries live in the
    store, under :meth:`scope` (the namespace and the thread), one item per execution of a
    tool call."""

    namespace: tuple[str, ...] = ("agent_guards", "ledger")
    """Store namespace prefix (labels cannot contain dots)."""
    reconcile: Reconcile | None = None
    """Decides a started-but-unknown write; without it a human is asked (``interrupt``)."""
    wait: float = 30.0
    """Seconds a worker waits for the outcome of a call another worker on the same thread
    is running (it never runs the call itself meanwhile)."""

    def __post_init__(self) -> None:
        if not self.namespace or any(
            not isinstance(p, str) or not p or "." in p for p in self.namespace
        ):
            raise ValueError(
                f"RunLedger.namespace must be non-empty labels without dots, got {self.namespace!r}"
            )
        if self.reconcile is not None and not callable(self.reconcile):
            raise TypeError(f"RunLedger.reconcile must be callable, got {self.reconcile!r}")
        if isinstance(self.wait, bool) or not isinstance(self.wait, int | float) or self.wait < 0:
            raise ValueError(f"RunLedger.wait must be seconds >= 0, got {self.wait!r}")

    def scope(self, thread_id: str) -> tuple[str, ...]:
        """The namespace of one thread's entries: ``namespace`` and the thread id as a store
        label (escaped by :func:`~agent_guards.core.fields.namespace_label`: a thread id
        like ``user.42`` or ``alice@example.com`` is no valid label as it is; ``%`` for an
        empty id, which no escaped id can be).

        >>> RunLedger().scope("user.42")
        ('agent_guards', 'ledger', 'user%2E42')
        """
        return (*self.namespace, namespace_label(thread_id) if thread_id else "%")

    def entry(
        self,
        store: BaseStore,
        thread_id: str,
        call_id: str,
        *,
        where: Callable[[Mapping[str, Any]], bool] | None = None,
    ) -> dict[str, Any] | None:
        """The call's latest execution (``executions`` says which), or None if it never ran;
        with ``where``, its latest execution that ``where`` accepts (a fork of an earlier
        user turn looks for the execution of that turn, not the last one)."""
        latest, n = None, 1
        while (item := store.get(self.scope(thread_id), _key(call_id, n))) is not None:
            if where is None or where(item.value):
                latest = dict(item.value)
            n += 1
        return latest

    def start(
        self,
        store: BaseStore,
        thread_id: str,
        call_id: str,
        *,
        tool: str,
        signature: str,
        effect: Effect | str,
        attempt: int = 1,
        previous: Mapping[str, Any] | None = None,
        args: Mapping[str, Any] | None = None,
        turn: Turn | None = None,
    ) -> dict[str, Any] | None:
        """Claim the call's next execution and record the intent, before it runs.

        The claim is atomic (see :mod:`~agent_guards.tool_guard.claims`): of two workers
        starting the same execution of a call, one gets the entry back and runs the tool,
        the other gets None and waits for the outcome (:meth:`outcome`). ``previous`` is
        the call's entry when the caller has just read it ({}: it never ran). ``args`` are
        kept when they are small JSON (a cancel can then undo a write no plan step lists).
        ``turn`` names the user message the call serves (see ``ToolCallGuard``).
        """
        old = previous if previous is not None else self.entry(store, thread_id, call_id) or {}
        ns, key, entry, text = self._intent(thread_id, call_id, old, in_process(store),
                                            tool=tool, signature=signature, effect=effect,
                                            attempt=attempt, args=args, turn=turn)  # fmt: skip
        return entry if claim(store, ns, key, entry, text=text) else None

    async def astart(
        self, store: BaseStore, thread_id: str, call_id: str, *, previous: Mapping[str, Any],
        **intent: Any,
    ) -> dict[str, Any] | None:  # fmt: skip
        """:meth:`start` from the event loop, for a caller that has read ``previous``."""
        ns, key, entry, text = self._intent(thread_id, call_id, previous, in_process(store),
                                            **intent)  # fmt: skip
        return entry if await aclaim(store, ns, key, entry, text=text) else None

    def _intent(
        self,
        thread_id: str,
        call_id: str,
        old: Mapping[str, Any],
        kept_as_is: bool,
        *,
        tool: str,
        signature: str,
        effect: Effect | str,
        attempt: int = 1,
        args: Mapping[str, Any] | None = None,
        turn: Turn | None = None,
    ) -> tuple[tuple[str, ...], str, dict[str, Any], str | None]:
        """Where the execution after ``old`` goes, its entry and the entry's JSON (None for a
        store that keeps values as they are, ``kept_as_is``)."""
        entry: dict[str, Any] = {
            "call_id": call_id,
            "tool": tool,
            "signature": signature[:500],
            "effect": Effect(effect).value,
            "attempt": attempt,
            "executions": int(old.get("executions", 0)) + 1,
            "status": "started",
            "started_at": time.time(),  # wall clock: how long another worker may still run it
        }
        if turn is not None and turn.id is not None:
            entry["turn"] = str(turn.id)[:200]
            if turn.at is not None:
                entry["turn_at"] = turn.at
        args = None if args is None else dict(args)
        entry, text = _with_small_json(entry, "args", args, text=not kept_as_is)
        return self.scope(thread_id), _key(call_id, int(entry["executions"])), entry, text

    def finish(
        self,
        store: BaseStore,
        thread_id: str,
        call_id: str,
        *,
        content: str,
        ok: bool,
        started: Mapping[str, Any] | None = None,
        artifact: Any = None,
        unknown: bool = False,
    ) -> None:
        """Record a call's outcome, after it ran (``started``: the entry :meth:`start` wrote).

        The result's ``artifact`` (the evidence a tool returns next to its text) is kept
        when it is JSON and small, so a call answered from the ledger later brings it back.
        ``unknown``: the call failed in a way that may have let it do its work (a write that
        timed out): recorded ``unknown``, it is asked about like a write that never reported
        back, never run again on its own.
        """
        old = started if started is not None else self.entry(store, thread_id, call_id)
        ns, key, value, text = self._outcome(thread_id, call_id, old, in_process(store),
                                             content=content, ok=ok, artifact=artifact,
                                             unknown=unknown)  # fmt: skip
        overwrite(store, ns, key, value, text=text)

    async def afinish(
        self, store: BaseStore, thread_id: str, call_id: str, *, content: str, ok: bool,
        started: Mapping[str, Any], artifact: Any = None, unknown: bool = False,
    ) -> None:  # fmt: skip
        """:meth:`finish` from the event loop, for the entry :meth:`astart` wrote."""
        ns, key, value, text = self._outcome(thread_id, call_id, started, in_process(store),
                                             content=content, ok=ok, artifact=artifact,
                                             unknown=unknown)  # fmt: skip
        await aoverwrite(store, ns, key, value, text=text)

    def _outcome(
        self,
        thread_id: str,
        call_id: str,
        old: Mapping[str, Any] | None,
        kept_as_is: bool,
        *,
        content: str,
        ok: bool,
        artifact: Any,
        unknown: bool = False,
    ) -> tuple[tuple[str, ...], str, dict[str, Any], str | None]:
        """Where the outcome of execution ``old`` goes, its value and the value's JSON (None
        for a store that keeps values as they are, ``kept_as_is``)."""
        old = old or {"call_id": call_id, "executions": 1}
        value = {
            **old,
            "status": "done" if ok else "unknown" if unknown else "failed",
            "digest": _digest(content),
            "content": content[:_CONTENT_CHARS],
        }
        value, text = _with_small_json(value, "artifact", artifact, text=not kept_as_is)
        return self.scope(thread_id), _key(call_id, int(old["executions"])), value, text

    def void(self, store: BaseStore, thread_id: str, entry: Mapping[str, Any]) -> None:
        """Record that a started execution never happened (a reconcile or a human said
        so): it is not counted, and the call's next execution is a new one."""
        key = _key(str(entry["call_id"]), int(entry["executions"]))
        store.put(self.scope(thread_id), key, {**entry, "status": "not_run"}, index=False)

    def outcome(
        self,
        store: BaseStore,
        thread_id: str,
        call_id: str,
        *,
        sleep: Callable[[float], Any] = time.sleep,
    ) -> dict[str, Any] | None:
        """The call's latest entry once it is no longer running elsewhere: a call started
        less than ``wait`` seconds ago may still be running in another worker, so this
        waits for its outcome until the start is ``wait`` seconds old. A ``started``
        entry comes back only when it never reported back in that time."""
        while True:
            entry = self.entry(store, thread_id, call_id)
            if entry is None or entry["status"] != "started":
                return entry
            if time.time() - float(entry.get("started_at", 0)) >= self.wait:
                return entry
            sleep(_POLL)

    def ask(self, entry: Mapping[str, Any]) -> str | tuple[str, Any] | None:
        """Did a write that started but never reported back happen? ``reconcile`` says,
        else a human, through ``interrupt()``: the result text (or ``(text, artifact)``)
        when it did, None when it did not."""
        if self.reconcile is not None:
            return self.reconcile(entry)
        answer = ask_human(
            {
                "type": "unknown_write_outcome",
                "call_id": entry.get("call_id"),
                "tool": entry.get("tool"),
                "question": f"{entry.get('tool')} (call {entry.get('call_id')}) started and "
                + (
                    "failed in a way that may have let it run"
                    if entry.get("status") == "unknown"
                    else "never reported back"
                )
                + ". Did it happen? Resume with {'ran': true, 'result': '...'} "
                "(and its 'artifact', if any) or {'ran': false} to run it now.",
            }
        )
        if isinstance(answer, Mapping) and answer.get("ran"):
            result = str(answer.get("result") or "done (confirmed by a human)")
            return result, answer.get("artifact")
        return None

    def done_writes(
        self, store: BaseStore, thread_id: str, *, statuses: tuple[str, ...] = ("done",)
    ) -> list[dict[str, Any]]:
        """The thread's completed executions that may have changed the world (writes,
        idempotent writes, unknown tools), newest first: what a cancel may have to undo
        (this thread's only, never those of a thread whose id starts with this one).
        ``statuses=("done", "unknown")`` adds the writes that may have run."""
        found = [
            dict(item.value)
            for item in items(store, self.scope(thread_id))
            if item.value.get("status") in statuses and item.value.get("effect") != "read"
        ]
        return sorted(found, key=lambda e: -float(e.get("started_at", 0)))

    def executions(self, store: BaseStore, thread_id: str, *, under: int | None = None) -> int:
        """Every execution recorded for the thread, whatever checkpoint or worker ran it
        (one item per execution; a start that never happened is not counted). One
        ``COUNT`` on SQLite and PostgreSQL stores, read before every budgeted call.

        ``under``: when the thread holds fewer than ``under`` entries in all, their number
        comes back instead, taken without reading any entry (see :func:`~.claims.size`):
        at least the count and below ``under``, so a check of the count against a limit
        of ``under`` or less decides the same. A budget's check then reads no entry until
        the thread nears its limit (in-process stores: its cost does not grow with the
        thread; SQL stores: a count of the prefix index instead of a read of every value).
        """
        ns = self.scope(thread_id)
        if under is not None and (held := size(store, ns)) is not None and held < under:
            return held
        return count(store, ns, status_not="not_run")


def _small_json(value: Any) -> Any:
    """``value`` if it is JSON of at most ``_ARTIFACT_BYTES``, else None."""
    if value is None:
        return None
    try:
        text = json.dumps(value)
    except (TypeError, ValueError):
        return None
    return value if len(text) <= _ARTIFACT_BYTES else None


def _with_small_json(
    value: dict[str, Any], name: str, extra: Any, *, text: bool = True
) -> tuple[dict[str, Any], str | None]:
    """``value`` with ``name: extra`` added when ``extra`` is small JSON (as ``_small_json``
    decides), and its JSON text: the one encoding both the check and the write need. Without
    ``text`` (a store that keeps values as they are: nothing to write as JSON) only
    ``extra`` is encoded, for the check, and the text is None."""
    if not text:
        kept = extra is not None and _small_json(extra) is not None
        return ({**value, name: extra} if kept else value), None
    if extra is not None:
        candidate = {**value, name: extra}
        try:
            encoded = json.dumps(candidate)
        except (TypeError, ValueError):
            pass
        else:  # extra's JSON is a part of the text: a text this short proves it small
            if len(encoded) <= _ARTIFACT_BYTES or _small_json(extra) is not None:
                return candidate, encoded
    return value, json.dumps(value)


def _digest(content: str) -> str:
    """The first 16 hex digits of the SHA-256 of ``content``."""
    sha = _SHA256.copy()
    sha.update(content.encode())
    return sha.hexdigest()[:16]


def _key(call_id: str, execution: int) -> str:
    """One store item per execution of a call: ``<call id>#<n>``."""
    return f"{call_id}#{execution}"


def grant(config: Mapping[str, Any] | None) -> tuple[int, str]:
    """The extra tool calls a run's config grants, and why (0 and "" without a grant)."""
    value = ((config or {}).get("configurable") or {}).get(GRANT_KEY)
    if value is None:
        return 0, ""
    if not isinstance(value, Mapping):
        raise TypeError(f"configurable[{GRANT_KEY!r}] must be a mapping, got {value!r}")
    extra = value.get("tool_calls", 0)
    if isinstance(extra, bool) or not isinstance(extra, int) or extra < 0:
        raise ValueError(f"configurable[{GRANT_KEY!r}]['tool_calls'] must be an int >= 0")
    return extra, str(value.get("reason", ""))


def granted(call: Mapping[str, Any], limit: int, extra: int, reason: str) -> GuardDecision:
    """The record of a call that ran only because the run's config granted more calls."""
    return GuardDecision(
        guard="budget",
        verdict=Verdict.CONTINUE,
        reason="granted",
        detail=f"{call['name']} ran past max_tool_calls={limit} on a grant of {extra}"
        + (f" ({reason})" if reason else ""),
        selected_ids=(str(call["id"]),),
        policy=f"Budget(max_tool_calls={limit})",
        data={"limit": limit, "grant": extra, "reason": reason},
    )


Status = Literal["started", "done", "failed", "unknown", "not_run"]
