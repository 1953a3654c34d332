"""Tool effects: where a tool's effect comes from, and what reuse and loop counting do with it.

Truth tables over the effect classes (read, idempotent write, write, unknown): an identical
call is answered from an earlier result only while that result is still true, a write is
never run twice silently, and a write between two reads makes the second read progress.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool

from agent_guards.core import Effect, ToolEffects, annotate_tool, effect_from_metadata
from agent_guards.core.effects import effects_of_tools
from agent_guards.loop_check import LoopPolicy, detect_loop
from agent_guards.tool_guard.plan import plan_call

_ids = itertools.count(1)

# get_balance reads, set_flag is an idempotent write, transfer and book write, probe is
# unknown (no set names it and it declares nothing).
EFFECTS = ToolEffects(
    read_only={"get_balance", "run_tests", "search"},
    idempotent={"set_flag"},
    writes={"transfer", "book", "cancel", "edit_file"},
)
POLICY = LoopPolicy(effects=EFFECTS)


# -- where an effect comes from ---------------------------------------------------------


@pytest.mark.parametrize(
    ("metadata", "expected"),
    [
        ({"readOnlyHint": True}, Effect.READ),
        ({"readOnlyHint": True, "destructiveHint": True}, Effect.READ),
        ({"readOnlyHint": False}, Effect.WRITE),
        ({"readOnlyHint": False, "idempotentHint": True}, Effect.IDEMPOTENT),
        ({"idempotentHint": True}, Effect.IDEMPOTENT),
        ({"destructiveHint": False}, Effect.WRITE),
        ({"openWorldHint": True}, Effect.WRITE),
        ({"title": "Search", "readOnlyHint": None}, None),
        ({}, None),
        (None, None),
        ("readOnlyHint", None),
    ],
)
def test_mcp_annotations_give_the_effect(metadata: Any, expected: Effect | None) -> None:
    assert effect_from_metadata(metadata) is expected


def test_the_policy_wins_over_annotations_which_win_over_the_default() -> None:
    effects = ToolEffects(writes={"search"}, default=Effect.READ)
    assert effects.of("search", {"readOnlyHint": True}) is Effect.WRITE
    assert effects.of("other", {"readOnlyHint": False}) is Effect.WRITE
    assert effects.of("other", None) is Effect.READ
    assert ToolEffects().of("other") is Effect.UNKNOWN
    assert ToolEffects().of("other", "idempotent_write") is Effect.IDEMPOTENT
    assert ToolEffects().of("other", "nonsense") is Effect.UNKNOWN


def test_annotate_tool_writes_the_mcp_hints_on_a_plain_tool() -> None:
    @tool
    def transfer(account: str, amount: int) -> str:
        """Move money."""
        return "done"

    @tool
    def set_flag(name: str) -> str:
        """Set a flag."""
        return "set"

    @tool
    def search(q: str) -> str:
        """Search."""
        return q

    annotate_tool(transfer)
    annotate_tool(set_flag, idempotent=True)
    annotate_tool(search, read_only=True, open_world=True)
    assert transfer.metadata == {
        "readOnlyHint": False,
        "idempotentHint": False,
        "destructiveHint": True,
    }
    assert effects_of_tools([transfer, set_flag, search]) == {
        "transfer": Effect.WRITE,
        "set_flag": Effect.IDEMPOTENT,
        "search": Effect.READ,
    }
    with pytest.raises(ValueError, match="pick one"):
        annotate_tool(search, read_only=True, idempotent=True)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"read_only": "search"}, TypeError, "ToolEffects.read_only must be a set of tool names"),
        ({"writes": {""}}, TypeError, "ToolEffects.writes must hold non-empty names"),
        ({"read_only": {"a"}, "idempotent": {"a"}}, ValueError, "'a' is in more than one set"),
        ({"default": "sometimes"}, ValueError, "'sometimes' is not a valid Effect"),
    ],
)
def test_bad_effect_sets_are_refused_naming_the_field(
    kwargs: dict[str, Any], error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=match):
        ToolEffects(**kwargs)


def test_loop_policy_takes_only_a_tool_effects() -> None:
    with pytest.raises(TypeError, match=r"LoopPolicy\.effects must be a ToolEffects"):
        LoopPolicy(effects={"read_only": ["a"]})  # type: ignore[arg-type]


# -- reuse: answered from an earlier result only while it is still true -------------------


@dataclass
class Request:
    """What ``plan_call`` reads of a ``ToolCallRequest``."""

    state: dict[str, Any]
    tool_call: Any
    tool: Any = None


def ask(*calls: tuple[str, dict[str, Any]]) -> AIMessage:
    """One assistant turn asking for ``calls`` (parallel when several)."""
    return AIMessage(
        "",
        tool_calls=[{"name": n, "args": a, "id": f"c{next(_ids)}"} for n, a in calls],
    )


def answer(ai: AIMessage, *results: str) -> list[ToolMessage]:
    return [
        ToolMessage(r, tool_call_id=str(c["id"]), name=c["name"])
        for c, r in zip(ai.tool_calls, results, strict=True)
    ]


def history(*steps: tuple[str, dict[str, Any], str]) -> list[BaseMessage]:
    """A user message, then one call and its answer per step."""
    out: list[BaseMessage] = [HumanMessage("task")]
    for name, args, result in steps:
        ai = ask((name, args))
        out += [ai, *answer(ai, result)]
    return out


def plan_next(messages: list[BaseMessage], name: str, args: dict[str, Any]) -> Any:
    """Plan a new assistant turn's call after ``messages``."""
    ai = ask((name, args))
    messages = [*messages, ai]
    return plan_call(Request({"messages": messages}, ai.tool_calls[0]), loop=POLICY, retry=None)  # type: ignore[arg-type]


BAL = ("get_balance", {"account": "A"}, "balance 100")
PAY = ("transfer", {"account": "A", "amount": 30}, "transferred 30; new balance 70")

REUSE_TABLE = [
    # (name, history, next call, plan kind, decision (verdict, reason) or None)
    ("read, read", [BAL], BAL, "reuse", ("reuse", "repeated_call")),
    ("read, write, read", [BAL, PAY], BAL, "execute", None),
    (
        "read, idempotent write, read",
        [BAL, ("set_flag", {"name": "x"}, "set")],
        BAL,
        "execute",
        None,
    ),
    ("read, unknown, read", [BAL, ("probe", {"x": 1}, "ok")], BAL, "execute", None),
    ("read, other read, read", [BAL, ("search", {"q": "fees"}, "fees: none")], BAL, "reuse", None),
    ("write, write", [PAY], PAY, "reuse", ("refuse", "repeated_write")),
    ("write, read, write", [PAY, BAL], PAY, "reuse", ("refuse", "repeated_write")),
    (
        "book, cancel, book again",
        [("book", {"room": 7}, "booked R1"), ("cancel", {"booking": "R1"}, "cancelled R1")],
        ("book", {"room": 7}, ""),
        "execute",
        None,
    ),
    (
        "idempotent, idempotent",
        [("set_flag", {"name": "x"}, "set")],
        ("set_flag", {"name": "x"}, ""),
        "reuse",
        ("reuse", "repeated_call"),
    ),
    ("unknown, unknown", [("probe", {"x": 1}, "ok")], ("probe", {"x": 1}, ""), "execute", None),
    (
        "unknown x2 alike, then again",
        [("probe", {"x": 1}, "ok 42"), ("probe", {"x": 1}, "ok 42")],
        ("probe", {"x": 1}, ""),
        "reuse",
        ("reuse", "repeated_call"),
    ),
    (
        "unknown x2 differing, then again",
        [("probe", {"x": 1}, "ok 41"), ("probe", {"x": 1}, "ok 42")],
        ("probe", {"x": 1}, ""),
        "execute",
        None,
    ),
    (
        "failed write, write again",
        [("transfer", {"account": "A", "amount": 30}, "Error: timed out")],
        PAY,
        "execute",
        None,
    ),
]


@pytest.mark.parametrize(
    ("steps", "nxt", "kind", "decision"),
    [row[1:] for row in REUSE_TABLE],
    ids=[row[0] for row in REUSE_TABLE],
)
def test_reuse_truth_table(
    steps: list[tuple[str, dict[str, Any], str]],
    nxt: tuple[str, dict[str, Any], str],
    kind: str,
    decision: tuple[str, str] | None,
) -> None:
    messages = history(*steps)
    if steps and steps[-1][2].startswith("Error"):
        messages[-1] = messages[-1].model_copy(update={"status": "error"})  # type: ignore[union-attr]
    plan = plan_next(messages, nxt[0], dict(nxt[1]))
    assert plan.kind == kind
    if decision is not None:
        assert [(d.verdict.value, d.reason) for d in plan.decisions] == [decision]
    assert plan.effect is EFFECTS.of(nxt[0])


def test_a_stale_read_is_never_answered_balance_transfer_balance() -> None:
    plan = plan_next(history(BAL, PAY), *BAL[:2])
    assert plan.kind == "execute"  # the real balance is 70; "balance 100" is stale


def test_a_refused_write_tells_the_model_what_happened() -> None:
    plan = plan_next(history(PAY), *PAY[:2])
    text = plan.message.content
    assert text.startswith("[loop_check] Not executed: transfer already ran")
    assert "new balance 70" in text and "ask the user to confirm" in text
    assert plan.message.response_metadata["agent_guards"]["refused"] == "repeated_write"


def test_an_idempotent_repeat_is_answered_as_already_done() -> None:
    plan = plan_next(history(("set_flag", {"name": "x"}, "flag x set")), "set_flag", {"name": "x"})
    assert plan.message.content.startswith("[loop_check] Already done: set_flag ran")
    assert "flag x set" in plan.message.content


def test_the_tools_own_annotations_are_read_from_the_request() -> None:
    @tool
    def lookup(q: str) -> str:
        """Look up."""
        return q

    messages = history(("lookup", {"q": "a"}, "alpha"))
    ai = ask(("lookup", {"q": "a"}))
    request = Request({"messages": [*messages, ai]}, ai.tool_calls[0], tool=lookup)
    plain = LoopPolicy()
    assert plan_call(request, loop=plain, retry=None).kind == "execute"  # type: ignore[arg-type]
    annotate_tool(lookup, read_only=True)
    assert plan_call(request, loop=plain, retry=None).kind == "reuse"  # type: ignore[arg-type]


# -- one turn, parallel calls -----------------------------------------------------------


def plan_in_turn(*calls: tuple[str, dict[str, Any]]) -> list[str]:
    """Plan every call of one parallel turn; the kinds, in order."""
    ai = ask(*calls)
    messages = [HumanMessage("task"), ai]
    return [
        plan_call(Request({"messages": messages}, c), loop=POLICY, retry=None).kind  # type: ignore[arg-type]
        for c in ai.tool_calls
    ]


@pytest.mark.parametrize(
    ("calls", "kinds"),
    [
        ([BAL[:2], BAL[:2]], ["execute", "reuse"]),
        ([PAY[:2], PAY[:2]], ["execute", "reuse"]),
        ([BAL[:2], PAY[:2], BAL[:2]], ["execute", "execute", "execute"]),
        ([("probe", {"x": 1}), ("probe", {"x": 1})], ["execute", "reuse"]),
        ([BAL[:2], ("get_balance", {"account": "B"})], ["execute", "execute"]),
    ],
    ids=["read twice", "write twice", "read, write, read", "unknown twice", "two accounts"],
)
def test_parallel_calls_in_one_turn(
    calls: list[tuple[str, dict[str, Any]]], kinds: list[str]
) -> None:
    assert plan_in_turn(*calls) == kinds


def test_a_duplicate_write_in_one_turn_is_refused_not_run() -> None:
    ai = ask(PAY[:2], PAY[:2])
    plan = plan_call(
        Request({"messages": [HumanMessage("pay"), ai]}, ai.tool_calls[1]), loop=POLICY, retry=None
    )  # type: ignore[arg-type]
    assert [(d.verdict.value, d.reason) for d in plan.decisions] == [("refuse", "duplicate_write")]
    assert "running it twice would make the change twice" in plan.message.content


# -- counting: a write between two reads is progress ------------------------------------


def counted(steps: list[tuple[str, dict[str, Any], str]]) -> tuple[str, str]:
    d = detect_loop(history(*steps), policy=POLICY)
    return d.verdict.value, d.reason


TESTS = ("run_tests", {}, "8 failed, 12 passed: test_a, test_b, ... see the log for details")


@pytest.mark.parametrize(
    ("steps", "expected"),
    [
        ([TESTS, TESTS], ("nudge", "repeated_call")),
        ([TESTS, TESTS, TESTS], ("stop", "repeated_call")),
        (
            [TESTS, ("edit_file", {"path": "a.py", "patch": 1}, "ok"), TESTS],
            ("continue", "no_loop"),
        ),
        (
            [TESTS]
            + [
                s
                for i in range(5)
                for s in (("edit_file", {"path": "a.py", "patch": i}, "ok"), TESTS)
            ],
            ("continue", "no_loop"),
        ),
        (
            [
                TESTS,
                ("edit_file", {"path": "a.py", "patch": 1}, "ok"),
                TESTS,
                ("edit_file", {"path": "a.py", "patch": 1}, "ok"),
                TESTS,
            ],
            ("nudge", "repeated_call"),
        ),
        (
            [("edit_file", {"path": f"f{i}.py", "patch": i}, "file saved") for i in range(20)],
            ("continue", "no_loop"),
        ),
        ([PAY, PAY], ("nudge", "repeated_call")),
        ([PAY, BAL, PAY], ("nudge", "repeated_call")),
        ([BAL, PAY, BAL], ("continue", "no_loop")),
    ],
    ids=[
        "tests re-run with nothing between",
        "tests three times with nothing between",
        "tests, an edit, tests",
        "tests after five different edits",
        "tests after the same edit twice",
        "twenty different edits, alike confirmations",
        "the same write twice",
        "the same write around a read",
        "a read around a write",
    ],
)
def test_counting_truth_table(
    steps: list[tuple[str, dict[str, Any], str]], expected: tuple[str, str]
) -> None:
    assert counted(steps) == expected


def test_reworded_reads_of_unknown_effect_are_not_no_progress() -> None:
    """A tool that may write can bring back the same text for a reason: never "no progress"."""
    long = "The 2026 policy needs a second review above 500k for every contract type."
    steps = [("lookup", {"q": q}, long) for q in ("a", "b", "c")]
    assert detect_loop(history(*steps)).reason == "no_loop"
    assert detect_loop(history(*steps), effects={"lookup": "read"}).reason == "no_progress"


def test_effects_given_to_detect_loop_must_be_a_mapping() -> None:
    with pytest.raises(TypeError, match="effects must map tool names"):
        detect_loop(history(BAL), effects=["get_balance"])  # type: ignore[arg-type]


# -- the keys that tell two writes apart ------------------------------------------------

REMIND = ("remind", {"text": "pills", "timestamp": "2026-12-02T09:00"}, "reminder set")
KEYED = ("transfer", {"account": "A", "amount": 30, "idempotency_key": "k1"}, "transferred 30")
KEY_EFFECTS = ToolEffects(read_only={"search"}, writes={"transfer", "remind"})


def plan_keyed(
    steps: list[tuple[str, dict[str, Any], str]], name: str, args: dict[str, Any]
) -> Any:
    ai = ask((name, args))
    request = Request({"messages": [*history(*steps), ai]}, ai.tool_calls[0])
    return plan_call(request, loop=LoopPolicy(effects=KEY_EFFECTS), retry=None)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("nxt", "kind"),
    [
        (("transfer", {**KEYED[1], "idempotency_key": "k2"}), "execute"),
        (("transfer", {**KEYED[1], "trace_id": "t-7"}), "reuse"),
        (("transfer", dict(KEYED[1])), "reuse"),
        (("remind", {**REMIND[1], "timestamp": "2026-12-03T09:00"}), "execute"),
    ],
    ids=["a fresh idempotency key", "only a trace id", "identical", "another time"],
)
def test_a_write_with_a_new_idempotency_key_or_time_is_a_new_change(
    nxt: tuple[str, dict[str, Any]], kind: str
) -> None:
    plan = plan_keyed([KEYED if nxt[0] == "transfer" else REMIND], *nxt)
    assert plan.kind == kind
    if kind == "reuse":
        assert [d.reason for d in plan.decisions] == ["repeated_write"]


def test_a_read_or_unknown_call_with_fresh_timestamps_is_still_one_call() -> None:
    steps = [("search", {"q": "x", "timestamp": t}, "results for x " * 5) for t in (1, 2)]
    assert plan_keyed(steps, "search", {"q": "x", "timestamp": 3}).kind == "reuse"
    probes = [("probe", {"q": "x", "nonce": n}, "probe says x " * 5) for n in (1, 2, 3)]
    assert detect_loop(history(*probes)).verdict.value == "stop"


def test_writes_told_apart_by_their_key_are_progress_when_counting() -> None:
    steps = [("transfer", {**KEYED[1], "idempotency_key": f"k{i}"}, "ok") for i in range(4)]
    assert detect_loop(history(*steps), policy=LoopPolicy(effects=KEY_EFFECTS)).reason == "no_loop"
    same = [KEYED] * 3
    assert (
        detect_loop(history(*same), policy=LoopPolicy(effects=KEY_EFFECTS)).verdict.value == "stop"
    )


def test_a_sibling_declaring_a_write_in_its_metadata_is_a_write_under_a_read_default() -> None:
    """[balance, transfer, balance] in one turn, transfer a write by its annotation only and
    the policy's default read-only: the second balance is read again, not reused stale."""
    ai = ask(BAL[:2], PAY[:2], BAL[:2])
    policy = LoopPolicy(effects=ToolEffects(default=Effect.READ))
    messages = [HumanMessage("pay"), ai]
    kinds = [
        plan_call(Request({"messages": messages}, c), loop=policy, retry=None).kind  # type: ignore[arg-type]
        for c in ai.tool_calls
    ]
    assert kinds == ["execute", "execute", "execute"]


def test_a_read_after_an_earlier_turn_is_run_again_beside_a_sibling_write() -> None:
    """balance, then [transfer, balance] in one turn, transfer a write by its annotation only
    and the policy's default read-only: the transfer has not answered when the balance is
    planned, so the earlier balance may be stale and the balance runs again."""
    policy = LoopPolicy(effects=ToolEffects(default=Effect.READ))
    ai = ask(PAY[:2], BAL[:2])
    messages = [*history(BAL), ai]
    plan = plan_call(Request({"messages": messages}, ai.tool_calls[1]), loop=policy, retry=None)  # type: ignore[arg-type]
    assert plan.kind == "execute"
    # named read-only by the policy, the sibling cannot make the balance stale
    reads = LoopPolicy(effects=ToolEffects(read_only={"transfer"}, default=Effect.READ))
    plan = plan_call(Request({"messages": messages}, ai.tool_calls[1]), loop=reads, retry=None)  # type: ignore[arg-type]
    assert plan.kind == "reuse"
