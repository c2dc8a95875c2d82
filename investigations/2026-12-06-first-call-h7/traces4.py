import sys, time, json, jax
jax.config.update("jax_enable_x64", True)
from concurrent.futures import ThreadPoolExecutor
from benchmarks import first_call_cases as C
from fixedopt._driver import ahead
from fixedopt.testing import wait_for_compiles_ahead
if "--not-niced" in sys.argv:
    ahead._POOL = ThreadPoolExecutor(max_workers=1, thread_name_prefix="fixedopt-ahead")
calls = C.BUILDERS[sys.argv[1]](2000)
t0 = time.process_time(); w0 = time.perf_counter()
jax.block_until_ready(calls["call"]())
cpu_call = time.process_time() - t0; wall = time.perf_counter() - w0
wait_for_compiles_ahead()
print(json.dumps({"cpu_call": round(cpu_call, 2), "cpu_all": round(time.process_time() - t0, 2), "wall": round(wall, 2), "load": round(__import__("os").getloadavg()[0], 1)}))
