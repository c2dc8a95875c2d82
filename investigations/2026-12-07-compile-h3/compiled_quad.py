"""Compiled calls of ``minimize`` on per-row tridiagonal quadratics (``quad_jax``,
float64, 30% of entries fixed) at n = 8, 64 and 512, and of the first_call cases
given: process CPU and wall seconds per call, medians of CALLS after the first (its
compiles ahead waited for). Run from a tree's root: python compiled_quad.py [CALLS]
[CASE ...] [--cases-only] (trees in turn, A B A B)."""
import statistics
import sys
import time

import jax

jax.config.update("jax_enable_x64", True)
import numpy as np  # noqa: E402

import fixedopt  # noqa: E402
from benchmarks.first_call import BATCHES  # noqa: E402
from benchmarks.first_call_cases import BUILDERS  # noqa: E402
from fixedopt.testing import wait_for_compiles_ahead  # noqa: E402
from fixedopt.testing_problems import quad_jax  # noqa: E402

SIZES = {8: 16384, 64: 4096, 512: 256}  # n: B


def quad(n, batch, seed=0):
    rng = np.random.default_rng(seed)
    diag, off = rng.uniform(2.0, 4.0, (batch, n)), rng.uniform(-0.9, 0.9, (batch, n - 1))
    b, x0 = rng.normal(size=(batch, n)), rng.normal(size=(batch, n))
    fixed = rng.random((batch, n)) < 0.3
    return lambda: fixedopt.minimize(quad_jax, x0, fixed, args=(diag, off, b), batched=True)


def timed(name, call, calls):
    jax.block_until_ready(call())
    wait_for_compiles_ahead()
    cpu, wall = [], []
    for _ in range(calls):
        start, clock = time.perf_counter(), time.process_time()
        jax.block_until_ready(call())
        wall.append(time.perf_counter() - start)
        cpu.append(time.process_time() - clock)
    print(f"{name} cpu {statistics.median(cpu):.4f} wall {statistics.median(wall):.4f}", flush=True)


calls = int(sys.argv[1]) if len(sys.argv) > 1 else 7
cases = sys.argv[2:]
if "--cases-only" not in cases:
    for n, batch in SIZES.items():
        timed(f"quad{n}_B{batch}", quad(n, batch), calls)
for case in (c for c in cases if c != "--cases-only"):
    timed(case, BUILDERS[case](BATCHES[case][0])["call"], calls)
