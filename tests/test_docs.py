"""The documentation site builds in strict mode, offline, and the strictness is real.

Each build runs ``mkdocs build --strict`` in a subprocess whose sockets refuse to
connect (and report any attempt), so the site is proven to build without network.
"""

import collections
import importlib
import importlib.util
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import types

import pytest

import fixedopt

ROOT = pathlib.Path(__file__).resolve().parents[1]
DOCS_EXTRA = (
    "mkdocs",
    "mkdocstrings",
    "mkdocstrings_handlers.python",
    "material",
    "mkdocs_jupyter",
)
MISSING = [name for name in DOCS_EXTRA if importlib.util.find_spec(name.split(".")[0]) is None]
pytestmark = pytest.mark.skipif(
    bool(MISSING),
    reason=f"the docs extra is not installed (missing {MISSING}): pip install -e '.[docs]'",
)

# Both builds (the site, then a broken copy) in one process, one after the other as
# `mkdocs serve` rebuilds: its imports (JAX's through fixedopt, mkdocs-jupyter's), most
# of a build's time, paid once. Each build's exit code follows its log, marked.
OFFLINE_BUILDS = """
import json, socket, sys
def refuse(*args, **kwargs):
    print("NETWORK ACCESS ATTEMPTED", args, file=sys.stderr)
    raise OSError("no network during the docs build")
socket.socket.connect = socket.socket.connect_ex = refuse
socket.create_connection = socket.getaddrinfo = refuse
from mkdocs.__main__ import cli
for prelude, config, site in json.loads(sys.argv[1]):
    exec(prelude)  # the test's prelude
    arguments = ["build", "--strict", "--config-file", config, "--site-dir", site]
    try:
        cli.main(arguments, prog_name="mkdocs", standalone_mode=False)
        code = 0
    except SystemExit as stop:  # mkdocs' Abort: the strict build's end
        if hasattr(stop, "show"):
            stop.show()
        code = stop.code
    sys.stdout.flush()
    print(f"{BUILT}{code}", file=sys.stderr, flush=True)
"""
BUILT = "--- the build ended, exit code "


@pytest.fixture(scope="module")
def builds(tmp_path_factory) -> dict[str, tuple[int, str, pathlib.Path]]:
    """The site (``site``), and a copy of the docs whose README links a name that does
    not exist, built in a process where ``fixedopt.project`` lost its docstring
    (``broken``): each build's exit code, log and site folder."""
    folder = tmp_path_factory.mktemp("docs")
    copy = broken_copy(folder / "repo")
    runs = {
        "site": ("", ROOT / "mkdocs.yml", folder / "site"),
        "broken": ("import fixedopt; fixedopt.project.__doc__ = None", copy / "mkdocs.yml",
                   folder / "broken-site"),
    }  # fmt: skip
    plan = json.dumps([[prelude, str(conf), str(site)] for prelude, conf, site in runs.values()])
    command = [sys.executable, "-c", f"BUILT = {BUILT!r}\n" + OFFLINE_BUILDS, plan]
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    result = subprocess.run(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=240, env=env
    )
    assert "NETWORK ACCESS ATTEMPTED" not in result.stdout, result.stdout
    logs = re.split(rf"^{re.escape(BUILT)}(-?\d+)$", result.stdout, flags=re.M)
    assert len(logs) == 2 * len(runs) + 1, result.stdout[-4000:]
    return {
        name: (int(logs[2 * i + 1]), logs[2 * i], site)
        for i, (name, (_, _, site)) in enumerate(runs.items())
    }


def broken_copy(copy: pathlib.Path) -> pathlib.Path:
    """A copy of the docs whose README links a name that does not exist."""
    copy.mkdir()
    shutil.copy(ROOT / "mkdocs.yml", copy)
    shutil.copytree(ROOT / "docs", copy / "docs", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("fixedopt", "notebooks", "benchmarks"):
        (copy / name).symlink_to(ROOT / name)
    readme = (ROOT / "README.md").read_text()
    (copy / "README.md").write_text(readme + "\nSee [`minimise`][fixedopt.minimise].\n")
    return copy


def test_site_builds_strict_and_offline(builds):
    returncode, output, site = builds["site"]
    assert returncode == 0, output[-4000:]

    api = (site / "api.html").read_text()
    for name in fixedopt.__all__:
        assert f'id="fixedopt.{name}"' in api, f"{name} is not in the API reference"
    first = [api.index(f'id="fixedopt.{name}"') for name in ("minimize", "least_squares")]
    assert max(first) < api.index('id="fixedopt.LBFGS"'), "the API opens with what a user calls"
    hooks = load_hooks()
    assert hooks.examples_outside_code(api) == [], "every docstring example is a code block"
    assert api.count('<span class="gp">&gt;&gt;&gt; </span>') >= 40, "highlighted as pycon"
    fixing = (site / "fixing.html").read_text()
    assert fixedopt.keep_fixed.__doc__.split("\n")[0] in fixing, "tables from the docstrings"
    solvers = (site / "solvers.html").read_text()
    assert all(f"<code>{status.name}</code>" in solvers for status in fixedopt.Status)
    assert "<!--" not in fixing + solvers, "every table marker was filled"
    for page in hooks.GUIDE.values():
        if (ROOT / "docs" / page).exists():
            assert (site / page.replace(".md", ".html")).exists(), f"{page} not on the site"
    assert 'href="#fixedopt.LBFGS"' in api, "a :class: role in minimize's docstring is a link"
    index = (site / "index.html").read_text()
    assert "Batched optimization in JAX where" in index, "the README is the home page"
    assert 'href="benchmarks/index.html"' in index, "README links to folders point at pages"
    for notebook in (ROOT / "notebooks").glob("*.ipynb"):
        page = site / "notebooks" / f"{notebook.stem}.html"
        assert page.exists() and "<img" in page.read_text(), f"{notebook.name} not rendered"
    for result_file in (ROOT / "benchmarks" / "results").glob("*.md"):
        assert (site / "benchmarks" / "results" / f"{result_file.stem}.html").exists()
    for plot in (ROOT / "benchmarks" / "results").glob("*.png"):
        copied = site / "benchmarks" / "results" / plot.name
        assert copied.read_bytes() == plot.read_bytes(), f"{plot.name} not on the site"


def test_strict_build_fails_on_broken_reference_and_missing_docstring(builds):
    """A copy of the docs whose README links a name that does not exist, built in a
    process where ``fixedopt.project`` lost its docstring: both are warnings, and the
    strict build aborts on exactly those two."""
    returncode, output, _ = builds["broken"]
    assert returncode != 0
    assert "Could not find cross-reference target 'fixedopt.minimise'" in output
    assert "missing docstring: fixedopt.project" in output
    assert "Aborted with 2 warnings in strict mode" in output, output[-4000:]


def load_hooks():
    spec = importlib.util.spec_from_file_location("docs_hooks", ROOT / "docs" / "hooks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_missing_docstrings_are_found():
    missing_docstrings = load_hooks().missing_docstrings
    assert missing_docstrings(fixedopt) == []

    class Documented:
        """A class."""

        def method(self):
            """A method."""

    class Override(Documented):
        """Overrides a documented method: the base's docstring is its contract."""

        def method(self):
            pass

        def extra(self):
            pass

    def undocumented():
        pass

    module = types.SimpleNamespace(
        __name__="m",
        __all__=["Documented", "Override", "undocumented", "Point"],
        Documented=Documented,
        Override=Override,
        undocumented=undocumented,
        Point=collections.namedtuple("Point", "x y"),  # only the generated docstring
    )
    assert missing_docstrings(module) == ["m.Override.extra", "m.undocumented", "m.Point"]


def load_griffe_extension():
    spec = importlib.util.spec_from_file_location("griffe_roles", ROOT / "docs" / "griffe_roles.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_doctests_are_fenced_as_code():
    fence = load_griffe_extension().fence_doctests
    text = "Summary.\n\nExample:\n  >>> x = 1\n  >>> x\n  1\n\nAfter.\n```\n>>> kept\n```"
    assert fence(text).split("\n") == [
        "Summary.", "", "Example:", "  ```pycon", "  >>> x = 1", "  >>> x", "  1", "  ```",
        "", "After.", "```", ">>> kept", "```",
    ]  # fmt: skip
    assert fence("no example") == "no example"


def test_an_example_outside_code_is_found():
    found = load_hooks().examples_outside_code
    rendered = "<div><pre><code>&gt;&gt;&gt; 1\n1</code></pre></div><code>&gt;&gt;&gt;</code>"
    assert found(rendered) == []
    assert len(found("<blockquote><p>&gt;&gt;&gt; x = 1 &gt;&gt;&gt; x</p></blockquote>")) == 2


# Dotted names cited on the architecture page: ``fixedopt.<module>...<attribute>``.
CITED = re.compile(r"`(fixedopt(?:\.\w+)+)`")


def resolve(dotted: str):
    """The object a dotted name names (a module, then attributes), or None."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for part in parts[cut:]:
            found = getattr(found, part, None)
        return found
    return None


def test_every_name_the_architecture_page_cites_exists():
    text = (ROOT / "docs" / "architecture.md").read_text()
    names = sorted(set(CITED.findall(text)))
    assert len(names) >= 40, names
    missing = [name for name in names if resolve(name) is None]
    assert not missing, missing
    assert resolve("fixedopt._driver.engine.run") is not None
    assert resolve("fixedopt._driver.engine.no_such_function") is None


# The guide's pages whose Python blocks are illustrations, not programs.
ILLUSTRATIONS = {"architecture.md"}


# The blocks print and assert as the docstrings' examples do (fixed entries' bits,
# converged well-posed problems, a reference to 1e-3): run as those are, without XLA's
# expensive backend optimizations (conftest.py).
@pytest.mark.fewer_optimizations
@pytest.mark.parametrize("page", ["fitting.md", "solvers.md", "fixing.md", "scale.md",
                                  "differentiation.md", "writing-a-solver.md"])  # fmt: skip
def test_guide_python_blocks_run(page):
    assert page not in ILLUSTRATIONS
    text = (ROOT / "docs" / page).read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert blocks, page
    for block in blocks:
        exec(compile(block, page, "exec"), {})
