"""is_stop_request: a message that only asks to stop is a cancel; a task never is."""

from __future__ import annotations

import pytest

from agent_guards.core.cancel import is_stop_request
from agent_guards.planner_gate import Approval


@pytest.mark.parametrize(
    "text",
    ["stop", "Stop!", "STOP.", "please stop", "stop it now", "cancel that", "cancel",
     "never mind", "nevermind", "forget it", "ok stop please", "abort", "Wait, stop!",
     "stop, cancel it", "ｓｔｏｐ", "停止", "停", "算了", "请停止吧", "别做了。", "取消", "算了，别做了"],
)  # fmt: skip
def test_a_request_to_stop(text: str) -> None:
    assert is_stop_request(text) is True


@pytest.mark.parametrize(
    "text",
    ["", "   ", "cancel my order 42", "stop the server on box 3", "stop words in NLP",
     "Can you cancel the booking?", "don't stop", "cancel the flight", "停止服务器", "取消订单",
     "why did it stop?", "stopping distance of a car"],
)  # fmt: skip
def test_a_task_or_a_question_is_not_a_cancel(text: str) -> None:
    assert is_stop_request(text) is False


def test_non_text_is_not_a_cancel() -> None:
    assert is_stop_request(None) is False  # type: ignore[arg-type]
    assert is_stop_request(["stop"]) is False  # type: ignore[arg-type]


@pytest.mark.parametrize(("resume", "cancelled"), [("stop", True), ("never mind", True),
                                                   ("no", False), ("reject", False)])  # fmt: skip
def test_an_approval_answered_with_stop_cancels(resume: str, cancelled: bool) -> None:
    answer = Approval.from_resume(resume)
    assert (answer.approved, answer.cancelled) == (False, cancelled)
