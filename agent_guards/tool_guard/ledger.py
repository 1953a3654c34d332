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
  ``max_tool_calls`` is spent from one account.

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
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from agent_guards.core.decision import GuardDecision, Verdict
from agent_guards.core.effects import Effect

if TYPE_CHECKING:
    from langgraph.store.base import BaseStore

__all__ = ["CANCEL_KEY", "GRANT_KEY", "Reconcile", "RunLedger", "grant", "granted"]

CANCEL_KEY = "agent_guards_cancel"
"""``config["configurable"][CANCEL_KEY] = reason`` cancels the run: a tool call planned under
it is answered as cancelled and never executed (the reference graph also ends the run at
its next step; see ``cancel_run``)."""

GRANT_KEY = "agent_guards_grant"
"""``config["configurable"][GRANT_KEY] = {"tool_calls": N, "reason": "..."}`` raises the
thread's tool budget by N for that run; the grant is recorded as a decision."""

Reconcile = Callable[[Mapping[str, Any]], "str | None"]
"""Asked about a write that started but never reported back: the ledger entry in, the
result text out when the write did happen (the call is answered with it), None when it
did not (the call runs)."""

_CONTENT_CHARS = 4000


@dataclass(frozen=True, kw_only=True)
class RunLedger:
    """Where and how the ledger is kept. Holds configuration only; the entries live in the
    store, under ``(*namespace, thread_id)``, one item per tool call id."""

    namespace: tuple[str, ...] = ("agent_guards", "ledger")
    """Store namespace prefix (labels cannot contain dots)."""
    reconcile: Reconcile | None = None
    """Decides a started-but-unknown write; without it a human is asked (``interrupt``)."""

    def __post_init__(self) -> None:
        if not self.namespace or any(
            not isinstance(p, str) or not p or "." in p for p in self.namespace
        ):
            raise ValueError(
                f"RunLedger.namespace must be non-empty labels without dots, got {self.namespace!r}"
            )
        if self.reconcile is not None and not callable(self.reconcile):
            raise TypeError(f"RunLedger.reconcile must be callable, got {self.reconcile!r}")

    def _ns(self, thread_id: str) -> tuple[str, ...]:
        return (*self.namespace, thread_id)

    def entry(self, store: BaseStore, thread_id: str, call_id: str) -> dict[str, Any] | None:
        """The recorded entry of one call, or None."""
        item = store.get(self._ns(thread_id), call_id)
        return dict(item.value) if item is not None else None

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
    ) -> dict[str, Any]:
        """Record the intent to run a call, before it runs (counted as an execution).

        ``previous`` is the call's entry when the caller has just read it (it is read
        again otherwise); the new entry is returned, for :meth:`finish`.
        """
        old = previous if previous is not None else self.entry(store, thread_id, call_id) or {}
        entry = {
            "call_id": call_id,
            "tool": tool,
            "signature": signature[:500],
            "effect": Effect(effect).value,
            "attempt": attempt,
            "executions": int(old.get("executions", 0)) + 1,
            "status": "started",
        }
        store.put(self._ns(thread_id), call_id, entry, index=False)
        return entry

    def finish(
        self,
        store: BaseStore,
        thread_id: str,
        call_id: str,
        *,
        content: str,
        ok: bool,
        started: Mapping[str, Any] | None = None,
    ) -> None:
        """Record a call's outcome, after it ran (``started``: the entry :meth:`start` wrote)."""
        old = started if started is not None else self.entry(store, thread_id, call_id)
        store.put(
            self._ns(thread_id),
            call_id,
            {
                **(old or {"call_id": call_id, "executions": 1}),
                "status": "done" if ok else "failed",
                "digest": hashlib.sha256(content.encode()).hexdigest()[:16],
                "content": content[:_CONTENT_CHARS],
            },
            index=False,
        )

    def executions(self, store: BaseStore, thread_id: str) -> int:
        """Every execution recorded for the thread, whatever checkpoint ran it."""
        total, offset = 0, 0
        while True:
            page = store.search(self._ns(thread_id), limit=100, offset=offset)
            total += sum(int(i.value.get("executions", 0)) for i in page)
            if len(page) < 100:
                return total
            offset += 100


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


Status = Literal["started", "done", "failed"]
