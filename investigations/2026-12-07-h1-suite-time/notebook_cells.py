import sys, json, time, resource, pathlib, nbformat, nbclient, datetime
tree=sys.argv[1]; sys.path.insert(0, tree)
from tests.test_notebooks import ENVIRONMENT, NO_COMPILES_AHEAD
from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.manager import AsyncKernelManager
import tempfile; root=pathlib.Path(tempfile.mkdtemp()); spec=root/"python3"; spec.mkdir(parents=True, exist_ok=True)
argv=[sys.executable,"-m","ipykernel_launcher","-f","{connection_file}",f"--IPKernelApp.exec_lines={NO_COMPILES_AHEAD!r}"]
(spec/"kernel.json").write_text(json.dumps({"argv":argv,"display_name":"x","language":"python","env":ENVIRONMENT}))
def ch():
    r=resource.getrusage(resource.RUSAGE_CHILDREN); return r.ru_utime+r.ru_stime
for name in sys.argv[2:]:
    nb=nbformat.read(f"{tree}/notebooks/{name}.ipynb", as_version=4)
    km=AsyncKernelManager(kernel_name="python3", kernel_spec_manager=KernelSpecManager(kernel_dirs=[str(root)]))
    c=ch()
    nbclient.NotebookClient(nb, km=km, timeout=300, record_timing=True, resources={"metadata": {"path": f"{tree}/notebooks"}}).execute(cleanup_kc=True)
    print(name, "kernel CPU", round(ch()-c,2))
    for i,cell in enumerate(nb.cells):
        if cell.cell_type!="code": continue
        e=cell.metadata.get("execution",{})
        a,b=e.get("iopub.execute_input"),e.get("shell.execute_reply")
        if a and b:
            d=(datetime.datetime.fromisoformat(b.replace("Z","+00:00"))-datetime.datetime.fromisoformat(a.replace("Z","+00:00"))).total_seconds()
            print("  cell", i, round(d,2), cell.source.splitlines()[0][:60]); [print("     ", o.get("text","")[:300]) for o in cell.outputs if o.output_type=="stream"]
