"""The compiled call of a first_call case: process CPU and wall seconds of each of 9
calls after the first, printed with their medians. Run from a tree's root:
python compiled_time.py CASE (trees in turn, A B A B)."""
import statistics
import sys
import time

import jax

jax.config.update("jax_enable_x64", True)
from benchmarks.first_call import BATCHES  # noqa: E402
from benchmarks.first_call_cases import BUILDERS  # noqa: E402

case = sys.argv[1]
call = BUILDERS[case](BATCHES[case][0])["call"]
jax.block_until_ready(call())
cpu, wall = [], []
for _ in range(9):
    start, clock = time.perf_counter(), time.process_time()
    jax.block_until_ready(call())
    wall.append(time.perf_counter() - start)
    cpu.append(time.process_time() - clock)
print(case, "cpu", f"{statistics.median(cpu):.3f}", "wall", f"{statistics.median(wall):.3f}",
      " ".join(f"{c:.3f}" for c in cpu))
