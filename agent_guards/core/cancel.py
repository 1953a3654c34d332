"""Reading a user's message as "stop the run": short, explicit requests only.

A user cancels where they can speak: a new message on a thread whose run has not
finished, or the answer to an approval question. Only a message that is nothing but a
request to stop counts ("stop", "cancel that", "never mind", "停止", "算了"); a message with
a task in it ("cancel my order 42", "stop the server on box 3") is a task for the agent,
never a cancel. Pass your own predicate where your users speak differently.

Example:
    >>> [is_stop_request(t) for t in ("Stop!", "please cancel it", "取消", "cancel order 42")]
    [True, True, True, False]
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable

__all__ = ["StopRequest", "is_stop_request"]

StopRequest = Callable[[str], bool]
"""Whether a user message asks to stop the run (``is_stop_request`` is the default)."""

_POLITE = r"(?:please |pls |ok |okay |no |wait |hey )*"
_OBJECT = r"(?: (?:it|that|this|everything|all|all of it|the run|the task|the plan|now))*"
_VERB = r"(?:stop|cancel|abort|halt|quit|stop it|cancel the whole thing|never ?mind|forget it)"
_EN = re.compile(rf"{_POLITE}{_VERB}(?: {_VERB})*{_OBJECT}(?: please)?")
_ZH_VERB = (
    r"(?:请)?(?:停|停止|停下|取消|中止|终止|算了|别做了|不要做了|不用了|别继续了|不要继续了)"
    r"(?:吧|了|吧了)?"
)
_ZH = re.compile(rf"(?:{_ZH_VERB})+")


def is_stop_request(text: str) -> bool:
    """True when the whole message is a request to stop (English or Chinese), else False."""
    if not isinstance(text, str):
        return False
    folded = unicodedata.normalize("NFKC", text).casefold()
    words = re.sub(r"[^\w\s']+", " ", folded)
    words = re.sub(r"\s+", " ", words).strip()
    return bool(words) and bool(_EN.fullmatch(words) or _ZH.fullmatch(words.replace(" ", "")))
