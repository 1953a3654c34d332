"""Every code block in the README runs, and prints what the README says it prints.

Python: a ```python block followed directly by a ```text block must print exactly that
text. Blocks run in order in one namespace, as a reader pasting them into a session would.

Bash: each line of a ```bash block is checked.

* ``make <target>`` lines name real targets of the Makefile (they are not run).
* ``agent-guards ...`` lines run in-process through :func:`agent_guards.cli.main`, in a
  temporary directory (with a ``data`` link to the repository's ``data/``, as in a clone), so
  the default ``--db .agent_guards/demo.sqlite`` lands there; an
  absolute ``--db`` path is moved there and a ``postgresql://`` URL is replaced by the test
  session's throwaway server. The exit status must be 0, or the one a trailing
  ``# exit status N`` comment names. A ```text block right after the bash block must match
  the output: exactly, except that ``...`` stands for any text (doctest's ELLIPSIS), and
  that thread and checkpoint ids shown in the README stand for the ones this run printed
  (the demo stamps thread ids with the time and a random tail; checkpoint ids are uuids).
* ``langgraph dev`` lines: ``langgraph.json`` names graphs that import.
* ``pip install`` lines name extras that pyproject.toml declares.

Any other command in a bash block fails the test, so the README cannot show a command
nobody checked.

JSON: each ```json block parses; one that is an eval case runs and passes.
"""

from __future__ import annotations

import contextlib
import doctest
import importlib
import io
import json
import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
FENCE = re.compile(r"^```(\w+)\n(.*?)^```[ \t]*$", re.S | re.M)

# ids the demo prints: <scenario>-<yyyymmdd>-<hhmmss>, and checkpoint uuids (history rows)
THREAD_ID = re.compile(r"\b([a-z][a-z0-9_]*)-(\d{8}-\d{6}-[0-9a-f]{4})\b")
HISTORY_ROW = re.compile(
    r"^\s*(-?\d+)\s+([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})\b", re.M
)
EXIT_NOTE = re.compile(r"#\s*exit status (\d+)")


@dataclass(frozen=True)
class Block:
    lang: str
    code: str
    expected: str | None  # the ```text block right after it, if any
    line: int  # where the block starts in README.md


def blocks(lang: str) -> list[Block]:
    text = README.read_text()
    found = list(FENCE.finditer(text))
    out: list[Block] = []
    for i, m in enumerate(found):
        if m.group(1) != lang:
            continue
        expected = None
        following = found[i + 1] if i + 1 < len(found) else None
        if (
            following is not None
            and following.group(1) == "text"
            and not text[m.end() : following.start()].strip()
        ):
            expected = following.group(2)
        out.append(Block(lang, m.group(2), expected, text.count("\n", 0, m.start()) + 1))
    return out


def test_readme_has_python_and_bash_examples() -> None:
    assert blocks("python")
    assert blocks("bash")


def test_readme_fences_use_known_languages() -> None:
    langs = {m.group(1) for m in FENCE.finditer(README.read_text())}
    assert langs <= {"python", "bash", "text", "json"}, langs


def test_readme_blocks_run_and_print_what_they_show(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {"__name__": "__readme__"}
    for index, block in enumerate(blocks("python")):
        buffer = io.StringIO()
        with contextlib.redirect_stdout(buffer):
            exec(compile(block.code, f"README.md line {block.line}", "exec"), namespace)
        if block.expected is not None:
            assert _lines(buffer.getvalue()) == _lines(block.expected), (
                f"README python block {index} (line {block.line}) output differs"
            )


# -- bash -------------------------------------------------------------------------------


def _lines(text: str) -> str:
    """Trailing spaces and surrounding blank lines do not count."""
    return "\n".join(line.rstrip() for line in text.strip("\n").splitlines()).strip()


def _matches(expected: str, got: str) -> bool:
    checker = doctest.OutputChecker()
    return checker.check_output(_lines(expected) + "\n", _lines(got) + "\n", doctest.ELLIPSIS)


def make_targets() -> set[str]:
    rules = re.findall(r"^([A-Za-z][\w.-]*):", (ROOT / "Makefile").read_text(), re.M)
    return set(rules)


class IdMap:
    """README ids -> the ids this run printed (thread ids by scenario, checkpoints by step)."""

    def __init__(self) -> None:
        self.ids: dict[str, str] = {}

    def learn(self, expected: str, got: str) -> None:
        actual_threads = {m.group(1): m.group(0) for m in THREAD_ID.finditer(got)}
        for m in THREAD_ID.finditer(expected):
            if m.group(1) in actual_threads:
                self.ids[m.group(0)] = actual_threads[m.group(1)]
        actual_rows = dict(HISTORY_ROW.findall(got))
        for step, cid in HISTORY_ROW.findall(expected):
            if step in actual_rows:
                self.ids[cid] = actual_rows[step]

    def apply(self, text: str) -> str:
        for readme_id, actual in self.ids.items():
            text = text.replace(readme_id, actual)
        return text

    def argv(self, argv: list[str], line: str) -> list[str]:
        out = []
        for arg in argv:
            looks_like_id = THREAD_ID.fullmatch(arg) or re.fullmatch(r"[0-9a-f-]{36}", arg)
            if looks_like_id and arg not in self.ids:
                pytest.fail(f"README `{line}` uses id {arg!r} that no block before it printed")
            out.append(self.ids.get(arg, arg))
        return out


def run_cli(argv: list[str]) -> tuple[int, str]:
    from agent_guards.cli import main

    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        try:
            status = main(argv)
        except SystemExit as stop:
            code = stop.code
            status = code if isinstance(code, int) else 1
            if isinstance(code, str):
                print(code)
    return status, buffer.getvalue()


def _db(argv: list[str], tmp_path: Path, postgres: Callable[[], str]) -> list[str]:
    out = list(argv)
    if "--db" in out:
        i = out.index("--db") + 1
        value = out[i]
        if value.startswith(("postgresql://", "postgres://")):
            out[i] = postgres()
        elif Path(value).is_absolute():
            out[i] = str(tmp_path / Path(value).name)
        else:
            assert (tmp_path / value).resolve().is_relative_to(tmp_path)
    return out


def check_langgraph_dev() -> None:
    config = json.loads((ROOT / "langgraph.json").read_text())
    assert config["graphs"], "langgraph.json names no graph"
    for spec in config["graphs"].values():
        module, _, attr = spec.partition(":")
        assert callable(getattr(importlib.import_module(module), attr)), spec


def check_pip(line: str) -> None:
    pyproject = (ROOT / "pyproject.toml").read_text()
    section = pyproject.split("[project.optional-dependencies]", 1)[1].split("\n[", 1)[0]
    extras = set(re.findall(r"^([\w-]+)\s*=", section, re.M))
    for group in re.findall(r"\[([\w,-]+)\]", line):
        for extra in group.split(","):
            assert extra in extras, f"`{line}`: no extra {extra!r} in pyproject.toml"


def test_readme_bash_blocks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "data").symlink_to(ROOT / "data", target_is_directory=True)
    targets = make_targets()
    ids = IdMap()

    def postgres() -> str:
        url: str = request.getfixturevalue("postgres_url")
        return url

    for block in blocks("bash"):
        outputs: list[str] = []
        ran = False
        for raw in block.code.splitlines():
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            command = line.split(" #", 1)[0].strip()
            where = f"README line {block.line}: `{command}`"
            if command.startswith("make "):
                for target in command.split()[1:]:
                    assert target in targets, f"{where}: no target {target!r} in the Makefile"
            elif command.startswith("agent-guards "):
                argv = _db(ids.argv(shlex.split(command)[1:], command), tmp_path, postgres)
                status, out = run_cli(argv)
                expected_status = int(m.group(1)) if (m := EXIT_NOTE.search(line)) else 0
                assert status == expected_status, f"{where}: exit status {status}\n{out}"
                outputs.append(out)
                ran = True
            elif command.startswith("langgraph dev"):
                check_langgraph_dev()
            elif command.startswith("pip install"):
                check_pip(command)
            else:
                pytest.fail(f"{where}: the README test does not know how to check this command")
        if block.expected is not None and ran:
            got = "".join(outputs)
            ids.learn(block.expected, got)
            expected = ids.apply(block.expected)
            assert _matches(expected, got), (
                f"README bash block at line {block.line}: output differs\n"
                f"--- README\n{expected}\n--- got\n{got}"
            )


def test_readme_json_blocks_are_passing_eval_cases() -> None:
    from agent_guards.evals import Case, run_case

    for block in blocks("json"):
        data = json.loads(block.code)
        if {"id", "slice", "kind", "input", "expect"} <= set(data):
            result = run_case(Case.from_dict(data, source=f"README line {block.line}"))
            assert result.passed, (block.line, result.failures)
