"""Every public class and function has a runnable example in its own docstring.

(test_doctests.py runs them.) Constants and the route ``Literal`` aliases have no
docstring of their own; they are shown in the examples of the names that use them.
"""

from __future__ import annotations

import inspect

import pytest

import agent_guards


def _documentable() -> list[str]:
    names = []
    for name in agent_guards.__all__:
        obj = getattr(agent_guards, name)
        if inspect.isclass(obj) or inspect.isfunction(obj):
            names.append(name)
    return names


@pytest.mark.parametrize("name", _documentable())
def test_public_name_has_an_example(name: str) -> None:
    doc = inspect.getdoc(getattr(agent_guards, name)) or ""
    assert ">>>" in doc, f"agent_guards.{name} has no runnable example in its docstring"


def test_most_public_names_are_classes_or_functions() -> None:
    assert len(_documentable()) >= 0.7 * len(agent_guards.__all__)
