"""The house rules of ``fixedopt/`` that a reader relies on, checked: small functions,
modules that import each other one way only, folders stacked in floors that import
downwards only, test folders that mirror the package's, and tests and benchmarks that
reach the library through its public surface only."""

import ast
import pathlib
import re
import textwrap
import tomllib

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


# Ablations that put back, in one process, an internal function as it was before a
# change (the change's own measurement), or take one out to measure its cost: they must
# reach the private module it lives in.
ABLATIONS: dict[str, set[str]] = {}  # none left: their scripts are in git (docs/decisions.md)


def test_benchmarks_use_only_the_public_api():
    # Private modules, by attribute or import; dunders (fixedopt.__main__, the demo, and
    # fixedopt.__file__) are public.
    private = re.compile(r"fixedopt\._(?!_)\w+|from fixedopt import _(?!_)\w+")
    offenders = [
        f"{path.relative_to(ROOT)}: {match}"
        for path in sorted((ROOT / "benchmarks").rglob("*.py"))
        for match in private.findall(path.read_text())
        if match not in ABLATIONS.get(str(path.relative_to(ROOT)), ())
    ]
    assert not offenders, offenders


def module_name(path: pathlib.Path) -> str:
    """``fixedopt._solvers.lbfgs`` for ``fixedopt/_solvers/lbfgs.py``."""
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(tree: ast.AST, modules: set[str]):
    """The fixedopt modules an import statement anywhere in ``tree`` names (at module
    level, inside functions and classes, in ``try``, and in ``if TYPE_CHECKING:``
    blocks: an annotation's type is a dependency too). ``from fixedopt._fixing import
    mask`` names ``fixedopt._fixing.mask``; ``from fixedopt._x.y import z`` names
    ``fixedopt._x.y`` (or ``fixedopt._x.y.z`` where that is a module)."""
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
    """No import circle among fixedopt's modules, counting every import: module-level
    ones, those deferred inside functions and those for type checkers only (a deferred
    or type-only import is still a dependency; either only hides the circle)."""
    graph = import_graph()
    # The walk sees imports, in both spellings (``from fixedopt._x import m``, ``from
    # fixedopt._x.m import y``), and type-only ones; else an empty graph would pass.
    assert graph["fixedopt._results.solution"] >= {"fixedopt._results.report"}
    assert graph["fixedopt.testing"] >= {"fixedopt._numerics.backends"}
    assert graph["fixedopt._contract.status"] == set(), "the status codes are a leaf"
    cycle = find_cycle(graph)
    assert cycle is None, "import circle: " + " -> ".join(cycle)


# The floors of the package, lowest first: a folder imports only from itself and from
# folders on lower floors (two folders on one floor never import each other). The
# package root (``__init__``, ``__main__``, ``testing``) stands above them all.
FLOORS = {
    "_inputs": 0,  # the rules every argument meets: scalars, trees
    "_numerics": 0,  # arithmetic every floor shares: reductions that fuse
    "_fixing": 1,  # the mask, keep_fixed, Flax masks
    "_derivatives": 1,  # Implicit / Unroll, the implicit function theorem, ring slots
    "_contract": 2,  # Problem, Step, Solver; Status, Reason, Outcome
    "_solvers": 3,  # each solver, the line searches, small solves
    "_objective": 3,  # the user's function made into a Problem
    "_results": 4,  # Solution, report, records, covariances
    "_driver": 5,  # the compiled solve: engine, loop, lanes
    "_entry": 6,  # minimize, least_squares, curve_fit, their options
    "_models": 7,  # fixedopt.models: named parameters, lineshapes, Model.fit on least_squares
}
ROOT_FLOOR = max(FLOORS.values()) + 1
# Public packages that stand with the root, above every floor: their private modules
# count as the root's (``fixedopt.testing_problems``: the test problems).
ROOT_PACKAGES = {"testing_problems"}


def folder_of(module: str) -> str:
    """``_driver`` for ``fixedopt._driver.lanes``; ``""`` for the package root and the
    :data:`ROOT_PACKAGES`."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in FLOORS else ""


def floor_of(module: str) -> int:
    folder = folder_of(module)
    return FLOORS[folder] if folder else ROOT_FLOOR


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    """Each import of ``graph`` that breaks the floors: into another folder that is not
    on a lower floor."""
    return [
        f"{module} (floor {floor_of(module)}) imports {target} (floor {floor_of(target)})"
        for module, targets in sorted(graph.items())
        for target in sorted(targets)
        if folder_of(target) != folder_of(module) and floor_of(target) >= floor_of(module)
    ]


def test_every_folder_of_the_package_has_a_floor():
    folders = {path.parent.name for path in PACKAGE.glob("*/__init__.py")}
    assert folders == set(FLOORS) | ROOT_PACKAGES, folders ^ (set(FLOORS) | ROOT_PACKAGES)
    assert not [path.name for path in PACKAGE.glob("_[!_]*.py")], "private modules live in folders"


def test_each_folder_imports_only_from_itself_and_lower_floors():
    graph = import_graph()
    assert floor_of("fixedopt._driver.lanes") == FLOORS["_driver"]
    assert floor_of("fixedopt.testing") == floor_of("fixedopt") == ROOT_FLOOR
    assert floor_of("fixedopt.testing_problems._batched") == ROOT_FLOOR
    offenders = upward_imports(graph)
    assert not offenders, offenders


def test_the_floor_check_finds_an_upward_or_sideways_import():
    graph = {
        "fixedopt._inputs.checks": {"fixedopt._driver.loop"},  # up
        "fixedopt._solvers.lbfgs": {"fixedopt._objective.problem"},  # sideways: floor 3
        "fixedopt._driver.loop": {"fixedopt._driver.packing", "fixedopt._contract.solver"},
        "fixedopt._entry.minimize": {"fixedopt"},  # the root stands above every folder
    }
    assert upward_imports(graph) == [
        f"fixedopt._entry.minimize (floor 6) imports fixedopt (floor {ROOT_FLOOR})",
        "fixedopt._inputs.checks (floor 0) imports fixedopt._driver.loop (floor 5)",
        "fixedopt._solvers.lbfgs (floor 3) imports fixedopt._objective.problem (floor 3)",
    ]


def test_every_folder_is_a_package_that_setuptools_installs():
    """``pyproject.toml`` names each package (no automatic discovery): a folder left
    out would be missing from a wheel."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    installed = set(config["tool"]["setuptools"]["packages"])
    assert installed == {"fixedopt", *(f"fixedopt.{name}" for name in [*FLOORS, *ROOT_PACKAGES])}


def test_the_cycle_finder_finds_a_deferred_or_type_only_import():
    code = "def f():\n    from fixedopt.a import x\nif TYPE_CHECKING:\n    import fixedopt.c\n"
    modules = {"fixedopt.a", "fixedopt.b", "fixedopt.c"}
    assert set(imported_modules(ast.parse(code), modules)) == {"fixedopt.a", "fixedopt.c"}
    graph = {"fixedopt.a": {"fixedopt.b"}, "fixedopt.b": {"fixedopt.a"}, "fixedopt.c": set()}
    assert find_cycle(graph) == ["fixedopt.a", "fixedopt.b", "fixedopt.a"]
    assert find_cycle({"fixedopt.a": {"fixedopt.b"}, "fixedopt.b": set()}) is None


def class_names(paths, name_of=module_name) -> dict[str, list[str]]:
    """Each class name defined anywhere in ``paths`` (nested classes too), and the
    modules that define it."""
    found: dict[str, list[str]] = {}
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                found.setdefault(node.name, []).append(name_of(path))
    return found


def test_one_class_per_name_across_the_package():
    """A class name means one thing in fixedopt: two ``Problem``s (the solver contract's
    and a fit's) make a reader, a traceback and a search ask which; private names count
    too."""
    found = class_names(sorted(PACKAGE.rglob("*.py")))
    assert {"Solution", "Problem", "Model", "Layout"} <= set(found), "the walk finds classes"
    repeated = {name: modules for name, modules in found.items() if len(modules) > 1}
    assert not repeated, repeated


def test_the_class_name_check_finds_a_repeated_name(tmp_path):
    (tmp_path / "a.py").write_text("class Layout:\n    class Inner: ...\n")
    (tmp_path / "b.py").write_text("def f():\n    class Layout: ...\n")
    paths = [tmp_path / "a.py", tmp_path / "b.py"]
    found = class_names(paths, lambda path: path.stem)
    names = {name: len(modules) for name, modules in found.items()}
    assert names == {"Layout": 2, "Inner": 1}


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


# What a test module may import from ``tests``: the shared helpers.
SHARED_TEST_MODULES = {"tests.helpers"}  # problems with benchmarks: fixedopt.testing_problems


def modules_under_tests() -> list[pathlib.Path]:
    return sorted((ROOT / "tests").rglob("*.py"))


def reaches_a_test_module(name: str) -> bool:
    """Whether an import of ``name`` reaches into a test module: ``tests.x`` or any
    module below it other than the shared ones (and names they define), or a bare
    ``test_x`` (a test module imported by its basename)."""
    shared = any(name == module or name.startswith(module + ".") for module in SHARED_TEST_MODULES)
    return (name.startswith("tests.") and not shared) or bool(re.match(r"^test_\w+", name))


def test_no_test_module_imports_another():
    """Shared solvers, problems and references live in ``tests/helpers.py`` (the
    problems shared with the benchmarks in ``fixedopt.testing_problems``); no module
    under ``tests/`` imports any other of its kind, itself included."""
    offenders = [
        f"{path.relative_to(ROOT)}: {name}"
        for path in modules_under_tests()
        for name in imports_of(ast.parse(path.read_text()))
        if reaches_a_test_module(name)
    ]
    assert not offenders, offenders
    script = (
        'CODE = """\n    from tests.driver.' + 'test_scale import batch\n"""'
    )  # in two: not code
    found = list(imports_of(ast.parse(script)))
    assert found == ["tests.driver.test_scale", "tests.driver.test_scale.batch"]
    assert all(map(reaches_a_test_module, [*found, "test_lanes", "tests.entry"]))
    assert not reaches_a_test_module("tests.helpers.bits")
    assert not reaches_a_test_module("tests")  # ``from tests import helpers``


def test_the_test_folders_mirror_the_package():
    """``tests/driver/`` holds the tests of ``fixedopt/_driver/``, and so on; each is a
    package (``__init__.py``), so that pytest names a test module by its path and two
    of one basename cannot collide. ``tests/`` itself holds the repository's checks and
    the shared modules."""
    tests = ROOT / "tests"
    folders = {
        path.name for path in tests.iterdir() if path.is_dir() and path.name != "__pycache__"
    }
    assert {f"_{folder}" for folder in folders} <= set(FLOORS), folders
    assert (tests / "__init__.py").is_file()
    assert all((tests / folder / "__init__.py").is_file() for folder in folders)
    assert all(list((tests / folder).glob("test_*.py")) for folder in folders), "empty folder"
    basenames = [path.name for path in modules_under_tests() if path.name.startswith("test_")]
    assert len(basenames) == len(set(basenames)), "two test modules of one name"


def test_importing_the_public_modules_compiles_nothing():
    """A notebook's first ``import`` must not wait for XLA: no module computes with JAX
    at import (module-level data is NumPy's). Checked in a fresh interpreter."""
    import subprocess
    import sys

    script = textwrap.dedent("""
        import jax
        from jax import monitoring
        compiled = []
        monitoring.register_event_duration_secs_listener(
            lambda event, seconds, **kw: compiled.append(kw.get("fun_name"))
            if "backend_compile" in event else None)
        import fixedopt, fixedopt.models, fixedopt.testing, fixedopt.testing_problems
        print(compiled)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          cwd=ROOT, timeout=120, check=True)  # fmt: skip
    assert done.stdout.strip() == "[]", done.stdout


def test_the_modules_the_suite_runs_first_exist():
    """conftest.py's LONGEST_FIRST names test modules (a renamed one would silently run
    in its collected place)."""
    import conftest

    missing = [path for path in conftest.LONGEST_FIRST if not (ROOT / path).is_file()]
    assert not missing, missing
