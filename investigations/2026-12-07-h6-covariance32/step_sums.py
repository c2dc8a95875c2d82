"""A float32 LM step whose J^T J is summed in float64 (rounded back to float32 for the
step), in whichever form the step takes (one variadic reduce, or the dot of gram):
curve_fit's process CPU time against the plain step, interleaved (two solver objects).
Run: PYTHONPATH=. python investigations/2026-12-07-h6-covariance32/step_sums.py"""
import sys, time, statistics, warnings
sys.path.insert(0, "investigations/2026-12-07-h6-covariance32")
import jax, jax.numpy as jnp, numpy as np
warnings.simplefilter("ignore")
jax.config.update("jax_enable_x64", True)
import refit_ab as ab
import fixedopt
from fixedopt._solvers import small_linalg
WIDE = [False]
orig = small_linalg.normal_sums_with
def normal_sums_with(matrix, vector, extra):
    normal, gradient, squared, sums = orig(matrix, vector, extra)
    if WIDE[0] and matrix.dtype == jnp.float32:
        if small_linalg.sums_together(matrix):
            n = matrix.shape[1]
            cols = [matrix[:, j].astype(jnp.float64) for j in range(n)]
            from fixedopt._numerics import reduce
            s = reduce.together(tuple(cols[i] * cols[j] for i in range(n) for j in range(i + 1)))
            it = iter(s); rows = [[next(it) for _ in range(i + 1)] for i in range(n)]
            normal = jnp.stack([jnp.stack([rows[max(i, j)][min(i, j)] for j in range(n)]) for i in range(n)]).astype(jnp.float32)
        else:
            w = matrix.astype(jnp.float64)
            normal = (w.T @ w).astype(jnp.float32)
    return normal, gradient, squared, sums
small_linalg.normal_sums_with = normal_sums_with
cases = {"decay": ab.decay_case(10_000), "spectra": ab.spectra_case(2_000), "gpufit": ab.gpufit_case(100_000)}
calls = {}
for label, c in cases.items():
    for side, damping in (("f32", 1e-3), ("f64sum", 1.0000001e-3)):
        WIDE[0] = side == "f64sum"
        solver = fixedopt.LevenbergMarquardt(initial_damping=damping)
        cast = lambda a: jnp.asarray(a, jnp.float32)
        kw = {} if c["bounds"] is None else {"bounds": c["bounds"]}
        if c["sigma"] is not None: kw["sigma"] = cast(c["sigma"])
        f = (lambda c=c, s=solver, kw=kw: fixedopt.curve_fit(c["f"], cast(c["x"]), cast(c["y"]), cast(c["p0"]), fixed=c["fixed"], batched=True, solver=s, result=True, **kw))
        out = jax.block_until_ready(f()); calls[label, side] = f
        print(label, side, "mean steps", float(np.mean(out[2].solution.steps)), flush=True)
WIDE[0] = False
res = {k: [] for k in calls}
for rep in range(7):
    for label in cases:
        for side in (("f32", "f64sum") if rep % 2 == 0 else ("f64sum", "f32")):
            t = time.process_time(); jax.block_until_ready(calls[label, side]()); res[label, side].append(time.process_time() - t)
for label in cases:
    a, b = res[label, "f32"], res[label, "f64sum"]
    print(label, "f32 %.3f f64sum %.3f ratio %.3f" % (statistics.median(a), statistics.median(b), statistics.median([y / x for x, y in zip(a, b)])))
