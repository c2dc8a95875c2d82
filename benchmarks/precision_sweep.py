"""A one-off study: least-squares and minimize rows that end CONVERGED while their
gradient, checked in float64 at the returned x (free entries), is far above ``abs_gtol``
(relative tests off), by solver -- docs/decisions.md "The last false PRECISION verdicts"
(after "Gauss-Newton's give-up by the gradient", whose ``benchmarks/gn_precision.py``
this extends by ``--tols``). Run it from the root of each tree compared:
``python -m benchmarks.precision_sweep --solver lm --tols 1e-3,1e-4,3e-5`` and
``python -m benchmarks.precision_sweep --solver gd --minimize --dtypes float32``.

Each case prints its statuses and the rows CONVERGED at a float64 gradient beyond
``2 abs_gtol`` (the float32 gradient's rounding), with the largest such gradient."""

import argparse
import collections
import json
import time

import jax
import jax.numpy as jnp
import numpy as np

import fixedopt
from fixedopt.testing_problems import BATCHED

TOLS = (1e-3, 1e-4)
OFF = {"gtol": 0.0, "ftol": 0.0, "xtol": 0.0}
SOLVERS = {
    "gn": fixedopt.GaussNewton,
    "lm": fixedopt.LevenbergMarquardt,
    "lbfgs": fixedopt.LBFGS,
    "gd": fixedopt.GradientDescent,
}


def rosen_residuals(x):
    odd, even = x[0::2], x[1::2]
    return jnp.concatenate([10.0 * (even - odd**2), 1.0 - odd])


def offset_quadratic(n, rows, seed=0):
    """``F0 + 0.5 sum d_i (x_i - c_i)^2`` (d log-spaced 1 .. 1e4, F0 = 1e4)."""
    rng = np.random.default_rng(seed)
    d = np.geomspace(1.0, 1e4, n)
    c = rng.normal(size=(rows, n))
    x0 = c + rng.normal(size=(rows, n))
    fixed = rng.random((rows, n)) < 0.3
    return d, c, x0, fixed


def grad64(fun, x, args=()):
    with jax.enable_x64(True):
        g = jax.vmap(jax.grad(fun))(jnp.asarray(x, jnp.float64), *args)
        return np.asarray(g)


def floor_of(residuals, x, fixed, args, grad_of):
    """The float64 gradient's max-norm at the float64 minimizer (LM from ``x``) rounded to
    float32: the gradient a float32 point near the minimum cannot go below."""
    with jax.enable_x64(True):
        sol = fixedopt.least_squares(residuals, jnp.asarray(x, jnp.float64), jnp.asarray(fixed),
                                     args=args, abs_gtol=1e-13, batched=True, max_steps=200,
                                     **OFF)  # fmt: skip
        best = np.asarray(sol.x).astype(np.float32).astype(np.float64)
    return grad_of(best)


def report(name, solution, g, abs_gtol, seconds, floor=None):
    status = np.asarray(solution.status)
    reason = np.asarray(solution.reason)
    names = collections.Counter(
        fixedopt.Status(int(s)).name + ("" if r == 0 else f" ({fixedopt.Reason(int(r)).name})")
        for s, r in zip(status, reason)
    )
    converged = status == fixedopt.Status.CONVERGED
    false = converged & (g > 2 * abs_gtol)
    steps = np.asarray(solution.steps)
    row = {"case": name, "statuses": dict(names), "false": int(false.sum()),
           "worst": float(g[false].max()) if false.any() else 0.0,
           "within": float(np.mean(g <= 2 * abs_gtol)),
           "steps_mean": float(steps.mean()), "steps_max": int(steps.max()),
           "g_max": float(g.max()), "g_median": float(np.median(g)),
           "seconds": round(seconds, 1)}  # fmt: skip
    if floor is not None:
        row["floor_max"] = float(floor.max())
        row["above_8_floor"] = int((converged & (g > 2 * abs_gtol) & (g > 8 * floor)).sum())
    print(json.dumps(row), flush=True)
    return row


def solve_rosen(solver, rows, dtype, x64, scale, abs_gtol, least):
    problem = BATCHED["rosen"](rows, 64, 0, dtype)
    x0, fixed = problem.x0, problem.fixed
    with jax.enable_x64(x64):
        t = time.perf_counter()
        kw = dict(abs_gtol=abs_gtol * scale, batched=True, solver=solver, **OFF)
        res = lambda x: np.sqrt(scale) * rosen_residuals(x)
        fun = lambda x: 0.5 * jnp.sum(res(x) ** 2)
        entry = fixedopt.least_squares if least else fixedopt.minimize
        sol = entry(res if least else fun, jnp.asarray(x0, dtype), jnp.asarray(fixed), **kw)
        jax.block_until_ready(sol)
        seconds = time.perf_counter() - t
    x = np.asarray(sol.x, np.float64)
    grad_of = lambda y: np.max(np.abs(np.where(fixed, 0.0, grad64(fun, y))), axis=-1) / scale
    floor = floor_of(lambda y: rosen_residuals(y) * np.sqrt(scale), x, fixed, (), grad_of)
    return sol, grad_of(x), seconds, floor


def solve_offset(solver, rows, dtype, x64, scale, abs_gtol, least):
    d, c, x0, fixed = offset_quadratic(16, rows)
    with jax.enable_x64(x64):
        t = time.perf_counter()
        kw = dict(abs_gtol=abs_gtol * scale, batched=True, args=(jnp.asarray(c, dtype),),
                  solver=solver, **OFF)  # fmt: skip
        dd = jnp.asarray(d, dtype)

        def res(x, c):
            offset = jnp.full((1,), np.sqrt(2e4), x.dtype)
            return np.sqrt(scale) * jnp.concatenate([jnp.sqrt(dd) * (x - c), offset])

        fun = lambda x, c: 0.5 * jnp.sum(res(x, c) ** 2)
        entry = fixedopt.least_squares if least else fixedopt.minimize
        sol = entry(res if least else fun, jnp.asarray(x0, dtype), jnp.asarray(fixed), **kw)
        jax.block_until_ready(sol)
        seconds = time.perf_counter() - t
    x = np.asarray(sol.x, np.float64)
    c = np.asarray(c, dtype).astype(np.float64)  # the solve's rounded data
    grad_of = lambda y: np.abs(np.where(fixed, 0.0, d * (y - c))).max(axis=-1)
    floor = grad_of(np.where(fixed, x, c.astype(np.float32).astype(np.float64)))
    return sol, grad_of(x), seconds, floor


def cases(solver, rows, least, dtypes):
    for problem, solve, tols, tight in (("rosen", solve_rosen, TOLS, 1e-7),
                                        ("offset", solve_offset, (1e-2,), 1e-6)):  # fmt: skip
        if "float32" in dtypes:
            for scale in (1e-6, 1.0, 1e6):
                for tol in tols:
                    yield (f"{problem} f32 s={scale:g} {tol:g}",
                           lambda s=scale, f=solve, t=tol: f(solver, rows, "float32", False, s,
                                                             t, least),
                           tol)  # fmt: skip
            yield (
                f"{problem} f32 tight {tight:g}",
                lambda f=solve, t=tight: f(solver, rows, "float32", False, 1.0, t, least),
                tight,
            )
        if "float64" in dtypes:
            for scale in (1e-6, 1.0, 1e6):
                yield (f"{problem} f64 s={scale:g} {tight:g}",
                       lambda s=scale, f=solve, t=tight: f(solver, rows, "float64", True, s, t,
                                                                 least),
                       tight)  # fmt: skip


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--solver", default="lm", choices=sorted(SOLVERS))
    parser.add_argument("--minimize", action="store_true", help="minimize, not least_squares")
    parser.add_argument("--rows", type=int, default=128)
    parser.add_argument("--dtypes", default="float32,float64")
    parser.add_argument("--only", default="")
    parser.add_argument("--tols", default="1e-3,1e-4")
    args = parser.parse_args()
    global TOLS
    TOLS = tuple(float(t) for t in args.tols.split(","))
    print(json.dumps(vars(args)))
    solver = SOLVERS[args.solver]()
    for name, solve, tol in cases(solver, args.rows, not args.minimize, args.dtypes):
        if args.only and args.only not in name:
            continue
        sol, g, seconds, floor = solve()
        report(name, sol, g, tol, seconds, floor)


if __name__ == "__main__":
    main()
