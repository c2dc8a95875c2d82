"""The house rules of ``fixedopt/`` that a reader relies on, checked: small functions,
and tests and benchmarks that reach the library through its public surface only."""

import ast
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parent.parent
MAX_FUNCTION_LINES = 60  # docstring excluded


def function_lengths(path: pathlib.Path):
    """``(name, lines)`` of every function in ``path``, without its docstring."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            first, *rest = node.body
            has_docstring = isinstance(first, ast.Expr) and isinstance(
                getattr(first, "value", None), ast.Constant
            )
            start = rest[0].lineno if has_docstring and rest else first.lineno
            yield node.name, node.end_lineno - start + 1


def test_no_function_in_the_library_is_longer_than_a_screen():
    long = [
        f"{path.relative_to(ROOT)}::{name} ({lines} lines)"
        for path in sorted((ROOT / "fixedopt").rglob("*.py"))
        for name, lines in function_lengths(path)
        if lines > MAX_FUNCTION_LINES
    ]
    assert not long, long


def test_benchmarks_use_only_the_public_api():
    # Private modules, by attribute or import; fixedopt.__main__ (the demo) is public.
    private = re.compile(r"fixedopt\._(?!_main__)\w+|from fixedopt import _\w+")
    offenders = [
        f"{path.relative_to(ROOT)}: {match}"
        for path in sorted((ROOT / "benchmarks").rglob("*.py"))
        for match in private.findall(path.read_text())
    ]
    assert not offenders, offenders
