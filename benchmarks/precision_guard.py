"""A one-off study: rows that end CONVERGED while their gradient, checked in float64 at
the returned x (projected for bounds, free entries only), is far above ``abs_gtol``
(relative tests off) -- the false-verdict class of docs/decisions.md "Flat steps in a
valley". ``python -m benchmarks.precision_guard [--flat 4] [--guard 0|1] [--rows 256]``.

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
from fixedopt._driver import loop
from fixedopt._solvers import levenberg_marquardt
from fixedopt.testing_problems import BATCHED

OFF = {"gtol": 0.0, "ftol": 0.0, "xtol": 0.0}


def rosen_residuals(x):
    odd, even = x[0::2], x[1::2]
    return jnp.concatenate([10.0 * (even - odd**2), 1.0 - odd])


def offset_quadratic(n, rows, seed=0):
    """``F0 + 0.5 sum d_i (x_i - c_i)^2`` (d log-spaced 1 .. 1e4, F0 = 1e4): the
    gradient can fall far below what ``f``'s rounding resolves."""
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


def projected(g, x, fixed, bounds):
    g = np.where(fixed, 0.0, g)
    if bounds is not None:
        lo, hi = (np.asarray(b, x.dtype) for b in bounds)  # the solve's rounded bounds
        g = np.where((x <= lo) & (g > 0), 0.0, g)
        g = np.where((x >= hi) & (g < 0), 0.0, g)
    return np.max(np.abs(g), axis=-1)


def report(name, solution, g, abs_gtol, seconds):
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
           "reported_false": int((converged & (np.asarray(solution.grad_norm)
                                                > 2 * abs_gtol)).sum()),
           "steps_mean": float(steps.mean()), "steps_max": int(steps.max()),
           "seconds": round(seconds, 1)}  # fmt: skip
    print(json.dumps(row), flush=True)
    return row


def solve_rosen(rows, dtype, x64, scale, abs_gtol, bounds=None, least=False):
    problem = BATCHED["rosen"](rows, 64, 0, dtype)
    x0, fixed = problem.x0, problem.fixed
    with jax.enable_x64(x64):
        t = time.perf_counter()
        kw = dict(abs_gtol=abs_gtol * scale, batched=True, **OFF)
        if bounds is not None:
            kw["bounds"] = tuple(jnp.asarray(b, dtype) for b in bounds)
        if least:
            res = lambda x: np.sqrt(scale) * rosen_residuals(x)
            sol = fixedopt.least_squares(res, jnp.asarray(x0, dtype), jnp.asarray(fixed), **kw)
            fun = lambda x: 0.5 * jnp.sum(res(x) ** 2)
        else:
            fun = lambda x: scale * problem.jax_fun(x)
            sol = fixedopt.minimize(fun, jnp.asarray(x0, dtype), jnp.asarray(fixed), **kw)
        jax.block_until_ready(sol)
        seconds = time.perf_counter() - t
    x = np.asarray(sol.x, np.float64)
    bounds = None if bounds is None else tuple(np.asarray(b, dtype).astype(float) for b in bounds)
    g = projected(grad64(fun, x), x, fixed, bounds) / scale
    return sol, g, seconds


def solve_offset(rows, dtype, x64, scale, abs_gtol, least=False):
    d, c, x0, fixed = offset_quadratic(16, rows)
    with jax.enable_x64(x64):
        t = time.perf_counter()
        kw = dict(abs_gtol=abs_gtol * scale, batched=True, args=(jnp.asarray(c, dtype),), **OFF)
        dd = jnp.asarray(d, dtype)
        if least:

            def res(x, c):
                return np.sqrt(scale) * jnp.concatenate(
                    [jnp.sqrt(dd) * (x - c), jnp.full((1,), np.sqrt(2e4), x.dtype)]
                )

            sol = fixedopt.least_squares(res, jnp.asarray(x0, dtype), jnp.asarray(fixed), **kw)
            fun = lambda x, c: 0.5 * jnp.sum(res(x, c) ** 2)
        else:

            def fun(x, c):
                return scale * (1e4 + 0.5 * jnp.sum(jnp.asarray(d, x.dtype) * (x - c) ** 2))

            sol = fixedopt.minimize(fun, jnp.asarray(x0, dtype), jnp.asarray(fixed), **kw)
        jax.block_until_ready(sol)
        seconds = time.perf_counter() - t
    x = np.asarray(sol.x, np.float64)
    c = np.asarray(c, dtype).astype(np.float64)  # the solve's rounded data
    g = projected(grad64(lambda x, c: fun(x, c), x, (c,)), x, fixed, None) / scale
    return sol, g, seconds


def solve_quad(rows, abs_gtol):
    problem = BATCHED["quad"](rows, 64, 0, "float32")
    args = tuple(jnp.asarray(a) for a in problem.args)
    with jax.enable_x64(False):
        t = time.perf_counter()
        sol = fixedopt.minimize(problem.jax_fun, jnp.asarray(problem.x0), problem.fixed,
                                args=args, abs_gtol=abs_gtol, batched=True, **OFF)  # fmt: skip
        jax.block_until_ready(sol)
        seconds = time.perf_counter() - t
    x = np.asarray(sol.x, np.float64)
    g = projected(problem.numpy_fun(x, *problem.args)[1], x, problem.fixed, None)
    return sol, g, seconds


def cases(rows):
    f32, f64 = "float32", "float64"
    for x64 in (False, True):
        for scale in (1e-6, 1.0, 1e6):
            yield (
                f"rosen f32 x64={x64} s={scale:g}",
                lambda x64=x64, scale=scale: solve_rosen(rows, f32, x64, scale, 1e-3),
                1e-3,
            )
    yield "rosen f64 x64 1e-7", lambda: solve_rosen(rows, f64, True, 1.0, 1e-7), 1e-7
    fixed = BATCHED["rosen"](rows, 64, 0, f32).fixed
    bounds = (np.where(fixed, -np.inf, -2.0), np.where(fixed, np.inf, 0.9))
    yield "rosen f32 bounds", lambda: solve_rosen(rows, f32, False, 1.0, 1e-3, bounds), 1e-3
    yield "rosen f64 bounds 1e-7", lambda: solve_rosen(rows, f64, True, 1.0, 1e-7, bounds), 1e-7
    yield "rosen LS f32", lambda: solve_rosen(rows, f32, False, 1.0, 1e-3, least=True), 1e-3
    yield "rosen LS f32 x64", lambda: solve_rosen(rows, f32, True, 1.0, 1e-3, least=True), 1e-3
    yield "rosen LS f32 1e-7", lambda: solve_rosen(rows, f32, False, 1.0, 1e-7, least=True), 1e-7
    yield "rosen LS f64 1e-7", lambda: solve_rosen(rows, f64, True, 1.0, 1e-7, least=True), 1e-7
    for scale in (1e-6, 1.0, 1e6):
        yield (
            f"offset f32 s={scale:g}",
            lambda scale=scale: solve_offset(rows, f32, False, scale, 1e-2),
            1e-2,
        )
    yield "offset f64 1e-6", lambda: solve_offset(rows, f64, True, 1.0, 1e-6), 1e-6
    for scale in (1e-6, 1.0, 1e6):
        yield (
            f"offset LS f32 s={scale:g}",
            lambda scale=scale: solve_offset(rows, f32, False, scale, 1e-2, least=True),
            1e-2,
        )
    yield "offset LS f32 1e-6", lambda: solve_offset(rows, f32, False, 1.0, 1e-6, least=True), 1e-6
    yield "offset LS f64 1e-6", lambda: solve_offset(rows, f64, True, 1.0, 1e-6, least=True), 1e-6
    for tol in (1e-3, 1e-4, 1e-5, 1e-7):
        yield f"quad f32 {tol:g}", lambda tol=tol: solve_quad(rows, tol), tol


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--flat", type=int, default=loop.FLAT_STEPS)
    parser.add_argument("--drop", type=float, default=levenberg_marquardt.GRADIENT_DROP)
    parser.add_argument("--rows", type=int, default=256)
    parser.add_argument("--only", default="")
    args = parser.parse_args()
    loop.FLAT_STEPS, levenberg_marquardt.GRADIENT_DROP = args.flat, args.drop
    print(json.dumps({"flat": args.flat, "drop": args.drop, "rows": args.rows}))
    for name, solve, tol in cases(args.rows):
        if args.only and args.only not in name:
            continue
        sol, g, seconds = solve()
        report(name, sol, g, tol, seconds)


if __name__ == "__main__":
    main()
