"""The compiled call of ``benchmarks.first_call``'s cases: median process CPU and wall
of ``REPS`` calls after the first (compiles ahead waited for): ``python compiled_time.py
CASE [CASE ...]`` with ``PYTHONPATH`` the tree (run the trees in turn, interleaved)."""

import os
import statistics
import sys
import time

import jax

jax.config.update("jax_enable_x64", True)
from benchmarks import first_call_cases as fc  # noqa: E402
from benchmarks.first_call import BATCHES  # noqa: E402
from fixedopt.testing import wait_for_compiles_ahead  # noqa: E402

for case in sys.argv[1:]:
    call = fc.BUILDERS[case](BATCHES[case][0])["call"]
    jax.block_until_ready(call())
    wait_for_compiles_ahead()
    cpu, wall = [], []
    for _ in range(int(os.environ.get("REPS", "7"))):
        start, clock = time.perf_counter(), time.process_time()
        jax.block_until_ready(call())
        wall.append(time.perf_counter() - start)
        cpu.append(time.process_time() - clock)
    print(f"{case} cpu {statistics.median(cpu):.3f} wall {statistics.median(wall):.3f}", flush=True)
