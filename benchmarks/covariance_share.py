"""The covariance's share of ``fixedopt.curve_fit``'s time (issue 61, item 5).

``curve_fit``'s call of :func:`fixedopt.covariance` is wrapped with a timer (its input
solution made ready first), so each call of ``curve_fit`` yields its total time and the
covariance's part of it, in one process. Cases: 10,000 decay curves (two exponentials
and a background, 128 bins, sigma, bounds, tau2 fixed in half the fits; the curve_fit
suite's) and Gpufit's protocol (a 2-D Gaussian on 5x5 pixels, 5 parameters, 100,000
fits). Run: ``python -m benchmarks.covariance_share [--repeats 7]``.
"""

from __future__ import annotations

import argparse
import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np

import fixedopt
import fixedopt._entry.curve_fit as entry
from benchmarks.curve_fit import BINS, decay, decays

_SPENT: list[float] = []
_covariance = entry.covariance


def _timed_covariance(solution, *args, **kwargs):
    jax.block_until_ready(solution)
    start = time.perf_counter()
    found = jax.block_until_ready(_covariance(solution, *args, **kwargs))
    _SPENT.append(time.perf_counter() - start)
    return found


def gaussian(xy, amplitude, x0, y0, width, background):
    r2 = (xy[0] - x0) ** 2 + (xy[1] - y0) ** 2
    return amplitude * jnp.exp(-r2 / (2 * width**2)) + background


def gpufit_inputs(batch: int, dtype):
    """Gpufit's protocol: amplitude 500, centre (2, 2) + U(-0.5, 0.5), width 1,
    background 10, Poisson noise; starts off by 10% (the position by U(-0.2, 0.2))."""
    rng = np.random.default_rng(0)
    grid = np.stack(np.meshgrid(np.arange(5.0), np.arange(5.0))).reshape(2, 25)
    truth = np.tile([500.0, 2.0, 2.0, 1.0, 10.0], (batch, 1))
    truth[:, 1:3] += rng.uniform(-0.5, 0.5, (batch, 2))
    mu = gaussian(grid, *truth.T[:, :, None])
    data = rng.poisson(np.asarray(mu)).astype(float)
    start = truth * rng.uniform(0.9, 1.1, truth.shape)
    start[:, 1:3] = truth[:, 1:3] + rng.uniform(-0.2, 0.2, (batch, 2))
    cast = lambda a: jnp.asarray(a, dtype)
    return lambda: fixedopt.curve_fit(gaussian, cast(grid), cast(data), cast(start), batched=True)


def decay_inputs(batch: int, dtype):
    _truth, data, sigma, fixed, start = decays(batch)
    cast = lambda a: jnp.asarray(a, dtype)
    return lambda: fixedopt.curve_fit(
        decay, cast(BINS), cast(data), cast(start), sigma=cast(sigma), bounds=(0.0, np.inf),
        fixed=fixed, batched=True,
    )  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=7)
    options = parser.parse_args()
    entry.covariance = _timed_covariance
    cases = {}
    for dtype in (jnp.float32, jnp.float64):
        name = jnp.dtype(dtype).name
        cases[f"decay 10,000 {name}"] = decay_inputs(10_000, dtype)
        cases[f"gpufit 100,000 {name}"] = gpufit_inputs(100_000, dtype)
    totals: dict[str, list[float]] = {k: [] for k in cases}
    parts: dict[str, list[float]] = {k: [] for k in cases}
    for call in cases.values():
        jax.block_until_ready(call())  # compile
    for _ in range(options.repeats):
        for name, call in cases.items():  # interleaved
            _SPENT.clear()
            start = time.perf_counter()
            jax.block_until_ready(call())
            totals[name].append(time.perf_counter() - start)
            parts[name].append(sum(_SPENT))
    print(f"{'case':26} {'curve_fit s':>11} {'covariance s':>12} {'share':>6}")
    for name in cases:
        total, part = statistics.median(totals[name]), statistics.median(parts[name])
        shares = [p / t for p, t in zip(parts[name], totals[name])]
        print(f"{name:26} {total:11.3f} {part:12.3f} {statistics.median(shares):6.1%}")


if __name__ == "__main__":
    jax.config.update("jax_enable_x64", True)
    main()
