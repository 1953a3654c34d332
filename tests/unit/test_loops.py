"""loop_check's pure core: truth tables over message histories, laws, bad input."""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from agent_guards.core import GuardDecision, InvalidInputError, Verdict
from agent_guards.loop_check import (
    PATTERNS,
    LoopPolicy,
    answer_pending,
    call_signature,
    detect_loop,
    normalize_result,
    partial_results,
)

_ids = itertools.count(1)
LONG = "The 2026 procurement policy requires a second review above 500k (section 4.2)."
OTHER = "The 2024 procurement policy required a second review above 1M (section 3.1)."


def call(name: str, args: dict[str, Any] | None = None, *, cid: str | None = None) -> AIMessage:
    cid = cid or f"c{next(_ids)}"
    return AIMessage(content="", tool_calls=[{"name": name, "args": args or {}, "id": cid}])


def turn(
    name: str,
    args: dict[str, Any] | None = None,
    result: str | None = None,
    error: bool = False,
    artifact: Any = None,
) -> list[BaseMessage]:
    """One call and its answer; by default each distinct call has its own long result."""
    if result is None:
        result = f"{LONG} ({name} {json.dumps(args or {}, sort_keys=True)})"
    ai = call(name, args)
    cid = ai.tool_calls[0]["id"]
    assert cid is not None
    status = "error" if error else "success"
    return [ai, ToolMessage(result, tool_call_id=cid, name=name, status=status, artifact=artifact)]


def turns(*specs: tuple[Any, ...]) -> list[BaseMessage]:
    out: list[BaseMessage] = [HumanMessage("task")]
    for spec in specs:
        out.extend(turn(*spec))
    return out


def say(text: str) -> AIMessage:
    return AIMessage(content=text)


def nudge() -> HumanMessage:
    return HumanMessage("[loop_check] stop repeating", name="loop_check")


A = ("search", {"q": "policy"})
B = ("fetch", {"doc": "d1"})
C = ("summarize", {"doc": "d1"})

# (id, history, expected verdict, expected reason, expected count)
TABLE: list[tuple[str, Callable[[], list[BaseMessage]], str, str, int]] = [
    ("one call", lambda: turns(A), "continue", "no_loop", 0),
    ("identical x2", lambda: turns(A, A), "nudge", "repeated_call", 2),
    ("identical x3", lambda: turns(A, A, A), "stop", "repeated_call", 3),
    ("identical x4", lambda: turns(A, A, A, A), "stop", "repeated_call", 4),
    (
        "same call failing x2, different errors",
        lambda: turns((*A, "timeout after 3s", True), (*A, "HTTP 502 upstream", True)),
        "nudge",
        "repeated_failure",
        2,
    ),
    (
        "same call failing x3",
        lambda: turns(*[(*A, f"error #{i}", True) for i in range(3)]),
        "stop",
        "repeated_failure",
        3,
    ),
    (
        "same call, the result changes every time (polling)",
        lambda: turns(
            *[("status", {"job": 1}, f"{s} {LONG}") for s in ("queued", "running", "done")]
        ),
        "continue",
        "no_loop",
        0,
    ),
    ("A-B-A-B", lambda: turns(A, B, A, B), "nudge", "cycle", 2),
    ("A-B-A-B-A-B", lambda: turns(A, B, A, B, A, B), "stop", "cycle", 3),
    ("A-B-C-A-B-C", lambda: turns(A, B, C, A, B, C), "nudge", "cycle", 2),
    ("A-B-C x3", lambda: turns(A, B, C, A, B, C, A, B, C), "stop", "cycle", 3),
    ("A-B then new C", lambda: turns(A, B, C), "continue", "no_loop", 0),
    (
        "same query, other regions: progress",
        lambda: turns(*[("search", {"q": "vat", "region": r}, LONG) for r in ("eu", "us", "apac")]),
        "continue",
        "no_loop",
        0,
    ),
    (
        "same query, other versions and dates: progress",
        lambda: turns(
            ("search", {"q": "vat", "version": "2024"}, LONG),
            ("search", {"q": "vat", "version": "2026"}, LONG),
            ("search", {"q": "vat", "date_range": ["2025-01", "2025-06"]}, LONG),
        ),
        "continue",
        "no_loop",
        0,
    ),
    (
        "reworded, same result twice",
        lambda: turns(
            ("search", {"q": "review limit"}, LONG), ("search", {"q": "limit for review"}, LONG)
        ),
        "nudge",
        "no_progress",
        2,
    ),
    (
        "reworded, same result three times",
        lambda: turns(*[("search", {"q": q}, LONG) for q in ("a", "b", "c")]),
        "stop",
        "no_progress",
        3,
    ),
    (
        "reworded, new result: progress",
        lambda: turns(("search", {"q": "a"}, LONG), ("search", {"q": "b"}, OTHER)),
        "continue",
        "no_loop",
        0,
    ),
    (
        "same evidence ids back",
        lambda: turns(
            ("kb", {"q": "a"}, "x", False, {"evidence_ids": ["d1", "d2"]}),
            ("kb", {"q": "b"}, "y", False, {"evidence_ids": ["d2"]}),
        ),
        "nudge",
        "no_progress",
        2,
    ),
    (
        "a new evidence id is progress",
        lambda: turns(
            ("kb", {"q": "a"}, "x", False, {"evidence_ids": ["d1"]}),
            ("kb", {"q": "b"}, "x", False, {"evidence_ids": ["d1", "d9"]}),
        ),
        "continue",
        "no_loop",
        0,
    ),
    (
        "short acknowledgements are not evidence",
        lambda: turns(*[("write", {"path": p}, "ok") for p in ("a", "b", "c")]),
        "continue",
        "no_loop",
        0,
    ),
    (
        "assistant repeats itself x2",
        lambda: [HumanMessage("q"), say("I need more data."), say("I need more data.")],
        "nudge",
        "repeated_message",
        2,
    ),
    (
        "assistant repeats itself x3 (case, spacing)",
        lambda: [
            HumanMessage("q"),
            say("I need more data."),
            say("i need  more data."),
            say("I need more data!"),
        ],
        "stop",
        "repeated_message",
        3,
    ),
    (
        "different replies",
        lambda: [HumanMessage("q"), say("first answer"), say("a completely different one")],
        "continue",
        "no_loop",
        0,
    ),
    (
        "volatile arg keys are ignored",
        lambda: turns(
            ("search", {"q": "x", "request_id": "r1", "timestamp": 1}, LONG),
            ("search", {"timestamp": 2, "q": "x ", "request_id": "r2"}, LONG),
        ),
        "nudge",
        "repeated_call",
        2,
    ),
    (
        "uuids and times in results are ignored",
        lambda: turns(
            (
                "search",
                {"q": "x"},
                f"{LONG} req 3f2b2c1e-8a7d-4c55-9d7e-0a1b2c3d4e5f at 2026-01-02T03:04:05Z",
            ),
            (
                "search",
                {"q": "x"},
                f"{LONG} req 0b1c2d3e-8a7d-4c55-9d7e-0a1b2c3d4e5f at 2026-01-02T03:09:15Z",
            ),
        ),
        "nudge",
        "repeated_call",
        2,
    ),
]


# What the table's tools do to the world: they read, except ``write``. (A tool of unknown
# effect may write, so reworded calls of it never count as "no progress": see test_effects.)
TABLE_EFFECTS = {**dict.fromkeys(("search", "fetch", "summarize", "status", "kb"), "read")}
TABLE_EFFECTS["write"] = "write"


@pytest.mark.parametrize(
    ("history", "verdict", "reason", "count"), [t[1:] for t in TABLE], ids=[t[0] for t in TABLE]
)
def test_truth_table(
    history: Callable[[], list[BaseMessage]], verdict: str, reason: str, count: int
) -> None:
    decision = detect_loop(history(), effects=TABLE_EFFECTS)
    assert (decision.verdict.value, decision.reason, decision.data["count"]) == (
        verdict,
        reason,
        count,
    )
    assert decision.guard == "loop_check"
    assert decision.policy == "LoopPolicy@1"


@pytest.mark.parametrize(
    ("n", "verdict"),
    [(1, "continue"), (2, "continue"), (3, "nudge"), (4, "continue"), (5, "stop"), (6, "stop")],
)
def test_thresholds_are_configurable(n: int, verdict: str) -> None:
    policy = LoopPolicy(nudge_at=3, stop_at=5)
    assert detect_loop(turns(*[A] * n), policy=policy).verdict.value == verdict


@pytest.mark.parametrize(
    ("policy", "n", "verdict"),
    [
        (LoopPolicy(nudge_at=None), 2, "continue"),
        (LoopPolicy(nudge_at=None), 3, "stop"),
        (LoopPolicy(on_stop="escalate"), 3, "escalate"),
        (LoopPolicy(thresholds={"repeated_call": (3, 4)}), 2, "continue"),
        (LoopPolicy(thresholds={"repeated_call": (3, 4)}), 4, "stop"),
        (LoopPolicy(patterns=frozenset({"cycle"})), 5, "continue"),
        (LoopPolicy(exempt_tools=frozenset({"search"})), 5, "continue"),
    ],
)
def test_policy_variants(policy: LoopPolicy, n: int, verdict: str) -> None:
    assert detect_loop(turns(*[A] * n), policy=policy).verdict.value == verdict


def test_a_cycle_nudges_once_per_streak() -> None:
    policy = LoopPolicy(thresholds={"cycle": (2, 4), "repeated_call": (None, 9)})
    seq = [A, B, A, B, A, B, A, B]
    verdicts = [detect_loop(turns(*seq[:i]), policy=policy).verdict.value for i in range(1, 9)]
    assert verdicts == ["continue"] * 3 + ["nudge", "continue", "continue", "continue", "stop"]


@pytest.mark.parametrize(("mode", "verdict"), [("interactive", "continue"), ("headless", "stop")])
def test_a_new_user_message_resets_only_in_interactive_mode(mode: str, verdict: str) -> None:
    history = [*turns(A, A), HumanMessage("try again please"), *turn(*A)]
    assert detect_loop(history, policy=LoopPolicy(mode=mode)).verdict.value == verdict  # type: ignore[arg-type]


def test_our_nudge_is_not_a_user_turn_and_is_not_needed() -> None:
    with_nudge = [*turns(A, A), nudge(), *turn(*A)]
    without = [m for m in with_nudge if m.name != "loop_check"]
    assert detect_loop(with_nudge).verdict is Verdict.STOP
    assert detect_loop(without) == detect_loop(with_nudge)


def test_a_pending_call_counts_before_it_runs() -> None:
    history = [*turns(A, A), call(*A)]
    decision = detect_loop(history)
    assert (decision.verdict, decision.data["count"]) == (Verdict.STOP, 3)


def test_reused_answers_count_as_the_same_result() -> None:
    history = turns(A)
    ai = call(*A)
    history += [
        ai,
        ToolMessage(
            f"[loop_check] Same call as c1: answered from that result.\n{LONG}",
            tool_call_id=ai.tool_calls[0]["id"] or "",
            name="search",
            response_metadata={"agent_guards": {"reused_from": "c1"}},
        ),
    ]
    assert detect_loop(history).verdict is Verdict.NUDGE


def parallel(n: int, spec: tuple[Any, ...], *, answered: bool) -> list[BaseMessage]:
    """One turn asking for the same call ``n`` times; answered as the guard answers it (the
    first runs, the others are told they are duplicates) or not answered yet."""
    name, args = spec
    ai = AIMessage(
        content="",
        tool_calls=[{"name": name, "args": args, "id": f"p{next(_ids)}"} for _ in range(n)],
    )
    if not answered:
        return [ai]
    ids = [str(c["id"]) for c in ai.tool_calls]
    dupes = [
        ToolMessage(
            f"[loop_check] Duplicate of call {ids[0]} in this turn: not executed again.",
            tool_call_id=i,
            name=name,
            response_metadata={"agent_guards": {"reused_from": ids[0], "duplicate": True}},
        )
        for i in ids[1:]
    ]
    result = f"{LONG} ({name} {json.dumps(args, sort_keys=True)})"  # as turn() answers
    return [ai, ToolMessage(result, tool_call_id=ids[0], name=name), *dupes]


@pytest.mark.parametrize("answered", [False, True], ids=["pending", "answered"])
def test_identical_calls_of_one_turn_count_once(answered: bool) -> None:
    history = [HumanMessage("task"), *parallel(3, A, answered=answered)]
    assert detect_loop(history).verdict is Verdict.CONTINUE
    # the turn is one action: the next turns asking again are its 2nd and 3rd repeat
    history = [*turns(A, A), *parallel(3, A, answered=answered)]
    decision = detect_loop(history)
    assert (decision.verdict, decision.data["count"]) == (Verdict.STOP, 3)


def test_a_reused_or_pending_call_counts_with_its_tools_recorded_effect() -> None:
    """A reused answer and a call not answered yet carry no effect of their own: the one
    the guard recorded on their tool's results is theirs, so a read between new results
    is progress before it runs, after it runs and when it is answered from before."""
    read = {"agent_guards": {"effect": "read"}}
    history: list[BaseMessage] = [HumanMessage("task")]
    for k in range(3):
        ai = AIMessage(
            content="",
            tool_calls=[
                {"name": "search", "args": {"q": "policy"}, "id": f"s{k}"},
                {"name": "fetch", "args": {"doc": f"d{k}"}, "id": f"f{k}"},
            ],
        )
        first = ToolMessage(LONG, tool_call_id=f"s{k}", name="search", response_metadata=read)
        reused = ToolMessage(
            f"[loop_check] Same call as s0: answered from that result.\n{LONG}",
            tool_call_id=f"s{k}",
            name="search",
            response_metadata={"agent_guards": {"reused_from": "s0"}},
        )
        new = f"{OTHER} doc {k}" * (k + 1)
        fetched = ToolMessage(new, tool_call_id=f"f{k}", name="fetch", response_metadata=read)
        history += [ai, first if k == 0 else reused, fetched]
        assert detect_loop(history).verdict is Verdict.CONTINUE
        assert detect_loop(history[:-2]).verdict is Verdict.CONTINUE, "pending"


def test_decision_names_the_calls_and_the_tool() -> None:
    history = turns(A, A, A)
    decision = detect_loop(history)
    calls = [m.tool_calls[0]["id"] for m in history if isinstance(m, AIMessage)]
    assert decision.selected_ids == tuple(calls)
    assert decision.data["tool"] == "search"
    assert decision.data["signature"] == 'search:{"q":"policy"}'
    assert "3 times" in decision.detail


# bad input ---------------------------------------------------------------------------


def test_malformed_json_args_still_count() -> None:
    def broken() -> AIMessage:
        return AIMessage(
            content="",
            invalid_tool_calls=[
                {
                    "name": "search",
                    "args": "{q: bad",
                    "id": f"b{next(_ids)}",
                    "error": "bad json",
                    "type": "invalid_tool_call",
                }
            ],
        )

    history: list[BaseMessage] = [HumanMessage("q")]
    for _ in range(3):
        ai = broken()
        history += [
            ai,
            ToolMessage(
                "invalid JSON", tool_call_id=ai.invalid_tool_calls[0]["id"] or "", status="error"
            ),
        ]
    decision = detect_loop(history)
    assert (decision.verdict, decision.reason, decision.data["signature"]) == (
        Verdict.STOP,
        "repeated_failure",
        "search:<raw>{q: bad",
    )


def test_missing_args_and_missing_ids_are_handled() -> None:
    history: list[Any] = [HumanMessage("q")]
    for _ in range(3):
        history += [
            AIMessage.model_construct(
                content="",
                tool_calls=[{"name": "search", "id": None}],
                invalid_tool_calls=[],
                id=None,
                name=None,
                response_metadata={},
                additional_kwargs={},
            ),
            ToolMessage(LONG, tool_call_id=""),
        ]
    decision = detect_loop(history)
    assert decision.verdict is Verdict.STOP
    assert decision.data["signature"] == "search:<missing>"
    assert all(i.startswith("messages[") for i in decision.selected_ids)


def test_dict_messages_are_accepted() -> None:
    history = [{"role": "user", "content": "q"}]
    for i in range(2):
        history += [
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [{"name": "search", "args": {"q": "x"}, "id": f"d{i}"}],
            },
            {"role": "tool", "content": LONG, "tool_call_id": f"d{i}"},
        ]
    assert detect_loop(history).verdict is Verdict.NUDGE


@pytest.mark.parametrize(
    ("history", "item", "field"),
    [
        ([HumanMessage("q"), 42], "messages[1]", "type"),
        (
            [
                AIMessage.model_construct(
                    content="",
                    tool_calls=[{"args": {}, "id": "x1"}],
                    invalid_tool_calls=[],
                    response_metadata={},
                    additional_kwargs={},
                    name=None,
                    id=None,
                )
            ],
            "x1",
            "name",
        ),
        ("not a list", None, "messages"),
    ],
)
def test_bad_input_names_the_item_and_field(history: Any, item: str | None, field: str) -> None:
    with pytest.raises(InvalidInputError) as info:
        detect_loop(history)
    assert (info.value.item, info.value.field) == (item, field)


def test_policy_type_is_checked() -> None:
    with pytest.raises(TypeError, match="LoopPolicy"):
        detect_loop([], policy="strict")  # type: ignore[arg-type]


def test_only_a_bounded_tail_is_read() -> None:
    """A malformed item far back is never even looked at: the cost is bounded."""
    history: list[Any] = [object()] + [
        m
        for _ in range(3000)
        for m in turn("search", {"q": f"{next(_ids)}"}, OTHER + str(next(_ids)))
    ]
    assert detect_loop(history).verdict is Verdict.CONTINUE


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"stop_at": 1}, "stop_at must be an int >= 2, got 1"),
        ({"nudge_at": 3, "stop_at": 3}, "nudge_at must be < stop_at (3), got 3"),
        ({"nudge_at": 0}, "nudge_at must be an int >= 1, got 0"),
        ({"on_stop": "halt"}, "on_stop='halt' is not allowed; allowed: 'stop', 'escalate'"),
        ({"mode": "batch"}, "mode='batch' is not allowed; allowed: 'interactive', 'headless'"),
        ({"window": 1}, "window must be an int >= 2, got 1"),
        ({"patterns": frozenset({"spiral"})}, "patterns has unknown ['spiral']"),
        ({"text_similarity": 0}, "text_similarity must be in (0, 1], got 0"),
        ({"thresholds": {"cycle": (3, 2)}}, "thresholds['cycle']=(3, 2)"),
        ({"thresholds": {"orbit": (1, 2)}}, "thresholds key='orbit' is not allowed"),
        ({"stop_at": True}, "stop_at must be an int >= 2, got True"),
    ],
)
def test_policy_rejects_bad_values_by_name(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError) as info:
        LoopPolicy(**kwargs)
    assert message in str(info.value)


def test_policy_type_errors() -> None:
    with pytest.raises(TypeError, match="no_reuse_tools"):
        LoopPolicy(no_reuse_tools="clock")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="normalizers"):
        LoopPolicy(normalizers=("nope",))  # type: ignore[arg-type]


# signatures and normalization ----------------------------------------------------------


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        ({"q": "x", "k": 5}, {"k": 5.0, "q": " x "}, True),
        ({"q": "x", "request_id": "1"}, {"q": "x", "Request-Id": "2"}, True),
        ({"filter": {"b": 1, "a": 2}}, {"filter": {"a": 2, "b": 1}}, True),
        ({"q": "x", "region": "eu"}, {"q": "x", "region": "us"}, False),
        ({"order_id": 1}, {"order_id": 2}, False),
        ({"id": 1}, {"id": 2}, False),
        ({"ids": [1, 2]}, {"ids": [2, 1]}, False),
    ],
)
def test_call_signatures(a: dict[str, Any], b: dict[str, Any], same: bool) -> None:
    assert (call_signature("t", a) == call_signature("t", b)) is same


def test_call_signature_forms() -> None:
    assert call_signature("t", '{"b": 1, "a": 2}') == 't:{"a":2,"b":1}'
    assert call_signature("t", "not json") == "t:<raw>not json"
    assert call_signature("t", None) == "t:<missing>"
    assert call_signature("t", {"x": 1}, ignore_keys=["x"]) == "t:{}"


@pytest.mark.parametrize(
    ("raw", "normalized"),
    [
        ("id 3f2b2c1e-8a7d-4c55-9d7e-0a1b2c3d4e5f ok", "id <uuid> ok"),
        ("at 2026-01-02 03:04:05.123+08:00 done", "at <time> done"),
        ("request_id=abc-123 ok", "request_id=<id> ok"),
        ('{"trace_id": "t-9"}', '{"trace_id": "<id>"}'),
        ("timestamp: 1767225600 ok", "timestamp: <time> ok"),
        ("query took 123ms", "query took <elapsed>"),
        ("object at 0x7f3a2b1c4d50", "object at 0x<addr>"),
        (
            'Traceback (most recent call last):\n  File "x.py", line 1\nValueError: bad',
            "ValueError: bad",
        ),
        ("[loop_check] Same call as c1.\nthe result", "the result"),
        ("kept 2026-01-02 date", "kept 2026-01-02 date"),
    ],
)
def test_normalize_result(raw: str, normalized: str) -> None:
    assert normalize_result(raw) == normalized


def test_normalizer_hook() -> None:
    assert (
        normalize_result("price 12.30 EUR", extra=[lambda s: s.replace("EUR", "<cur>")])
        == "price 12.30 <cur>"
    )
    policy = LoopPolicy(normalizers=(lambda s: s.split("|")[0],))
    history = turns(("q", {"a": 1}, f"{LONG}|by node-1"), ("q", {"a": 1}, f"{LONG}|by node-7"))
    assert detect_loop(history).verdict is Verdict.CONTINUE
    assert detect_loop(history, policy=policy).verdict is Verdict.NUDGE


def test_stop_helpers() -> None:
    history = [*turns(A), call("fetch", {"doc": 1})]
    answers = answer_pending(history, "not executed")
    assert [m.tool_call_id for m in answers] == [history[-1].tool_calls[0]["id"]]  # type: ignore[attr-defined]
    assert all(m.status == "error" for m in answers)
    assert partial_results(history) == [f'search: {LONG} (search {{"q": "policy"}})']


# laws (hypothesis) ---------------------------------------------------------------------

names = st.sampled_from(["search", "fetch", "rank"])
argsets = st.dictionaries(st.sampled_from(["q", "k", "doc"]), st.integers(0, 3), max_size=2)
results = st.sampled_from([LONG, OTHER, "ok", "error: timeout"])
steps = st.lists(st.tuples(names, argsets, results, st.booleans()), min_size=1, max_size=12)


def _build(spec: list[tuple[str, dict[str, int], str, bool]]) -> list[BaseMessage]:
    return turns(*[(n, a, r, e) for n, a, r, e in spec])


@settings(max_examples=80, deadline=None)
@given(steps)
def test_law_deterministic_and_id_free(spec: list[tuple[str, dict[str, int], str, bool]]) -> None:
    history = _build(spec)
    stripped = [m.model_copy(update={"id": None}) for m in history]
    assert (
        detect_loop(history).verdict
        == detect_loop(stripped).verdict
        == detect_loop(list(history)).verdict
    )


@settings(max_examples=80, deadline=None)
@given(steps, st.randoms())
def test_law_arg_order_does_not_matter(
    spec: list[tuple[str, dict[str, int], str, bool]], rnd: Any
) -> None:
    shuffled = []
    for n, a, r, e in spec:
        keys = list(a)
        rnd.shuffle(keys)
        shuffled.append((n, {k: a[k] for k in keys}, r, e))
    first, second = detect_loop(_build(spec)), detect_loop(_build(shuffled))
    assert (first.verdict, first.reason, first.data["count"]) == (
        second.verdict,
        second.reason,
        second.data["count"],
    )


@settings(max_examples=80, deadline=None)
@given(steps, st.lists(st.integers(0, 30), max_size=4))
def test_law_nudges_never_change_the_decision(
    spec: list[tuple[str, dict[str, int], str, bool]], where: list[int]
) -> None:
    history = _build(spec)
    with_nudges = list(history)
    for i in sorted(where, reverse=True):
        position = min(i, len(with_nudges))
        if position < len(with_nudges) and isinstance(with_nudges[position], ToolMessage):
            continue  # never split a call from its answer
        with_nudges.insert(position, nudge())
    a, b = detect_loop(history), detect_loop(with_nudges)
    assert (a.verdict, a.reason, a.data["count"]) == (b.verdict, b.reason, b.data["count"])


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 8))
def test_law_identical_calls_escalate_by_count(n: int) -> None:
    expected = "continue" if n < 2 else "nudge" if n == 2 else "stop"
    assert detect_loop(turns(*[A] * n)).verdict.value == expected


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.sampled_from(["eu", "us", "apac", "latam", "mena", "cn", "jp"]),
        min_size=2,
        max_size=7,
        unique=True,
    ),
    results,
)
def test_law_another_scope_is_progress(regions: list[str], result: str) -> None:
    history = turns(*[("search", {"q": "vat", "region": r}, result) for r in regions])
    assert detect_loop(history).verdict is Verdict.CONTINUE


@pytest.mark.parametrize("key", ["order_id", "id", "customer_ids", "Order-Id"])
def test_another_entity_is_progress_even_with_the_same_result(key: str) -> None:
    """A healthy batch over entities (get_order for 22 orders, each "shipped"): a key
    naming an entity is a scope. Before, it was stopped as no_progress at the third."""
    history = turns(*[("get_order", {key: i}, LONG) for i in range(22)])
    assert detect_loop(history, effects={"get_order": "read"}).verdict is Verdict.CONTINUE
    same = turns(*[("get_order", {"status": "open"}, LONG) for _ in range(3)])  # a loop still
    assert detect_loop(same, effects={"get_order": "read"}).verdict is not Verdict.CONTINUE


def _tickets(n: int) -> list[BaseMessage]:
    """The same call answering anew each time, as a write that really ran would."""
    return turns(*[("create_ticket", {"title": "printer"}, f"Created ticket #{1000 + i}")
                   for i in range(1, n + 1)])  # fmt: skip


def test_a_call_that_may_write_and_answers_anew_is_stopped_at_its_fifth_run() -> None:
    """A new result resets a read's streak (the world moved), not the runs of a call that
    may write: a new ticket number each time is the write done again. Before, an
    undeclared create_ticket ran until the recursion limit."""
    verdicts = [detect_loop(_tickets(n)).verdict for n in range(1, 6)]
    assert verdicts == [Verdict.CONTINUE] * 4 + [Verdict.STOP]
    decision = detect_loop(_tickets(5))
    assert (decision.reason, decision.data["count"]) == ("repeated_effect", 5)
    assert len(decision.selected_ids) == 5
    assert detect_loop(_tickets(5), effects={"create_ticket": "write"}).reason == "repeated_effect"


def test_a_read_that_answers_anew_is_progress_and_the_limit_is_a_threshold() -> None:
    reads = {"create_ticket": "read"}
    assert detect_loop(_tickets(8), effects=reads).verdict is Verdict.CONTINUE
    exempt = LoopPolicy(exempt_tools=frozenset({"create_ticket"}))
    assert detect_loop(_tickets(8), policy=exempt).verdict is Verdict.CONTINUE
    later = LoopPolicy(thresholds={"repeated_effect": (None, 7)})
    assert detect_loop(_tickets(6), policy=later).verdict is Verdict.CONTINUE
    assert detect_loop(_tickets(7), policy=later).reason == "repeated_effect"
    # a new write in between starts the count again
    history = [*_tickets(4), *turn("close_ticket", {"id": 1001}, "closed"), *_tickets(4)]
    assert detect_loop(history).verdict is Verdict.CONTINUE


def test_a_request_id_is_no_entity_the_same_call_with_a_fresh_one_repeats() -> None:
    history = turns(*[("get_order", {"order_id": 7, "request_id": i}, LONG) for i in range(3)])
    assert detect_loop(history).reason == "repeated_call"


def test_patterns_are_documented() -> None:
    assert set(PATTERNS) == {
        "repeated_call",
        "repeated_effect",
        "cycle",
        "no_progress",
        "repeated_message",
        "conversation_loop",
        "content_loop",
        "failure_loop",
        "condensation",
        "subagent",
    }
    assert isinstance(detect_loop([]), GuardDecision)
    assert json.dumps(detect_loop(turns(A, A)).to_dict())


@pytest.mark.parametrize("artifact", [[{"id": 10**5000}], {"ids": [10**5000]}])
def test_an_evidence_id_too_long_for_str_is_read_not_raised(artifact: Any) -> None:
    # str() refuses an int past 4,300 digits; a result's evidence ids are read as JSON text
    def turn(call_id: str) -> list[BaseMessage]:
        call = AIMessage("", tool_calls=[{"name": "lookup", "args": {"q": "x"}, "id": call_id}])
        return [call, ToolMessage("ok", tool_call_id=call_id, artifact=artifact)]

    decision = detect_loop([*turn("c1"), *turn("c2"), *turn("c3")])
    assert decision.reason == "repeated_call"
    assert decision.data["count"] == 3
