"""Per chunk: covariance's normal path (now), the one-program path (J, float64 sums, _rows;
"first"; with the sums and the inverse batch-last: "last", "lastlast"), its sums alone and
the Jacobian alone. Process CPU, medians. NOPAR=1: without XLA:CPU's parallel task
assigner; DEV=1: inputs on the device first.
Run: PYTHONPATH=. python investigations/2026-12-07-h6-covariance32/chunk_programs.py CASE"""
import functools, statistics, sys, time, warnings
import jax, jax.numpy as jnp, numpy as np
from jax.flatten_util import ravel_pytree
sys.path.insert(0, "investigations/2026-12-07-h6-covariance32")
import refit_ab as share
from fixedopt._numerics import cpu_compiler, reduce
from fixedopt._results import covariance as cov_module
from fixedopt._results import solver_covariance
SEEN = []
_orig = cov_module._compiled
def _spy(residual_fun, batched, rule, axes, derived, path, *data):
    SEEN.append((residual_fun, batched, rule, axes, derived, path, data))
    return _orig(residual_fun, batched, rule, axes, derived, path, *data)
cov_module._compiled = _spy

def jac_rows(residual_fun, sigma_axis, axes, x, constraints, sigma, args):
    def one(x, fixed, sigma, args):
        flat_x, unravel = ravel_pytree(x)
        fixed = ravel_pytree(fixed)[0]
        def weighted(flat):
            r = residual_fun(unravel(jnp.where(fixed, flat_x, flat)), *args)
            r = jnp.ravel(r if sigma is None else jnp.where(jnp.isinf(sigma), 0.0, r / sigma))
            return r, r
        return jax.jacfwd(weighted, has_aux=True)(flat_x)
    return jax.vmap(one, in_axes=(0, 0, sigma_axis, axes))(x, constraints.fixed, sigma, args)

def pairs_of(n):
    return [(i, j) for i in range(n) for j in range(i + 1)]

def assemble(n, out):
    normal = [[None] * n for _ in range(n)]
    for (i, j), t in zip(pairs_of(n), out):
        normal[i][j] = normal[j][i] = t
    return normal

def sums_first(residual_fun, sigma_axis, axes, x, constraints, sigma, args):
    jac, r = jac_rows(residual_fun, sigma_axis, axes, x, constraints, sigma, args)  # (B,m,n),(B,m)
    n = jac.shape[-1]
    cols = [jac[:, :, j].astype(jnp.float64) for j in range(n)]
    rw = r.astype(jnp.float64)
    terms = tuple(cols[i] * cols[j] for i, j in pairs_of(n)) + (rw * rw,)
    out = jax.lax.reduce(terms, tuple(jnp.zeros((), jnp.float64) for _ in terms), lambda a, b: tuple(p + q for p, q in zip(a, b)), (1,))
    normal = assemble(n, out[:-1])
    return jnp.stack([jnp.stack(row, -1) for row in normal], -2), out[-1]  # (B,n,n)

def sums_last(residual_fun, sigma_axis, axes, x, constraints, sigma, args, keep_last=False):
    jac, r = jac_rows(residual_fun, sigma_axis, axes, x, constraints, sigma, args)
    n = jac.shape[-1]
    J = jnp.transpose(jac, (1, 2, 0))  # (m, n, B)
    R = r.T
    cols = [J[:, j, :].astype(jnp.float64) for j in range(n)]
    rw = R.astype(jnp.float64)
    terms = tuple(cols[i] * cols[j] for i, j in pairs_of(n)) + (rw * rw,)
    out = jax.lax.reduce(terms, tuple(jnp.zeros((), jnp.float64) for _ in terms), lambda a, b: tuple(p + q for p, q in zip(a, b)), (0,))
    normal = assemble(n, out[:-1])
    if keep_last:
        return jnp.stack([jnp.stack(row) for row in normal]), out[-1]  # (n,n,B)
    return jnp.stack([jnp.stack(row, -1) for row in normal], -2), out[-1]

def p_first(residual_fun, sigma_axis, axes, rule, x, constraints, sigma, args, points, residuals):
    normal, rss = sums_first(residual_fun, sigma_axis, axes, x, constraints, sigma, args)
    return solver_covariance._rows(rule, x, constraints, normal, 0.5 * rss, points, residuals)

def p_last(residual_fun, sigma_axis, axes, rule, x, constraints, sigma, args, points, residuals):
    normal, rss = sums_last(residual_fun, sigma_axis, axes, x, constraints, sigma, args)
    return solver_covariance._rows(rule, x, constraints, normal, 0.5 * rss, points, residuals)

def p_lastlast(residual_fun, sigma_axis, axes, rule, x, constraints, sigma, args, points, residuals):
    normal, rss = sums_last(residual_fun, sigma_axis, axes, x, constraints, sigma, args, keep_last=True)
    T = lambda t: jax.tree.map(lambda a: None if a is None else jnp.moveaxis(a, 0, -1), t)
    out = jax.vmap(functools.partial(solver_covariance._row, rule), in_axes=-1, out_axes=-1)(
        T(x), T(constraints), normal, 0.5 * rss, points, residuals)
    return jax.tree.map(lambda a: jnp.moveaxis(a, -1, 0), out)

import os
opts = dict(cpu_compiler.ROW_WISE_OPTIONS)
if os.environ.get("NOPAR"):
    opts["xla_disable_hlo_passes"] += ",cpu-parallel-task-assigner"
S = (0, 1, 2, 3)
V = {"first": jax.jit(p_first, static_argnums=S, compiler_options=opts),
     "last": jax.jit(p_last, static_argnums=S, compiler_options=opts),
     "lastlast": jax.jit(p_lastlast, static_argnums=S, compiler_options=opts)}
SUMS = {"sums_first": jax.jit(sums_first, static_argnums=(0, 1, 2), compiler_options=opts),
        "sums_last": jax.jit(sums_last, static_argnums=(0, 1, 2), compiler_options=opts),
        "jac": jax.jit(jac_rows, static_argnums=(0, 1, 2), compiler_options=opts)}

def timed(f):
    jax.block_until_ready(f())
    ts = []
    for _ in range(21):
        s = time.process_time(); jax.block_until_ready(f()); ts.append(time.process_time() - s)
    return statistics.median(ts) * 1e3

def main():
    label = sys.argv[1]
    make = {"decay": lambda: share.decay_case(10_000), "spectra": lambda: share.spectra_case(2_000),
            "gpufit": lambda: share.gpufit_case(100_000)}[label]
    solver_covariance._refits = lambda x: False  # covariance's path, spied on
    call = share.call(make(), jnp.float32)
    jax.block_until_ready(call())
    residual_fun, batched, rule, axes, derived, path, data = SEEN[0]
    x, constraints, sigma, args = data
    rows = np.shape(jax.tree.leaves(x)[0])[0]
    sa = None if sigma is None else 0
    m = int(np.prod(jax.eval_shape(lambda: jax.vmap(residual_fun, in_axes=(0, *axes))(x, *args)).shape[1:]))
    points = np.full(rows, m, np.int32) if sigma is None else np.isfinite(np.broadcast_to(sigma, (rows, m))).sum(1).astype(np.int32)
    residuals = np.full(rows, m, np.int32)
    if os.environ.get("DEV"):
        x, constraints, sigma, args = jax.device_put((x, constraints, sigma, args))
        data = (x, constraints, sigma, args)
        points, residuals = jax.device_put((points, residuals))
    base = lambda: _orig(residual_fun, batched, rule, axes, derived, path, *data)
    fs = {"now": base}
    for k, f in V.items():
        fs[k] = functools.partial(f, residual_fun, sa, axes, rule, x, constraints, sigma, args, points, residuals)
    for k, f in SUMS.items():
        fs[k] = functools.partial(f, residual_fun, sa, axes, x, constraints, sigma, args)
    res = {k: [] for k in fs}
    for _ in range(3):
        for k, f in fs.items():
            res[k].append(timed(f))
    ref = np.asarray(base()[0].covariance, float)
    out = []
    for k in V:
        c = np.asarray(fs[k]()[0].covariance, float)
        out.append(f"{k}=={'same' if np.array_equal(c, np.asarray(fs['first']()[0].covariance, float)) else 'diff'}")
    print(f"{label} chunk {rows}: " + "  ".join(f"{k} {statistics.median(v):.2f}" for k, v in res.items()), " ".join(out))

if __name__ == "__main__":
    warnings.simplefilter("ignore")
    jax.config.update("jax_enable_x64", True)
    main()
