"""``python -m fixedopt demo``: thousands of noisy spectra, each a sum of Gaussian
peaks, some peak parameters known (fixed) per spectrum, fitted in one batched call."""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any, TypeVar

import jax
import jax.numpy as jnp
import numpy as np

import fixedopt

T = TypeVar("T")
PEAKS = 3
GRID = np.linspace(0.0, 1.0, 200)


def spectrum(params: jax.Array, grid: np.ndarray = GRID) -> jax.Array:
    """``params = [amplitudes (PEAKS), centers (PEAKS), widths (PEAKS), baseline]``."""
    points = jnp.asarray(grid, params.dtype)  # float32 params stay float32
    amplitude, center, width = (
        params[:PEAKS],
        params[PEAKS : 2 * PEAKS],
        params[2 * PEAKS : 3 * PEAKS],
    )
    peaks = amplitude[:, None] * jnp.exp(
        -0.5 * ((points[None, :] - center[:, None]) / width[:, None]) ** 2
    )
    return jnp.sum(peaks, axis=0) + params[-1]


def residuals(params: jax.Array, observed: jax.Array) -> jax.Array:
    """The model spectrum minus the observed one (the fit's residuals)."""
    return spectrum(params) - observed


def make_data(
    batch: int, seed: int, dtype: Any, known: float = 0.35, slotted: bool = False
) -> tuple[np.ndarray, jax.Array, jax.Array, jax.Array, tuple[np.ndarray, np.ndarray]]:
    """True parameters, noisy spectra, starting points, and which parameters are known.

    ``known``: the fraction of centers and widths known (fixed) per spectrum.
    ``slotted``: each peak's center jittered within its own slot of ``[0.15, 0.85]``
    (peaks at least half a slot apart) rather than drawn anywhere: two nearly
    coincident peaks make a spectrum degenerate, a straggler among its batch.
    """
    rng = np.random.default_rng(seed)
    amplitude = rng.uniform(0.5, 2.0, (batch, PEAKS))
    if slotted:
        slot = 0.7 / PEAKS
        center = 0.15 + slot * (np.arange(PEAKS) + rng.uniform(0.25, 0.75, (batch, PEAKS)))
    else:
        center = np.sort(rng.uniform(0.15, 0.85, (batch, PEAKS)), axis=1)
    width = rng.uniform(0.03, 0.08, (batch, PEAKS))
    truth = np.concatenate([amplitude, center, width, rng.uniform(-0.1, 0.1, (batch, 1))], axis=1)
    observed = np.asarray(jax.vmap(spectrum)(jnp.asarray(truth)))
    observed = observed + 0.02 * rng.normal(size=observed.shape)
    # Each spectrum knows a different subset of centers and widths (from a reference).
    fixed = np.zeros(truth.shape, bool)
    fixed[:, PEAKS : 3 * PEAKS] = rng.random((batch, 2 * PEAKS)) < known
    # Starting guesses as a peak finder would give them: centers within a fraction of
    # a width, amplitudes and widths within 20%.
    start = truth * rng.uniform(0.8, 1.2, truth.shape)
    start[:, PEAKS : 2 * PEAKS] = center + 0.3 * width * rng.normal(size=center.shape)
    start[:, -1] = 0.0
    start = np.where(fixed, truth, start)
    lower = np.concatenate([np.zeros(PEAKS), np.zeros(PEAKS), np.full(PEAKS, 0.005), [-1.0]])
    upper = np.concatenate([np.full(PEAKS, 10.0), np.ones(PEAKS), np.full(PEAKS, 0.5), [1.0]])
    observed_, start_ = jnp.asarray(observed, dtype), jnp.asarray(start, dtype)
    return truth, observed_, start_, jnp.asarray(fixed), (lower, upper)


def fit(
    observed: jax.Array, start: jax.Array, fixed: jax.Array, bounds: tuple[np.ndarray, np.ndarray]
) -> fixedopt.Solution:
    """All spectra in one batched ``least_squares`` call."""
    # The default tolerances (from the dtype, scale-invariant) and lanes: the few
    # spectra that need many steps take their own steps while the lanes move on.
    # args_axes: one observed spectrum per row, said explicitly (with 200 spectra of
    # 200 points the shapes alone could not tell).
    return fixedopt.least_squares(
        residuals, start, fixed, args=(observed,), args_axes=(0,), bounds=bounds,
        batched=True, max_steps=200,
    )  # fmt: skip


def scipy_fit(
    observed: np.ndarray,
    start: np.ndarray,
    fixed: np.ndarray,
    bounds: tuple[np.ndarray, np.ndarray],
) -> np.ndarray:
    """scipy.optimize.least_squares on the free parameters of each row (it rejects
    lb == ub), one row at a time: what a user would write without fixedopt."""
    from scipy.optimize import least_squares

    costs = []
    for row in range(start.shape[0]):
        free = ~fixed[row]
        full = start[row].copy()

        def reduced(
            z: np.ndarray, row: int = row, free: np.ndarray = free, full: np.ndarray = full
        ) -> np.ndarray:
            full[free] = z
            return _numpy_residuals(full, observed[row])

        lower, upper = bounds[0][free], bounds[1][free]
        result = least_squares(reduced, start[row][free], bounds=(lower, upper), x_scale="jac")
        costs.append(result.cost)
    return np.array(costs)


def _numpy_residuals(params: np.ndarray, observed: np.ndarray) -> np.ndarray:
    amplitude, center, width = np.split(params[:-1], 3)
    shape = np.exp(-0.5 * ((GRID[None, :] - center[:, None]) / width[:, None]) ** 2)
    residual: np.ndarray = (amplitude[:, None] * shape).sum(axis=0) + params[-1] - observed
    return residual


def line(label: str, value: object) -> None:
    print(f"  {label:<40}{value}")


def timed(function: Callable[..., T], *args: Any) -> tuple[T, float]:
    start = time.perf_counter()
    result = jax.block_until_ready(function(*args))
    return result, time.perf_counter() - start


def demo(batch: int, dtype_name: str, scipy_rows: int, seed: int) -> bool:
    dtype = jnp.float64 if dtype_name == "float64" else jnp.float32
    truth, observed, start, fixed, bounds = make_data(batch, seed, dtype)
    print(
        f"Fitting {batch} noisy spectra ({GRID.size} points; {PEAKS} Gaussian peaks and a "
        f"baseline, {start.shape[1]} parameters each; {dtype_name}).\n{int(fixed.sum())} "
        "parameters are known and fixed, a different set in each spectrum; the others "
        "have bounds.\n"
    )
    _, first_call = timed(fit, observed, start, fixed, bounds)
    solution, seconds = timed(fit, observed, start, fixed, bounds)

    drift = float(jnp.max(jnp.where(fixed, jnp.abs(solution.x - start), 0.0)))
    identical = bool(jnp.all(jnp.where(fixed, solution.x == start, True)))
    counts = np.bincount(np.asarray(solution.status), minlength=len(fixedopt.Status))
    line("rows", batch)
    reasons = np.bincount(np.asarray(solution.reason), minlength=len(fixedopt.Reason))
    line("converged", int(solution.converged.sum()))
    for reason in fixedopt.Reason:
        if reason != fixedopt.Reason.NONE and reasons[reason]:
            line(f"  by the {reason.name} test", reasons[reason])
    for status in fixedopt.Status:
        if status != fixedopt.Status.CONVERGED and counts[status]:
            line(f"  stopped with {status.name}", counts[status])
    line("max |drift| of fixed entries", f"{drift:.1e}  (bit-identical: {identical})")
    line("steps per row (mean / max)", f"{solution.steps.mean():.1f} / {solution.steps.max()}")
    line("time, first call (with compile)", f"{first_call:.2f} s")
    line("time, compiled", f"{seconds:.3f} s ({1e3 * seconds / batch:.3f} ms per spectrum)")
    center_error = np.abs(np.asarray(solution.x, np.float64) - truth)[:, PEAKS : 2 * PEAKS]
    line("median |center error|", f"{np.median(center_error):.1e}")

    if scipy_rows:
        rows = min(scipy_rows, batch)

        def as_numpy(a: jax.Array) -> np.ndarray:
            return np.asarray(a[:rows], np.float64)

        costs, scipy_seconds = timed(
            scipy_fit, as_numpy(observed), as_numpy(start), np.asarray(fixed[:rows]), bounds
        )
        relative = (as_numpy(solution.value) - costs) / np.maximum(np.abs(costs), 1e-12)
        print(f"\n  scipy.optimize.least_squares, row by row on the free parameters ({rows} rows)")
        per_row = scipy_seconds / rows
        line(
            "time per spectrum",
            f"{1e3 * per_row:.3f} ms (fixedopt {per_row * batch / seconds:.0f}x faster)",
        )
        line("fixedopt cost <= scipy's (1e-8 rel.)", f"{np.mean(relative <= 1e-8):.0%} of rows")
    print(f"\nEvery fixed entry bit-identical: {identical}")
    return identical


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m fixedopt", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    command = commands.add_parser("demo", help="fit a batch of noisy spectra (built-in data)")
    command.add_argument("--batch", type=int, default=4096, help="number of spectra")
    command.add_argument("--dtype", choices=["float64", "float32"], default="float64")
    command.add_argument("--scipy-rows", type=int, default=100,
                         help="rows also fitted with scipy for comparison (0: none)")  # fmt: skip
    command.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    jax.config.update("jax_enable_x64", True)
    return 0 if demo(args.batch, args.dtype, args.scipy_rows, args.seed) else 1


if __name__ == "__main__":
    raise SystemExit(main())
