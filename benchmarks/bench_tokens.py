"""How close the context guard's default token counter is to a real tokenizer.

The reference is o200k_base (GPT-4o / GPT-4.1 / GPT-5), from the ``bpe-openai`` package,
which ships the vocabulary in its wheel (the dev extras install it; ``tiktoken`` would
download it at first use). cl100k_base (GPT-4) is shown beside it. Without the package the
rows are skipped with a note. Ratios are estimate / real: 1.0 is exact, above 1 is careful.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage
from langchain_core.messages.utils import count_tokens_approximately

from agent_guards.context_guard.tokens import count_tokens_cjk
from benchmarks.token_samples import SAMPLES

TARGET = "0.80-1.20"
WINDOW = 64_000


def _tokenizers() -> dict[str, Callable[[str], int]] | str:
    try:
        import bpe_openai  # type: ignore[import-not-found, unused-ignore]
    except ImportError:
        return "skipped: no real tokenizer here (pip install bpe-openai, in the dev extras)"
    encs = {n: bpe_openai.get_encoding(n) for n in ("o200k_base", "cl100k_base")}
    return {n: (lambda text, e=e: len(e.encode(text))) for n, e in encs.items()}


_PER_MESSAGE = 4  # what a chat format adds around one message (role, separators)


def _ratio(
    count: Callable[[list[BaseMessage]], int], real: Callable[[str], int], texts: Any
) -> float:
    estimate = sum(count([HumanMessage(t)]) for t in texts)
    return estimate / sum(real(t) + _PER_MESSAGE for t in texts)


def _window_rows(real: Callable[[str], int]) -> list[dict[str, Any]]:
    zh = "".join(SAMPLES["chinese"])
    text = (zh * (60_000 // len(zh) + 1))[:60_000]
    truth = real(text) + _PER_MESSAGE
    rows = []
    for label, count in (
        ("count_tokens_approximately", count_tokens_approximately),
        ("default counter", count_tokens_cjk),
    ):
        seen = count([HumanMessage(text)])
        ours = count is count_tokens_cjk  # LangChain's counter is the comparison: no target
        rows.append(
            {
                "name": f"60k Chinese chars in a 64k window, {label} / o200k",
                "value": round(seen / truth, 2),
                "unit": "x",
                **({"target": TARGET} if ours else {}),
                "note": f"reads {seen / WINDOW:.0%} of the window; o200k: {truth / WINDOW:.0%}",
            }
        )
    return rows


def run(quick: bool = False) -> list[dict[str, Any]]:
    tokenizers = _tokenizers()
    if isinstance(tokenizers, str):
        return [
            {
                "name": "token counter / real tokenizer",
                "value": 0.0,
                "unit": "skip",
                "note": tokenizers,
            }
        ]
    rows: list[dict[str, Any]] = []
    for lang, texts in SAMPLES.items():
        for family, real in tokenizers.items():
            new = _ratio(count_tokens_cjk, real, texts)
            old = _ratio(count_tokens_approximately, real, texts)
            rows.append(
                {
                    "name": f"token counter / {family.removesuffix('_base')}, {lang}",
                    "value": round(new, 2),
                    "unit": "x",
                    "target": TARGET if family == "o200k_base" else "",
                    "note": f"{len(texts)} samples; count_tokens_approximately: {old:.2f}x",
                }
            )
    return rows + _window_rows(tokenizers["o200k_base"])


if __name__ == "__main__":  # pragma: no cover
    for row in run():
        print(row)
