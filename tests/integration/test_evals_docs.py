"""docs/evaluating.md: every ```python block runs and prints what the page shows."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "evaluating.md"
BLOCK = re.compile(r"```(\w+)\n(.*?)```", re.S)


def blocks() -> list[tuple[str, str | None]]:
    text = DOC.read_text()
    found = list(BLOCK.finditer(text))
    out: list[tuple[str, str | None]] = []
    for i, m in enumerate(found):
        if m.group(1) != "python":
            continue
        expected = None
        nxt = found[i + 1] if i + 1 < len(found) else None
        if nxt is not None and nxt.group(1) == "text" and not text[m.end() : nxt.start()].strip():
            expected = nxt.group(2)
        out.append((m.group(2), expected))
    return out


def test_the_page_has_examples() -> None:
    assert len(blocks()) >= 3


def test_blocks_run_and_print_what_the_page_shows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {"__name__": "__doc__"}
    for index, (code, expected) in enumerate(blocks()):
        buffer = io.StringIO()
        with contextlib.redirect_stdout(buffer):
            exec(compile(code, f"evaluating.md block {index}", "exec"), namespace)
        if expected is not None:
            assert buffer.getvalue().strip() == expected.strip(), f"block {index} output differs"


def test_the_dated_replay_numbers_are_the_ones_the_command_prints_ramdocs_page() -> None:
    from agent_guards.evals.dated import format_dated, run_dated

    assert format_dated(run_dated()) in DOC.read_text()


def test_the_ramdocs_numbers_are_the_ones_the_command_prints() -> None:
    from agent_guards.evals.ramdocs import run_ramdocs

    text = DOC.read_text()
    plain, unknown, oracle = (
        run_ramdocs(),
        run_ramdocs(keep_unknown=True),
        run_ramdocs(labels="oracle"),
    )
    for key in (
        "strict_correct_rate",
        "correct_answer_rate",
        "wrong_commit_rate",
        "caveat_rate",
        "clarify_rate",
        "clarify_on_ambiguous",
        "clarify_lists_misinfo",
    ):
        row = " | ".join(f"{100 * r[key]:.1f}%" for r in (plain, unknown, oracle))
        assert row in text.replace(" (2)", ""), key
