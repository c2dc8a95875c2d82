"""The compiled call of first_call cases: process CPU seconds per call (median of 7),
after the first call and fixedopt's compiles ahead. Run from a checkout's root:
python speed.py CASE [B]; interleave two checkouts' runs."""
import json
import statistics
import sys
import time

import jax

case = sys.argv[1]
if case != "spot":
    jax.config.update("jax_enable_x64", True)
from benchmarks.first_call_cases import BUILDERS
from fixedopt.testing import wait_for_compiles_ahead

batch = int(sys.argv[2]) if len(sys.argv) > 2 else 2000
call = BUILDERS[case](batch)["call"]
jax.block_until_ready(call())
wait_for_compiles_ahead()
times = []
for _ in range(7):
    start = time.process_time()
    jax.block_until_ready(call())
    times.append(time.process_time() - start)
print(json.dumps({"case": case, "cpu_s": round(statistics.median(times), 4)}))
