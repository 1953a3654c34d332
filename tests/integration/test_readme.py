"""Every Python block in the README runs, and prints what the README says it prints.

A ```python block followed directly by a ```text block must print exactly that text.
Blocks run in order in one namespace, as a reader pasting them into a session would.
"""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"
BLOCK = re.compile(r"```(\w+)\n(.*?)```", re.S)


def blocks() -> list[tuple[str, str | None]]:
    found = [
        (m.group(1), m.group(2), m.end(), m.start()) for m in BLOCK.finditer(README.read_text())
    ]
    out: list[tuple[str, str | None]] = []
    for i, (lang, code, end, _) in enumerate(found):
        if lang != "python":
            continue
        expected = None
        if i + 1 < len(found) and found[i + 1][0] == "text":
            between = README.read_text()[end : found[i + 1][3]]
            if not between.strip():
                expected = found[i + 1][1]
        out.append((code, expected))
    return out


def test_readme_has_python_examples() -> None:
    assert blocks()


def test_readme_blocks_run_and_print_what_they_show(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {"__name__": "__readme__"}
    for index, (code, expected) in enumerate(blocks()):
        buffer = io.StringIO()
        with contextlib.redirect_stdout(buffer):
            exec(compile(code, f"README.md block {index}", "exec"), namespace)
        if expected is not None:
            assert buffer.getvalue().strip() == expected.strip(), (
                f"README block {index} output differs"
            )
