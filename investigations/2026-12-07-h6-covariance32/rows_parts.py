"""Where _rows' time goes: synthetic rows (B, n, m), inputs on the device, the unit
scaling, + the inverse, + the finish; RW: ROW_WISE_OPTIONS, NP: without the parallel task
assigner. Run: PYTHONPATH=. python investigations/2026-12-07-h6-covariance32/rows_parts.py 4096 5 25"""
import functools, statistics, sys, time, warnings, os
import jax, jax.numpy as jnp, numpy as np
warnings.simplefilter("ignore")
jax.config.update("jax_enable_x64", True)
from jax.flatten_util import ravel_pytree
from fixedopt._numerics import cpu_compiler
from fixedopt._results import solver_covariance
from fixedopt._results.free_block import Constraints, held_entries, summed_variance
from fixedopt._results.row_covariance import Rule, Pieces, Inverse, scaled
from fixedopt._results.normal_inverse import inverse_of_normal
B, n, m = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
dt = jnp.float32
rng = np.random.default_rng(0)
J = rng.normal(size=(B, m, n))
G = np.einsum("bmi,bmj->bij", J, J)
x = rng.normal(size=(B, n)).astype(dt)
fixed = np.zeros((B, n), bool)
cons = Constraints(fixed, None, fixed, np.zeros(B, bool))
value = np.ones(B); points = np.full(B, m, np.int32); res = np.full(B, m, np.int32)
rule = Rule(False, False, True)
args = jax.device_put((x, cons, G, value, points, res))
def upto(stage, x, constraints, normal, value, points, residuals):
    flat_x = ravel_pytree(x)[0]
    at_bound, frozen = held_entries(flat_x, constraints, rule.hold, None)
    diagonal = jnp.where(frozen, 0.0, jnp.diagonal(normal))
    column_scale = jnp.sqrt(jnp.where(diagonal > 0, diagonal, 1.0))
    zero = (diagonal == 0) & ~frozen
    held = frozen | zero
    off = held[:, None] | held[None, :]
    unit = jnp.where(off, 0.0, normal / (column_scale[:, None] * column_scale[None, :]))
    unit = jnp.where(jnp.eye(n, dtype=bool) & held[:, None], 1.0, unit)
    if stage == "unit":
        return unit, held
    unscaled, certified = inverse_of_normal(unit, held, residuals, flat_x.dtype)
    if stage == "inverse":
        return unscaled, certified
    n_free = jnp.sum(~frozen)
    found = Pieces(jnp.zeros((0,), flat_x.dtype), jnp.zeros((0, n), flat_x.dtype),
                   column_scale.astype(flat_x.dtype), at_bound, frozen, zero, n_free, points - n_free)
    inverse = Inverse(jnp.where(off, 0.0, unscaled), n_free - jnp.sum(zero), zero)
    variance = summed_variance(rule.absolute_sigma, 2.0 * value, found.dof)
    finite = jnp.isfinite(value) & jnp.all(jnp.isfinite(flat_x)) & jnp.all(jnp.isfinite(normal))
    return scaled(rule, x, constraints, found, inverse, variance, finite), certified & finite
opts = dict(cpu_compiler.ROW_WISE_OPTIONS)
nopar = dict(opts, xla_disable_hlo_passes=opts["xla_disable_hlo_passes"] + ",cpu-parallel-task-assigner")
V = {}
for stage in ("unit", "inverse", "all"):
    for name, o in (("RW", opts), ("NP", nopar)):
        V[f"{stage} {name}"] = jax.jit(jax.vmap(functools.partial(upto, stage)), compiler_options=o)
V["rows RW"] = jax.jit(functools.partial(solver_covariance._rows, rule), compiler_options=opts)
def timed(f):
    jax.block_until_ready(f(*args)); ts = []
    for _ in range(31):
        s = time.process_time(); jax.block_until_ready(f(*args)); ts.append(time.process_time() - s)
    return ts
out = {k: [] for k in V}
for _ in range(5):
    for k, f in V.items():
        out[k] += timed(f)
for k, f in V.items():
    txt = f.lower(*args).compile().as_text()
    print(f"{k:12} median {statistics.median(out[k])*1e3:.3f} min {min(out[k])*1e3:.3f} ms  fusions {txt.count(' fusion(')}")
