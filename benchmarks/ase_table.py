"""Run notebook 05 (ASE slabs vs one batched fixedopt solve) and save its results table.

Usage: ``python -m benchmarks.ase_table [--save-notebook]`` writes
``benchmarks/results/<backend>-ase-<date>.md``: the notebook's own table (structures,
atoms, frozen atoms, steps, ASE and fixedopt times, largest forces, energy differences),
from a fresh kernel on this interpreter, headed by the backend and package versions.
"""

from __future__ import annotations

import argparse
import datetime
import json
import pathlib
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "notebooks" / "05_ase_slab_relaxation.ipynb"
TAG = "results-table"


def run_notebook(path: pathlib.Path):
    """Execute ``path`` in a fresh kernel on ``sys.executable``; return the notebook."""
    import nbclient
    import nbformat
    from jupyter_client.kernelspec import KernelSpecManager
    from jupyter_client.manager import KernelManager

    notebook = nbformat.read(path, as_version=4)
    with tempfile.TemporaryDirectory() as root:
        spec = pathlib.Path(root) / "python3"
        spec.mkdir()
        argv = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
        (spec / "kernel.json").write_text(json.dumps({"argv": argv, "language": "python"}))
        specs = KernelSpecManager(kernel_dirs=[root])
        kernel = KernelManager(kernel_name="python3", kernel_spec_manager=specs)
        client = nbclient.NotebookClient(
            notebook, km=kernel, timeout=600, resources={"metadata": {"path": str(path.parent)}}
        )
        client.execute(cleanup_kc=True)
    return notebook


def tagged_output(notebook, tag: str) -> str:
    """The printed output of the one code cell tagged ``tag``."""
    (cell,) = [c for c in notebook.cells if tag in c.metadata.get("tags", [])]
    return "".join(o.text for o in cell.outputs if o.output_type == "stream")


def main(argv: list[str] | None = None) -> pathlib.Path:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=pathlib.Path, default=ROOT / "benchmarks" / "results")
    parser.add_argument(
        "--save-notebook",
        action="store_true",
        help="also write the executed notebook back (its outputs then show this run)",
    )
    options = parser.parse_args(argv)

    import ase
    import jax

    notebook = run_notebook(NOTEBOOK)
    if options.save_notebook:
        import nbformat

        nbformat.write(notebook, NOTEBOOK)
    backend = jax.default_backend()
    date = datetime.date.today().isoformat()
    header = (
        f"# ASE slab relaxation: ASE BFGS vs one batched fixedopt solve ({backend}, {date})\n\n"
        f"From `python -m benchmarks.ase_table` (executes `notebooks/{NOTEBOOK.name}`); "
        f"ase {ase.__version__}, jax {jax.__version__}, device {jax.devices()[0].device_kind}. "
        "Energies: ASE's `MorsePotential` (Girifalco-Weizer parameters) and its JAX "
        "transcription; frozen atoms (`FixAtoms`) bit-identical in both. One run: absolute "
        "times on a shared machine drift from run to run; the speedup compares times of the "
        "same run.\n\n"
    )
    path = options.out / f"{backend}-ase-{date}.md"
    path.write_text(header + tagged_output(notebook, TAG))
    print(path.read_text())
    return path


if __name__ == "__main__":
    main()
