"""Status-truth families of issue 59 (part of the status_truth suite): starts at a
stationary point that is no minimum (maxima, saddle points; ``minimize`` with L-BFGS,
GradientDescent and Optax, ``least_squares`` with LM and GN), in three units of the
objective; and GradientDescent rows (stiff quadratics, and the minimize status-truth
problems of :mod:`fixedopt.testing_problems`).

A stationary-start row is accurate when its value is within ``sqrt(eps) max(|f*|,
eps (f(x0) - f*))`` of the value ``f*`` of the problem's local minima (all equal here,
closed forms); truthful when CONVERGED exactly if accurate."""

import math

import jax.numpy as jnp
import numpy as np
import optax

import fixedopt
from fixedopt import testing_problems as known

ROTATION = np.array([[0.8, -0.6], [0.6, 0.8]])  # a saddle whose axes are not the entries'


def _bump(x):
    return 1 - jnp.sum(x**2) + jnp.sum(x**4)


def _saddle(x):
    return x[0] ** 2 - x[1] ** 2 + x[1] ** 4


def _rotated_saddle(x):
    return _saddle(jnp.asarray(ROTATION, x.dtype) @ x)


def _saddle_residuals(x):
    return jnp.stack([x[0] ** 2 - 1.0, x[1]])


def _rotated_residuals(x):
    return _saddle_residuals(jnp.asarray(ROTATION, x.dtype) @ x)


def _wells(x):
    return x**2 - 1.0


# name: (function, n, value at the start, value of the local minima); every start is 0.
MINIMIZE_STARTS = {
    "maximum n=2": (_bump, 2, 1.0, 0.5),
    "maximum n=20": (_bump, 20, 1.0, -4.0),
    "saddle": (_saddle, 2, 0.0, -0.25),
    "rotated saddle": (_rotated_saddle, 2, 0.0, -0.25),
}
RESIDUAL_STARTS = {  # 0.5 |r|^2
    "saddle": (_saddle_residuals, 2, 0.5, 0.0),
    "rotated saddle": (_rotated_residuals, 2, 0.5, 0.0),
    "maximum n=20": (_wells, 20, 10.0, 0.0),
}


def _minimizers():
    return {"LBFGS": None, "GradientDescent": fixedopt.GradientDescent(),
            "Optax(adam)": fixedopt.Optax(optax.adam(0.01))}  # fmt: skip


def stationary_starts(dtypes, quick: bool = False) -> list[dict]:
    """Every stationary-start problem x solver x dtype x objective scale (quick: the
    first problem of each kind, every solver)."""
    rows = []
    least = {"LM": None, "GN": fixedopt.GaussNewton()}
    minimize, residual = MINIMIZE_STARTS.items(), RESIDUAL_STARTS.items()
    if quick:  # the smoke (tests/test_benchmarks.py): 5 solves, not 18
        minimize, residual = list(minimize)[:1], list(residual)[:1]
    cases = [(name, "minimize", solver_name, solver, *problem)
             for name, problem in minimize
             for solver_name, solver in _minimizers().items()]  # fmt: skip
    cases += [(name, "least_squares", solver_name, solver, *problem)
              for name, problem in residual
              for solver_name, solver in least.items()]  # fmt: skip
    for name, call, solver_name, solver, fun, n, start, minimum in cases:
        for dtype in dtypes:
            scales = np.asarray(known.SCALES)
            x0 = jnp.zeros((len(scales), n), dtype)
            if call == "minimize":
                solution = fixedopt.minimize(
                    lambda x, s, fun=fun: s * fun(x), x0, False, args=(jnp.asarray(scales, dtype),),
                    batched=True, solver=solver,
                )  # fmt: skip
            else:
                root = jnp.asarray(np.sqrt(scales), dtype)
                solution = fixedopt.least_squares(
                    lambda x, s, fun=fun: s * fun(x), x0, False, args=(root,), batched=True,
                    solver=solver,
                )  # fmt: skip
            eps = float(np.finfo(dtype).eps)
            for row, scale in enumerate(scales):
                value = float(solution.value[row]) / scale
                allowed = math.sqrt(eps) * max(abs(minimum), eps * (start - minimum))
                accurate = bool(value - minimum <= allowed)
                converged = bool(solution.converged[row])
                status = fixedopt.Status(int(solution.status[row])).name
                rows.append({"kind": "stationary_start", "family": f"{call} {name}",
                             "solver": solver_name, "dtype": np.dtype(dtype).name,
                             "scale": float(scale), "status": status,
                             "steps": int(solution.steps[row]), "value": value,
                             "accurate": accurate, "truthful": accurate == converged})  # fmt: skip
    return rows


def _stiff(a):
    """``a x0^2 + (x1 - 3)^2 / 2`` as residuals (minimum 0 at (0, 3))."""
    return lambda x: jnp.stack([jnp.sqrt(2.0 * a) * x[0], x[1] - 3.0])


STIFF = {f"stiff a={a:g}": known.MinimizeProblem(_stiff(a), ((1.0, 0.0), (-2.0, 10.0)))
         for a in (1e2, 1e4, 1e6, 1e8)}  # fmt: skip


def family_summary(rows: list[dict], kind: str, key: str) -> list[dict]:
    """Per ``key`` (family or solver), solver and dtype: rows, truthful, false CONVERGED."""
    out = []
    groups = dict.fromkeys((r[key], r["solver"], r["dtype"]) for r in rows)
    for group, solver, dtype in groups:
        mine = [r for r in rows if (r[key], r["solver"], r["dtype"]) == (group, solver, dtype)]
        out.append({"kind": kind, key: group, "solver": solver, "dtype": dtype,
                    "rows": len(mine), "truthful": sum(r["truthful"] for r in mine),
                    "false_converged": sum(r["status"].startswith("CONVERGED")
                                           and not r["accurate"] for r in mine)})  # fmt: skip
    return out
