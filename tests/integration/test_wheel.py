"""The built wheel, installed into a clean venv, works the way the README says.

The wheel is built from this checkout (``pip wheel``, hatchling backend) and installed with
the ``sqlite`` extra into a fresh ``python -m venv``. Then, from a directory outside the
repository: ``agent_guards.graphs.plan_execute`` imports (from the venv, not the checkout),
no top-level ``graphs`` module exists, and the ``agent-guards demo`` console script runs the
built-in scenarios under strict msgpack. The wheel holds nothing but the package and its
metadata.
"""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]

# What `make demo` prints for the first scenario (procurement_threshold): the guarded answer
# cites the 2026 policy and sets the conflicting 2024 one aside.
FIRST_SCENARIO = "[1/6] procurement_threshold:"
FIRST_ANSWER = "-> answer: approval_threshold: 50w [policy_2026]"


@dataclass(frozen=True)
class Installed:
    wheel: Path
    venv: Path
    work: Path  # an empty directory outside the repository, the cwd of every run

    def bin(self, name: str) -> Path:
        return self.venv / ("Scripts" if os.name == "nt" else "bin") / name


def _env(**extra: str) -> dict[str, str]:
    """The test's environment without anything that points back at this checkout's venv."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in {"PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHONSTARTUP"}
    }
    env.update(
        PIP_DISABLE_PIP_VERSION_CHECK="1",
        PIP_NO_INPUT="1",
        PYTHONNOUSERSITE="1",
        LANGSMITH_TRACING="false",
    )
    env.update(extra)
    return env


def _run(args: list[str | Path], cwd: Path, timeout: float, **env: str) -> str:
    run = subprocess.run(
        [str(a) for a in args],
        cwd=cwd,
        env=_env(**env),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    output = run.stdout + run.stderr
    assert run.returncode == 0, f"{args} exited with {run.returncode}:\n{output}"
    return output


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    base = tmp_path_factory.mktemp("wheel")
    dist, venv, work = base / "dist", base / "venv", base / "work"
    work.mkdir()
    _run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", dist, ROOT],
        cwd=work,
        timeout=300,
    )
    wheels = sorted(dist.glob("agent_guards-*.whl"))
    assert len(wheels) == 1, wheels
    _run([sys.executable, "-m", "venv", venv], cwd=work, timeout=120)
    result = Installed(wheels[0], venv, work)
    _run(
        [result.bin("python"), "-m", "pip", "install", "-q", f"{wheels[0]}[sqlite]"],
        cwd=work,
        timeout=600,
    )
    return result


def test_the_wheel_holds_only_the_package(installed: Installed) -> None:
    with zipfile.ZipFile(installed.wheel) as wheel:
        names = wheel.namelist()
    top = {name.split("/", 1)[0] for name in names}
    assert "agent_guards" in top
    stray = [
        name
        for name in names
        if not name.startswith("agent_guards/")
        and not (name.startswith("agent_guards-") and name.split("/", 1)[0].endswith(".dist-info"))
    ]
    assert not stray, f"files outside agent_guards/ and its dist-info: {stray}"
    for module in ("plan_execute", "state", "nodes", "outcomes", "prompts", "scenarios", "demo"):
        assert f"agent_guards/graphs/{module}.py" in names
    assert "agent_guards/py.typed" in names


def test_the_reference_graph_imports_and_there_is_no_top_level_graphs(
    installed: Installed,
) -> None:
    probe = (
        "import importlib.util, agent_guards.graphs.plan_execute as m\n"
        "from agent_guards.graphs.plan_execute import Policies, build_graph, run_config\n"
        "print(m.__file__)\n"
        "print(importlib.util.find_spec('graphs'))\n"
    )
    out = _run([installed.bin("python"), "-I", "-c", probe], cwd=installed.work, timeout=120)
    module_file, graphs_spec = out.strip().splitlines()[-2:]
    assert Path(module_file).resolve().is_relative_to(installed.venv.resolve()), module_file
    assert not Path(module_file).resolve().is_relative_to(ROOT), module_file
    assert graphs_spec == "None", f"a top-level graphs module is importable: {graphs_spec}"


def test_the_console_script_runs_the_demo(installed: Installed) -> None:
    out = _run(
        [installed.bin("agent-guards"), "demo"],
        cwd=installed.work,
        timeout=300,
        LANGGRAPH_STRICT_MSGPACK="true",
    )
    assert FIRST_SCENARIO in out, out
    assert FIRST_ANSWER in out, out
    assert (installed.work / ".agent_guards" / "demo.sqlite").exists()
