"""The per-row NumPy baselines: scipy L-BFGS-B, scipy least_squares and lmfit in a loop.

Each solves one row at a time, as a user without a batched solver would. On a large
batch they solve the first ``settings.loop_rows`` rows only (rows are i.i.d.) and
their time is extrapolated to the batch: ``Runner.scale = B / rows``.
"""

from __future__ import annotations

import warnings

import numpy as np
import scipy.optimize

from benchmarks.methods import RowResults, Runner, Settings, Skipped
from benchmarks.problems import Problem


def row_bounds(problem: Problem, i: int):
    """Row ``i``'s ``(lower, upper)`` with ``lower == upper == x0`` on fixed entries."""
    n, fixed, x0 = problem.size, problem.fixed[i], problem.x0[i]
    lower, upper = problem.bounds or (np.full(n, -np.inf), np.full(n, np.inf))
    return np.where(fixed, x0, lower), np.where(fixed, x0, upper)


def loop_rows(problem: Problem, settings: Settings) -> np.ndarray:
    count = problem.batch if settings.loop_rows is None else settings.loop_rows
    return np.arange(min(problem.batch, count))


def loop_runner(problem: Problem, settings: Settings, solve_row, notes=()) -> Runner:
    """Solve rows one by one; ``solve_row(i) -> (x, value, steps, converged)``."""
    rows = loop_rows(problem, settings)

    def collect(results):
        x, value, steps, converged = zip(*results)
        return RowResults(np.stack(x), np.array(value), np.array(steps), np.array(converged),
                          rows)  # fmt: skip

    if rows.size < problem.batch:
        notes = (*notes, f"solved {rows.size} of {problem.batch} rows (extrapolated)")
    call = lambda: [solve_row(i) for i in rows]
    return Runner(call, collect, compiles=False, scale=problem.batch / rows.size,
                  notes=tuple(notes))  # fmt: skip


def scipy_lbfgsb_loop(problem: Problem, settings: Settings) -> Runner:
    """scipy ``minimize(method="L-BFGS-B", jac=True)`` with ``lb == ub`` on fixed entries.

    The reference. With ``ftol=0`` scipy also stops (with ``success``) when a step no
    longer decreases ``f``: a row counts as converged only if its gradient meets ``gtol``.
    """
    options = {"gtol": settings.gtol, "ftol": 0.0, "maxiter": settings.max_steps,
               "maxfun": 10 * settings.max_steps}  # fmt: skip
    bounds = {i: row_bounds(problem, i) for i in loop_rows(problem, settings)}  # not timed

    def solve_row(i):
        lower, upper = bounds[i]
        r = scipy.optimize.minimize(problem.numpy_fun, problem.x0[i], args=problem.row_args(i),
                                    jac=True, method="L-BFGS-B", bounds=list(zip(lower, upper)),
                                    options=options)  # fmt: skip
        projected = r.x - np.clip(r.x - r.jac, lower, upper)
        gradient = np.max(np.abs(projected[~problem.fixed[i]]), initial=0.0)
        return r.x, r.fun, r.nit, bool(gradient <= settings.gtol)

    return loop_runner(problem, settings, solve_row)


def scipy_least_squares_loop(problem: Problem, settings: Settings) -> Runner:
    """scipy ``least_squares`` (trf) on each row's free parameters, analytic Jacobian.

    scipy rejects ``lb == ub``, so each row is reduced by hand (free parameters
    scattered into a copy of ``x0``). Stops on scipy's scaled-gradient rule alone.
    """

    def solve_row(i):
        free, full, args = ~problem.fixed[i], problem.x0[i].copy(), problem.row_args(i)
        lower, upper = row_bounds(problem, i)

        def reduced(z):
            full[free] = z
            return problem.numpy_residual(full, *args)

        def jacobian(z):
            full[free] = z
            return problem.numpy_jacobian(full, *args)[:, free]

        r = scipy.optimize.least_squares(
            reduced, problem.x0[i][free], jac=jacobian, bounds=(lower[free], upper[free]),
            ftol=None, xtol=None, gtol=settings.gtol, max_nfev=settings.max_steps,
        )  # fmt: skip
        x = problem.x0[i].copy()
        x[free] = r.x
        return x, r.cost, r.njev, r.status == 1

    return loop_runner(problem, settings, solve_row, notes=("steps = Jacobian evaluations",))


def lmfit_loop(problem: Problem, settings: Settings) -> Runner:
    """lmfit ``minimize(method="leastsq")`` per row, fixed parameters ``vary=False``:
    named ``Parameters`` with bounds, MINPACK's finite-difference Jacobian."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import lmfit
    except Exception as error:  # any failure to import is a reason to skip
        raise Skipped(
            f"lmfit does not import ({type(error).__name__}); pip install lmfit"
        ) from None
    names = [f"p{j}" for j in range(problem.size)]
    lower, upper = problem.bounds

    def solve_row(i):
        params = lmfit.Parameters()
        for j, name in enumerate(names):
            vary = not problem.fixed[i, j]
            params.add(name, value=problem.x0[i, j], vary=vary, min=lower[j] if vary else -np.inf,
                       max=upper[j] if vary else np.inf)  # fmt: skip
        fcn = lambda p, *args: problem.numpy_residual(np.array([p[k].value for k in names]), *args)
        r = lmfit.minimize(fcn, params, args=problem.row_args(i), method="leastsq",
                           calc_covar=False, max_nfev=settings.max_steps * (problem.size + 1),
                           ftol=1e-10, xtol=1e-10)  # fmt: skip
        x = np.array([r.params[k].value for k in names])
        return x, 0.5 * float(np.sum(r.residual**2)), r.nfev, r.success

    notes = ("steps = residual evaluations (finite-difference Jacobian)",
             "ftol = xtol = 1e-10 (MINPACK has no gradient-norm rule)")  # fmt: skip
    return loop_runner(problem, settings, solve_row, notes=notes)
