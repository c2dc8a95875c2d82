"""The Gpufit protocol (B = 1e5, float32, least_squares) called plainly, inside a
``jax.jit`` of the user's, and inside one given ``fixedopt.compiler_options``:
compile and run time, interleaved, median of 5 after a warm call (issue 45, step 5).

    PYTHONPATH=. python studies/2026-12-04-users_jit/measure.py
"""

import statistics
import time

import jax
import numpy as np

import fixedopt
from benchmarks.first_call import GPUFIT, SPOT_COLUMNS, SPOT_ROWS, spot_residual

B = 100_000
rng = np.random.default_rng(0)
truth = (np.array([500.0, 2.0, 2.0, 1.0, 10.0]) * rng.uniform(0.9, 1.1, (B, 5))).astype(np.float32)
radius = (SPOT_COLUMNS - truth[:, 1:2]) ** 2 + (SPOT_ROWS - truth[:, 2:3]) ** 2
clean = truth[:, :1] * np.exp(-radius / (2 * truth[:, 3:4] ** 2)) + truth[:, 4:]
y = (clean + rng.normal(0.0, 7.0, clean.shape)).astype(np.float32)
p0 = (truth * rng.uniform(0.9, 1.1, truth.shape)).astype(np.float32)
fixed = np.zeros((B, 5), bool)


def fit(p0, fixed, y):
    return fixedopt.least_squares(spot_residual, p0, fixed, args=(y,), batched=True, **GPUFIT).x


options = fixedopt.compiler_options(fixedopt.LevenbergMarquardt())
calls = {
    "plain call": fit,
    "inside the user's jax.jit": jax.jit(fit),
    "inside jax.jit(compiler_options=fixedopt.compiler_options(...))": jax.jit(
        fit, compiler_options=options
    ),
}
for name, call in calls.items():
    start = time.perf_counter()
    jax.block_until_ready(call(p0, fixed, y))
    print(f"{name}: first call {time.perf_counter() - start:.2f} s")
times = {name: [] for name in calls}
for _ in range(5):
    for name, call in calls.items():
        start = time.perf_counter()
        jax.block_until_ready(call(p0, fixed, y))
        times[name].append(time.perf_counter() - start)
plain = statistics.median(times["plain call"])
for name, seconds in times.items():
    median = statistics.median(seconds)
    rate = B / median / 1e3
    print(f"{name}: {median * 1e3:.1f} ms, {rate:.0f}k fits/s, {median / plain:.3f}x plain")
