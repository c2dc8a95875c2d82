import sys, time, json, contextlib, hashlib, jax
jax.config.update("jax_enable_x64", True)
import numpy as np
from benchmarks import first_call_cases as C
from fixedopt.testing import wait_for_compiles_ahead
case = sys.argv[1]
calls = C.BUILDERS[case](2000)
t0 = time.process_time(); w0 = time.perf_counter()
out = jax.block_until_ready(calls["call"]())
cpu_call = time.process_time() - t0; wall = time.perf_counter() - w0
wait_for_compiles_ahead()
cpu_all = time.process_time() - t0
leaves = jax.tree.leaves(out)
h = hashlib.sha256(b"".join(np.ascontiguousarray(np.asarray(a)).tobytes() for a in leaves)).hexdigest()[:12]
print(json.dumps({"cpu_call": round(cpu_call, 2), "cpu_all": round(cpu_all, 2), "wall": round(wall, 2), "hash": h}))
