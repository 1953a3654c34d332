"""Every docstring example in the package runs (and passes)."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import agent_guards


def _modules() -> list[str]:
    names = [agent_guards.__name__]
    for info in pkgutil.walk_packages(agent_guards.__path__, prefix="agent_guards."):
        names.append(info.name)
    return sorted(names)


# examples that run packages the dev extras install but the package does not need
OPTIONAL = {"agent_guards.prebuilt.multi_agent": ("langgraph_supervisor", "langgraph_swarm")}


@pytest.mark.parametrize("name", _modules())
def test_docstring_examples(name: str) -> None:
    for package in OPTIONAL.get(name, ()):
        pytest.importorskip(package)
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0, f"{result.failed} docstring example(s) failed in {name}"


def test_the_package_has_examples() -> None:
    finder = doctest.DocTestFinder()
    examples = sum(
        len(t.examples) for name in _modules() for t in finder.find(importlib.import_module(name))
    )
    assert examples >= 20
