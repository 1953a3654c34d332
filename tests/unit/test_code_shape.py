"""Code shape: no function in agent_guards/ is longer than MAX_LINES lines of code.

A line of code is a line of the function's body that carries a token of code: blank lines,
comment-only lines and docstrings (the function's own and those of anything nested in it)
do not count. A nested function's lines count for it and for the function around it.
"""

from __future__ import annotations

import ast
import io
import tokenize
from pathlib import Path

import pytest

MAX_LINES = 60
PACKAGE = Path(__file__).resolve().parents[2] / "agent_guards"
NOT_CODE = {
    tokenize.COMMENT,
    tokenize.NL,
    tokenize.NEWLINE,
    tokenize.INDENT,
    tokenize.DEDENT,
    tokenize.ENCODING,
    tokenize.ENDMARKER,
}


def _token_lines(source: str) -> set[int]:
    """Line numbers that carry at least one token of code (a string spans all its lines)."""
    lines: set[int] = set()
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type not in NOT_CODE:
            lines.update(range(tok.start[0], tok.end[0] + 1))
    return lines


def _docstring_lines(tree: ast.Module) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(tree):
        if not isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        first = node.body[0] if node.body else None
        if (
            isinstance(first, ast.Expr)
            and isinstance(first.value, ast.Constant)
            and isinstance(first.value.value, str)
        ):
            lines.update(range(first.lineno, (first.end_lineno or first.lineno) + 1))
    return lines


def code_lines(source: str) -> list[tuple[str, int]]:
    """``(qualified function name, lines of code in its body)`` for one module's source."""
    tree = ast.parse(source)
    code = _token_lines(source) - _docstring_lines(tree)
    out: list[tuple[str, int]] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                visit(child, prefix)
                continue
            name = prefix + child.name
            if not isinstance(child, ast.ClassDef):
                body = range(child.body[0].lineno, (child.end_lineno or child.lineno) + 1)
                out.append((name, sum(1 for line in body if line in code)))
            visit(child, name + ".")

    visit(tree, "")
    return out


def test_counts_code_lines_only() -> None:
    source = '''
def f(x):
    """Docstring,
    two lines."""
    # a comment

    y = (x +
         1)  # trailing comment
    def g():
        """Nested docstring."""
        return y
    return g
'''
    assert code_lines(source) == [("f", 5), ("f.g", 1)]


def test_package_is_found() -> None:
    assert (PACKAGE / "__init__.py").is_file()


def test_no_function_is_longer_than_the_limit() -> None:
    too_long = []
    for path in sorted(PACKAGE.rglob("*.py")):
        source = path.read_text(encoding="utf-8")
        for name, count in code_lines(source):
            if count > MAX_LINES:
                rel = path.relative_to(PACKAGE.parent).as_posix()
                too_long.append(f"{rel}:{name} ({count} lines)")
    if too_long:
        pytest.fail(
            f"{len(too_long)} function(s) over {MAX_LINES} lines of code; split them into "
            "named helpers:\n" + "\n".join(too_long)
        )
