"""The version floors pyproject.toml declares are the ones `make floors` tests."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _declared() -> dict[str, str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    specs = [*project["dependencies"], *project["optional-dependencies"]["sqlite"],
             *project["optional-dependencies"]["agents"]]  # fmt: skip
    floors = {}
    for spec in specs:
        match = re.match(r"^([A-Za-z0-9_.\-\[\]]+?)(\[[^\]]*\])?>=([^,]+)", spec)
        assert match, f"{spec!r} declares no floor"
        floors[match.group(1).lower()] = match.group(3)
    return floors


def _pinned() -> dict[str, str]:
    pins = {}
    for raw in (ROOT / ".ci" / "floors.txt").read_text().splitlines():
        line = raw.split("#")[0].strip()
        if line:
            name, version = line.split("==")
            pins[name.lower()] = version
    return pins


def test_every_declared_floor_is_pinned_for_the_floors_job() -> None:
    assert _declared() == _pinned()


def test_python_floor_matches_the_language_features_used() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["requires-python"] == ">=3.11"  # enum.StrEnum, tomllib
