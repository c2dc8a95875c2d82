"""``python -m benchmarks.poisson_wall``: Poisson fits of 2D spots whose background is 0
(half of them), with and without a lower bound of 0 on the background.

Without bounds the likelihood is NaN where an expected count reaches 0, and
Levenberg–Marquardt rejects such a step like a non-finite one: a fit whose likelihood
wants the background below the point where a pixel's expected count is 0 stops at that
wall. The table says how each fit stopped and, for the fits that stopped at the wall,
how far their half deviance is above the bounded fit's, a point the unbounded fit
could also have reached (its optimum is at least as good): a positive gap is a fit
that is not at its optimum. Until this stop such rows stopped CONVERGED (PRECISION).

2000 spots 7x7, amplitude 20-200 counts, width 0.8-1.5 pixels, background 0 (even
rows) or 0.01-0.5, float64, starts within 10% of the truth (background at least 0.5).

Writes ``benchmarks/results/<backend>-poisson-wall-<date>.md``.
"""

from __future__ import annotations

import pathlib

import jax
import jax.numpy as jnp
import numpy as np
import scipy.optimize

import fixedopt
from benchmarks import timing

RESULTS = pathlib.Path(__file__).parent / "results"
FITS, SIDE = 2000, 7
REFERENCE_ROWS = 12  # per status, checked against scipy's SLSQP
GRID = np.arange(float(SIDE))


def spot(p):
    amplitude, x0, y0, width, background = p
    yy, xx = np.meshgrid(GRID, GRID, indexing="ij")
    return amplitude * jnp.exp(-((xx - x0) ** 2 + (yy - y0) ** 2) / (2 * width**2)) + background


def spots(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``(counts, starts)`` of ``FITS`` spots."""
    rng = np.random.default_rng(seed)
    background = np.where(np.arange(FITS) % 2 == 0, 0.0, rng.uniform(0.01, 0.5, FITS))
    truth = np.column_stack([rng.uniform(20, 200, FITS), rng.uniform(2.5, 3.5, FITS),
                             rng.uniform(2.5, 3.5, FITS), rng.uniform(0.8, 1.5, FITS),
                             background])  # fmt: skip
    counts = rng.poisson(np.asarray(jax.vmap(spot)(jnp.asarray(truth)))).astype(float)
    starts = truth * rng.uniform(0.9, 1.1, truth.shape)
    starts[:, 4] = np.maximum(starts[:, 4], 0.5)
    return counts, starts


def _statuses(status: np.ndarray) -> str:
    return ", ".join(f"{fixedopt.Status(int(code)).name} {int(np.sum(status == code))}"
                     for code in np.unique(status))  # fmt: skip


# One spot's expected counts and their Jacobian, flat, compiled once for every row.
_pixels = jax.jit(lambda p: spot(p).ravel())
_pixel_jacobian = jax.jit(lambda p: jax.jacfwd(spot)(p).reshape(-1, 5))


def constrained_optimum(counts: np.ndarray, starts: list[np.ndarray]) -> float:
    """The half deviance at the best point of the likelihood's domain (every expected
    count >= 0): scipy's SLSQP with one constraint per pixel, the best of ``starts``."""

    def model(p: np.ndarray) -> np.ndarray:
        return np.asarray(_pixels(p))

    def jacobian(p: np.ndarray) -> np.ndarray:
        return np.asarray(_pixel_jacobian(p))

    def half_deviance(p: np.ndarray) -> float:
        mu = np.maximum(model(p), 1e-300)
        logs = np.where(counts > 0, counts * np.log(np.where(counts > 0, counts, 1.0) / mu), 0.0)
        return float(np.sum(mu - counts + logs))

    def gradient(p: np.ndarray) -> np.ndarray:
        mu = np.maximum(model(p), 1e-300)
        return jacobian(p).T @ (1.0 - counts / mu)

    positive = {"type": "ineq", "fun": model, "jac": jacobian}
    options = {"ftol": 1e-14, "maxiter": 500}
    return min(half_deviance(scipy.optimize.minimize(half_deviance, start, jac=gradient,
                                                     method="SLSQP", constraints=[positive],
                                                     options=options).x)
               for start in starts)  # fmt: skip


def main() -> pathlib.Path:
    jax.config.update("jax_enable_x64", True)
    env = timing.environment()
    counts, starts = spots()
    options = {"counts": counts, "estimator": "poisson", "batched": True}
    lower = [0.0, 0.0, 0.0, 0.1, 0.0]
    fits = {"no bounds": fixedopt.least_squares(spot, jnp.asarray(starts), False, **options),
            "background >= 0": fixedopt.least_squares(
                spot, jnp.asarray(starts), False, bounds=(lower, np.inf), **options)}  # fmt: skip
    bounded = np.asarray(fits["background >= 0"].value)
    stem = RESULTS / f"{env['backend']}-poisson-wall-{env['date']}"
    lines = [f"# {stem.name}", "",
             f"{FITS} Poisson spot fits (7x7, half with background 0), Levenberg–Marquardt "
             "defaults, float64. At the wall: a pixel's expected count below 1e-12 at the "
             "fit's end; `gap`: their half deviance minus the bounded fit's. "
             "`python -m benchmarks.poisson_wall`.", "",
             "| bounds | statuses | at the wall | their statuses | of them, gap > 0 "
             "| gap min / median / max |", "|---|---|---|---|---|---|"]  # fmt: skip
    for name, sol in fits.items():
        lowest = np.min(np.asarray(jax.vmap(spot)(sol.x)).reshape(FITS, -1), axis=1)
        wall = lowest < 1e-12
        row = [name, _statuses(np.asarray(sol.status)), str(int(wall.sum()))]
        row += ["—"] * 3
        if wall.any():
            gaps = np.asarray(sol.value)[wall] - bounded[wall]
            row[3:] = [_statuses(np.asarray(sol.status)[wall]),
                       _statuses(np.asarray(sol.status)[wall][gaps > 0]),
                       f"{gaps.min():.2e} / {np.median(gaps):.2e} / {gaps.max():.2e}"]  # fmt: skip
        lines.append("| " + " | ".join(row) + " |")
    free, bound = fits["no bounds"], fits["background >= 0"]
    lowest = np.min(np.asarray(jax.vmap(spot)(free.x)).reshape(FITS, -1), axis=1)
    lines += ["", f"No bounds, the first {REFERENCE_ROWS} fits at the wall of each status: "
              "half deviance minus the best point of the likelihood's domain (scipy's SLSQP "
              "with every expected count >= 0, from the bounded and the unbounded fit's "
              "points).", "", "| status | fits | above the domain's best: min / median / max |",
              "|---|---|---|"]  # fmt: skip
    for code in np.unique(np.asarray(free.status)[lowest < 1e-12]):
        rows = np.flatnonzero((lowest < 1e-12) & (np.asarray(free.status) == code))
        above = []
        for i in rows[:REFERENCE_ROWS]:
            points = [np.asarray(bound.x[i]), np.asarray(free.x[i])]
            above.append(float(free.value[i]) - constrained_optimum(counts[i].ravel(), points))
        lines.append(f"| {fixedopt.Status(int(code)).name} | {len(above)} | "
                     f"{min(above):.1e} / {np.median(above):.1e} / {max(above):.1e} |")  # fmt: skip
    return timing.write_markdown(stem, lines)


if __name__ == "__main__":
    main()
