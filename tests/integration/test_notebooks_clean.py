"""The notebooks in git are clean, and a broken notebook fails the test run.

``pytest`` executes ``notebooks/*.ipynb`` through nbmake (``--nbmake`` in ``addopts``,
``notebooks`` in ``testpaths``), without writing outputs back. These tests check what is
committed: no outputs, no execution counts, no machine paths; and that nbmake really fails
on a cell that raises (in a throwaway copy, in a subprocess).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import nbformat
import pytest

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
EXPECTED = (
    "01_drop_in.ipynb",
    "02_template.ipynb",
    "03_time_travel.ipynb",
    "04_evals.ipynb",
)
MACHINE_PATHS = ("/work/", "/root/", "/tmp/")


def problems(text: str) -> list[str]:
    """What is wrong with a notebook's committed text (empty when clean)."""
    found = [f"contains the machine path {p!r}" for p in MACHINE_PATHS if p in text]
    nb = json.loads(text)
    for i, cell in enumerate(nb.get("cells", [])):
        if cell.get("cell_type") != "code":
            continue
        if cell.get("outputs"):
            found.append(f"cell {i} has outputs")
        if cell.get("execution_count") is not None:
            found.append(f"cell {i} has execution_count {cell['execution_count']}")
    return found


def _notebook(*sources: str, outputs: list[dict[str, Any]] | None = None) -> str:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = nbformat.from_dict(
        {"display_name": "Python 3", "language": "python", "name": "python3"}
    )
    nb.cells = [nbformat.v4.new_code_cell(s) for s in sources]
    if outputs is not None:
        nb.cells[0]["outputs"] = [nbformat.from_dict(o) for o in outputs]
        nb.cells[0]["execution_count"] = 1
    return str(nbformat.writes(nb))


def test_the_notebooks_are_there() -> None:
    names = sorted(p.name for p in NOTEBOOKS.glob("*.ipynb"))
    assert set(EXPECTED) <= set(names), names


@pytest.mark.parametrize("path", sorted(NOTEBOOKS.glob("*.ipynb")), ids=lambda p: p.name)
def test_committed_notebook_is_stripped_and_has_no_machine_paths(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    nbformat.validate(nbformat.reads(text, as_version=4))
    assert problems(text) == []


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (_notebook("print(1)"), []),
        (
            _notebook(
                "print(1)", outputs=[{"output_type": "stream", "name": "stdout", "text": "1"}]
            ),
            ["cell 0 has outputs", "cell 0 has execution_count 1"],
        ),
        (_notebook("open('/work/main/data.csv')"), ["contains the machine path '/work/'"]),
        (_notebook("x = '/root/.cache'"), ["contains the machine path '/root/'"]),
        (_notebook("x = '/tmp/run.sqlite'"), ["contains the machine path '/tmp/'"]),
    ],
    ids=["clean", "outputs", "work-path", "root-path", "tmp-path"],
)
def test_the_check_catches_dirty_notebooks(text: str, expected: list[str]) -> None:
    assert problems(text) == expected


@pytest.mark.slow
def test_a_broken_cell_fails_nbmake(tmp_path: Path) -> None:
    (tmp_path / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
    (tmp_path / "good.ipynb").write_text(_notebook("x = 1 + 1", "assert x == 2"), "utf-8")
    broken = _notebook("x = 1", "raise RuntimeError('broken on purpose')")
    (tmp_path / "broken.ipynb").write_text(broken, encoding="utf-8")
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "--nbmake", "-p", "no:cacheprovider", "-q", "."],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    output = run.stdout + run.stderr
    assert run.returncode != 0, output
    assert "1 failed, 1 passed" in output, output
    assert "broken on purpose" in output, output
    assert "FAILED broken.ipynb" in output, output
