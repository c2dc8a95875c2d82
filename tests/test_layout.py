"""The house rules of ``fixedopt/`` that a reader relies on, checked: small functions,
modules that import each other one way only, and tests and benchmarks that reach the
library through its public surface only."""

import ast
import pathlib
import re
import textwrap

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "fixedopt"
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


def module_name(path: pathlib.Path) -> str:
    """``fixedopt._solvers.lbfgs`` for ``fixedopt/_solvers/lbfgs.py``."""
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def is_type_checking_block(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and ast.unparse(node.test) in (
        "TYPE_CHECKING",
        "typing.TYPE_CHECKING",
    )


def imported_modules(tree: ast.AST, modules: set[str]):
    """The fixedopt modules an import statement anywhere in ``tree`` names (at module
    level, inside functions and classes, in ``try``), but not in ``if TYPE_CHECKING:``
    blocks: those never run, and only let an annotation name a type from a layer above.
    ``from fixedopt import _mask`` names ``fixedopt._mask``; ``from fixedopt._x import y``
    names ``fixedopt._x`` (or ``fixedopt._x.y`` where that is a module)."""
    if is_type_checking_block(tree):
        return
    if isinstance(tree, ast.Import):
        yield from (alias.name for alias in tree.names if alias.name in modules)
    elif isinstance(tree, ast.ImportFrom) and tree.level == 0 and tree.module in modules:
        submodules = [f"{tree.module}.{alias.name}" for alias in tree.names]
        named = [name for name in submodules if name in modules]
        yield from named if len(named) == len(submodules) else [tree.module, *named]
    for child in ast.iter_child_nodes(tree):
        yield from imported_modules(child, modules)


def import_graph() -> dict[str, set[str]]:
    """Module -> the fixedopt modules it imports (an import of ``fixedopt._x`` also runs
    ``fixedopt/__init__.py``, a package's way of loading; that is not counted)."""
    paths = {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}
    graph = {}
    for name, path in paths.items():
        tree = ast.parse(path.read_text())
        graph[name] = set(imported_modules(tree, set(paths))) - {name}
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` (its modules in order, the first repeated at the end), or
    None; a depth-first search."""
    state: dict[str, str] = {}  # "open" while on the current path, then "done"
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = "open"
        path.append(node)
        for target in sorted(graph.get(node, ())):
            if state.get(target) == "open":
                return [*path[path.index(target) :], target]
            if target not in state and (cycle := visit(target)):
                return cycle
        state[node] = "done"
        path.pop()
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_the_library_imports_in_one_direction():
    """No import circle among fixedopt's modules, counting every import that runs:
    module-level ones and those deferred inside functions (a deferred import is still
    a dependency; deferring it only hides the circle)."""
    graph = import_graph()
    assert graph["fixedopt._solution"] >= {"fixedopt._report"}  # the walk sees imports
    assert graph["fixedopt._status"] == set(), "the status codes are a leaf"
    cycle = find_cycle(graph)
    assert cycle is None, "import circle: " + " -> ".join(cycle)


def test_the_cycle_finder_finds_a_deferred_import():
    code = "def f():\n    from fixedopt.a import x\nif TYPE_CHECKING:\n    import fixedopt.c\n"
    modules = {"fixedopt.a", "fixedopt.b", "fixedopt.c"}
    assert set(imported_modules(ast.parse(code), modules)) == {"fixedopt.a"}
    graph = {"fixedopt.a": {"fixedopt.b"}, "fixedopt.b": {"fixedopt.a"}, "fixedopt.c": set()}
    assert find_cycle(graph) == ["fixedopt.a", "fixedopt.b", "fixedopt.a"]
    assert find_cycle({"fixedopt.a": {"fixedopt.b"}, "fixedopt.b": set()}) is None


def imports_of(tree: ast.AST):
    """The modules an ``import`` anywhere in ``tree`` names (``from tests import x``
    names ``tests.x``), with the imports of code in string literals (scripts a test
    runs in a subprocess)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            yield node.module
            yield from (f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            try:
                script = ast.parse(textwrap.dedent(node.value))
            except SyntaxError:  # prose, not code
                continue
            yield from imports_of(script)


def test_no_test_module_imports_another():
    """Shared solvers, problems and references live in ``tests/helpers.py`` (and the
    data modules ``tests/mgh_least_squares.py``, ``tests/minimize_truth.py``); a test
    module (``tests/test_*.py``) imports none of its kind, itself included."""
    test_module = re.compile(r"^(tests\.)?test_\w+$")
    offenders = [
        f"{path.relative_to(ROOT)}: {name}"
        for path in sorted((ROOT / "tests").glob("*.py"))
        for name in imports_of(ast.parse(path.read_text()))
        if test_module.match(name)
    ]
    assert not offenders, offenders
    script = 'CODE = """\n    from tests.' + 'test_scale import batch\n"""'  # in two: not code here
    assert list(imports_of(ast.parse(script))) == ["tests.test_scale", "tests.test_scale.batch"]
