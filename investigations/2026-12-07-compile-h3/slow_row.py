"""quad n = 64 (B = 16384, float64) with its last row ill-conditioned (Hessian diagonal
1e-3..1e3: a block's tail comes): its compiled call (process CPU and wall, median of
CALLS after the first, the tail's compile waited for), digests of every row and of
all rows but the last, the last row's status, steps and value, and the wall time of
the tail's program in each call. Run from a tree's
root: python slow_row.py [CALLS]."""
import hashlib
import statistics
import sys
import time

import jax

jax.config.update("jax_enable_x64", True)
import numpy as np  # noqa: E402

import fixedopt  # noqa: E402
from benchmarks.first_call_cases import quad64_data, real  # noqa: E402
from fixedopt.testing import wait_for_compiles_ahead  # noqa: E402
from fixedopt.testing_problems import quad_jax  # noqa: E402

calls = int(sys.argv[1]) if len(sys.argv) > 1 else 5
x0, fixed, (diag, off, b) = quad64_data(16384)
diag, off = np.array(diag), np.array(off)
diag[-1], off[-1], fixed[-1] = np.logspace(-3, 3, 64), 0.0, False
args = tuple(map(real, (diag, off, b)))


def call():
    return fixedopt.minimize(quad_jax, x0, fixed, args=args, batched=True)


from fixedopt._driver import ahead, batching  # noqa: E402

tails = []  # wall seconds of each call of the tail's program


def timed_call(*args, **kwargs):
    start = time.perf_counter()
    out = jax.block_until_ready(ahead_call(*args, **kwargs))
    tails.append(time.perf_counter() - start)
    return out


ahead_call, batching.ahead.call = ahead.call, timed_call
sol = jax.block_until_ready(call())
wait_for_compiles_ahead()
tails.clear()
cpu, wall = [], []
for _ in range(calls):
    start, clock = time.perf_counter(), time.process_time()
    sol = jax.block_until_ready(call())
    wall.append(time.perf_counter() - start)
    cpu.append(time.process_time() - clock)


def digest(rows):
    d = hashlib.sha256()
    for leaf in (sol.x, sol.value, sol.status, sol.reason, sol.steps):
        d.update(np.ascontiguousarray(np.asarray(leaf)[rows]).tobytes())
    return d.hexdigest()[:16]


last = -1
print(f"cpu {statistics.median(cpu):.3f} wall {statistics.median(wall):.3f} "
      f"({' '.join(f'{c:.3f}' for c in cpu)}) all {digest(slice(None))} "
      f"but_last {digest(slice(0, -1))} last: status {int(sol.status[last])} "
      f"steps {int(sol.steps[last])} value {float(sol.value[last])!r} "
      f"tail {statistics.median(tails) * 1e3:.1f} ms ({' '.join(f'{t * 1e3:.1f}' for t in tails)})",
      flush=True)
