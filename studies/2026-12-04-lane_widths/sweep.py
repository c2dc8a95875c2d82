"""Lane widths on the CPU (issue 45, step 1): each case solved with the default width
and with widths from 8 up to the batch, interleaved, median of 3 after a warm call.

    PYTHONPATH=. python studies/2026-12-04-lane_widths/sweep.py \
        --out studies/2026-12-04-lane_widths/results.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import jax

jax.config.update("jax_enable_x64", True)

import numpy as np  # noqa: E402

import fixedopt  # noqa: E402
from benchmarks import first_call as cases  # noqa: E402


def spot(batch):
    rng = np.random.default_rng(0)
    truth = np.array([500.0, 2.0, 2.0, 1.0, 10.0]) * rng.uniform(0.9, 1.1, (batch, 5))
    truth = truth.astype(np.float32)
    radius = (cases.SPOT_COLUMNS - truth[:, 1:2]) ** 2 + (cases.SPOT_ROWS - truth[:, 2:3]) ** 2
    clean = truth[:, :1] * np.exp(-radius / (2 * truth[:, 3:4] ** 2)) + truth[:, 4:]
    y = (clean + rng.normal(0.0, 7.0, clean.shape)).astype(np.float32)
    p0 = (truth * rng.uniform(0.9, 1.1, truth.shape)).astype(np.float32)
    fixed = np.zeros((batch, 5), bool)
    return lambda lanes: fixedopt.least_squares(
        cases.spot_residual, p0, fixed, args=(y,), batched=True, lanes=lanes, **cases.GPUFIT
    )


def quad(batch, n):
    rng = np.random.default_rng(0)
    diag = rng.uniform(2.0, 4.0, (batch, n))
    off = rng.uniform(-0.9, 0.9, (batch, n - 1))
    b = rng.normal(size=(batch, n))
    x0 = rng.normal(size=(batch, n))
    fixed = rng.random((batch, n)) < 0.3
    return lambda lanes: fixedopt.minimize(
        cases.quad, x0, fixed, args=(diag, off, b), batched=True, lanes=lanes
    )


def rk4(batch):
    rng = np.random.default_rng(0)
    truth = np.array([2.0, 0.1, 1.3, 1.7, 1.0, 0.0]) * rng.uniform(0.9, 1.1, (batch, 6))
    truth[:, 5] = rng.normal(0.0, 0.1, batch)
    y = np.asarray(jax.jit(jax.vmap(cases.trajectory))(truth)) + rng.normal(0.0, 0.02, (batch, 200))
    fixed = np.zeros((batch, 6), bool)
    fixed[np.arange(batch), rng.integers(0, 6, batch)] = True
    p0 = np.where(fixed, truth, truth * rng.uniform(0.95, 1.05, truth.shape))
    return lambda lanes: fixedopt.least_squares(
        cases.trajectory_residual, p0, fixed, args=(y,), batched=True, lanes=lanes
    )


CASES = {  # name: (builder, widths besides the default)
    "spot B=1e5 f32 (Gpufit protocol)": (lambda: spot(100_000), (256, 1024, 4096, 16384, 65536)),
    "quad n=8 B=16384": (lambda: quad(16384, 8), (64, 256, 1024, 4096, 16384)),
    "quad n=64 B=16384": (lambda: quad(16384, 64), (64, 256, 1024, 4096, 16384)),
    "quad n=512 B=2048": (lambda: quad(2048, 512), (8, 32, 128, 512, 2048)),
    "rk4 B=500": (lambda: rk4(500), (8, 16, 32, 64, 128, 500)),
}


def sweep(name, builder, widths, repeats):
    solve = builder()
    runs = {w: (lambda w=w: jax.block_until_ready(solve(w).x)) for w in (None, *widths)}
    for run in runs.values():  # compile and warm
        run()
    times = {w: [] for w in runs}
    for _ in range(repeats):  # interleaved
        for w, run in runs.items():
            start = time.perf_counter()
            run()
            times[w].append(time.perf_counter() - start)
    medians = {("default" if w is None else str(w)): statistics.median(t) for w, t in times.items()}
    best = min(medians, key=medians.get)
    record = {
        "case": name,
        "seconds": medians,
        "best": best,
        "default_over_best": medians["default"] / medians[best],
    }
    print(json.dumps(record), flush=True)
    return record


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", required=True)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    records = [sweep(name, *case, args.repeats) for name, case in CASES.items()]
    with open(args.out, "w") as out:
        environment = {"jax": jax.__version__, "devices": str(jax.devices())}
        json.dump({"records": records, **environment}, out, indent=1)


if __name__ == "__main__":
    main()
