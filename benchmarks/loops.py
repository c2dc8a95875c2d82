"""The per-row NumPy baselines: scipy L-BFGS-B, scipy least_squares and lmfit in a loop.

Each solves one row at a time, as a user without a batched solver would. On a large
batch they solve the first ``settings.loop_rows`` rows only (the rows are i.i.d.) and
their time is extrapolated to the batch: ``Runner.scale = B / rows``.
"""

from __future__ import annotations

import warnings

import numpy as np
import scipy.optimize

from benchmarks.base import RowResults, Runner, Settings, Skipped
from benchmarks.problems import Problem


def _loop_rows(problem: Problem, settings: Settings) -> np.ndarray:
    rows = problem.batch if settings.loop_rows is None else min(problem.batch, settings.loop_rows)
    return np.arange(rows)


def _row_bounds(problem: Problem, i: int):
    """Row ``i``'s ``(lower, upper)`` with ``lower == upper == x0`` on fixed entries."""
    n = problem.size
    lower, upper = problem.bounds or (np.full(n, -np.inf), np.full(n, np.inf))
    fixed = problem.fixed[i]
    return np.where(fixed, problem.x0[i], lower), np.where(fixed, problem.x0[i], upper)


def _loop_runner(problem, rows, solve_row, collect, notes=()) -> Runner:
    def call():
        return [solve_row(i) for i in rows]

    def collect_rows(results):
        return collect(results)._replace(rows=rows)

    if rows.size < problem.batch:
        extrapolated = f"solved {rows.size} of {problem.batch} rows (extrapolated)"
        notes = (*notes, extrapolated)
    return Runner(
        call, collect_rows, compiles=False, scale=problem.batch / rows.size, notes=tuple(notes)
    )


# --- scipy L-BFGS-B ----------------------------------------------------------------------


def scipy_lbfgsb_loop(problem: Problem, settings: Settings) -> Runner:
    """scipy ``minimize(method="L-BFGS-B", jac=True)`` with ``lb == ub`` on fixed entries.

    The reference method: a NumPy objective with its analytic gradient, looped over
    rows. With ``ftol=0`` scipy still stops (with ``success``) when a step no longer
    decreases ``f``; such a row counts as converged only if its gradient meets ``gtol``.
    """
    options = {
        "gtol": settings.gtol,
        "ftol": 0.0,
        "maxiter": settings.max_steps,
        "maxfun": 10 * settings.max_steps,
    }
    bounds = {i: list(zip(*_row_bounds(problem, i))) for i in _loop_rows(problem, settings)}

    def solve_row(i):
        return scipy.optimize.minimize(
            problem.numpy_fun,
            problem.x0[i],
            args=problem.row_args(i),
            jac=True,
            method="L-BFGS-B",
            bounds=bounds[i],
            options=options,
        )

    def collect(results):
        rows = _loop_rows(problem, settings)
        return RowResults(
            x=np.stack([r.x for r in results]),
            value=np.array([r.fun for r in results]),
            steps=np.array([r.nit for r in results]),
            converged=np.array(
                [
                    _projected_gradient_met(r.x, r.jac, problem, i, settings.gtol)
                    for r, i in zip(results, rows)
                ]
            ),
        )

    return _loop_runner(problem, _loop_rows(problem, settings), solve_row, collect)


def _projected_gradient_met(x, grad, problem: Problem, i: int, gtol: float) -> bool:
    """Whether the method's own final gradient meets ``gtol`` on row ``i``'s free entries
    (scipy's ``success`` also counts a stall in ``f`` as success)."""
    lower, upper = _row_bounds(problem, i)
    projected = x - np.clip(x - grad, lower, upper)
    return bool(np.max(np.abs(projected[~problem.fixed[i]]), initial=0.0) <= gtol)


# --- scipy least_squares on the reduced problem ------------------------------------------


def scipy_least_squares_loop(problem: Problem, settings: Settings) -> Runner:
    """scipy ``least_squares`` (trf) on each row's free parameters, analytic Jacobian.

    scipy rejects ``lb == ub``, so each row is reduced by hand: the free parameters are
    scattered into a copy of ``x0`` inside the residual. Stops on the gradient only
    (``ftol = xtol = None``): scipy's scaled-gradient rule with ``gtol``.
    """
    residual, jacobian = problem.least_squares.numpy_residual, problem.least_squares.numpy_jacobian

    def solve_row(i):
        free, full, args = ~problem.fixed[i], problem.x0[i].copy(), problem.row_args(i)
        lower, upper = _row_bounds(problem, i)

        def reduced(z):
            full[free] = z
            return residual(full, *args)

        def reduced_jacobian(z):
            full[free] = z
            return jacobian(full, *args)[:, free]

        result = scipy.optimize.least_squares(
            reduced,
            problem.x0[i][free],
            jac=reduced_jacobian,
            bounds=(lower[free], upper[free]),
            ftol=None,
            xtol=None,
            gtol=settings.gtol,
            max_nfev=settings.max_steps,
        )
        x = problem.x0[i].copy()
        x[free] = result.x
        return x, result.cost, result.njev, result.status == 1

    return _loop_runner(
        problem,
        _loop_rows(problem, settings),
        solve_row,
        _collect_tuples,
        notes=("steps = Jacobian evaluations",),
    )


def _collect_tuples(results) -> RowResults:
    x, value, steps, converged = zip(*results)
    return RowResults(np.stack(x), np.array(value), np.array(steps), np.array(converged))


# --- lmfit with vary=False ---------------------------------------------------------------


def lmfit_loop(problem: Problem, settings: Settings) -> Runner:
    """lmfit ``minimize(method="leastsq")`` per row, fixed parameters ``vary=False``.

    As an lmfit user writes it: named ``Parameters`` with ``min``/``max`` bounds and
    MINPACK's finite-difference Jacobian (lmfit's default; it maps bounded parameters
    through a change of variables). The covariance estimate is switched off.
    """
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import lmfit
    except Exception as error:  # any failure to import is a reason to skip
        raise Skipped(f"lmfit does not import: {type(error).__name__}: {error}") from None
    residual = problem.least_squares.numpy_residual
    n = problem.size
    names = [f"p{j}" for j in range(n)]

    def solve_row(i):
        params = lmfit.Parameters()
        lower, upper = problem.bounds or (np.full(n, -np.inf), np.full(n, np.inf))
        for j, name in enumerate(names):
            vary = not problem.fixed[i, j]
            params.add(
                name,
                value=problem.x0[i, j],
                vary=vary,
                min=lower[j] if vary else -np.inf,
                max=upper[j] if vary else np.inf,
            )

        def fcn(params, *args):
            return residual(np.array([params[name].value for name in names]), *args)

        result = lmfit.minimize(
            fcn,
            params,
            args=problem.row_args(i),
            method="leastsq",
            calc_covar=False,
            max_nfev=settings.max_steps * (problem.size + 1),
            ftol=1e-10,
            xtol=1e-10,
        )
        x = np.array([result.params[name].value for name in names])
        return x, 0.5 * float(np.sum(result.residual**2)), result.nfev, result.success

    return _loop_runner(
        problem,
        _loop_rows(problem, settings),
        solve_row,
        _collect_tuples,
        notes=(
            "steps = residual evaluations (finite-difference Jacobian)",
            "ftol = xtol = 1e-10 (MINPACK has no gradient-norm rule)",
        ),
    )
