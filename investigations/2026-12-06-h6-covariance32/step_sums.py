"""A float32 LM step whose J^T J is summed in float64 (rounded back to float32 for the
step): curve_fit's process CPU time against the plain step, interleaved (two solver
objects, so two compiled solves). Run: PYTHONPATH=. python <this file>"""
import sys, time, statistics, warnings
import jax, jax.numpy as jnp, numpy as np
warnings.simplefilter("ignore")
jax.config.update("jax_enable_x64", True)
sys.path.insert(0, "investigations/2026-12-06-h6-covariance32")
import share
import fixedopt
from fixedopt._solvers import small_linalg
from fixedopt._numerics import reduce
WIDE = [False]
orig = small_linalg.normal_sums
def normal_sums(matrix, vector):
    if not WIDE[0] or matrix.dtype != jnp.float32 or not small_linalg.sums_together(matrix):
        return orig(matrix, vector)
    n = matrix.shape[1]
    columns = [matrix[:, j] for j in range(n)]
    wide_cols = [c.astype(jnp.float64) for c in columns]
    terms = [wide_cols[i] * wide_cols[j] for i in range(n) for j in range(i + 1)]
    terms += [c * vector for c in columns] + [vector * vector]
    *sums, squared = reduce.together(tuple(terms))
    lower = iter(sums[: len(sums) - n])
    rows = [[next(lower) for _ in range(i + 1)] for i in range(n)]
    full = [[rows[max(i, j)][min(i, j)] for j in range(n)] for i in range(n)]
    gradient = jnp.stack(sums[len(sums) - n:])
    return jnp.stack([jnp.stack(r) for r in full]).astype(jnp.float32), gradient, squared
small_linalg.normal_sums = normal_sums
import fixedopt._solvers.levenberg_marquardt as lm
lm.small_linalg = small_linalg
cases = {}
for label, make in (("decay", lambda: share.decay_case(10_000)), ("spectra", lambda: share.spectra_case(2_000)), ("gpufit", lambda: share.gpufit_case(100_000))):
    c = make()
    calls = {}
    for side, damping in (("f32", 1e-3), ("f64sum", 1.0000001e-3)):
        WIDE[0] = side == "f64sum"
        base = share.ours(c, jnp.float32)
        solver = fixedopt.LevenbergMarquardt(initial_damping=damping)
        calls[side] = (lambda b=base, s=solver, cc=c: fixedopt.curve_fit(cc["f"], *(jnp.asarray(cc[k], jnp.float32) for k in ("x", "y", "p0")), fixed=cc["fixed"], batched=True, solver=s, result=True, **({} if cc["bounds"] is None else {"bounds": cc["bounds"]}), **({} if cc["sigma"] is None else {"sigma": jnp.asarray(cc["sigma"], jnp.float32)})))
        out = calls[side]()
        jax.block_until_ready(out)
        print(label, side, "mean steps", float(np.mean(out[2].solution.steps)))
    cases[label] = calls
found = {(l, s): [] for l in cases for s in ("f32", "f64sum")}
for rep in range(5):
    for l, calls in cases.items():
        for s in (("f32", "f64sum") if rep % 2 == 0 else ("f64sum", "f32")):
            t = time.process_time(); jax.block_until_ready(calls[s]()); found[l, s].append(time.process_time() - t)
for l in cases:
    a, b = found[l, "f32"], found[l, "f64sum"]
    print(l, "f32 %.3f  f64sum %.3f  ratio %.3f" % (statistics.median(a), statistics.median(b), statistics.median([y / x for x, y in zip(a, b)])))
