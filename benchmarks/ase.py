"""The ase suite: notebook 05 (ASE slabs vs one batched fixedopt solve) run in a fresh
kernel on this interpreter and checkout, and its results table kept."""

import json
import os
import pathlib
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "notebooks" / "05_ase_slab_relaxation.ipynb"


def run_notebook(path: pathlib.Path):
    """Execute ``path`` in a fresh kernel on ``sys.executable``; return the notebook."""
    import nbclient
    import nbformat
    from jupyter_client.kernelspec import KernelSpecManager
    from jupyter_client.manager import KernelManager

    notebook = nbformat.read(path, as_version=4)
    paths = [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
    os.environ["PYTHONPATH"] = os.pathsep.join(paths)  # the kernel imports this fixedopt
    with tempfile.TemporaryDirectory() as root:
        (spec := pathlib.Path(root) / "python3").mkdir()
        argv = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
        (spec / "kernel.json").write_text(json.dumps({"argv": argv, "language": "python"}))
        specs = KernelSpecManager(kernel_dirs=[root])
        kernel = KernelManager(kernel_name="python3", kernel_spec_manager=specs)
        resources = {"metadata": {"path": str(path.parent)}}
        client = nbclient.NotebookClient(notebook, km=kernel, timeout=600, resources=resources)
        client.execute(cleanup_kc=True)
    return notebook


def run(quick: bool, args) -> list[dict]:
    """The notebook's table as one record (the notebook has no smaller variant)."""
    import ase

    notebook = run_notebook(NOTEBOOK)
    (cell,) = [c for c in notebook.cells if "results-table" in c.metadata.get("tags", [])]
    table = "".join(o.text for o in cell.outputs if o.output_type == "stream")
    return [{"kind": "ase", "notebook": NOTEBOOK.name, "ase": ase.__version__, "table": table}]
