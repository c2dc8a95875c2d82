"""A/B of a float32 ``curve_fit``'s covariance: the Jacobian evaluated again and summed in
float64 in one program with the inverse (``solver_covariance._from_jacobian``, A) against
``covariance``'s normal-equations path (B), interleaved, order alternated (issue 61 item
5). Each call yields its process CPU time and the covariance's part (its
``fit_covariance`` timed, its input made ready first). Cases as
``investigations/2026-12-06-h6-covariance32/share.py`` (commit e54b310): 10,000 decay
curves, 2,000 two-Gaussian spectra, Gpufit's protocol at 100,000 fits.
Run: ``PYTHONPATH=. python investigations/2026-12-07-h6-covariance32/refit_ab.py
[--repeats 5] [--only decay]``."""

from __future__ import annotations

import argparse
import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np

import fixedopt
from benchmarks.curve_fit import BINS, decay, decays
from fixedopt._results import solver_covariance

_SPENT: list[float] = []
_covariance = solver_covariance.fit_covariance
_refits = solver_covariance._refits


def _timed_covariance(solution, *args, **kwargs):
    jax.block_until_ready(solution)
    start = time.process_time()
    found = jax.block_until_ready(_covariance(solution, *args, **kwargs))
    _SPENT.append(time.process_time() - start)
    return found


def gaussian(xy, amplitude, x0, y0, width, background):
    r2 = (xy[0] - x0) ** 2 + (xy[1] - y0) ** 2
    return amplitude * jnp.exp(-r2 / (2 * width**2)) + background


def two_gaussians(x, a1, c1, w1, a2, c2, w2, slope, offset):
    one = a1 * jnp.exp(-((x - c1) ** 2) / (2 * w1**2))
    two = a2 * jnp.exp(-((x - c2) ** 2) / (2 * w2**2))
    return one + two + slope * x + offset


def gpufit_case(batch: int):
    rng = np.random.default_rng(0)
    grid = np.stack(np.meshgrid(np.arange(5.0), np.arange(5.0))).reshape(2, 25)
    truth = np.tile([500.0, 2.0, 2.0, 1.0, 10.0], (batch, 1))
    truth[:, 1:3] += rng.uniform(-0.5, 0.5, (batch, 2))
    data = rng.poisson(np.asarray(gaussian(grid, *truth.T[:, :, None]))).astype(float)
    start = truth * rng.uniform(0.9, 1.1, truth.shape)
    start[:, 1:3] = truth[:, 1:3] + rng.uniform(-0.2, 0.2, (batch, 2))
    return dict(f=gaussian, x=grid, y=data, p0=start, fixed=np.zeros(start.shape, bool),
                sigma=None, bounds=None)  # fmt: skip


def decay_case(batch: int):
    _truth, data, sigma, fixed, start = decays(batch)
    return dict(f=decay, x=BINS, y=data, p0=start, fixed=fixed, sigma=sigma,
                bounds=(0.0, np.inf))  # fmt: skip


def spectra_case(batch: int):
    rng = np.random.default_rng(2)
    x = np.linspace(0.0, 30.0, 301)
    truth = np.tile([3.0, 10.0, 1.5, 2.0, 19.0, 2.0, 0.01, 0.5], (batch, 1))
    truth *= rng.uniform(0.9, 1.1, truth.shape)
    y = np.asarray(two_gaussians(x, *truth.T[:, :, None])) + rng.normal(0, 0.05, (batch, 301))
    start = truth * rng.uniform(0.95, 1.05, truth.shape)
    fixed = np.zeros(truth.shape, bool)
    fixed[::3, 5] = True
    start[fixed] = truth[fixed]
    return dict(f=two_gaussians, x=x, y=y, p0=start, fixed=fixed, sigma=None, bounds=None)


def call(case, dtype):
    cast = lambda a: None if a is None else jnp.asarray(a, dtype)
    extra = {} if case["bounds"] is None else {"bounds": case["bounds"]}
    if case["sigma"] is not None:
        extra["sigma"] = cast(case["sigma"])
    inputs = cast(case["x"]), cast(case["y"]), cast(case["p0"])
    fixed = case["fixed"]
    return lambda: fixedopt.curve_fit(case["f"], *inputs, fixed=fixed, batched=True, **extra)


def side(on: bool) -> None:
    solver_covariance._refits = _refits if on else (lambda x: False)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--only", default="")
    options = parser.parse_args()
    solver_covariance.fit_covariance = _timed_covariance
    cases = {}
    for label, make in (("decay 10,000", lambda: decay_case(10_000)),
                        ("spectra 2,000", lambda: spectra_case(2_000)),
                        ("gpufit 100,000", lambda: gpufit_case(100_000))):  # fmt: skip
        if not options.only or options.only in label:
            cases[label] = call(make(), jnp.float32)
    pcov = {}
    for name, run in cases.items():  # compile both, and compare them
        for on in (True, False):
            side(on)
            pcov[name, on] = np.asarray(jax.block_until_ready(run())[1], float)
        a, b = pcov[name, True], pcov[name, False]
        finite = np.isfinite(b)
        scale = np.nan_to_num(np.sqrt(np.abs(np.einsum("bii,bjj->bij", b, b))), posinf=0.0)
        worst = np.max(np.abs(a - b)[finite] / np.where(scale[finite] > 0, scale[finite], 1.0))
        print(f"{name}: same non-finite {np.array_equal(finite, np.isfinite(a))}, "
              f"largest difference to sqrt(var_i var_j) {worst:.2e}")  # fmt: skip
    totals = {(k, on): [] for k in cases for on in (True, False)}
    parts = {(k, on): [] for k in cases for on in (True, False)}
    for repeat in range(options.repeats):
        for name, run in cases.items():  # interleaved, order alternated
            for on in (True, False) if repeat % 2 == 0 else (False, True):
                side(on)
                _SPENT.clear()
                start = time.process_time()
                jax.block_until_ready(run())
                totals[name, on].append(time.process_time() - start)
                parts[name, on].append(sum(_SPENT))
    side(True)
    print(f"{'case, float32 (process CPU s)':30} {'A curve_fit':>11} {'cov':>6} {'share':>6} "
          f"{'B curve_fit':>11} {'cov':>6} {'share':>6}")  # fmt: skip
    for name in cases:
        row = []
        for on in (True, False):
            total = statistics.median(totals[name, on])
            part = statistics.median(parts[name, on])
            share = statistics.median(p / t for p, t in zip(parts[name, on], totals[name, on]))
            row.append(f"{total:11.3f} {part:6.3f} {share:6.1%}")
        print(f"{name:30} " + " ".join(row))


if __name__ == "__main__":
    jax.config.update("jax_enable_x64", True)
    main()
