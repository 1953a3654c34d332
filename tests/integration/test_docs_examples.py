"""Every ```python block in docs/*.md runs, and prints the ```text block that follows it.

Blocks of one page run in order in one namespace, as a reader pasting them would.
Fragments that need a live server or a paused thread are fenced ```py and not run.
"""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

DOCS = sorted((Path(__file__).resolve().parents[2] / "docs").glob("*.md"))
BLOCK = re.compile(r"```(\w*)\n(.*?)```", re.S)


def examples(page: Path) -> list[tuple[str, str | None]]:
    text = page.read_text(encoding="utf-8")
    found = list(BLOCK.finditer(text))
    out: list[tuple[str, str | None]] = []
    for i, m in enumerate(found):
        if m.group(1) != "python":
            continue
        nxt = found[i + 1] if i + 1 < len(found) else None
        expected = None
        if nxt is not None and nxt.group(1) == "text" and not text[m.end() : nxt.start()].strip():
            expected = nxt.group(2)
        out.append((m.group(2), expected))
    return out


@pytest.mark.parametrize("page", DOCS, ids=[p.name for p in DOCS])
def test_doc_examples_run(page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {"__name__": f"__docs_{page.stem}__"}
    for index, (code, expected) in enumerate(examples(page)):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            # as a reader's own file runs it: not under this module's __future__ imports
            block = compile(code, f"{page.name} block {index}", "exec", dont_inherit=True)
            exec(block, namespace)
        if expected is not None:
            got = "\n".join(line.rstrip() for line in out.getvalue().strip().splitlines())
            want = "\n".join(line.rstrip() for line in expected.strip().splitlines())
            assert got == want, f"{page.name} block {index} prints something else"
