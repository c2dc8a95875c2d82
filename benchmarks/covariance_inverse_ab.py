"""A/B of the covariance's small inverse in ``solver_covariance._rows`` (float64 fits'
covariance from the solver's normal matrix) on a first chunk of each case of
``benchmarks.covariance_share``: the Cholesky factor and its inverse (``old``, as in the
tree) against ``G = L D L^T`` (``new``: one reciprocal a pivot); fusions in the
optimized program, agreement, process CPU time a call (medians of 40, interleaved).
Run: ``python -m benchmarks.covariance_inverse_ab``."""

import functools
import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np

jax.config.update("jax_enable_x64", True)
from benchmarks import covariance_share as cs
from fixedopt._numerics import cpu_compiler
from fixedopt._results import normal_inverse as ni
from fixedopt._results import small_inverse
from fixedopt._results import solver_covariance as sc


def ldl_inverse_of_normal(normal, held, m, dtype):
    """normal_inverse.inverse_of_normal's result by ``G = L D L^T``: one reciprocal a
    pivot, no square root (the variant tried)."""
    n, wide = normal.shape[0], normal.dtype
    lower, times_pivot, pivots, reciprocals = [[] for _ in range(n)], [[] for _ in range(n)], [], []
    minus = lambda start, a, b: functools.reduce(jnp.subtract, [p * q for p, q in zip(a, b)], start)
    for j in range(n):
        pivot = minus(normal[j, j], times_pivot[j], lower[j])
        pivots.append(pivot)
        reciprocals.append(1.0 / pivot)
        for i in range(j + 1, n):
            entry = minus(normal[i, j], times_pivot[i], lower[j])
            times_pivot[i].append(entry)
            lower[i].append(entry * reciprocals[j])
    inverse = [[] for _ in range(n)]  # L^{-1}, unit lower
    for i in range(n):
        for j in range(i):
            terms = [lower[i][k] * inverse[k][j] for k in range(j + 1, i)]
            inverse[i].append(-functools.reduce(jnp.add, terms, lower[i][j]))
        inverse[i].append(jnp.ones((), wide))
    scaled = [[inverse[k][i] * reciprocals[k] for i in range(k + 1)] for k in range(n)]
    product = [[jnp.zeros((), wide)] * n for _ in range(n)]
    for i in range(n):
        for j in range(i + 1):
            terms = [scaled[k][i] * inverse[k][j] for k in range(i, n)]
            product[i][j] = product[j][i] = functools.reduce(jnp.add, terms)
    inverse_trace = functools.reduce(
        jnp.add, [jnp.where(held[i], 0.0, product[i][i]) for i in range(n)]
    )
    columns_free = jnp.sum(~held).astype(wide)
    eps, eps_wide = (jnp.finfo(d).eps for d in (dtype, wide))
    cutoff = small_inverse.SAFETY * eps * jnp.maximum(m, n) * jnp.sqrt(columns_free)
    accurate = eps_wide * (m + n * n) * columns_free * inverse_trace <= ni.TARGET * np.sqrt(eps)
    definite = functools.reduce(jnp.logical_and, [p > 0 for p in pivots])
    certified = (
        definite & jnp.isfinite(inverse_trace) & (jnp.sqrt(inverse_trace) * cutoff < 1.0) & accurate
    )
    return jnp.stack([jnp.stack(row) for row in product]).astype(dtype), certified


captured = []
orig = sc._compiled


def spy(rule, *rows):
    captured.append((rule, rows))
    return orig(rule, *rows)


spy.lower = orig.lower
sc._compiled = spy

O = dict(cpu_compiler.ROW_WISE_OPTIONS)


def variant(use_old):
    def f(rule, *rows):
        saved = sc.inverse_of_normal
        sc.inverse_of_normal = ni.inverse_of_normal if use_old else ldl_inverse_of_normal
        try:
            return sc._rows(rule, *rows)
        finally:
            sc.inverse_of_normal = saved

    return jax.jit(f, static_argnums=0, compiler_options=O)


cases = {
    "gpufit": cs.gpufit_case(20_000),
    "decay": cs.decay_case(4096),
    "spectra": cs.spectra_case(600),
}
for name, case in cases.items():
    captured.clear()
    jax.block_until_ready(cs.ours(case, jnp.float64)())
    rule, rows = captured[0]
    P = {"old": variant(True), "new": variant(False)}
    out = {k: jax.block_until_ready(p(rule, *rows)) for k, p in P.items()}
    (co, ko), (cn, kn) = out["old"], out["new"]
    a, b = np.asarray(co.covariance), np.asarray(cn.covariance)
    scale = np.sqrt(np.abs(np.einsum("bii->bi", a)))
    rel = np.abs(a - b) / (scale[:, :, None] * scale[:, None, :])
    both = np.asarray(ko) & np.asarray(kn)
    print(
        name,
        "rows",
        len(ko),
        "certified old/new",
        int(np.sum(ko)),
        int(np.sum(kn)),
        "max rel diff",
        float(np.nanmax(np.where(both[:, None, None], rel, 0))),
    )
    for k, p in P.items():
        print(" ", k, "fusions", p.lower(rule, *rows).compile().as_text().count(" fusion("))
    T = {k: [] for k in P}
    for _ in range(40):
        for k, p in P.items():
            t = time.process_time()
            jax.block_until_ready(p(rule, *rows))
            T[k].append(time.process_time() - t)
    for k in P:
        print(f"  {k}: {1e3 * statistics.median(T[k]):.3f} ms (min {1e3 * min(T[k]):.3f})")
