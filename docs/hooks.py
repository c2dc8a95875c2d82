"""MkDocs hooks of the fixedopt site: its pages, generated from the repository at build time.

* ``index.md``: the README (its links into the repository rewritten for the site);
* ``api.md``: one mkdocstrings block per public name of ``fixedopt.__all__``, after
  checking that each has a docstring (a missing one is a warning: the strict build fails);
* ``notebooks/*.ipynb``: the committed notebooks, rendered by mkdocs-jupyter;
* ``benchmarks/``: each results table of ``benchmarks/results/*.md`` with its plots.

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


def _root(config) -> pathlib.Path:
    return pathlib.Path(config.config_file_path).resolve().parent


def _notebooks(root):
    return sorted((root / "notebooks").glob("*.ipynb"))


def _results(root):
    return sorted((root / "benchmarks" / "results").glob("*.md"))


def on_config(config):
    """The navigation: home, API, every notebook, every benchmark table."""
    root = _root(config)
    config.nav = [
        {"Home": "index.md"},
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
    """The README with its links to repository folders pointed at their site pages."""
    for target, page in README_LINKS.items():
        readme = readme.replace(f"]({target})", f"]({page})")
    return readme


def api_page(names) -> str:
    """One mkdocstrings block per public name, in the order of ``__all__``."""
    blocks = [f"::: fixedopt.{name}\n" for name in names]
    intro = (
        "# API reference\n\nEvery public name of `fixedopt` (its `__all__`), generated "
        "from the docstrings, then the test hooks of `fixedopt.testing`.\n"
    )
    return "\n".join([intro, *blocks, "::: fixedopt.testing\n"])


def benchmarks_page(results) -> str:
    """The index of the benchmark results: one link per table."""
    links = [f"- [{path.stem}](results/{path.name})" for path in results]
    intro = (
        "# Benchmarks\n\nSaved results of `make bench` and the other benchmark programs "
        "(`benchmarks/results/` in the repository; protocol in the README).\n"
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
