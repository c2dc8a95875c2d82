"""The status_truth suite (defaults only): statuses and digits of fits in other units;
CONVERGED exactly when within 100 sqrt(eps) on the problems of Moré, Garbow and Hillstrom;
``minimize`` on its status-truth cases (problem x start x dtype x scale), with L-BFGS
and GradientDescent (also on stiff quadratics); problems and judge from
:mod:`fixedopt.testing_problems`; the families of issue 59: bounded fits in other units,
costs that underflow, float32 bi-exponential decays (:mod:`benchmarks.status_families`)
and stationary starts that are no minimum (:mod:`benchmarks.status_starts`)."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import scipy.optimize

import fixedopt
from benchmarks import status_families, status_starts
from benchmarks.status_families import status_names
from fixedopt import testing_problems as known

FITS = (  # (label, call, model, data, units of each parameter: 1 = the data's, 0 = none)
    ("least_squares (LM), decay", fixedopt.least_squares, known.decay, known.decay_batch,
     [1, 0, 1]),
    ("minimize (LBFGS), decay", fixedopt.minimize, known.decay, known.decay_batch, [1, 0, 1]),
    ("minimize (LBFGS), hyperbola", fixedopt.minimize, known.hyperbola, known.hyperbola_batch,
     [1, 1, 1]),
)  # fmt: skip
DTYPES = (np.float32, np.float64)
TIGHT = {"method": "lm", "xtol": 1e-15, "ftol": 1e-15, "gtol": 1e-15}  # MINPACK's references


def units(fits, dtypes) -> list[dict]:
    """Statuses and correct digits of each fit in three units and each dtype."""
    rows = []
    for label, call, model, batch, units in fits:
        x0, fixed, y = batch()
        reference = known.reference_fits(x0, fixed, y, model)
        fun = model
        if call is fixedopt.minimize:
            fun = lambda p, y, model=model: 0.5 * jnp.sum(model(p, y) ** 2)
        for dtype in dtypes:
            for scale in (1e-6, 1.0, 1e6):
                factor = np.where(np.array(units) == 1, scale, 1.0)
                start, args = jnp.asarray(x0 * factor, dtype), (jnp.asarray(y * scale, dtype),)
                solution = call(fun, start, fixed, args=args, batched=True)
                x = np.asarray(solution.x, float) / factor
                error = np.max(np.abs(x - reference) / np.abs(reference), axis=1)
                digits = [round(float(-math.log10(max(e, 1e-17))), 1) for e in error]
                rows.append({"kind": "units", "solver": label, "dtype": np.dtype(dtype).name,
                             "scale": scale, "statuses": status_names(solution),
                             "digits": digits})  # fmt: skip
    return rows


def truth(problems, dtypes) -> list[dict]:
    """Per problem, solver and dtype: status, steps, error, accurate, truthful."""
    solvers = {"LM": fixedopt.LevenbergMarquardt(), "GN": fixedopt.GaussNewton(),
               "LBFGS": fixedopt.LBFGS()}  # fmt: skip
    rows = []
    for name, problem in problems.items():
        fun = lambda z, problem=problem: np.asarray(problem.residuals(jnp.asarray(z)))
        minima = [scipy.optimize.least_squares(fun, np.asarray(x, float), **TIGHT).x
                 for x, _ in problem.minima]  # fmt: skip
        for (solver_name, solver), dtype in ((s, d) for s in solvers.items() for d in dtypes):
            x0 = jnp.asarray(problem.start, dtype)
            solution = fixedopt.least_squares(problem.residuals, x0, jnp.zeros(x0.shape, bool),
                                              solver=solver, max_steps=2000)  # fmt: skip
            error = min(known.relative_error(np.asarray(solution.x, float), m) for m in minima)
            accurate = bool(error <= 100 * math.sqrt(float(np.finfo(dtype).eps)))
            rows.append({"kind": "truth", "problem": name, "solver": solver_name,
                         "dtype": np.dtype(dtype).name, "status": status_names(solution)[0],
                         "steps": int(solution.steps), "error": float(error), "accurate": accurate,
                         "truthful": accurate == bool(solution.converged)})  # fmt: skip
    return rows


def minimize_cases(problems, dtypes, solver=None) -> list[dict]:
    """``minimize`` (defaults) on every problem, start, dtype and objective scale of
    ``fixedopt.testing_problems``, each row judged there (float64, scipy's polish)."""
    rows = []
    for (name, problem), dtype in ((p, d) for p in problems.items() for d in dtypes):
        cases = [(i, start, scale) for i, start in enumerate(problem.starts)
                 for scale in known.SCALES]  # fmt: skip
        x0 = jnp.asarray([start for _, start, _ in cases], dtype)
        scales = jnp.asarray([scale for *_, scale in cases], dtype)
        fun = known.objective(problem.residuals)
        solution = fixedopt.minimize(fun, x0, False, args=(scales,), batched=True, args_axes=0,
                                     solver=solver)  # fmt: skip
        statuses = status_names(solution)
        for row, (start_index, start, scale) in enumerate(cases):
            verdict = known.judge(problem.residuals, np.asarray(start),
                                           np.asarray(solution.x[row]), dtype)  # fmt: skip
            converged = bool(solution.converged[row])
            scaling = solver.scaling if isinstance(solver, fixedopt.LBFGS) else "auto"
            if solver is not None and not isinstance(solver, fixedopt.LBFGS):
                scaling = type(solver).__name__  # the summary's group: the solver
            rows.append({"kind": "minimize_truth", "scaling": scaling, "problem": name,
                         "start": start_index, "dtype": np.dtype(dtype).name, "scale": scale,
                         "status": statuses[row],
                         "steps": int(solution.steps[row]), "gap": verdict["gap"],
                         "allowed": verdict["allowed"], "error": verdict["error"],
                         "accurate": verdict["accurate"],
                         "truthful": verdict["accurate"] == converged})  # fmt: skip
    return rows


def minimize_summary(rows: list[dict]) -> list[dict]:
    """Per L-BFGS scaling and dtype (and in all): truthful, false CONVERGED, accurate
    rows at max_steps."""
    out = []
    groups = [(scaling, dtype) for scaling in dict.fromkeys(r["scaling"] for r in rows)
              for dtype in (*dict.fromkeys(r["dtype"] for r in rows), "all")]  # fmt: skip
    for scaling, dtype in groups:
        mine = [r for r in rows if r["scaling"] == scaling and dtype in ("all", r["dtype"])]
        out.append({"kind": "minimize_summary", "scaling": scaling, "dtype": dtype,
                    "cases": len(mine),
                    "truthful": sum(r["truthful"] for r in mine),
                    "false_converged": sum(r["status"].startswith("CONVERGED")
                                           and not r["accurate"] for r in mine),
                    "accurate_not_converged": sum(r["accurate"] and not r["truthful"]
                                                  for r in mine),
                    "accurate_at_max_steps": sum(r["accurate"] and r["status"] == "MAX_STEPS"
                                                 for r in mine)})  # fmt: skip
    return out


def summary(rows: list[dict]) -> list[dict]:
    """Per solver and dtype: truthful, converged and accurate rows."""
    out = []
    for solver, dtype in dict.fromkeys((r["solver"], r["dtype"]) for r in rows):
        mine = [r for r in rows if (r["solver"], r["dtype"]) == (solver, dtype)]
        out.append({"kind": "truth_summary", "solver": solver, "dtype": dtype, "rows": len(mine),
                    "truthful": sum(r["truthful"] for r in mine),
                    "converged": sum(r["status"].startswith("CONVERGED") for r in mine),
                    "accurate": sum(r["accurate"] for r in mine)})  # fmt: skip
    return out


def run(quick: bool, args) -> list[dict]:
    """All tables (quick: the first fit, the first MGH problem, the first minimize and
    stiff problems and the first stationary start of each kind, in float64: a smoke
    that every table runs, tests/test_benchmarks.py)."""
    problems = dict(list(known.LEAST_SQUARES.items())[:1]) if quick else known.LEAST_SQUARES
    dtypes = DTYPES[1:] if quick else DTYPES
    rows = truth(problems, dtypes)
    jax.clear_caches()  # one process holding every table's programs ran out of memory maps
    chosen = dict(list(known.MINIMIZE.items())[:1]) if quick else known.MINIMIZE
    stiff = dict(list(status_starts.STIFF.items())[:1]) if quick else status_starts.STIFF
    cases = [*minimize_cases(chosen, dtypes),
             *minimize_cases(chosen, dtypes, fixedopt.LBFGS(scaling="hessian"))]  # fmt: skip
    descent = fixedopt.GradientDescent()
    cases += [*minimize_cases(stiff, dtypes, descent),
              *minimize_cases(chosen, dtypes, descent)]  # fmt: skip
    lies = [r | {"kind": "minimize_lie"} for r in cases if not r["truthful"]]

    jax.clear_caches()
    starts = status_starts.stationary_starts(dtypes, quick)
    stationary = status_starts.family_summary(starts, "stationary_summary", "family")
    jax.clear_caches()
    return (units(FITS[:1] if quick else FITS, dtypes) + summary(rows) + rows
            + minimize_summary(cases) + stationary + lies + cases + starts
            + status_families.run(dtypes, quick))  # fmt: skip
