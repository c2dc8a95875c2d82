"""Every benchmark suite runs (``--quick``) and writes its JSON, markdown and plots.

All suites run in one subprocess (``benchmarks.run`` turns on float64 for its whole
process; one process also shares JAX's caches between suites). Methods whose packages
are missing (jaxopt, TFP: the ``bench`` extra) are recorded as skipped with the reason.
"""

import json
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
SUITES = ("solvers", "cpu", "gpu", "micro", "linesearch", "small_n", "scale",
          "differentiation", "fusion", "status_truth", "ase", "at_bound", "curve_fit", "tiny",
          "tiny_large", "deblur")  # fmt: skip
PLOTTED = ("solvers", "cpu", "gpu", "tiny")  # suites with solver cases against the scipy loop
DRIVER = """
import sys
from benchmarks.run import main
for suite in sys.argv[2:]:
    main(["--suite", suite, "--quick", "--out", sys.argv[1]])
main(["--suite", "scale", "--quick", "--stragglers-only", "--out", sys.argv[1]])
"""


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> pathlib.Path:
    out = tmp_path_factory.mktemp("results")
    command = [sys.executable, "-c", DRIVER, str(out), *SUITES]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=1500)
    assert done.returncode == 0, done.stderr[-3000:]
    return out


@pytest.mark.parametrize("suite", [*SUITES, "scale-stragglers"])
def test_suite_writes_json_markdown_and_plots(results, suite):
    (path,) = results.glob(f"*-{suite}-quick-*.json")
    records = json.loads(path.read_text())
    assert records and all(r["suite"] == suite.split("-")[0] for r in records)
    markdown = path.with_suffix(".md").read_text()
    assert markdown.startswith(f"# {path.stem}") and "| ---" not in markdown
    assert "|---" in markdown or suite == "ase"
    plots = sorted(results.glob(f"{path.stem}-*.png"))
    assert bool(plots) == (suite in PLOTTED), plots


def test_missing_packages_are_skipped_with_a_reason(results):
    (path,) = results.glob("*-cpu-quick-*.json")
    for record in json.loads(path.read_text()):
        if "skipped" in record:
            assert record["skipped"] and record["skipped"] in path.with_suffix(".md").read_text()
