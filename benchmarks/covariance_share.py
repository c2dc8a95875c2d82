"""The covariance's share of ``fixedopt.curve_fit``'s time, and ``curve_fit`` against a
vmapped jaxopt ``LevenbergMarquardt`` (issue 61, item 5 and its CPU target).

``curve_fit``'s call of its covariance (``solver_covariance.fit_covariance``) is wrapped
with a CPU timer (its input solution made ready first), so each call of ``curve_fit``
yields its process CPU time and the covariance's part of it. jaxopt's LM
(``solver="cholesky"``, its default tolerances, the fixed entries substituted inside the
residual, no bounds, no covariance) runs under ``jit(vmap)``. Cases: 10,000 decay curves
(the curve_fit suite's: two exponentials and a background, 128 bins, sigma, bounds, tau2 fixed in
half), 2,000 two-Gaussian spectra (8 parameters, 301 points) and Gpufit's protocol (a
2-D Gaussian on 5x5 pixels, 5 parameters, 100,000 fits), float32 and float64; all
interleaved, medians. Run: ``python -m benchmarks.covariance_share [--repeats 5]
[--no-jaxopt]`` (jaxopt on ``PYTHONPATH``).
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings

import jax
import jax.numpy as jnp
import numpy as np

import fixedopt
from benchmarks.curve_fit import BINS, decay, decays
from fixedopt._results import solver_covariance

_SPENT: list[float] = []
_covariance = solver_covariance.fit_covariance


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
    return dict(f=gaussian, x=grid, y=data, p0=start, fixed=np.zeros(start.shape, bool),
                sigma=None, bounds=None)  # fmt: skip


def decay_case(batch: int):
    _truth, data, sigma, fixed, start = decays(batch)
    return dict(f=decay, x=BINS, y=data, p0=start, fixed=fixed, sigma=sigma,
                bounds=(0.0, np.inf))  # fmt: skip


def spectra_case(batch: int):
    """Two Gaussians on a line, 301 points, noise 0.05; the second peak's width fixed
    in a third of the fits."""
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


def ours(case, dtype):
    cast = lambda a: None if a is None else jnp.asarray(a, dtype)
    extra = {} if case["bounds"] is None else {"bounds": case["bounds"]}
    if case["sigma"] is not None:
        extra["sigma"] = cast(case["sigma"])
    inputs = cast(case["x"]), cast(case["y"]), cast(case["p0"])
    fixed = case["fixed"]
    return lambda: fixedopt.curve_fit(case["f"], *inputs, fixed=fixed, batched=True, **extra)


def theirs(case, dtype):
    """jaxopt's LM under jit(vmap): Cholesky, fixed entries substituted in the residual."""
    with warnings.catch_warnings(action="ignore"):
        import jaxopt
    f, x = case["f"], jnp.asarray(case["x"], dtype)

    def residual(p, fixed, values, y, weight):
        return (f(x, *jnp.where(fixed, values, p)) - y) * weight

    solver = jaxopt.LevenbergMarquardt(residual, solver="cholesky", materialize_jac=True)
    run = jax.jit(jax.vmap(lambda p, fixed, y, w: solver.run(p, fixed, p, y, w).params))
    sigma = np.ones_like(case["y"]) if case["sigma"] is None else case["sigma"]
    args = [jnp.asarray(case["p0"], dtype), jnp.asarray(case["fixed"]),
            jnp.asarray(case["y"], dtype), jnp.asarray(1.0 / sigma, dtype)]  # fmt: skip
    return lambda: run(*args)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--no-jaxopt", action="store_true")
    parser.add_argument("--only", default="")
    options = parser.parse_args()
    solver_covariance.fit_covariance = _timed_covariance
    cases = {}
    for dtype in (jnp.float32, jnp.float64):
        name = jnp.dtype(dtype).name
        for label, make in (("decay 10,000", lambda: decay_case(10_000)),
                            ("spectra 2,000", lambda: spectra_case(2_000)),
                            ("gpufit 100,000", lambda: gpufit_case(100_000))):  # fmt: skip
            if options.only and options.only not in label:
                continue
            case = make()
            cases[f"{label} {name}"] = (
                ours(case, dtype),
                None if options.no_jaxopt else theirs(case, dtype),
            )
    for ours_call, theirs_call in cases.values():
        jax.block_until_ready(ours_call())  # compile
        if theirs_call:
            jax.block_until_ready(theirs_call())
    totals = {k: [] for k in cases}
    parts = {k: [] for k in cases}
    peers = {k: [] for k in cases}
    for _ in range(options.repeats):
        for name, (ours_call, theirs_call) in cases.items():  # interleaved
            _SPENT.clear()
            start = time.process_time()
            jax.block_until_ready(ours_call())
            totals[name].append(time.process_time() - start)
            parts[name].append(sum(_SPENT))
            if theirs_call:
                start = time.process_time()
                jax.block_until_ready(theirs_call())
                peers[name].append(time.process_time() - start)
    print(f"{'case (process CPU s)':24} {'curve_fit':>9} {'cov':>7} {'share':>6} "
          f"{'jaxopt':>7} {'speedup':>7}")  # fmt: skip
    for name in cases:
        total, part = statistics.median(totals[name]), statistics.median(parts[name])
        shares = statistics.median(p / t for p, t in zip(parts[name], totals[name]))
        peer = statistics.median(peers[name]) if peers[name] else float("nan")
        ratios = statistics.median(p / t for p, t in zip(peers[name], totals[name])) if peers[
            name] else float("nan")  # fmt: skip
        print(f"{name:24} {total:9.3f} {part:7.3f} {shares:6.1%} {peer:7.3f} {ratios:6.2f}x")


if __name__ == "__main__":
    jax.config.update("jax_enable_x64", True)
    main()
