"""MkDocs hooks of the fixedopt site: its pages, generated from the repository at build time.

* ``index.md``: the README (its links into the repository rewritten for the site);
* the guide: the topic pages of :data:`GUIDE` in ``docs/`` (those that exist);
* ``api.md``: one mkdocstrings block per public name of ``fixedopt.__all__``, by topic
  (:data:`API_TOPICS`: what a user calls first opens it), after checking that each has a
  docstring (a missing one is a warning: the strict build fails);
* ``notebooks/*.ipynb``: the committed notebooks, rendered by mkdocs-jupyter;
* ``benchmarks/``: each current results table of ``benchmarks/results/*.md`` with its
  plots (what finished investigations settled is the guide's ``decisions.md``).

Every page is checked after rendering: a docstring example (``>>>``) outside a code
block is a warning, so the strict build fails on it.

Nothing is copied into the repository; the files point at their sources.
"""

from __future__ import annotations

import inspect
import logging
import pathlib
import re

from mkdocs.plugins import event_priority
from mkdocs.structure.files import File

log = logging.getLogger("mkdocs.hooks.fixedopt")  # under "mkdocs": warnings count in strict

# README links that point at a folder of the repository, and their page on the site.
README_LINKS = {"benchmarks/results": "benchmarks/index.md", "docs/": "index.md"}

# The guide's pages (``docs/<file>``), in the order of the navigation; a page that does not
# exist yet is left out of it.
GUIDE = {
    "Fitting": "fitting.md",
    "Models": "models.md",
    "scipy users": "scipy.md",
    "Solvers and statuses": "solvers.md",
    "Fixing and optax": "fixing.md",
    "Scale and GPUs": "scale.md",
    "Differentiation": "differentiation.md",
    "Writing a solver": "writing-a-solver.md",
    "Architecture": "architecture.md",
    "Decisions": "decisions.md",
}

# The API reference by topic, in the order a user meets the names; a public name in none
# of them is listed under "More" (so a new name is documented before it is placed).
API_TOPICS = {
    "Solving": ("minimize", "least_squares", "curve_fit", "multistart"),
    "Results": ("Solution", "Status", "Reason", "CurveFit", "covariance", "hessian_covariance",
                "Covariance", "report", "Report", "to_records", "to_dataframe"),
    "Fixing components": ("fix", "project", "keep_fixed", "KeepFixedState", "apply_updates",
                          "schedule_free_eval_params", "mask_from"),
    "Solvers": ("LBFGS", "LevenbergMarquardt", "GaussNewton", "GradientDescent", "Optax"),
    "Differentiation": ("Implicit", "Unroll"),
    "Writing a solver": ("Solver", "Problem", "Step", "StepContext", "Outcome", "Certificate"),
    "Compilation": ("compiler_options",),
    "Warnings": ("PrecisionWarning", "OptimizeWarning", "HostFunctionWarning"),
}  # fmt: skip


def _root(config) -> pathlib.Path:
    return pathlib.Path(config.config_file_path).resolve().parent


def _notebooks(root):
    return sorted((root / "notebooks").glob("*.ipynb"))


def _results(root):
    return sorted((root / "benchmarks" / "results").glob("*.md"))


def guide(root) -> list[dict]:
    """The guide's navigation: each page of :data:`GUIDE` that exists in ``docs/``."""
    return [{title: name} for title, name in GUIDE.items() if (root / "docs" / name).exists()]


def on_config(config):
    """The navigation: home, the guide, API, every notebook, every benchmark table."""
    root = _root(config)
    config.nav = [
        {"Home": "index.md"},
        {"Guide": guide(root)},
        {"API reference": "api.md"},
        {"Notebooks": [f"notebooks/{path.name}" for path in _notebooks(root)]},
        {
            "Benchmarks": [
                "benchmarks/index.md",
                *(f"benchmarks/results/{path.name}" for path in _results(root)),
            ]
        },
    ]
    return config


@event_priority(100)  # before mkdocs-jupyter wraps the notebook files
def on_files(files, config):
    """Add the generated pages and the files they point at."""
    import fixedopt

    root = _root(config)
    for problem in missing_docstrings(fixedopt):
        log.warning("missing docstring: %s", problem)
    pages = {
        "index.md": readme_page((root / "README.md").read_text()),
        "api.md": api_page(fixedopt.__all__),
        "benchmarks/index.md": benchmarks_page(_results(root)),
    }
    for path in _results(root):
        plots = sorted(path.parent.glob(f"{path.stem}-*.png"))
        pages[f"benchmarks/results/{path.name}"] = results_page(path, plots)
        for plot in plots:
            files.append(
                File.generated(config, f"benchmarks/results/{plot.name}", abs_src_path=str(plot))
            )
    for name, content in pages.items():
        files.append(File.generated(config, name, content=content))
    for path in _notebooks(root):  # a real file under the root: mkdocs-jupyter reads it
        notebook = path.relative_to(root).as_posix()
        files.append(File(notebook, str(root), config.site_dir, config.use_directory_urls))
    return files


def readme_page(readme: str) -> str:
    """The README with its links to repository folders and to the guide's sources
    (``docs/fitting.md``) pointed at their site pages."""
    for target, page in README_LINKS.items():
        readme = readme.replace(f"]({target})", f"]({page})")
    return re.sub(r"\]\(docs/([\w-]+\.md)", r"](\1", readme)


def api_page(names) -> str:
    """One mkdocstrings block per public name, by topic (:data:`API_TOPICS`), then the
    names of no topic, then the test hooks of ``fixedopt.testing`` and the problems of
    ``fixedopt.testing_problems``."""
    placed = {name for topic in API_TOPICS.values() for name in topic}
    topics = {title: [n for n in topic if n in names] for title, topic in API_TOPICS.items()}
    topics["More"] = [name for name in names if name not in placed]
    parts = [
        "# API reference\n\nEvery public name of `fixedopt` (its `__all__`), by topic, "
        "generated from the docstrings; the guide's pages say how the pieces fit.\n"
    ]
    for title, members in topics.items():
        if members:
            parts += [f"## {title}\n", *(f"::: fixedopt.{name}\n" for name in members)]
    testing = ["## Testing\n", "::: fixedopt.testing\n", "::: fixedopt.testing_problems\n"]
    return "\n".join([*parts, *testing])


# A guide page's table of public names and their docstrings' summaries: the line
# ``<!-- api: fix project keep_fixed -->`` becomes the table, so the guide never restates
# a docstring.
SUMMARY_TABLE = re.compile(r"^<!-- api: ([\w ]+) -->$", re.M)
ROLE_OR_LITERAL = re.compile(r":\w+:`~?([\w.]+)`|``(.+?)``")


def summary(obj) -> str:
    """The first paragraph of ``obj``'s docstring, on one line, in Markdown."""
    first = inspect.cleandoc(obj.__doc__ or "").split("\n\n")[0].replace("\n", " ")
    return ROLE_OR_LITERAL.sub(lambda m: f"`{m.group(1) or m.group(2)}`", first)


def summary_table(names, module) -> str:
    """A table of ``names`` of ``module``: each linked to the API reference, with its
    docstring's summary.

    Example:
      >>> import types
      >>> f = lambda: None
      >>> f.__doc__ = "Do ``x``.\\n\\nMore."
      >>> print(summary_table(["f"], types.SimpleNamespace(f=f, __name__="m")))
      | name | what it does |
      |---|---|
      | [`f`][m.f] | Do `x`. |
    """
    rows = [f"| [`{n}`][{module.__name__}.{n}] | {summary(getattr(module, n))} |" for n in names]
    return "\n".join(["| name | what it does |", "|---|---|", *rows])


# A table of an enumeration's codes and their ``message``: ``<!-- codes: Status -->``.
CODES_TABLE = re.compile(r"^<!-- codes: (\w+) -->$", re.M)


def codes_table(codes) -> str:
    """A table of the members of ``codes`` (``fixedopt.Status``) and their messages."""
    rows = [f"| `{code.name}` | {ROLE_OR_LITERAL.sub(_code, code.message)} |" for code in codes]
    return "\n".join([f"| `{codes.__name__}` | meaning |", "|---|---|", *rows])


def _code(match: re.Match) -> str:
    return f"`{match.group(1) or match.group(2)}`"


def on_page_markdown(markdown, page, config, files):
    """Fill each ``<!-- api: ... -->`` and ``<!-- codes: ... -->`` table of a guide page
    from the docstrings and the codes' messages."""
    import fixedopt

    markdown = SUMMARY_TABLE.sub(lambda m: summary_table(m.group(1).split(), fixedopt), markdown)
    return CODES_TABLE.sub(lambda m: codes_table(getattr(fixedopt, m.group(1))), markdown)


# A code block or inline code of the rendered HTML (where ``>>>`` belongs).
CODE = re.compile(r"<(pre|code)\b.*?</\1>", re.S)


def examples_outside_code(html: str) -> list[str]:
    """The text around each ``>>>`` of ``html`` that is not inside a ``<pre>`` or ``<code>``.

    Example:
      >>> examples_outside_code("<pre><code>&gt;&gt;&gt; 1</code></pre><p>&gt;&gt;&gt; 2</p>")
      ['<p>&gt;&gt;&gt; 2</p>']
    """
    text = CODE.sub("", html)
    return [text[max(0, m.start() - 3) : m.end() + 7] for m in re.finditer("&gt;&gt;&gt;", text)]


def on_page_content(html, page, config, files):
    """Warn (the strict build fails) where an example renders outside a code block."""
    for found in examples_outside_code(html)[:3]:
        log.warning("%s: an example renders outside a code block: %r", page.file.src_uri, found)
    return html


def benchmarks_page(results) -> str:
    """The index of the benchmark results: one link per table."""
    links = [f"- [{path.stem}](results/{path.name})" for path in results]
    intro = (
        "# Benchmarks\n\nThe current results of each suite (`python -m benchmarks.run --suite "
        "NAME`, `make bench` for the CPU suite) and of the other benchmark programs "
        "(`benchmarks/results/` in the repository). What finished investigations "
        "settled, with their numbers, is in [Decisions](../decisions.md).\n"
    )
    return "\n".join([intro, *links]) + "\n"


def results_page(path: pathlib.Path, plots) -> str:
    """A results table, followed by the plots saved with it."""
    images = [f"![{plot.stem}]({plot.name})" for plot in plots]
    return "\n\n".join([path.read_text().rstrip(), *images]) + "\n"


def _own_doc(obj) -> str | None:
    """``obj``'s own docstring (a class's, not inherited; not a NamedTuple's generated one)."""
    doc = obj.__dict__.get("__doc__") if inspect.isclass(obj) else obj.__doc__
    if doc and inspect.isclass(obj) and re.fullmatch(rf"{obj.__name__}\(.*\)", doc.strip()):
        return None
    return doc


def _public_members(cls):
    for name, member in vars(cls).items():
        if not name.startswith("_") and (callable(member) or isinstance(member, property)):
            yield name, member


def _documented_in_base(cls, name) -> bool:
    return any(getattr(vars(base).get(name), "__doc__", None) for base in cls.__mro__[1:])


def missing_docstrings(module) -> list[str]:
    """The public names of ``module.__all__`` (and their public methods) without a docstring.

    A method that overrides a documented one of a base class inherits its contract.

    Example:
      >>> import types
      >>> module = types.SimpleNamespace(__name__="m", __all__=["f"], f=lambda x: x)
      >>> missing_docstrings(module)
      ['m.f']
    """
    missing = []
    for name in module.__all__:
        obj = getattr(module, name)
        if not _own_doc(obj):
            missing.append(f"{module.__name__}.{name}")
        if inspect.isclass(obj):
            for member_name, member in _public_members(obj):
                if not member.__doc__ and not _documented_in_base(obj, member_name):
                    missing.append(f"{module.__name__}.{name}.{member_name}")
    return missing
