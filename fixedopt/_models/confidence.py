"""``ModelResult.conf_interval``: lmfit's profile confidence intervals, batched.

For a parameter ``p`` and a level ``sigma`` (probability ``erf(sigma / sqrt 2)``), a
limit is the value ``v`` of ``p`` at which the fit with ``p`` held at ``v`` (the others
refitted) has the chi-square the F-test puts at that probability, lmfit's ``f_compare``
with one parameter held: ``chisqr(v) = chisqr * (1 + F.ppf(prob, 1, nfree) / nfree)``.
A Poisson fit's limits are the profile likelihood's (Wilks): ``deviance(v) = deviance +
chi2.ppf(prob, 1)``.
Every fit, parameter, side and level is one row of ONE batched ``least_squares`` per
step of the search (a new held value is data: every step reuses the compiled solve).

The search runs on ``u(v) = sqrt(chisqr(v) - chisqr)``, which is linear in ``v`` for a
linear model: it starts at the quadratic estimate ``best +/- stderr * sqrt(F.ppf)``
and takes secant steps through the last two points, bisecting the bracket when a step
leaves it, until ``u`` is within ``rtol`` of its target.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from fixedopt._entry.minimize import least_squares
from fixedopt._inputs import arrays as host_arrays


class ConfidenceIntervals(dict[str, np.ndarray]):
    """``{name: (B, 2 * levels + 1)}`` limits (lmfit's order) with their
    ``probabilities`` (one per column; 0 for the best value) and lmfit's report."""

    def __init__(self, limits: dict[str, np.ndarray], probabilities: tuple[float, ...]):
        super().__init__(limits)
        self.probabilities = probabilities

    def report(self, row: int = 0, with_offset: bool = True, ndigits: int = 5) -> str:
        """lmfit's ``ci_report`` of fit ``row`` (the parameters fitted in it): each limit
        as an offset from the best value (``with_offset``), ``ndigits`` decimals."""
        from fixedopt._models.report import ci_report

        best = len(self.probabilities) // 2
        rows = {name: list(zip(self.probabilities, table[row], strict=True))
                for name, table in self.items() if np.isfinite(table[row, best])}  # fmt: skip
        return ci_report(rows, with_offset, ndigits)


class FitProblem(NamedTuple):
    """What a fit solved, kept by its ``ModelResult`` for the profile fits."""

    residual: Any  # the residual of the covariance (Pearson's for a Poisson fit)
    args: tuple[Any, ...]
    axes: tuple[Any, ...]
    fun: Any  # the function least_squares solved, its args and their axes
    solve_args: tuple[Any, ...]
    solve_axes: tuple[Any, ...]
    counts: Any  # (B, m) for a Poisson fit, else None
    lower: np.ndarray  # (B, k)
    upper: np.ndarray  # (B, k)
    bounded: bool
    options: dict[str, Any]  # the keywords of least_squares the fit was given

    def solve_inputs(
        self, rows: np.ndarray | None = None
    ) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """The ``args`` and keywords of ``least_squares`` for the fits ``rows`` (every
        fit by default): the bounds, the Poisson counts and the caller's keywords."""
        take = slice(None) if rows is None else jnp.asarray(rows)
        args = tuple(
            a if axis is None else jax.tree.map(lambda leaf: leaf[take], a)
            for a, axis in zip(self.solve_args, self.solve_axes, strict=True)
        )
        bounds = (host_arrays.asarray(self.lower[take]), host_arrays.asarray(self.upper[take]))
        options: dict[str, Any] = dict(
            bounds=bounds if self.bounded else None,
            batched=True,
            args_axes=self.solve_axes,
            **self.options,
        )
        if self.counts is not None:
            options.update(estimator="poisson", counts=self.counts[take])
        return args, options


class _Jobs(NamedTuple):
    """One profile search per entry: its fit, column, side and target."""

    row: np.ndarray
    column: np.ndarray
    side: np.ndarray  # -1 or +1
    level: np.ndarray  # the index of its sigma
    best: np.ndarray  # the best value of the held parameter
    chisqr: np.ndarray  # the best fit's chi-square (a Poisson fit's deviance)
    target: np.ndarray  # the target of u = sqrt(chisqr(v) - chisqr)
    start: np.ndarray  # the quadratic estimate of the limit


def _probabilities(sigmas: Sequence[float]) -> list[float]:
    """lmfit's: ``erf(sigma / sqrt 2)``, a ``sigma`` below 1 being the probability."""
    return [s if s < 1 else math.erf(s / math.sqrt(2.0)) for s in sorted(sigmas)]


def _jobs(result: Any, columns: list[int], probs: list[float], chosen: np.ndarray) -> _Jobs:
    from scipy.stats import chi2, f

    vector = result.problem.residual.plan.vector
    free = ~np.asarray(result.solution.fixed)
    free &= (np.asarray(result.success) & chosen)[:, None]  # a failed fit has no interval
    picks = [(b, j, s, k) for b in range(free.shape[0]) for j in columns if free[b, j]
             for s in (-1, 1) for k in range(len(probs))]  # fmt: skip
    if not picks:
        raise ValueError("conf_interval: the parameters named are fitted in no fit")
    row, column, side, level = (np.array(a, int) for a in zip(*picks, strict=True))
    stderr = np.array([result.stderr[vector[j]][b] for b, j in zip(row, column, strict=True)])
    best = np.asarray(result.solution.x)[row, column]
    if result.estimator == "poisson":  # Wilks: the deviance rises by chi2.ppf(prob, 1)
        quantile = chi2.ppf(np.array(probs)[level], 1)
        baseline, target = result.deviance[row], np.sqrt(quantile)
    else:  # lmfit's F-test on chisqr; stderr is scaled by the reduced chi-square
        quantile = f.ppf(np.array(probs)[level], 1, result.nfree[row])
        baseline = result.chisqr[row]
        target = np.sqrt(baseline * quantile / result.nfree[row])
    start = best + side * stderr * np.sqrt(quantile)
    return _Jobs(row, column, side, level, best, baseline, target, start)


Refit = Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]


def held_refit(result: Any, rows: np.ndarray, held: np.ndarray) -> Refit:
    """``refit(x) -> (chisqr, x)``: the fits ``rows`` (one per entry, of ``result``)
    refitted from ``x`` clipped into their bounds, the entries ``held`` (``(len(rows),
    k)`` booleans) held where ``x`` has them, in one batched solve; ``chisqr`` is a
    Poisson fit's deviance. Shared by the profile searches and the 2-D grids."""
    problem = result.problem
    lower, upper = problem.lower[rows], problem.upper[rows]
    fixed = np.asarray(result.solution.fixed)[rows] | held
    args, options = problem.solve_inputs(rows)

    def refit(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        start = jnp.asarray(np.clip(x, lower, upper))
        solution = least_squares(problem.fun, start, jnp.asarray(fixed), args=args, **options)
        return 2.0 * np.asarray(solution.value), np.asarray(solution.x)

    return refit


def picked_fits(result: Any, rows: Any) -> np.ndarray:
    """``(B,)`` booleans: the fits named by ``rows`` (every fit for None), each checked."""
    picked = np.zeros(result.data.shape[0], bool)
    if rows is None:
        picked[:] = True
    else:
        picked[[result.check_row(r, "rows") for r in np.ravel(rows).tolist()]] = True
    return picked


def fit_problem(result: Any, caller: str) -> Any:
    """``result.problem``, or a ValueError saying ``caller`` needs a ``Model.fit`` result."""
    if result.problem is None:
        raise ValueError(f"{caller} needs the result of Model.fit")
    return result.problem


def _profile(result: Any, jobs: _Jobs) -> Any:
    """``chisqr(v, x)`` (a Poisson fit's deviance) of every job: one batched solve, each
    row with its column held at ``v`` and started from ``x`` (the last solve's, so each
    step starts near its end); and the bounds of the held columns."""
    problem = result.problem
    index = (np.arange(len(jobs.row)), jobs.column)
    held = np.zeros((len(jobs.row), problem.lower.shape[1]), bool)
    held[index] = True
    refit = held_refit(result, jobs.row, held)

    def chisqr(v: np.ndarray, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        x = np.array(x)
        x[index] = v
        return refit(x)

    return chisqr, problem.lower[jobs.row][index], problem.upper[jobs.row][index]


def _next(v: np.ndarray, u: np.ndarray, previous: tuple[np.ndarray, np.ndarray],
          bracket: tuple[np.ndarray, np.ndarray], jobs: _Jobs) -> np.ndarray:  # fmt: skip
    """The secant step through the last two points, bisecting where it leaves the
    bracket; with no upper end yet, at most 4x (and at least 1.5x) as far out."""
    low_v, high_v = bracket  # the last values below and above the target
    v1, u1 = previous
    with np.errstate(divide="ignore", invalid="ignore"):
        step = v + (jobs.target - u) * (v - v1) / (u - u1)
    known = np.isfinite(high_v)
    inside = (step - low_v) * (step - high_v) < 0
    bisect = 0.5 * (low_v + high_v)
    out = low_v - jobs.best  # the distance out with u still below target
    far, near = jobs.best + 4.0 * out, jobs.best + 1.5 * out
    beyond = np.where(np.isfinite(step), step, far)
    beyond = np.where(jobs.side * (beyond - far) > 0, far, beyond)
    beyond = np.where(jobs.side * (beyond - near) < 0, near, beyond)
    return np.asarray(np.where(known, np.where(inside, step, bisect), beyond))


def conf_interval(result: Any, names: Sequence[str] | None = None,
                  sigmas: Sequence[float] = (1, 2, 3), rtol: float = 1e-6,
                  maxiter: int = 30, rows: Any = None) -> ConfidenceIntervals:  # fmt: skip
    """The profile confidence limits of ``names`` (by default every fitted parameter)
    in every fit (or in the fits ``rows``): ``{name: (B, 2 * len(sigmas) + 1)}``,
    lmfit's order (the lower limits from the widest in, the best value, the upper
    limits); NaN where the parameter is not fitted in that fit, the fit did not converge
    or is not in ``rows``; ``-inf``/``inf`` where a bound (or a chi-square that stops
    rising) comes first."""
    vector = fit_problem(result, "conf_interval").residual.plan.vector
    names = list(names) if names is not None else [n for n in vector if any(
        n in varied for varied in result.varying)]  # fmt: skip
    unknown = [n for n in names if n not in vector]
    if unknown:
        raise ValueError(f"conf_interval profiles fitted parameters; not fitted: {unknown}")
    probs = _probabilities(sigmas)
    jobs = _jobs(result, [vector.index(n) for n in names], probs, picked_fits(result, rows))
    limits = _search(result, jobs, rtol, maxiter)
    table = _table(result, names, jobs, limits, len(probs), vector)
    return ConfidenceIntervals(table, (*probs[::-1], 0.0, *probs))


def _tolerance(jobs: _Jobs, rtol: float, dtype: Any) -> np.ndarray:
    """How close ``u`` must come to its target: ``rtol`` of it, or the rounding of ``u``
    where that is coarser. ``u**2`` is the difference of two chi-squares, each found to
    a few ``eps`` of itself (the profile fit stops at ``ftol = eps``), so ``u`` is known
    to about ``16 eps chisqr / target`` (with a margin): 3e-5 of the target in float32
    on 40 points, 3e-4 on 400, where ``rtol = 1e-6`` is never met; in float64 (``eps``
    1e-16) it stays far below ``rtol``."""
    eps = float(np.finfo(dtype).eps)
    target = jobs.target
    rounding = 16.0 * eps * np.abs(jobs.chisqr) / np.where(target > 0, target, 1.0)
    return np.asarray(np.maximum(rtol * target, rounding))


def _search(result: Any, jobs: _Jobs, rtol: float, maxiter: int) -> np.ndarray:
    chisqr, lowest, highest = _profile(result, jobs)
    x = np.asarray(result.solution.x)[jobs.row]
    v, previous = np.clip(jobs.start, lowest, highest), (jobs.best, np.zeros_like(jobs.best))
    nan = np.full_like(jobs.best, np.nan)
    bracket = (jobs.best.copy(), nan.copy())
    limits, done = nan.copy(), np.zeros(len(v), bool)
    at_bound = np.where(jobs.side > 0, highest, lowest)
    tolerance = _tolerance(jobs, rtol, x.dtype)
    for _ in range(maxiter):
        value, x = chisqr(v, x)
        u = np.sqrt(np.maximum(value - jobs.chisqr, 0.0))
        found = ~done & (np.abs(u - jobs.target) <= tolerance)
        limits[found], done = v[found], done | found
        # a bound first, or a chi-square that stops rising below the target (lmfit's
        # min_rel_change of 1e-5, on the probability): no limit on this side
        flat = (u - previous[1] <= 1e-5 * u) & np.isnan(bracket[1])
        blocked = ~done & (u < jobs.target) & ((v == at_bound) | flat)
        limits[blocked], done = jobs.side[blocked] * np.inf, done | blocked
        if done.all():
            return limits
        below = u < jobs.target
        bracket = (np.where(below, v, bracket[0]), np.where(below, bracket[1], v))
        step = _next(v, u, previous, bracket, jobs)
        previous, v = (v, u), np.where(done, v, np.clip(step, lowest, highest))
    warnings.warn(f"conf_interval: {int((~done).sum())} limits not found in {maxiter} steps "
                  "(NaN)", RuntimeWarning, stacklevel=3)  # fmt: skip
    return limits


def _table(result: Any, names: list[str], jobs: _Jobs, limits: np.ndarray, levels: int,
           vector: tuple[str, ...]) -> dict[str, np.ndarray]:  # fmt: skip
    rows = result.data.shape[0]
    out = {}
    for name in names:
        table = np.full((rows, 2 * levels + 1), np.nan)
        j = vector.index(name)
        fitted = np.isin(np.arange(rows), jobs.row[jobs.column == j])
        table[fitted, levels] = result.best_values[name][fitted]
        for i in np.flatnonzero(jobs.column == j):
            level = jobs.level[i]
            where = levels - 1 - level if jobs.side[i] < 0 else levels + 1 + level
            table[jobs.row[i], where] = limits[i]
        out[name] = table
    return out
