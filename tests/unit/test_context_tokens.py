"""The context guard's default token counter: CJK text, the model's counter, usage_metadata."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    ChatMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.messages.utils import count_tokens_approximately

from agent_guards.context_guard import fit_context
from agent_guards.context_guard.steps import DEFAULT_COUNTER, make_counter
from agent_guards.context_guard.tokens import (
    CJK_TOKENS_PER_CHAR,
    cached_counter,
    count_tokens_cjk,
    has_own_counter,
    usage_scale,
)
from agent_guards.core import Verdict

ZH = "根据二零二四年发布的补贴管理办法，申请企业需要在每季度结束后提交材料。"


class CountingModel(FakeListChatModel):
    """A chat model with a counter of its own: one token per character."""

    def get_num_tokens_from_messages(self, messages: Any, tools: Any = None) -> int:
        return sum(len(str(m.content)) for m in messages)


def test_60k_chinese_characters_are_not_a_quarter_of_a_64k_window() -> None:
    text = (ZH * (60_000 // len(ZH) + 1))[:60_000]
    old = count_tokens_approximately([HumanMessage(text)]) / (64_000 * 0.9)
    v = fit_context([HumanMessage(text, id="q")], max_tokens=64_000, archive=False)
    assert old < 0.3
    assert v.usage_before > 0.75 and v.verdict is not Verdict.CONTINUE


PROSE = (
    "The agent found two retrieved documents that disagree about the same metric: the "
    "official notice says twelve percent, while the internal weekly report says fifteen. "
    "Following the order of evidence arbitration, it should first confirm whether the user "
    "may read the internal report at all, and only then compare the dates of both sources."
)


def test_english_prose_counts_by_words_not_by_four_characters() -> None:
    # o200k spends 60 tokens on this text (about 5.3 characters a token, measured); four
    # characters a token reads it 40% heavier than it is
    msg = HumanMessage(PROSE)
    assert count_tokens_approximately([msg]) - 4 == 84  # 4: the per-message overhead
    assert 60 <= count_tokens_cjk([msg]) - 4 <= 60 * 1.1


@pytest.mark.parametrize(
    ("text", "o200k"),  # the tokens o200k spends on each text, measured
    [("1" * 300, 100), ("hello world " * 50, 101), ("x" * 700, 88), ("a\n\n    b\n\n    c", 7)],
)
def test_digits_words_and_spacing_count_like_o200k(text: str, o200k: int) -> None:
    assert o200k * 0.8 <= count_tokens_cjk([HumanMessage(text)]) - 4 <= o200k * 1.2


def test_tool_calls_count_as_count_tokens_approximately() -> None:
    call = AIMessage("", tool_calls=[{"name": "search", "args": {"q": "x"}, "id": "c1"}])
    assert count_tokens_cjk([call]) == count_tokens_approximately([call])


def test_cjk_in_tool_calls_and_text_blocks_is_counted() -> None:
    call = AIMessage("", tool_calls=[{"name": "weather", "args": {"city": "北京" * 20}, "id": "c"}])
    blocks = HumanMessage([{"type": "text", "text": ZH}])
    assert count_tokens_cjk([call]) == count_tokens_approximately([call]) + 20  # 40 x 0.5
    # 35 CJK characters at 0.75 instead of 0.25 a token: + 17.5, rounded up
    assert count_tokens_cjk([blocks]) == count_tokens_approximately([blocks]) + 18


def test_cjk_rate_is_a_parameter() -> None:
    msgs = [HumanMessage(ZH * 10)]
    assert count_tokens_cjk(msgs, cjk_tokens_per_char=1.1) > count_tokens_cjk(msgs)


def test_memo_counts_equal_messages_alike_and_never_returns_a_stale_count() -> None:
    a = HumanMessage(ZH, id="m")
    assert DEFAULT_COUNTER(a) == DEFAULT_COUNTER(HumanMessage(str(ZH), id="other"))
    longer = HumanMessage(ZH * 3, id="m")  # same id, new content
    assert DEFAULT_COUNTER(longer) == count_tokens_cjk([longer]) > DEFAULT_COUNTER(a)
    tool = ToolMessage(ZH, tool_call_id="a")
    assert DEFAULT_COUNTER(tool) == count_tokens_cjk([tool])


def test_a_model_counter_is_used_only_when_the_model_has_one() -> None:
    own, generic = CountingModel(responses=["x"]), FakeListChatModel(responses=["x"])
    assert has_own_counter(own) and not has_own_counter(generic)
    assert make_counter(generic) is DEFAULT_COUNTER
    assert make_counter(own)(HumanMessage("abcd")) == 4


def _with_usage(total: int) -> list[BaseMessage]:
    reply = AIMessage(
        "done " * 50,
        id="a",
        usage_metadata={"input_tokens": total - 60, "output_tokens": 60, "total_tokens": total},
    )
    return [HumanMessage("question " * 100, id="q"), reply, HumanMessage("next", id="n")]


@pytest.mark.parametrize("factor", [0.01, 1.0, 1.3, 40.0])
def test_usage_metadata_scales_the_estimate_up_within_bounds(factor: float) -> None:
    estimate = sum(count_tokens_cjk([m]) for m in _with_usage(1)[:2])
    total = round(factor * estimate)
    msgs = _with_usage(total)
    tokens = [count_tokens_cjk([m]) for m in msgs]
    assert usage_scale(msgs, tokens, 0) == pytest.approx(min(1.5, max(1.0, total / estimate)))


def test_fit_context_uses_usage_metadata_for_estimates_only() -> None:
    plain = fit_context(_with_usage(1), max_tokens=100_000)
    scaled = fit_context(_with_usage(10_000), max_tokens=100_000)
    model = fit_context(
        _with_usage(10_000), max_tokens=100_000, token_counter=CountingModel(responses=["x"])
    )
    assert scaled.tokens_before > 1.4 * plain.tokens_before
    assert model.tokens_before == sum(len(str(m.content)) for m in _with_usage(1))


def test_a_long_text_is_counted_on_windows_close_to_a_full_count() -> None:
    from agent_guards.context_guard import tokens

    text = "".join(f"REQ-{i}: 字段 renamed, criteria {{'id': {i}}}.\n" for i in range(40_000))
    assert len(text) > tokens._SAMPLED_OVER
    full = tokens._shape_tokens(text, tokens.CJK_TOKENS_PER_CHAR)
    sampled = tokens._text_tokens(text, tokens.CJK_TOKENS_PER_CHAR)
    assert sampled != full and abs(sampled / full - 1) < 0.02
    assert count_tokens_cjk([HumanMessage(text)]) == count_tokens_cjk([HumanMessage(text)])


_TEXT = st.text(
    alphabet=st.sampled_from(list("ab Z9,.;!\n\t(){}") + list("北京需求變更日本語한국"))
)
_CALLS = st.lists(
    st.fixed_dictionaries({"name": st.sampled_from(["t", "天气"]), "args": st.dictionaries(
        st.sampled_from(["q", "城市"]), _TEXT, max_size=2), "id": st.sampled_from(["c1", "c2"])}),
    max_size=2,
)  # fmt: skip
_CONTENT = _TEXT | st.lists(
    _TEXT | st.fixed_dictionaries({"type": st.sampled_from(["text", "image"]), "text": _TEXT}),
    max_size=3,
)
_MESSAGES = st.one_of(
    st.builds(HumanMessage, content=_CONTENT, name=st.none() | st.sampled_from(["ann", "李"])),
    st.builds(AIMessage, content=_CONTENT, tool_calls=_CALLS),
    st.builds(ToolMessage, content=_CONTENT, tool_call_id=st.sampled_from(["c1", "調用"])),
    st.builds(SystemMessage, content=_CONTENT),
    st.builds(ChatMessage, content=_TEXT, role=st.sampled_from(["critic", "user"])),
)


@settings(max_examples=300, deadline=None)
@given(message=_MESSAGES, rate=st.sampled_from([CJK_TOKENS_PER_CHAR, 0.5, 1.1]))
def test_the_memo_counts_one_message_as_count_tokens_cjk_does(
    message: BaseMessage, rate: float
) -> None:
    counter = cached_counter(rate)
    expected = count_tokens_cjk([message], cjk_tokens_per_char=rate)
    assert counter(message) == expected  # a miss
    assert counter(message) == expected  # a hit
