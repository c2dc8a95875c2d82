"""The optimized programs of a first_call case's first call (XLA's dump, nothing compiled
ahead): per module, its fusions (kernels), while loops and instructions; and the first
call's process CPU seconds and XLA compile seconds per program.

Run from a checkout's root: python sizes.py CASE [B]."""
import glob
import json
import os
import re
import sys
import tempfile
import time

case = sys.argv[1]
batch = int(sys.argv[2]) if len(sys.argv) > 2 else 2000
dump = os.environ.get("DUMP") or tempfile.mkdtemp()
os.environ["XLA_FLAGS"] = os.environ.get("XLA_FLAGS", "") + f" --xla_dump_to={dump} --xla_dump_hlo_as_text"
os.environ["FIXEDOPT_CACHE"] = tempfile.mkdtemp()
import jax

if case != "spot":
    jax.config.update("jax_enable_x64", True)
from benchmarks.first_call import per_program
from benchmarks.first_call_cases import BUILDERS
from fixedopt.testing import no_compiles_ahead

call = BUILDERS[case](batch)["call"]
with no_compiles_ahead(), per_program() as programs:
    cpu = time.process_time()
    jax.block_until_ready(call())
    cpu = time.process_time() - cpu
sizes = {}
for path in sorted(glob.glob(f"{dump}/*after_optimizations.txt")):
    text = open(path).read()
    name = ".".join(os.path.basename(path).split(".")[:2])
    sizes[name] = dict(fusions=len(re.findall(r" fusion\(", text)), whiles=len(re.findall(r" while\(", text)),
                       instructions=len(re.findall(r"^\s+(?:ROOT )?\S+ = ", text, re.M)))
compile_s = {f"{k[0]}": round(v["compile"], 3) for k, v in programs.items() if v["compile"] > 0.01}
print(json.dumps(dict(case=case, cpu_s=round(cpu, 2), compile_s=compile_s, sizes=sizes)))
