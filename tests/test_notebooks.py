"""The notebooks in notebooks/ run from a clean kernel, without errors, and plot.

Each notebook is executed in memory (the committed file is not rewritten) by a fresh
IPython kernel running *this* interpreter: the kernel spec is written to a temporary
directory, so a `python3` kernel registered elsewhere on the machine (another
virtualenv, a user-wide Jupyter install) cannot be picked up instead.
"""

import json
import pathlib
import sys

import nbclient
import nbformat
import pytest
from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.manager import AsyncKernelManager

# The test extra installs nbformat, nbclient, ipykernel and matplotlib: a missing one
# is an error here, not a skip, so that the notebooks never go untested silently.

NOTEBOOKS = pathlib.Path(__file__).resolve().parents[1] / "notebooks"
CELL_TIMEOUT_S = 300
# The kernels compile without XLA's expensive backend optimizations (as tests marked
# ``fewer_optimizations``, conftest.py): a notebook's programs run for milliseconds and
# compile for seconds, and what the notebooks assert (fixed entries' bits, compile
# counts, a reference within 1e-10) no backend optimization changes. Notebooks 03, 05 and
# 06 read FIXEDOPT_NOTEBOOK_SMOKE: 200 spectra of 2000, two slabs of eight and one timed
# call, 10,000 spots of 100,000 (each notebook says so in its first cell); what they show
# and assert runs the same code at any size.
ENVIRONMENT = {"JAX_DISABLE_MOST_OPTIMIZATIONS": "1", "FIXEDOPT_NOTEBOOK_SMOKE": "1"}
# Nothing compiled ahead (``fixedopt.testing.no_compiles_ahead``, as in the tests:
# conftest.py): a CPU block's tail is compiled by the call that has one, not in a thread
# beside each new model's first block, which on CI's two busy cores took a core for
# nothing. The same results, bit for bit (tests/driver/test_tail.py).
NO_COMPILES_AHEAD = [
    "import fixedopt.testing as _fixedopt_testing",
    "_no_compiles_ahead = _fixedopt_testing.no_compiles_ahead()",  # kept: its exit restores
    "_no_compiles_ahead.__enter__()",
]


def _notebooks():
    return sorted(NOTEBOOKS.glob("*.ipynb"))


@pytest.fixture(scope="module")
def kernel_dirs(tmp_path_factory):
    """A kernel spec named python3 that starts an IPython kernel on sys.executable."""
    root = tmp_path_factory.mktemp("kernels")
    spec = root / "python3"
    spec.mkdir()
    argv = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}",
            f"--IPKernelApp.exec_lines={NO_COMPILES_AHEAD!r}"]  # fmt: skip
    kernel = {"argv": argv, "display_name": "Python 3 (fixedopt tests)", "language": "python"}
    kernel["env"] = ENVIRONMENT
    (spec / "kernel.json").write_text(json.dumps(kernel))
    return [str(root)]


def test_notebooks_exist():
    assert [path.name for path in _notebooks()], f"no notebooks in {NOTEBOOKS}"


@pytest.mark.parametrize("path", _notebooks(), ids=lambda path: path.stem)
def test_notebook_runs_and_plots(path, kernel_dirs):
    notebook = nbformat.read(path, as_version=4)
    specs = KernelSpecManager(kernel_dirs=kernel_dirs)
    kernel = AsyncKernelManager(kernel_name="python3", kernel_spec_manager=specs)
    assert kernel.kernel_spec.argv[0] == sys.executable
    client = nbclient.NotebookClient(
        notebook,
        km=kernel,
        timeout=CELL_TIMEOUT_S,
        allow_errors=False,  # any cell error raises CellExecutionError
        resources={"metadata": {"path": str(NOTEBOOKS)}},
    )
    client.execute(cleanup_kc=True)  # shut the kernel down and close its sockets

    cells = [cell for cell in notebook.cells if cell.cell_type == "code"]
    outputs = [output for cell in cells for output in cell.outputs]
    errors = [output for output in outputs if output.output_type == "error"]
    assert not errors, f"{path.name}: {errors[0].ename}: {errors[0].evalue}"
    images = [output for output in outputs if "image/png" in output.get("data", {})]
    assert images, f"{path.name} produced no image/png output (no matplotlib figure shown)"
