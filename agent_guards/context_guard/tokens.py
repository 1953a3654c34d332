"""Token counting for the context guard: a CJK-aware estimate, the model's own counter, usage.

The default counter, :func:`count_tokens_cjk`, targets the o200k family (the tokenizer of
GPT-4o, GPT-4.1, GPT-5 and the o-series; DeepSeek and Qwen tokenizers read Chinese at a similar
rate). It counts text by its shape: an English word of up to 8 letters is a token, a group of
up to 3 digits is a token, a punctuation mark or symbol 0.6, a CJK character (Han, kana,
Hangul, full-width punctuation) 0.75; the per-message overhead, tool calls and schemas are
counted as ``count_tokens_approximately`` counts them. Measured against o200k on Chinese,
English prose, technical English and mixed text it stays within 10% (``make bench``), where
``count_tokens_approximately``'s four characters a token reads Chinese at 0.39x (a Chinese
conversation would overflow a window the guard believes is a third full) and English prose
at 1.29x. cl100k models (GPT-4, GPT-3.5) spend about 1.1 tokens a Chinese character: pass
``cjk_tokens_per_char=1.1`` for them.

Per-message counts are memoized in a bounded cache keyed by what the count is a function of
(role, name, content, tool calls), so a long history is not re-counted before every model
call and a replay counts exactly the same.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from typing import Any

from langchain_core.language_models import BaseLanguageModel
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    ChatMessage,
    ToolMessage,
    convert_to_messages,
)
from langchain_core.messages.utils import MessageLikeRepresentation, count_tokens_approximately

__all__ = [
    "CJK_TOKENS_PER_CHAR",
    "count_tokens_cjk",
    "has_own_counter",
    "usage_scale",
]

CJK_TOKENS_PER_CHAR = 0.75
"""Tokens per CJK character in the o200k family (measured: ``benchmarks/bench_tokens.py``)."""

_BASE_CHARS_PER_TOKEN = 4.0  # count_tokens_approximately's default
_CJK_RUN = re.compile(
    "[\u2e80-\u2fdf\u3000-\u303f\u3040-\u30ff\u3100-\u312f\u3130-\u318f\u31a0-\u31ff"
    "\u3400-\u4dbf\u4e00-\u9fff\ua960-\ua97f\uac00-\ud7af\uf900-\ufaff\ufe30-\ufe4f"
    "\uff00-\uffef\U00020000-\U0002fa1f]+"
)
_MAX_SCALE = 1.5  # usage_metadata may scale the estimate up, never by more than this


# The shape of text, counted in single C-level regex passes (no Python loop per piece):
# o200k spends about one token per English word of up to 8 letters (longer words split),
# one per group of up to 3 digits, one per whitespace run other than a single space, and
# 0.6 per punctuation mark or symbol (pairs such as ``("`` and ``":`` are one token).
_WORD_PIECE = re.compile("[A-Za-z]{1,8}")
_DIGIT_GROUP = re.compile("[0-9]{1,3}")
_SPACING = re.compile(r"\s{2,}|[^\S ]")
_PLAIN = re.compile(r"[A-Za-z0-9\s]+")
_SYMBOL_TOKENS = 0.6


_SAMPLED_OVER = 65_536  # characters; a longer text is counted on evenly spaced windows
_WINDOWS, _WINDOW = 16, 4_096


def _text_tokens(text: str, cjk_tokens_per_char: float) -> float:
    """Estimated o200k tokens of ``text``, from its words, digits, spacing and symbols.

    A long text (a 10 MB tool result) is counted on 16 evenly spaced windows and scaled to
    its length: the cost stays bounded and the same text always gets the same count.
    """
    if len(text) > _SAMPLED_OVER:
        step = (len(text) - _WINDOW) // (_WINDOWS - 1)
        sample = "".join(text[i * step : i * step + _WINDOW] for i in range(_WINDOWS))
        return _shape_tokens(sample, cjk_tokens_per_char) * len(text) / len(sample)
    return _shape_tokens(text, cjk_tokens_per_char)


def _shape_tokens(text: str, cjk_tokens_per_char: float) -> float:
    cjk = 0 if text.isascii() else sum(map(len, _CJK_RUN.findall(text)))
    other = len(_PLAIN.sub("", text)) - cjk  # punctuation, symbols, other scripts
    return (
        len(_WORD_PIECE.findall(text))
        + len(_DIGIT_GROUP.findall(text))
        + len(_SPACING.findall(text))
        + other * _SYMBOL_TOKENS
        + cjk * cjk_tokens_per_char
    )


def _texts(m: BaseMessage) -> Iterable[str]:
    """The text parts of ``m``'s content, as ``count_tokens_approximately`` finds them."""
    content = m.content
    if isinstance(content, str):
        yield content
    else:
        for block in content:
            if isinstance(block, str):
                yield block
            elif isinstance(block, dict) and block.get("type") == "text":
                yield str(block.get("text", ""))


def count_tokens_cjk(
    messages: Iterable[MessageLikeRepresentation],
    *,
    cjk_tokens_per_char: float = CJK_TOKENS_PER_CHAR,
    tools: list[Any] | None = None,
) -> int:
    """Estimate the tokens of ``messages`` as an o200k tokenizer would spend them.

    ``count_tokens_approximately`` counts 4 characters a token; here the text is counted by
    its shape instead: English words, digit groups, spacing and symbols, and CJK characters
    at ``cjk_tokens_per_char``. Everything else (the per-message overhead, roles, names,
    tool schemas, non-text blocks) is counted as ``count_tokens_approximately`` counts it.

    Example:
        >>> from langchain_core.messages import HumanMessage
        >>> from langchain_core.messages.utils import count_tokens_approximately
        >>> zh = [HumanMessage("帮我总结一下这个项目的所有需求变更" * 10)]
        >>> count_tokens_approximately(zh), count_tokens_cjk(zh)
        (47, 132)
        >>> en = [HumanMessage("Summarize every requirement change of this project.")]
        >>> count_tokens_approximately(en), count_tokens_cjk(en)
        (17, 14)
    """
    msgs = convert_to_messages(messages)
    return _by_shape(msgs, count_tokens_approximately(msgs, tools=tools), cjk_tokens_per_char)


def _by_shape(msgs: Sequence[BaseMessage], base: int, cjk_tokens_per_char: float) -> int:
    """``base``, ``count_tokens_approximately``'s count of ``msgs``, with their text counted
    by its shape instead of 4 characters a token."""
    chars = shaped = 0.0
    for m in msgs:
        for text in _texts(m):
            chars += len(text)
            shaped += _text_tokens(text, cjk_tokens_per_char)
        if isinstance(m, AIMessage) and isinstance(m.content, str) and m.tool_calls:
            # the repr of the calls is not what a provider sends: 4 characters a token as
            # count_tokens_approximately has it, CJK characters (in arguments) at their rate
            calls = repr(m.tool_calls)
            if not calls.isascii():
                shaped += sum(map(len, _CJK_RUN.findall(calls))) * (
                    cjk_tokens_per_char - 1 / _BASE_CHARS_PER_TOKEN
                )
    return max(1, base + math.ceil(shaped - chars / _BASE_CHARS_PER_TOKEN)) if msgs else base


def has_own_counter(model: BaseLanguageModel[Any]) -> bool:
    """True when ``model`` overrides LangChain's generic counter (which needs ``transformers``
    and a GPT-2 vocabulary, wrong for any current model)."""
    cls = type(model)
    return any(
        getattr(cls, name) is not getattr(BaseLanguageModel, name)
        for name in ("get_num_tokens_from_messages", "get_num_tokens", "get_token_ids")
    )


def usage_scale(messages: Sequence[BaseMessage], tokens: Sequence[int], tool_tokens: int) -> float:
    """How much to scale an estimate up from the last AIMessage's ``usage_metadata``.

    ``total_tokens`` of the last reply that reports it is what the provider counted for the
    context up to and including that reply; the estimate of the same prefix is compared with
    it. The scale is kept in [1, 1.5]: usage only ever makes the guard more careful, and a
    model node that adds a prompt of its own cannot make it panic.
    """
    for i in range(len(messages) - 1, -1, -1):
        m = messages[i]
        if not isinstance(m, AIMessage):
            continue
        total = m.usage_metadata.get("total_tokens") if m.usage_metadata else None
        if isinstance(total, int) and not isinstance(total, bool) and total > 0:
            estimate = sum(tokens[: i + 1]) + tool_tokens
            return min(_MAX_SCALE, max(1.0, total / estimate)) if estimate > 0 else 1.0
    return 1.0


def cached_counter(cjk_tokens_per_char: float = CJK_TOKENS_PER_CHAR) -> _MemoCounter:
    """A one-message :func:`count_tokens_cjk` with a bounded memo (a pure function cache)."""
    return _MemoCounter(cjk_tokens_per_char)


_MEMO_SIZE = 16_384  # entries
_MEMO_CHARS = 16_000_000  # characters of content the memo may keep alive
_MEMO_MAX_TEXT = 200_000  # longer texts are counted each time (a scan is cheap next to them)


class _MemoCounter:
    """``message -> tokens``, memoized by everything the count depends on (never by identity).

    Bounded in entries and in the characters it keeps alive; a miss only costs a recount.
    """

    __slots__ = ("_chars", "_memo", "_rate")

    def __init__(self, cjk_tokens_per_char: float) -> None:
        self._rate = cjk_tokens_per_char
        self._memo: dict[tuple[Any, ...], int] = {}
        self._chars = 0

    def __call__(self, m: BaseMessage) -> int:
        content = m.content
        if not isinstance(content, str) or len(content) > _MEMO_MAX_TEXT:
            return self._count(m)
        calls = repr(m.tool_calls) if isinstance(m, AIMessage) and m.tool_calls else ""
        call_id = m.tool_call_id if isinstance(m, ToolMessage) else ""
        role = m.role if isinstance(m, ChatMessage) else None
        key = (type(m), role, m.name, call_id, calls, content)
        hit = self._memo.get(key)
        if hit is None:
            hit = self._count(m)
            if len(self._memo) >= _MEMO_SIZE or self._chars >= _MEMO_CHARS:
                self._memo.clear()
                self._chars = 0
            self._memo[key] = hit
            self._chars += len(content) + len(calls)
        return hit

    def _count(self, m: BaseMessage) -> int:
        """``count_tokens_cjk([m])``: ``m`` is a message already, converted once (by
        ``count_tokens_approximately``), not twice."""
        one = [m]
        return _by_shape(one, count_tokens_approximately(one), self._rate)
