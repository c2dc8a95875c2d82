"""Every benchmark suite runs (``--quick``, one timed call each) and writes its JSON,
markdown and plots.

All suites run in one subprocess (``benchmarks.run`` turns on float64 for its whole
process; one process also shares JAX's caches between suites, so ``cpu`` runs first: the
suites after it reuse its programs). Methods whose packages are missing (jaxopt, TFP: the
``bench`` extra) are recorded as skipped with the reason. The ``ase`` suite reads notebook
05 as committed, with its outputs, instead of executing it again:
``tests/test_notebooks.py`` executes every notebook.
"""

import ast
import collections
import json
import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
# Not ``gpu``: its quick plan is the ``cpu`` one (tested below), run there once.
# ``tiny`` right after ``cpu``: its quad case is the cpu smoke's, whose programs it reuses
# (``status_truth`` drops JAX's caches at its end).
SUITES = ("cpu", "scale", "tiny", "tiny_large", "status_truth", "ase", "curve_fit",
          "deblur")  # fmt: skip
PLOTTED = ("cpu", "tiny")  # suites with solver cases against the scipy loop
# The suites compile without XLA's expensive backend optimizations (as tests marked
# ``fewer_optimizations``, conftest.py): the smoke's programs run once and compile for
# seconds. What is checked here (files written, split against mask to 1e-6, the lanes'
# temporaries, which XLA's buffer assignment sets before the backend) none changes. Not
# ``deblur``, whose programs run longer than they compile (measured: 12.6 CPU s
# optimized, 27.6 without). And nothing compiled ahead (``fixedopt.testing.
# no_compiles_ahead``, as the tests in conftest.py): a CPU block's tail is compiled by
# the call that has one, not in a thread beside every new model's first block, where on
# CI's two busy cores it took a core for nothing (the smoke's 16-row batches mostly
# have no tail; the module 151 to 114-122 CPU s, under load). Results are the same, bit for bit
# (tests/driver/test_tail.py).
OPTIMIZED = ("deblur",)
DRIVER = f"""
import sys
import jax
import nbformat
from benchmarks import ase
from benchmarks.run import main
from fixedopt.testing import no_compiles_ahead
ase.run_notebook = lambda path: nbformat.read(path, as_version=4)
for suite in sys.argv[2:]:
    jax.config.update("jax_disable_most_optimizations", suite not in {OPTIMIZED!r})
    with no_compiles_ahead():
        main(["--suite", suite, "--quick", "--repeats", "1", "--loop-repeats", "1",
              "--out", sys.argv[1]])
"""


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> pathlib.Path:
    out = tmp_path_factory.mktemp("results")
    command = [sys.executable, "-c", DRIVER, str(out), *SUITES]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=1500)
    assert done.returncode == 0, done.stderr[-3000:]
    return out


@pytest.mark.parametrize("suite", SUITES)
def test_suite_writes_json_markdown_and_plots(results, suite):
    (path,) = results.glob(f"*-{suite}-quick-*.json")
    records = json.loads(path.read_text())
    assert records and all(r["suite"] == suite for r in records)
    markdown = path.with_suffix(".md").read_text()
    assert markdown.startswith(f"# {path.stem}") and "| ---" not in markdown
    assert "|---" in markdown or suite == "ase"
    plots = sorted(results.glob(f"{path.stem}-*.png"))
    assert bool(plots) == (suite in PLOTTED), plots


def test_the_gpu_smoke_is_the_cpu_smoke():
    from benchmarks.suites import PLANS

    assert PLANS["gpu"][1] == PLANS["cpu"][1]


def test_missing_packages_are_skipped_with_a_reason(results):
    (path,) = results.glob("*-cpu-quick-*.json")
    for record in json.loads(path.read_text()):
        if "skipped" in record:
            assert record["skipped"] and record["skipped"] in path.with_suffix(".md").read_text()


def test_the_cpu_smoke_times_split_against_mask_on_every_pattern(results):
    """docs/solvers.md's table: split and mask solve each mask pattern to the same values."""
    from benchmarks.suites import PATTERNS

    (path,) = results.glob("*-cpu-quick-*.json")
    rows = [r for r in json.loads(path.read_text()) if r["kind"] == "strategy"]
    assert [r["pattern"] for r in rows] == list(PATTERNS)
    assert all(r["split_max_rel_obj_diff_vs_mask"] <= 1e-6 for r in rows), rows


def test_the_scale_smoke_finds_the_lanes_memory_below_one_vmap(results):
    """docs/scale.md: the lanes bound the loop's working memory (XLA's temporaries)."""
    (path,) = results.glob("*-scale-quick-*.json")
    memory = {r["lanes"]: r for r in json.loads(path.read_text()) if r["kind"] == "memory"}
    assert memory["default"]["temp_bytes"] < memory["whole batch"]["temp_bytes"] / 2, memory
    assert memory["default"]["converged"] == memory["whole batch"]["converged"] == 1.0


def test_least_repeats_zero_times_a_slow_call_by_its_first_call(monkeypatch):
    """``--least-repeats 0``: a call past ``SLOW_S`` (15 s; here 0.3) runs once, its first
    call's run the sample and its output kept; a shorter one still runs again, timed."""
    import argparse
    import time

    from benchmarks import cases
    from benchmarks.methods import Runner

    calls = collections.Counter()

    def runner(name: str, seconds: float) -> Runner:
        def call():
            calls[name] += 1
            time.sleep(seconds)
            return name

        return Runner(call, lambda out: out, compiles=True)

    monkeypatch.setattr(cases, "SLOW_S", 0.6)  # 0.4 s from the middle call: a loaded CI
    args = argparse.Namespace(quick=True, repeats=3, least_repeats=0, loop_repeats=1)
    runners = {"slow": runner("slow", 0.7), "middle": runner("middle", 0.2),
               "fast": runner("fast", 0.0)}  # fmt: skip
    first, times, outputs, once = cases.timed(runners, args)
    assert once == {"slow"} and calls == {"slow": 1, "middle": 2, "fast": 4}
    assert outputs == {"slow": "slow", "middle": "middle", "fast": "fast"}
    assert times["slow"] == [first["slow"]["first_call_s"] - first["slow"]["compile_s"]]
    assert 0.7 <= times["slow"][0] < 2 and len(times["fast"]) == 3


def imported_modules(path: pathlib.Path) -> set[str]:
    """The absolute modules a Python file imports (``from a.b import c``: ``a.b``)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
    return names


def test_benchmarks_do_not_import_tests():
    """The suites stand alone: the problems tests share with them are the library's
    (``fixedopt.testing_problems``)."""
    offenders = [
        f"{path.relative_to(ROOT)}: {name}"
        for path in sorted((ROOT / "benchmarks").rglob("*.py"))
        for name in imported_modules(path)
        if name.split(".")[0] == "tests"
    ]
    assert not offenders, offenders


def test_benchmarks_use_only_public_modules():
    """No suite reaches a private module of fixedopt (``fixedopt._solvers``...);
    ``python -m fixedopt``'s module, ``fixedopt.__main__``, is public."""
    offenders = [
        f"{path.relative_to(ROOT)}: {name}"
        for path in sorted((ROOT / "benchmarks").rglob("*.py"))
        for name in imported_modules(path)
        if re.match(r"fixedopt\._(?!_main__$)", name)
    ]
    assert not offenders, offenders


def test_the_import_check_finds_a_test_import(tmp_path):
    script = tmp_path / "x.py"
    script.write_text("import os\nfrom tests import helpers\nimport fixedopt._x as x\n")
    assert imported_modules(script) == {"os", "tests", "fixedopt._x"}


SUITE_RESULT = re.compile(
    r"(?P<backend>cpu|gpu|tpu)-(?P<suite>[a-z_]+?)(?:-(?P<label>[\w-]+?))?"
    r"-(?P<date>\d{4}-\d{2}-\d{2})(?:-(?P<plot>[\w-]+))?\.(?:json|md|png)"
)


def suite_results():
    """``(file, match)`` for each results file: what a suite of ``benchmarks.run`` or a
    benchmark's own command (``python -m benchmarks.first_call``) wrote, or None."""
    from benchmarks.run import OWN
    from benchmarks.suites import PLANS

    runs = {*PLANS, *OWN, *(path.stem for path in (ROOT / "benchmarks").glob("*.py"))}
    for path in sorted((ROOT / "benchmarks" / "results").iterdir()):
        match = SUITE_RESULT.fullmatch(path.name)
        yield path, match if match and match["suite"] in runs else None


def test_every_results_file_is_the_run_of_a_suite():
    """A result that no suite or benchmark command writes (an investigation's, or the
    run of a script that has left) is a decision's data: a paragraph in
    ``docs/decisions.md`` names the commit that holds it, off the tree."""
    strays = [path.name for path, match in suite_results() if match is None]
    assert not strays, strays


def test_results_are_the_current_run_of_each_suite_named_by_one_scheme():
    """``<backend>-<suite>[-label]-<date>`` (plots: ``<that>-<plot>.png``), and one date per
    backend, suite and label: a rerun replaces its results (git keeps the old ones)."""
    dates = collections.defaultdict(set)
    for _path, match in suite_results():
        if match:
            dates[match["backend"], match["suite"], match["label"]].add(match["date"])
    assert len(dates) >= 10, sorted(dates)
    stale = {key: sorted(found) for key, found in dates.items() if len(found) > 1}
    assert not stale, stale


def test_committed_files_name_no_machine_paths():
    machine = re.compile(r"/(?:work|home|root|tmp)/[\w.-]+")
    offenders = [
        f"{path.relative_to(ROOT)}: {found}"
        for folder in ("benchmarks", "docs")
        for path in sorted((ROOT / folder).rglob("*"))
        if path.suffix in (".md", ".py", ".txt", ".yml")
        for found in machine.findall(path.read_text())
    ]
    assert not offenders, offenders


# A finished investigation is a section of docs/decisions.md, its script and data in git's
# history: "Study `<date>-<name>`, commit <hash>." A path into a study folder points at
# nothing in the tree.
# A decision names where its script and data lie: a study folder of the old tree
# ("Study `2026-12-01-certify`, commit 1a2b3c4") or, since studies left the tree, the
# files of the commit that held them ("Script `benchmarks/tpu.py`, commit 1a2b3c4").
DECISION_SOURCE = re.compile(
    r"^(Study `\d{4}-\d{2}-\d{2}-\w+`|Script `[\w./-]+`), commit [0-9a-f]{7,40}", re.M
)
STUDY_PATH = re.compile(r"studies/\d{4}-\d{2}-\d{2}")


def test_every_decision_names_its_study_and_commit():
    text = (ROOT / "docs" / "decisions.md").read_text()
    sections = re.split(r"^### ", text, flags=re.M)[1:]
    unsourced = [s.splitlines()[0] for s in sections if len(DECISION_SOURCE.findall(s)) != 1]
    assert len(sections) >= 40 and not unsourced, unsourced


def test_nothing_points_into_a_study_folder():
    assert not (ROOT / "studies").exists(), "finished studies are docs/decisions.md"
    files = [ROOT / "README.md", ROOT / "mkdocs.yml"]
    for folder in ("fixedopt", "benchmarks", "docs", "tests"):
        files += [p for p in (ROOT / folder).rglob("*") if p.suffix in (".py", ".md", ".yml")]
    offenders = [
        f"{path.relative_to(ROOT)}: {found}"
        for path in sorted(files)
        for found in STUDY_PATH.findall(path.read_text())
    ]
    assert not offenders, offenders
