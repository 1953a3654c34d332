"""The package layout: one package per guard, a LangGraph-free core, a small lazy top level.

Only the LangGraph adapters import ``langgraph``; ``core/`` and every guard's
``core.py`` / ``policy.py`` / ``model.py`` import none of it, directly or through another
module of the package.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import agent_guards

PACKAGE = Path(agent_guards.__file__).parent
GUARDS = (
    "evidence_resolve",
    "memory_resolve",
    "planner_gate",
    "loop_check",
    "retry_router",
    "context_guard",
)

# Modules that may import langgraph, and why.
ADAPTERS = {
    "graph.py": "the plumbing every guard's graph.py shares",
    "serde.py": "checkpoint serialization and delta channels",
    "persistence.py": "SQLite / PostgreSQL checkpointers and stores",
    "tracing.py": "run metadata for LangSmith",
    "tool_guard/": "the ToolNode(wrap_tool_call=...) wrapper",
    "middleware/": "create_agent middleware",
    "prebuilt/": "create_react_agent hooks, supervisor handoffs and subgraph nodes",
    "graphs/": "the reference graph",
    "evals/": "evaluations over recorded threads and checkpointers",
    "memory_resolve/store.py": "memories in a LangGraph BaseStore",
    "context_guard/archive.py": "archived tool results in a BaseStore, and their reader tool",
    "retry_router/breaker.py": "breaker state in a BaseStore (type only)",
}
PURE_ROLES = ("core.py", "policy.py", "model.py")


def _module(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def _type_only(tree: ast.Module) -> set[int]:
    """Ids of the import nodes under ``if TYPE_CHECKING:`` (they never run)."""
    return {
        id(node)
        for block in ast.walk(tree)
        if isinstance(block, ast.If) and ast.unparse(block.test).endswith("TYPE_CHECKING")
        for node in ast.walk(block)
    }


def _imports(path: Path, *, runtime: bool = False) -> set[str]:
    tree = ast.parse(path.read_text())
    skip = _type_only(tree) if runtime else set()
    names: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


SOURCES = {_module(p): p for p in PACKAGE.rglob("*.py")}
IMPORTS = {name: _imports(path) for name, path in SOURCES.items()}
RUNTIME_IMPORTS = {name: _imports(path, runtime=True) for name, path in SOURCES.items()}


def _langgraph(modules: set[str]) -> bool:
    return any(m == "langgraph" or m.startswith("langgraph.") for m in modules)


def _imports_langgraph(name: str) -> bool:
    return _langgraph(IMPORTS[name])


def _is_adapter(path: Path) -> bool:
    rel = path.relative_to(PACKAGE).as_posix()
    return path.name == "graph.py" or any(
        rel == key or (key.endswith("/") and rel.startswith(key)) for key in ADAPTERS
    )


def _is_pure(path: Path) -> bool:
    rel = path.relative_to(PACKAGE)
    return rel.parts[0] == "core" or (rel.parts[0] in GUARDS and rel.name in PURE_ROLES)


def _internal_closure(name: str) -> set[str]:
    """The package modules ``name`` imports, directly or through one another.

    The top level is not followed: it is lazy (its imports are for type checkers only).
    """
    seen: set[str] = {"agent_guards"}
    todo = [name]
    while todo:
        for imported in RUNTIME_IMPORTS[todo.pop()]:
            if imported in SOURCES and imported not in seen:
                seen.add(imported)
                todo.append(imported)
    return seen - {"agent_guards"}


def test_only_adapters_import_langgraph() -> None:
    offenders = sorted(
        n for n, p in SOURCES.items() if _imports_langgraph(n) and not _is_adapter(p)
    )
    assert not offenders, f"langgraph imported outside the adapters: {offenders}"


def test_the_adapter_list_names_real_modules() -> None:
    """A stale entry would silently allow a future module: every entry must exist."""
    for key in ADAPTERS:
        assert (PACKAGE / key).exists(), key


@pytest.mark.parametrize(
    "name", sorted(n for n, p in SOURCES.items() if _is_pure(p)), ids=lambda n: n
)
def test_pure_modules_reach_no_langgraph(name: str) -> None:
    assert not _imports_langgraph(name), f"{name} imports langgraph"
    reached = sorted(m for m in _internal_closure(name) if _langgraph(RUNTIME_IMPORTS[m]))
    assert not reached, f"{name} reaches langgraph through {reached}"


def test_every_guard_is_a_package_with_a_graph_adapter() -> None:
    for guard in GUARDS:
        assert (PACKAGE / guard / "__init__.py").is_file(), guard
        assert (PACKAGE / guard / "graph.py").is_file(), guard
        assert f"create_{guard}" in vars(agent_guards) or f"create_{guard}" in agent_guards.__all__


def test_no_private_module_files() -> None:
    private = sorted(
        str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("_*.py") if p.name != "__init__.py"
    )
    assert not private


def test_the_top_level_is_small_and_every_name_resolves() -> None:
    names = agent_guards.__all__
    assert len(names) <= 50
    assert len(set(names)) == len(names)
    for name in names:
        assert getattr(agent_guards, name) is not None, name
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        _ = agent_guards.nope  # type: ignore[attr-defined]


def test_every_top_level_name_is_importable_from_its_package() -> None:
    from agent_guards import _SOURCES  # type: ignore[attr-defined]

    for name, package in _SOURCES.items():
        module = __import__(f"agent_guards.{package}", fromlist=[name])
        assert getattr(module, name) is getattr(agent_guards, name), name


def test_import_agent_guards_is_lazy() -> None:
    code = (
        "import sys, agent_guards\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & "
        "{'langgraph', 'langchain_core', 'langchain', 'pydantic', 'rapidfuzz', 'langsmith'}))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_importing_core_loads_no_langgraph() -> None:
    code = (
        "import sys, agent_guards.core\nprint(any(m.startswith('langgraph') for m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
