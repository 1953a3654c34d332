"""loop_check on its peers' own test scenarios, translated into LangChain message histories.

Each ported case names the peer file and test it comes from:

* gemini-cli ``packages/core/src/services/loopDetectionService.test.ts`` (tool-call loops,
  content loops inside one streamed reply, code blocks and markdown structure, strikes,
  the LLM check). A stream of content events becomes one ``AIMessage`` whose content is
  the events joined; a chunk that opens or closes a fence, a table, a list item, a heading
  or a quote is put on its own line, as the streamed chunk starts one.
* OpenHands ``tests/unit/controller/test_is_stuck.py`` (StuckDetector) and
  ``tests/unit/controller/test_agent_controller_loop_recovery.py`` (loop recovery). An
  action with its observation becomes a tool call with its ToolMessage; an agent
  MessageAction a reply; a user MessageAction a HumanMessage; an
  AgentCondensationObservation a context_guard summary.

Each row also says whether agent-guards agrees with the peer on the outcome (loop or
not). Where it does not, the row says why (counts are occurrences: loop_check stops the 3rd
identical call, where the peers wait for the 4th or 5th; repeats are answered from the
first result, so the tool still runs once). ``test_the_agreement_counts`` keeps the counts
docs/loop_check.md reports.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from agent_guards.core import Verdict
from agent_guards.loop_check import LoopPolicy, detect_loop, judge_due, judge_loop, repeated_chunk
from agent_guards.testing import ScriptedChatModel

_ids = itertools.count(1)
HEADLESS = LoopPolicy(mode="headless")


def run(name: str, args: dict[str, Any], result: str = "", *, error: bool = False) -> list[Any]:
    cid = f"p{next(_ids)}"
    call = AIMessage("", tool_calls=[{"name": name, "args": args, "id": cid}], id=f"a{cid}")
    status = "error" if error else "success"
    return [call, ToolMessage(result, tool_call_id=cid, name=name, status=status, id=f"t{cid}")]


def user(text: str = "go on") -> HumanMessage:
    return HumanMessage(text, id=f"u{next(_ids)}")


def say(text: str) -> AIMessage:
    return AIMessage(text, id=f"s{next(_ids)}")


def summary() -> HumanMessage:
    """A context summary as context_guard writes it (OpenHands' condensation event)."""
    mark = {"agent_guards": {"role": "summary", "count": 4}}
    return HumanMessage("[Context summary by agent_guards: ...]", additional_kwargs=mark)


def calls(*specs: tuple[str, dict[str, Any], str]) -> list[Any]:
    return [m for spec in specs for m in run(*spec)]


def verdict(history: list[Any], policy: LoopPolicy | None = None) -> str:
    return detect_loop(history, policy=policy, effects=EFFECTS).verdict.value


EFFECTS = dict.fromkeys(("testTool", "anotherTool", "read_file", "t", "ls", "read", "pwd"), "read")
EFFECTS |= {"cmd": "unknown", "ipython": "unknown", "update_payment": "write"}


def verdicts(specs: list[tuple[str, dict[str, Any], str]]) -> list[str]:
    """The verdict after each call of ``specs``, one call per assistant turn."""
    history: list[Any] = [user("task")]
    out = []
    for spec in specs:
        history += run(*spec)
        out.append(verdict(history))
    return out


def rep(i: int, length: int = 50) -> str:
    """gemini-cli's createRepetitiveContent(id, length)."""
    base = f"This is a unique sentence, id={i}. "
    return (base * (length // len(base) + 1))[:length]


def noise(n: int, seed: int) -> str:
    """gemini-cli's generateRandomString, seeded."""
    rnd = random.Random(seed)
    return "".join(
        rnd.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123") for _ in range(n)
    )


def reply(text: str) -> str:
    """The verdict on one reply that says ``text``."""
    return verdict([user("task"), say(text)])


# -- gemini-cli: tool-call loops ----------------------------------------------------------

TA = ("testTool", {"param": "value"}, "done")


def test_gemini_fewer_than_threshold_identical_calls() -> None:
    """G: 'should not detect a loop for fewer than TOOL_CALL_LOOP_THRESHOLD identical calls'
    (4 calls, no loop). Disagrees by design: loop_check nudges the 2nd identical call and
    stops the 3rd (answered from the 1st result, so the tool runs once)."""
    assert verdicts([TA] * 4) == ["continue", "nudge", "stop", "stop"]


def test_gemini_threshold_and_subsequent_identical_calls() -> None:
    """G: 'should detect a loop on the TOOL_CALL_LOOP_THRESHOLD-th identical call' and
    'should detect a loop on subsequent identical calls'. Agrees (stopped)."""
    assert verdicts([TA] * 6)[4:] == ["stop", "stop"]


def test_gemini_different_tool_calls() -> None:
    """G: 'should not detect a loop for different tool calls' (e1, e2, e3 three times over,
    no loop). Disagrees: the same three calls with the same results, three rounds in a row,
    are a cycle for loop_check (stopped at round 3; nudged at round 2)."""
    e1, e2 = ("testTool", {"param": "value1"}, "r1"), ("testTool", {"param": "value2"}, "r2")
    e3 = ("anotherTool", {"param": "value1"}, "r3")
    out = verdicts([e1, e2, e3] * 3)
    assert out[:5] == ["continue"] * 5 and out[-1] == "stop"


def test_gemini_other_events_do_not_reset_the_tool_counter() -> None:
    """G: 'should not reset tool call counter for other event types' (a thought between
    identical calls changes nothing). Agrees: a reply between them is no progress."""
    history = [user("task"), *run(*TA), say("Let me think about it."), *run(*TA), *run(*TA)]
    assert verdict(history) == "stop"


def test_gemini_detection_disabled() -> None:
    """G: 'should not detect a loop when disabled for session' / 'should skip loop detection
    if disabled in config'. Agrees: ``patterns=frozenset()`` switches detection off."""
    history = [user("task"), *[m for _ in range(6) for m in run(*TA)]]
    assert verdict(history, LoopPolicy(patterns=frozenset())) == "continue"


@pytest.mark.parametrize(
    ("period", "calls_made"),
    [(2, 15), (3, 20), (5, 30)],
    ids=["cycle of length 2", "cycle of length 3", "cycle of length 5"],
)
def test_gemini_cyclic_tool_call_loops(period: int, calls_made: int) -> None:
    """G: 'should detect an alternating tool call loop (cycle of length 2)', '... cyclic tool
    call loop of length 3', '... of length 5'. Agrees: stopped (a 5-cycle, longer than
    ``max_cycle``, is caught as the same calls repeated with nothing new in between)."""
    seq = [("read_file", {"file_path": f"loop_{i}.txt"}, f"content {i}") for i in range(period)]
    out = verdicts([seq[i % period] for i in range(calls_made)])
    assert "stop" in out


def test_gemini_non_looping_alternating_sequences_that_vary() -> None:
    """G: 'should not detect loops for non-looping alternating sequences that vary'
    (A,B,A,B,C,A,B,A,B: no loop at any call). Agrees on the outcome: never stopped (C's new
    result changes the picture, so the count starts again). loop_check still nudges the
    2nd round of A-B, once per streak, where gemini-cli says nothing."""
    a, b = ("read_file", {"file_path": "loop_a.txt"}, "A"), ("read_file", {"file_path": "b"}, "B")
    c = ("read_file", {"file_path": "loop_c.txt"}, "C")
    out = verdicts([a, b, a, b, c, a, b, a, b])
    assert "stop" not in out
    assert out[:5] == ["continue", "continue", "continue", "nudge", "continue"]


# -- gemini-cli: content loops inside one reply -------------------------------------------

CONTENT: list[tuple[str, Callable[[], str], str]] = [
    ("should not detect a loop for random content", lambda: noise(10_000, 1), "continue"),
    (
        "should detect a loop when a chunk of content repeats consecutively",
        lambda: rep(1) * 10,
        "nudge",
    ),
    (
        "should not detect a loop for a list with a long shared prefix",
        lambda: "".join(
            f"- projects/my-google-cloud-project-12345/locations/us-central1/services/{i}\n"
            for i in range(15)
        ),
        "continue",
    ),
    (
        "should not detect a loop if repetitions are very far apart",
        lambda: "".join(rep(1) + noise(500, i) for i in range(10)),
        "continue",
    ),
    (
        "should detect a loop with longer repeating patterns (e.g. ~150 chars)",
        lambda: rep(1, 150) * 12,
        "nudge",
    ),
    (
        "should detect the specific user-provided loop example",
        lambda: (
            (
                "I will not output any text.\n  I will just end the turn.\n  I am done.\n"
                "  I will not do anything else.\n  I will wait for the user's next command.\n"
            )
            * 15
        ),
        "nudge",
    ),
    (
        "should detect the second specific user-provided loop example",
        lambda: (
            "I have added all the requested logs and verified the test file. "
            "I will now mark the task as complete.\n  " * 15
        ),
        "nudge",
    ),
    (
        "should detect a loop of alternating short phrases",
        lambda: "Thinking... Done. " * 30,
        "nudge",
    ),
    (
        "should detect a loop of repeated complex thought processes",
        lambda: "I need to check the file. The file does not exist. I will create the file. " * 15,
        "nudge",
    ),
    (
        "should not detect a loop when repetitive content is inside a code block",
        lambda: "```\n" + rep(1) * 10 + "\n```",
        "continue",
    ),
    (
        "should not detect loops when content transitions into a code block",
        lambda: rep(1) * 8 + "\n```javascript\n" + rep(1) * 10,
        "continue",
    ),
    (
        "should skip loop detection when already inside a code block (this.inCodeBlock)",
        lambda: "Here is some code:\n```\n" + rep(1) * 15,
        "continue",
    ),
    (
        "should correctly track inCodeBlock state with multiple fence transitions",
        lambda: "Normal text \n```\n" + rep(1) * 5 + "\n```\n```python\n",
        "continue",
    ),
    (
        "should detect a loop when repetitive content is outside a code block",
        lambda: "```\nsome code\n```\n" + rep(1) * 10,
        "nudge",
    ),
    (
        "should handle content with multiple code blocks and no loops",
        lambda: "```\ncode1\n```\nsome text\n```\ncode2\n```",
        "continue",
    ),
    (
        "should handle content with mixed code blocks and looping text",
        lambda: "```\ncode1\n```\n" + rep(1) * 10,
        "nudge",
    ),
    (
        "should not detect a loop for a long code block with some repeating tokens",
        lambda: "```\n" + "for (let i = 0; i < 10; i++) { console.log(i); }" * 20 + "\n```",
        "continue",
    ),
    (
        "should reset tracking when a code fence is found",
        lambda: rep(1) * 9 + "\n```\n" + rep(1) * 10,
        "continue",
    ),
    (
        "should reset tracking when a table is detected",
        lambda: rep(1) * 9 + "\n| Column 1 | Column 2 |\n" + rep(1) * 9,
        "continue",
    ),
    (
        "should reset tracking when a list item is detected",
        lambda: rep(1) * 9 + "\n* List item\n" + rep(1) * 9,
        "continue",
    ),
    (
        "should reset tracking when a heading is detected",
        lambda: rep(1) * 9 + "\n## Heading\n" + rep(1) * 9,
        "continue",
    ),
    (
        "should reset tracking when a blockquote is detected",
        lambda: rep(1) * 9 + "\n> Quote text\n" + rep(1) * 9,
        "continue",
    ),
    ("should handle empty content", lambda: "", "continue"),
    (
        "should not detect a loop for repeating divider-like content",
        lambda: ("-" * 50) * 15,
        "continue",
    ),
    (
        "should not detect a loop for repeating complex box-drawing dividers",
        lambda: ("╭─" * 25) * 15,
        "continue",
    ),
]


@pytest.mark.parametrize(
    ("text", "expected"), [c[1:] for c in CONTENT], ids=[c[0] for c in CONTENT]
)
def test_gemini_content_loops(text: Callable[[], str], expected: str) -> None:
    """G: the 'Content Loop Detection', '... with Code Blocks', 'Edge Cases' and 'Divider
    Content Detection' tests named in the ids. Agrees on every one: one looping reply is a
    content loop (nudged: the model answers again), a second one in a row stops."""
    assert reply(text()) == expected


@pytest.mark.parametrize(
    "marker",
    [
        "* Bullet item",
        "- Dash item",
        "+ Plus item",
        "1. Numbered item",
        "42. Another numbered item",
        "| Column 1 | Column 2 |",
        "|---|---|",
        "|++|++|",
        "+---+---+",
        *[f"{'#' * n} H{n} Heading" for n in range(1, 7)],
    ],
)
def test_gemini_structure_resets_tracking(marker: str) -> None:
    """G: 'should reset tracking for various list item formats', '... table formats',
    '... heading levels'. Agrees: markdown structure ends the stretch compared."""
    assert reply(rep(1) * 9 + "\n" + marker + "\n" + rep(100) * 9) == "continue"


def test_gemini_strikes_escalate_and_recovery_proceeds() -> None:
    """G: 'should increment strike count for repeated detections' and 'should allow recovery
    turn to proceed after clearDetection'. Agrees: the 1st looping reply is a strike
    (nudge), a 2nd in a row stops; a normal reply after the nudge goes on."""
    chant = "I will now mark the task as complete.\n" * 15
    first = [user("task"), say(chant)]
    assert verdict(first) == "nudge"
    assert verdict([*first, say(chant)]) == "stop"
    assert verdict([*first, say("Recovery text")]) == "continue"


def test_gemini_a_tool_call_resets_content_tracking() -> None:
    """G: 'tool call should reset content count'. Agrees: content before a tool call and a
    fresh reply after it are not one loop."""
    history = [user("task"), *run(*TA), say("Fresh content.")]
    assert verdict(history) == "continue"


def test_issue_example_one_reply_chanting() -> None:
    """The example: one reply saying the same sentence 15 times is a content loop;
    the same text as three separate replies is stopped as before."""
    decision = detect_loop([user("task"), say("I will now mark the task as complete.\n" * 15)])
    assert (decision.verdict, decision.reason) == (Verdict.NUDGE, "content_loop")
    assert "15 times" in decision.detail
    three = [user("task"), *[say("I will now mark the task as complete.") for _ in range(3)]]
    assert detect_loop(three).verdict is Verdict.STOP
    assert repeated_chunk("I will now mark the task as complete.\n" * 15) == 15


# -- gemini-cli: the LLM check -------------------------------------------------------------


def turns_of(n: int) -> list[Any]:
    return [m for i in range(n) for m in (user(f"step {i}"), say(f"Working on step {i}."))]


def judging(answer: str) -> ScriptedChatModel:
    return ScriptedChatModel(script=[answer], repeat_last=True)


LOOPING = '{"is_loop": true, "confidence": 0.95, "reasoning": "it re-plans the same step"}'


def test_gemini_llm_check_schedule() -> None:
    """G: 'should not trigger LLM check before LLM_CHECK_AFTER_TURNS (30)' and 'should
    trigger LLM check on the 30th turn'. Agrees (the same 30, then every 10)."""
    policy = LoopPolicy()
    assert [judge_due(turns_of(n), policy) for n in (29, 30, 35, 40)] == [False, True, False, True]
    model = judging(LOOPING)
    assert judge_loop(turns_of(29), model).reason == "no_loop" and not model.calls
    assert judge_loop(turns_of(30), model).verdict is Verdict.NUDGE and len(model.calls) == 1


@pytest.mark.parametrize(
    ("answer", "verdict_", "reason"),
    [
        (LOOPING, "nudge", "llm_judged_loop"),
        ('{"is_loop": true, "confidence": 0.5, "reasoning": "maybe"}', "continue", "no_loop"),
        ('{"is_loop": true, "confidence": 0.9, "reasoning": "x"}', "nudge", "llm_judged_loop"),
        ("I think so", "continue", "judge_unreadable"),
        ('```json\n{"is_loop": false, "confidence": 0.99}\n```', "continue", "no_loop"),
    ],
    ids=[
        "should detect a cognitive loop when confidence is high",
        "should not detect a loop when confidence is low",
        "should detect a loop when confidence is exactly equal to the threshold (0.9)",
        "an unreadable answer is no loop",
        "a fenced answer is read",
    ],
)
def test_gemini_llm_check_confidence(answer: str, verdict_: str, reason: str) -> None:
    """G: the LLM-check tests named in the ids. Agrees: only a confident judgement counts;
    here it can only nudge (policy is code: a model never stops the run)."""
    decision = judge_loop(turns_of(3), judging(answer), force=True)
    assert (decision.verdict.value, decision.reason) == (verdict_, reason)


def test_the_judge_is_off_without_a_model_and_bad_schedules_fail() -> None:
    """G: 'should not trigger LLM check when disabled for session': no model, no judgement
    (LoopGuardMiddleware(judge=None) is the default)."""
    from agent_guards.middleware import LoopGuardMiddleware

    guard = LoopGuardMiddleware()
    assert guard.judge is None and not guard._judge_due({"messages": turns_of(30)})
    with pytest.raises(ValueError, match="judge_every"):
        LoopPolicy(judge_every=0)
    with pytest.raises(ValueError, match="judge_confidence"):
        LoopPolicy(judge_confidence=1.5)


# -- OpenHands: StuckDetector ---------------------------------------------------------------


def ls(content: str = "") -> list[Any]:
    return run("ls", {"command": "ls"}, content)


def test_openhands_history_too_short() -> None:
    """O: test_history_too_short. Agrees: not stuck."""
    assert verdict([user("Hello"), *ls("file1.txt\nfile2.txt")], HEADLESS) == "continue"


def test_openhands_interactive_mode_resets_after_user_message() -> None:
    """O: test_interactive_mode_resets_after_user_message. Agrees at every checkpoint on
    stuck / not stuck (loop_check nudges the 2nd identical call after the user's message,
    and stops at the 3rd where OpenHands waits for the 4th)."""
    history = [m for _ in range(4) for m in ls()]
    assert verdict(history, HEADLESS) == verdict(history) == "stop"
    history.append(user("Hello"))
    assert (verdict(history), verdict(history, HEADLESS)) == ("continue", "stop")
    history += ls() + ls()
    assert verdict(history) == "nudge"
    history += ls() + ls()
    assert verdict(history) == "stop"


def test_openhands_repeating_action_observation() -> None:
    """O: test_is_stuck_repeating_action_observation (stuck at the 4th identical ls, not at
    the 3rd, a user message between them). Agrees that it is stuck at the 4th; stricter:
    headless loop_check already stops the 3rd."""
    history = [say("Hello"), *ls(), *ls(), user("Done"), *ls()]
    assert verdict(history, HEADLESS) == "stop"
    assert verdict([*history, *ls()], HEADLESS) == "stop"


def test_openhands_repeating_action_error() -> None:
    """O: test_is_stuck_repeating_action_error (the same command failing, not necessarily
    with the same error, over a user message). Agrees: stopped."""
    bad = ("cmd", {"command": "invalid_command"})
    history = [
        say("Hello"),
        *run(*bad, "Command not found", error=True),
        *run(*bad, "Command still not found or another error", error=True),
        user("Done"),
        *run(*bad, "Different error", error=True),
        *run(*bad, "Command not found", error=True),
    ]
    decision = detect_loop(history, policy=HEADLESS)
    assert (decision.verdict, decision.reason) == (Verdict.STOP, "repeated_failure")


CELL = 'to_replace="""def largest(min_factor, max_factor):\n            ^\n'


def cell_error(line: Any, message: str, tail: str = "") -> list[Any]:
    content = f"  Cell In[1], line {line}\n{CELL}{message}{tail}"
    return run("ipython", {"code": "def largest(...)"}, content)


@pytest.mark.parametrize(
    ("message", "random_line", "incidents", "expected"),
    [
        ("SyntaxError: invalid syntax. Perhaps you forgot a comma?", False, 4, "stop"),
        ("SyntaxError: invalid syntax. Perhaps you forgot a comma?", True, 4, "continue"),
        ("SyntaxError: invalid syntax. Perhaps you forgot a comma?", True, 3, "continue"),
        ("SyntaxError: incomplete input", False, 4, "stop"),
        ("SyntaxError: incomplete input", True, 4, "continue"),
        ("SyntaxError: unterminated string literal (detected at line 1)", True, 4, "continue"),
        ("SyntaxError: unterminated string literal (detected at line 1)", False, 2, "nudge"),
        ("SyntaxError: unterminated string literal (detected at line 1)", False, 4, "stop"),
    ],
    ids=[
        "test_is_stuck_invalid_syntax_error",
        "test_is_not_stuck_invalid_syntax_error_random_lines",
        "test_is_not_stuck_invalid_syntax_error_only_three_incidents",
        "test_is_stuck_incomplete_input_error",
        "test_is_not_stuck_incomplete_input_error",
        "test_is_not_stuck_ipython_unterminated_string_error_random_lines",
        "test_is_not_stuck_ipython_unterminated_string_error_only_two_incidents",
        "test_is_stuck_ipython_unterminated_string_error",
    ],
)
def test_openhands_repeated_syntax_errors(
    message: str, random_line: bool, incidents: int, expected: str
) -> None:
    """O: the syntax-error tests named in the ids (the same cell run again; the error at the
    same line is stuck, at another line each time it is not). Agrees on each: the same
    output again is a repeat, an output that changes is not (two incidents are nudged,
    not stopped)."""
    history = [user("fix it")]
    for i in range(incidents):
        line = (i + 1) * 10 if random_line else 42
        history += cell_error(line, message, "\n" * (i + 1) if random_line else "")
    assert verdict(history, HEADLESS) == expected


def test_openhands_syntax_error_not_at_end() -> None:
    """O: test_is_not_stuck_ipython_syntax_error_not_at_end (the output after the error
    differs each time). Agrees: not stuck."""
    tails = ["This is some additional output", "Too much output here", "Enough", "Last line"]
    history = [user("fix it")]
    for i, tail in enumerate(tails):
        history += cell_error(
            1, f"SyntaxError: unterminated string literal (detected at line {i})\n", tail
        )
    assert verdict(history, HEADLESS) == "continue"


def test_openhands_repeating_action_observation_pattern() -> None:
    """O: test_is_stuck_repeating_action_observation_pattern ((ls, read) three times, user
    messages between). Agrees: stuck (a cycle)."""
    rnd = [*ls("file1.txt\nfile2.txt"), *run("read", {"path": "file1.txt"}, "File content")]
    history = [user("Come on"), *rnd, *rnd, user("Come on"), *rnd]
    decision = detect_loop(history, policy=HEADLESS, effects=EFFECTS)
    assert (decision.verdict, decision.reason) == (Verdict.STOP, "cycle")


def test_openhands_not_stuck() -> None:
    """O: test_is_stuck_not_stuck (ls, read 1, pwd, read 2, user, pwd, read 2). Agrees: not
    stopped (the second pwd, read 2 round is nudged once)."""
    history = [
        say("Hello"),
        *ls("file1.txt\nfile2.txt"),
        *run("read", {"path": "file1.txt"}, "File content"),
        *run("pwd", {}, "/home/user"),
        *run("read", {"path": "file2.txt"}, "Another file content"),
        user("Done"),
        *run("pwd", {}, "/home/user"),
        *run("read", {"path": "file2.txt"}, "Another file content"),
    ]
    assert verdict(history, HEADLESS) in ("continue", "nudge")


def test_openhands_monologue() -> None:
    """O: test_is_stuck_monologue (the same reply three times is stuck; after an
    observation, two more are not). Agrees on both, and this is the "reply streaks
    across tool results": a tool call and its result end the streak."""
    same = "I'm doing well, thanks for asking."
    history = [user("Hi there!"), say("Hi there!"), user("How are you?")]
    history += [*run("cmd", {"command": "echo 42"}, "42"), say(same), say(same), say(same)]
    assert detect_loop(history, policy=HEADLESS).reason == "repeated_message"
    assert verdict(history, HEADLESS) == "stop"
    history += [
        *run("cmd", {"command": "storybook"}, "OK, I was stuck, but no more."),
        say(same),
        say(same),
    ]
    assert verdict(history, HEADLESS) == "nudge"


def test_issue_reply_streak_across_a_tool_result() -> None:
    """The case: two identical replies, a tool call and its result, the same reply
    again: not a streak of three."""
    same = "Let me check the order status."
    history = [
        user("where is my order?"),
        say(same),
        say(same),
        *run("t", {"id": 1}, "shipped"),
        say(same),
    ]
    assert verdict(history) == "continue"


@pytest.mark.parametrize(
    ("n", "between", "expected"),
    [(10, None, "stop"), (9, None, "stop"), (10, "work", "continue"), (10, "user", "stop")],
    ids=[
        "test_is_stuck_context_window_error_loop",
        "test_is_not_stuck_context_window_error_less_than_ten",
        "test_is_not_stuck_context_window_error_with_other_events",
        "test_is_stuck_context_window_error_with_user_messages",
    ],
)
def test_openhands_condensation_loops(n: int, between: str | None, expected: str) -> None:
    """O: the context-window tests named in the ids (headless). Agrees, except with nine in
    a row: OpenHands waits for ten, loop_check stops the 3rd condensation in a row."""
    history: list[Any] = [user("Hello")]
    for i in range(n):
        history.append(summary())
        if i < n - 1 and between == "work":
            history += run("cmd", {"command": f"ls {i}"}, "file1.txt\nfile2.txt")
        elif i < n - 1 and between == "user":
            history.append(user(f"Please continue {i}"))
    decision = detect_loop(history, policy=HEADLESS)
    assert decision.verdict.value == expected
    if expected == "stop":
        assert decision.reason == "condensation"


def test_openhands_condensation_before_the_user_message() -> None:
    """O: test_is_not_stuck_context_window_error_in_non_headless. Agrees: stuck headless,
    not stuck interactive (only what follows the latest user message counts)."""
    history = [*[summary() for _ in range(10)], user("Please continue")]
    assert (verdict(history, HEADLESS), verdict(history)) == ("stop", "continue")


def worker_stop() -> AIMessage:
    """The final message of a sub-agent whose own loop_check stopped it."""
    meta = {"agent_guards": {"guard": "loop_check", "verdict": "stop", "reason": "repeated_call"}}
    return AIMessage(
        "loop_check stopped the run: repeated_call: search was called 3 times.",
        name="loop_check",
        response_metadata=meta,
    )


def test_openhands_delegate_stuck() -> None:
    """O: TestAgentController.test_is_stuck_delegate_stuck (a stuck delegate makes the
    controller stuck). Agrees: a worker's loop stop in the parent's messages, or as the
    result of the tool that ran the worker, stops the parent."""
    decision = detect_loop([user("book a trip"), *run("t", {"id": 1}, "ok"), worker_stop()])
    assert (decision.verdict, decision.reason) == (Verdict.STOP, "subagent_stuck")
    as_tool = run("researcher", {"task": "find fares"}, worker_stop().text)
    decision = detect_loop([user("book a trip"), *as_tool])
    assert (decision.reason, decision.data["tool"]) == ("subagent_stuck", "researcher")
    later = [user("book a trip"), worker_stop(), user("try again")]
    assert detect_loop(later).verdict is Verdict.CONTINUE, "a new turn starts afresh"


# -- cross-turn scenarios ---------------------------------------------------------


def pay(card: str, extra: dict[str, Any] | None = None) -> list[Any]:
    args = {"reservation_id": "HXDUBJ", "payment_id": card, "cabin": "business", **(extra or {})}
    return run("update_payment", args, "Error: gift card balance is not enough")


def test_issue_failure_loop_across_user_turns() -> None:
    """The cross-turn failure loop: a payment update failing "balance is not enough"
    four times over four user turns, some attempts identical, some not: stopped at the
    4th (nudged at the 3rd), although each user message starts a fresh count of repeats."""
    history: list[Any] = []
    cards = ["gift_card_1", "gift_card_1", "gift_card_2", "gift_card_1"]
    got = []
    for i, card in enumerate(cards):
        history += [user(f"please try again ({i})"), *pay(card)]
        got.append(detect_loop(history, effects=EFFECTS))
    assert [d.verdict.value for d in got] == ["continue", "continue", "nudge", "stop"]
    assert got[-1].reason == "failure_loop" and "over 4 user turn" in got[-1].detail


@pytest.mark.parametrize(
    ("between", "expected"),
    [
        (lambda: run("t", {"id": 9}, "a new fact about the reservation"), "continue"),
        (
            lambda: run(
                "update_payment", {"reservation_id": "HXDUBJ", "payment_id": "cc"}, '{"ok": 1}'
            ),
            "continue",
        ),
        (lambda: [say("Sorry, it failed again.")], "stop"),
    ],
    ids=["a new result resets", "the tool working resets", "a reply does not reset"],
)
def test_failure_loop_resets(between: Callable[[], list[Any]], expected: str) -> None:
    history: list[Any] = []
    for i in range(3):
        history += [user(f"try {i}"), *pay("gift_card_1")]
    history += [*between(), user("again"), *pay("gift_card_1")]
    assert verdict(history) == expected


def test_failure_loop_needs_the_same_failure_and_near_identical_args() -> None:
    other_errors = [
        user("a"),
        *pay("g1"),
        user("b"),
        *run("update_payment", {"x": 1}, "Error: card expired"),
    ]
    other_errors += [user("c"), *pay("g1"), user("d"), *pay("g1")]
    assert detect_loop(other_errors, effects=EFFECTS).data["counts"]["failure_loop"] == 3
    far = [m for i in range(4) for m in (user(str(i)), *pay(f"g{i}", {"note": "x" * 40 * i}))]
    assert "failure_loop" not in detect_loop(far, effects=EFFECTS).data["counts"]
    plain = LoopPolicy(failure_prefixes=())
    history = [m for i in range(4) for m in (user(str(i)), *pay("g1"))]
    assert detect_loop(history, policy=plain).verdict is Verdict.CONTINUE, "text is ok then"


def test_issue_conversation_loop() -> None:
    """The conversation loop: the assistant asking for the same details turn after
    turn, without calling a tool (more room across user turns: nudged at the 3rd, stopped
    at the 4th)."""
    ask = "Could you please provide your user ID and the reservation ID?"
    history = [user("I want to change my flight"), say(ask)]
    out = []
    for text in ("It's the one to Vegas", "My name is James", "Please just change it"):
        history += [user(text), say(ask)]
        out.append(detect_loop(history))
    assert [d.verdict.value for d in out] == ["continue", "nudge", "stop"]
    assert out[1].reason == "conversation_loop" and "over 3 user turns" in out[1].detail


def test_a_held_refusal_is_no_conversation_loop() -> None:
    """Repeating an answer to a user who insists (a refusal held) is not a loop: only a
    question to the user repeated turn after turn is."""
    no = "I am unable to offer a refund for a basic economy reservation."
    history = [m for i in range(5) for m in (user(f"refund please ({i})"), say(no))]
    assert verdict(history) == "continue"
    assert verdict([*history[:-1], say(no), say(no)]) == "nudge", "the same turn still counts"


def test_issue_non_consecutive_repeats() -> None:
    """The case: A,B,A,B,C,A,B,A,B used to stop at call 6; a new result in between
    now starts the count again, and a write in between does so too."""
    a, b = ("t", {"id": "a"}, "A"), ("t", {"id": "b"}, "B")
    out = verdicts([a, b, a, b, ("t", {"id": "c"}, "C"), a, b, a, b])
    assert "stop" not in out
    assert verdicts([a, b, a, b, a, b])[-1] == "stop", "nothing new in between: a loop"
    write = ("update_payment", {"reservation_id": "R1", "payment_id": "cc"}, "saved")
    assert verdicts([a, a]) == ["continue", "nudge"]
    assert verdicts([a, write, a]) == ["continue", "continue", "continue"], "a write resets"


def test_every_pattern_can_be_switched_off() -> None:
    chant = [user("task"), say("I am done. " * 40)]
    assert verdict(chant, LoopPolicy(patterns=frozenset({"cycle"}))) == "continue"
    with pytest.raises(ValueError, match="content_repeats"):
        LoopPolicy(content_repeats=1)
    with pytest.raises(TypeError, match="failure_prefixes"):
        LoopPolicy(failure_prefixes="Error:")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="on_loop"):
        LoopPolicy(on_loop="rewind")  # type: ignore[arg-type]


# -- agreement counts (docs/loop_check.md) ----------------------------------------------------

AGREE = {"gemini-cli": (49, 47), "OpenHands": (27, 25)}
"""Ported scenarios (peer tests) per peer: (ported, agreeing on the outcome)."""


def test_the_agreement_counts() -> None:
    """The counts docs/loop_check.md reports, by peer test. gemini-cli: 11 tool-call tests,
    25 content tests, 3 structure-format tests, 2 strike tests, the reset test and 7
    LLM-check tests (one in tests/integration/test_loops_peers_graph.py); disagreeing:
    'fewer than TOOL_CALL_LOOP_THRESHOLD identical calls' and 'different tool calls'.
    OpenHands: 22 StuckDetector tests and 5 loop-recovery tests (in the integration file);
    disagreeing: the 3rd identical ls and nine condensations (loop_check stops earlier)."""
    text = (Path(__file__).parents[2] / "docs" / "loop_check.md").read_text(encoding="utf-8")
    for peer, (ported, agree) in AGREE.items():
        assert f"{peer}: {ported} scenarios ported, {agree} agree" in text
