"""Per chunk: the covariance program of the float32 Jacobian path now (P1) against a
program that forms J^T J and |r|^2 in float64 from the raw Jacobian in one reduction and
inverts as solver_covariance does (P2), and its sums alone (P3). Process CPU time.
Run: PYTHONPATH=. python investigations/2026-12-06-h6-covariance32/proto.py CASE"""

import functools
import statistics
import sys
import time
import warnings

import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree

sys.path.insert(0, "investigations/2026-12-06-h6-covariance32")
import share  # noqa: E402
from fixedopt._numerics import cpu_compiler, reduce  # noqa: E402
from fixedopt._results import covariance as cov_module  # noqa: E402
from fixedopt._results import solver_covariance  # noqa: E402

SEEN = []
_orig = cov_module._compiled


def _spy(residual_fun, batched, rule, axes, derived, path, *data):
    SEEN.append((residual_fun, batched, rule, axes, derived, path, data))
    return _orig(residual_fun, batched, rule, axes, derived, path, *data)


cov_module._compiled = _spy


def sums(residual_fun, sigma_axis, axes, x, constraints, sigma, args):
    def one(x, fixed, sigma, args):
        flat_x, unravel = ravel_pytree(x)
        fixed = ravel_pytree(fixed)[0]

        def weighted(flat):
            r = residual_fun(unravel(jnp.where(fixed, flat_x, flat)), *args)
            r = jnp.ravel(r if sigma is None else jnp.where(jnp.isinf(sigma), 0.0, r / sigma))
            return r, r

        jac, r = jax.jacfwd(weighted, has_aux=True)(flat_x)
        n = flat_x.shape[0]
        cols = [jac[:, j].astype(jnp.float64) for j in range(n)]
        pairs = [(i, j) for i in range(n) for j in range(i + 1)]
        rw = r.astype(jnp.float64)
        out = reduce.together(tuple(cols[i] * cols[j] for i, j in pairs) + (rw * rw,))
        normal = [[None] * n for _ in range(n)]
        for (i, j), t in zip(pairs, out[:-1]):
            normal[i][j] = normal[j][i] = t
        return jnp.stack([jnp.stack(row) for row in normal]), out[-1]

    return jax.vmap(one, in_axes=(0, 0, sigma_axis, axes))(x, constraints.fixed, sigma, args)


def p2(residual_fun, sigma_axis, axes, rule, x, constraints, sigma, args, points, residuals):
    normal, rss = sums(residual_fun, sigma_axis, axes, x, constraints, sigma, args)
    return solver_covariance._rows(rule, x, constraints, normal, 0.5 * rss, points, residuals)


opts = cpu_compiler.ROW_WISE_OPTIONS
P2 = jax.jit(p2, static_argnums=(0, 1, 2, 3), compiler_options=opts)
P3 = jax.jit(sums, static_argnums=(0, 1, 2), compiler_options=opts)


def timed(f, *a):
    jax.block_until_ready(f(*a))
    ts = []
    for _ in range(15):
        s = time.process_time()
        jax.block_until_ready(f(*a))
        ts.append(time.process_time() - s)
    return statistics.median(ts) * 1e3


def main():
    label = sys.argv[1]
    make = {"decay": lambda: share.decay_case(10_000), "spectra": lambda: share.spectra_case(2_000),
            "gpufit": lambda: share.gpufit_case(100_000)}[label]
    call = share.ours(make(), jnp.float32)
    jax.block_until_ready(call())
    residual_fun, batched, rule, axes, derived, path, data = SEEN[0]
    x, constraints, sigma, args = data
    rows = np.shape(jax.tree.leaves(x)[0])[0]
    sigma_axis = None if sigma is None else 0
    m = int(np.prod(jax.eval_shape(lambda: jax.vmap(residual_fun, in_axes=(0, *axes))(x, *args)).shape[1:]))
    points = np.full(rows, m, np.int32) if sigma is None else np.isfinite(np.broadcast_to(sigma, (rows, m))).sum(1).astype(np.int32)
    residuals = np.full(rows, m, np.int32)
    t1 = timed(lambda: _orig(residual_fun, batched, rule, axes, derived, path, *data))
    t2 = timed(lambda: P2(residual_fun, sigma_axis, axes, rule, x, constraints, sigma, args, points, residuals))
    t3 = timed(lambda: P3(residual_fun, sigma_axis, axes, x, constraints, sigma, args))
    old = np.asarray(_orig(residual_fun, batched, rule, axes, derived, path, *data)[0].covariance, float)
    new_found, certified = P2(residual_fun, sigma_axis, axes, rule, x, constraints, sigma, args, points, residuals)
    new = np.asarray(new_found.covariance, float)
    ok = np.asarray(certified)
    scale = np.sqrt(np.abs(np.einsum("bii,bjj->bij", old, old)))
    rel = np.nanmax(np.where(scale > 0, np.abs(new - old) / np.where(scale > 0, scale, 1), 0)[ok])
    print(f"{label}: chunk {rows} rows, path {path}: now {t1:.2f} ms, J+sums+inverse {t2:.2f} ms, "
          f"J+sums {t3:.2f} ms; certified {ok.mean():.3f}, max rel diff {rel:.2e}")


if __name__ == "__main__":
    warnings.simplefilter("ignore")
    jax.config.update("jax_enable_x64", True)
    main()
