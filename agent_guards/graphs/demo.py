"""``agent-guards demo | history | replay``: the scenarios on real persistence.

The embedded default is one SQLite file (checkpoints and store) under ``.agent_guards/``;
``--db postgresql://...`` uses PostgresSaver and PostgresStore instead, the path to many
workers and to the LangGraph Agent Server without code changes.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import os
import sys
import time
import uuid
from collections.abc import Iterator, Mapping
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage

from agent_guards import GuardDecision, Verdict
from agent_guards.persistence import open_persistence, replay_config
from agent_guards.planner_gate import current_plan
from agent_guards.tool_guard.ledger import RunLedger
from agent_guards.tool_guard.state_ledger import StateLedger

from .plan_execute import build_graph
from .scenarios import SCENARIOS, ScenarioResult, run_baseline, run_scenario

__all__ = ["demo_main", "history_main", "replay_main"]


def _shown(d: GuardDecision) -> bool:
    """Hide the routine 'nothing to do' records (they stay in state and in the trace)."""
    return not (d.verdict is Verdict.CONTINUE and d.reason in ("within_budget", "no_memory"))


def _ids(d: GuardDecision) -> str:
    parts = []
    for label, ids in (
        ("chose", d.selected_ids),
        ("flagged", d.conflicting_ids),
        ("set aside", d.dropped_ids),
    ):
        if ids:
            parts.append(f"{label} {', '.join(ids)}")
    return "; ".join(parts)


def print_result(result: ScenarioResult, baseline: ScenarioResult | None) -> None:
    decisions = result.decisions
    shown = [d for d in decisions if _shown(d)]
    for d in shown:
        print(f"    {d.guard:<17} {d.verdict.value:<9} {d.reason:<22} {_ids(d)}")
    if len(shown) < len(decisions):
        hidden = len(decisions) - len(shown)
        print(f"    ({hidden} routine decisions hidden: within budget, no memory)")
    outcome = result.state.get("outcome") or {}
    text = str(outcome.get("text", "")).replace("\n", "\n      ")
    print(f"  -> {result.route}: {text}")
    usage = result.usage
    print(
        f"  cost with guards:    {usage.get('model_calls', 0)} model calls, "
        f"{usage.get('tool_calls', 0)} tool executions, {usage.get('steps', 0)} steps"
    )
    if baseline is not None:
        print(
            f"  cost without guards: {baseline.model_calls} model calls, {baseline.tool_calls} "
            f"tool executions; {baseline.ended}"
        )
        if baseline.state.get("outcome"):
            blended = str(baseline.state["outcome"].get("text", "")).replace("\n", " | ")
            print(f"    unguarded answer:  {blended}")


def demo_main(args: argparse.Namespace) -> int:
    """Run the scenarios, print each one's guard decisions and its cost with and without."""
    if args.list:
        for name, scenario in SCENARIOS.items():
            print(f"{name:<24} {scenario.title}")
        return 0
    names = args.scenario or list(SCENARIOS)
    unknown = [n for n in names if n not in SCENARIOS]
    if unknown:
        raise SystemExit(f"unknown scenario(s) {unknown}; allowed: {', '.join(SCENARIOS)}")
    model = None
    if args.model:
        from langchain.chat_models import init_chat_model

        model = init_chat_model(args.model)
    # time-stamped for people, with a random tail so two runs never share a thread
    stamp = f"{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:4]}"
    print(
        f"agent-guards demo: checkpoints and store in {args.db}; "
        f"model: {args.model or 'scripted (no network)'}"
    )
    with open_persistence(args.db) as (checkpointer, store):
        for i, name in enumerate(names, 1):
            scenario = SCENARIOS[name]
            thread = f"{name}-{stamp}"
            print(f"\n[{i}/{len(names)}] {name}: {scenario.title}")
            print(f"  user: {scenario.message}")
            result = run_scenario(scenario, checkpointer, store, thread_id=thread, model=model)
            baseline = None if args.no_baseline or model else run_baseline(scenario)
            print_result(result, baseline)
            print(f"  thread: {thread}  (agent-guards history {thread} --db {args.db})")
    return 0


def _scenario_of(thread: str) -> str:
    for name in sorted(SCENARIOS, key=len, reverse=True):
        if thread == name or thread.startswith(f"{name}-"):
            return name
    raise SystemExit(
        f"thread {thread!r} was not made by the demo (scenarios: {', '.join(SCENARIOS)}); "
        "for a thread of your own graph pass --graph module:attr (as langgraph.json names it)"
    )


def load_graph(spec: str, checkpointer: Any, store: Any) -> Any:
    """The graph ``spec`` names, ``module:attr`` or ``path/to/file.py:attr`` as in
    langgraph.json (a factory is called with an empty config), on ``checkpointer`` and
    ``store`` (the graph's own store wins when it has one)."""
    where, sep, attr = spec.rpartition(":")
    if not sep or not where or not attr:
        raise SystemExit(f"--graph must be module:attr or path/to/file.py:attr, got {spec!r}")
    try:
        if where.endswith(".py"):
            loader = importlib.util.spec_from_file_location(Path(where).stem, where)
            if loader is None or loader.loader is None:
                raise ImportError(f"cannot load {where}")
            module = importlib.util.module_from_spec(loader)
            loader.loader.exec_module(module)
        else:
            sys.path.insert(0, os.getcwd())
            module = importlib.import_module(where)
        found = getattr(module, attr)
    except (ImportError, AttributeError, OSError) as err:
        raise SystemExit(f"--graph {spec}: {err}") from None
    graph = found if hasattr(found, "get_state_history") else found({"configurable": {}})
    if not hasattr(graph, "get_state_history"):
        raise SystemExit(f"--graph {spec} is not a compiled graph nor a factory of one")
    copied = graph.copy(update={"checkpointer": checkpointer, "store": graph.store or store})
    # Pregel.copy() drops the strict-msgpack allowlist compile() derived from the state schema
    copied._serde_allowlist = graph._serde_allowlist
    return copied


def _graph_for(args: argparse.Namespace, checkpointer: Any, store: Any) -> Any:
    if getattr(args, "graph", None):
        return load_graph(args.graph, checkpointer, store)
    scenario = SCENARIOS[_scenario_of(args.thread)]
    return build_graph(
        scenario.script().model(),
        scenario.tools(),
        policies=scenario.policies,
        checkpointer=checkpointer,
        store=store,
    )


@contextmanager
def _existing(db: str) -> Iterator[tuple[Any, Any]]:
    """The persistence of a database that must exist already (history and replay read a
    past run): a mistyped ``--db`` ends with the path, and creates nothing."""
    stack = ExitStack()
    try:
        pair = stack.enter_context(open_persistence(db, create=False))
    except FileNotFoundError as err:
        raise SystemExit(f"{err}: check --db (the file the demo wrote)") from None
    with stack:
        yield pair


def history_main(args: argparse.Namespace) -> int:
    """``agent-guards history THREAD``: every checkpoint with plan version, usage, decision."""
    with _existing(args.db) as (checkpointer, store):
        graph = _graph_for(args, checkpointer, store)
        config = {"configurable": {"thread_id": args.thread}}
        rows = list(graph.get_state_history(config))
        if not rows:
            raise SystemExit(f"no checkpoints for thread {args.thread!r} in {args.db}")
        print(
            f"{'step':>4}  {'checkpoint':<36}  {'next':<16} {'plan':<5} {'model':>5} "
            f"{'tools':>5}  last decision"
        )
        for snap in reversed(rows):
            values = snap.values
            plan = current_plan(values.get("plans") or [])
            usage = values.get("usage") or {}
            log = values.get("guard_log") or []
            last = f"{log[-1].guard}:{log[-1].verdict.value}:{log[-1].reason}" if log else ""
            step = snap.metadata.get("step", "?") if snap.metadata else "?"
            checkpoint = snap.config["configurable"]["checkpoint_id"]
            version = f"v{plan.version}" if plan else "-"
            print(
                f"{step:>4}  {checkpoint:<36}  {','.join(snap.next) or '-':<16} {version:<5} "
                f"{usage.get('model_calls', 0):>5} {usage.get('tool_calls', 0):>5}  {last}"
            )
    return 0


def _history(graph: Any, thread: str) -> tuple[dict[str, Any], dict[str, list[str]]]:
    """The thread's checkpoints by id, and each checkpoint's children."""
    children: dict[str, list[str]] = {}
    snaps: dict[str, Any] = {}
    for snap in graph.get_state_history({"configurable": {"thread_id": thread}}):
        cid = snap.config["configurable"]["checkpoint_id"]
        snaps[cid] = snap
        if snap.parent_config:
            parent = snap.parent_config["configurable"]["checkpoint_id"]
            children.setdefault(parent, []).append(cid)
    return snaps, children


def _original_end(snaps: dict[str, Any], children: dict[str, list[str]], checkpoint: str) -> str:
    """The checkpoint at which the run that first went on from ``checkpoint`` ended.

    Earlier replays fork the thread, so its latest state may be a fork's (or a later
    turn's): follow the oldest child from ``checkpoint`` to the first checkpoint with
    nothing left to run (or a pause), the end of the original run.
    """
    node = checkpoint
    while children.get(node) and (
        node == checkpoint or (snaps[node].next and not snaps[node].interrupts)
    ):
        node = min(children[node])  # checkpoint ids sort by creation time
    return node


def _call_ids(snaps: dict[str, Any], end: str, start: str) -> list[str]:
    """The tool call ids a run asked for, in order, from its checkpoints ``start``..``end``."""
    chain, node = [], end
    while node in snaps:
        chain.append(snaps[node])
        if node == start or snaps[node].parent_config is None:
            break
        node = snaps[node].parent_config["configurable"]["checkpoint_id"]
    ids: dict[str, None] = {}
    for snap in reversed(chain):
        for key in ("messages", "step_messages"):
            for m in snap.values.get(key) or ():
                for call in m.tool_calls if isinstance(m, AIMessage) else ():
                    ids.setdefault(str(call.get("id")), None)
    return list(ids)


def _ran_without_store(values: Mapping[str, Any]) -> bool:
    """A run ledger kept in state, or a context_guard with no archive: no store had the run."""
    log = values.get("guard_log") or []
    return bool(values.get("run_ledger")) or any(
        d.data.get("archive_available") is False for d in log
    )


def _writes_after(at: Mapping[str, Any], end: Mapping[str, Any]) -> list[str]:
    """The writes the state's run ledger holds at ``end`` and not at ``at`` (done, or failed
    in a way that may have let them run; ``tool (call id)``): what a replay from ``at``
    runs again when no store knows them."""
    ledger = RunLedger()

    def done(values: Mapping[str, Any]) -> list[dict[str, Any]]:
        view = StateLedger(values.get("run_ledger"))
        return ledger.done_writes(view, "state", statuses=("done", "unknown"))

    known = {(e["call_id"], e["executions"]) for e in done(at)}
    return [
        f"{e['tool']} ({e['call_id']})"
        for e in reversed(done(end))  # oldest first
        if (e["call_id"], e["executions"]) not in known
    ]


def _canonical(decisions: list[GuardDecision], ids: list[str]) -> list[str]:
    """Decisions with the run's tool call ids written by position (``<call 3>``): a model
    asked again gives its calls fresh ids, and the same decision on them is the same."""
    names = sorted(((cid, f"<call {n}>") for n, cid in enumerate(ids, 1)), key=lambda p: -len(p[0]))
    out = []
    for d in decisions:
        compared = {k: v for k, v in d.to_dict().items() if k not in ("step", "at")}  # as ==
        text = json.dumps(compared, sort_keys=True, default=str)
        for cid, name in names:
            text = text.replace(json.dumps(cid)[1:-1], name)
        out.append(text)
    return out


def replay_main(args: argparse.Namespace) -> int:
    """``agent-guards replay THREAD --checkpoint ID``: re-run from a checkpoint on a fork, diff."""
    with _existing(args.db) as (checkpointer, store):
        graph = _graph_for(args, checkpointer, store)
        past = {"configurable": {"thread_id": args.thread, "checkpoint_id": args.checkpoint}}
        snapshot = graph.get_state(past)
        if not snapshot.values and not snapshot.next:
            raise SystemExit(f"no checkpoint {args.checkpoint!r} in thread {args.thread!r}")
        snaps, children = _history(graph, args.thread)
        end = _original_end(snaps, children, args.checkpoint)
        if store is not None and _ran_without_store(snaps[end].values if end in snaps else {}):
            # replayed on a store it never had, its decisions would differ by that alone
            graph = _graph_for(args, checkpointer, None)
        original = snaps[end].values.get("guard_log") or [] if end in snaps else []
        old_ids = _call_ids(snaps, end, args.checkpoint)
        rerun = _writes_after(snapshot.values, snaps[end].values if end in snaps else {})
        if rerun and not getattr(args, "run_writes", False):
            raise SystemExit(
                f"the thread keeps its run ledger in state (its graph has no store), so a "
                f"replay from {args.checkpoint} would run again the writes done after it: "
                f"{', '.join(rerun)}; pass --run-writes to replay anyway"
            )
        before = len(snapshot.values.get("guard_log") or [])
        # the run's own configurable (clock, principal...), read back from the checkpoint
        replayed = graph.invoke(None, replay_config(snapshot)).get("guard_log") or []
        snaps, _ = _history(graph, args.thread)
        latest = graph.get_state({"configurable": {"thread_id": args.thread}}).config
        new_ids = _call_ids(snaps, latest["configurable"]["checkpoint_id"], args.checkpoint)
        new, old = replayed[before:], original[before:]
        # a write the original run did is answered from the run ledger, not run again: the
        # replay's own record of the original execution, not a decision the run made
        recorded = [d for d in new if d.data.get("ledger") == "recorded_outcome"]
        new = [d for d in new if d.data.get("ledger") != "recorded_outcome"]
        new_keys, old_keys = _canonical(new, new_ids), _canonical(old, old_ids)
        same = new_keys == old_keys
        print(
            f"replayed {len(new)} decisions from checkpoint {args.checkpoint}: "
            f"{'identical to the original run' if same else 'DIFFERENT from the original run'}"
        )
        if recorded:
            print(
                f"  ({len(recorded)} completed call(s) answered from the run ledger, not run again)"
            )
        for i in range(max(len(new), len(old))):
            a = old[i] if i < len(old) else None
            b = new[i] if i < len(new) else None
            same_one = i < min(len(new), len(old)) and new_keys[i] == old_keys[i]
            mark = "=" if same_one else "!"
            label = b if b is not None else a
            assert label is not None  # i < max(len(new), len(old))
            print(f"  {mark} {label.guard:<17} {label.verdict.value:<9} {label.reason}")
        return 0 if same else 1
