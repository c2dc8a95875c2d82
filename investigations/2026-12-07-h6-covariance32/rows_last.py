"""Prototype: _rows with every per-row quantity an entry of a batch-last array, against
_rows. Run: PYTHONPATH=. python investigations/2026-12-07-h6-covariance32/rows_last.py 4096 5 25"""
import functools, statistics, sys, time, warnings
import jax, jax.numpy as jnp, numpy as np
warnings.simplefilter("ignore")
jax.config.update("jax_enable_x64", True)
from fixedopt._numerics import cpu_compiler
from fixedopt._results import solver_covariance
from fixedopt._results.free_block import Constraints
from fixedopt._results.row_covariance import Rule
from fixedopt._results.normal_inverse import inverse_of_normal
B, n, m = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
dt = jnp.float32
rng = np.random.default_rng(0)
J = rng.normal(size=(B, m, n))
G = np.einsum("bmi,bmj->bij", J, J)
x = rng.normal(size=(B, n)).astype(dt)
fixed = rng.random((B, n)) < 0.2
cons = Constraints(fixed, None, np.zeros((B, n), bool), np.zeros(B, bool))
value = np.ones(B); points = np.full(B, m, np.int32); res = np.full(B, m, np.int32)
rule = Rule(False, False, True)
args = jax.device_put((x, cons, G, value, points, res))

def last_rows(x, cons, normal, value, points, residuals):
    n = x.shape[1]
    g = jnp.moveaxis(normal, 0, -1)
    fixedT = cons.fixed.T
    frozen = [fixedT[i] for i in range(n)]
    d = [jnp.where(frozen[i], 0.0, g[i, i]) for i in range(n)]
    c = [jnp.sqrt(jnp.where(d[i] > 0, d[i], 1.0)) for i in range(n)]
    zero = [(d[i] == 0) & ~frozen[i] for i in range(n)]
    held = [frozen[i] | zero[i] for i in range(n)]
    u = [[None] * n for _ in range(n)]
    for i in range(n):
        for j in range(n):
            if i == j:
                u[i][j] = jnp.where(held[i], 1.0, g[i, i] / (c[i] * c[i]))
            else:
                u[i][j] = jnp.where(held[i] | held[j], 0.0, g[i, j] / (c[i] * c[j]))
    unit = jnp.stack([jnp.stack(r) for r in u])
    heldv = jnp.stack(held)
    inv, cert = jax.vmap(lambda a, h, r: inverse_of_normal(a, h, r, dt), in_axes=(-1, -1, 0), out_axes=(-1, 0))(unit, heldv, residuals)
    n_free = sum(jnp.where(f, 0, 1) for f in frozen)
    dof = points - n_free
    variance = jnp.where(dof > 0, (2.0 * value) / jnp.maximum(dof, 1), jnp.inf).astype(dt)
    cs = [ci.astype(dt) for ci in c]
    cov = [[None] * n for _ in range(n)]
    for i in range(n):
        for j in range(n):
            e = jnp.where(held[i] | held[j], 0.0, inv[i, j]) / (cs[i] * cs[j])
            e = variance * e
            e = jnp.where(zero[i] | zero[j], jnp.inf, e)
            cov[i][j] = jnp.where(frozen[i] | frozen[j], 0.0, e)
    covT = jnp.moveaxis(jnp.stack([jnp.stack(r) for r in cov]), -1, 0)
    stderr = jnp.sqrt(jnp.stack([cov[i][i] for i in range(n)], -1))
    return covT, stderr, cert

opts = cpu_compiler.ROW_WISE_OPTIONS
V = {"rows": jax.jit(functools.partial(solver_covariance._rows, rule), compiler_options=opts),
     "last": jax.jit(last_rows, compiler_options=opts)}
def timed(f):
    jax.block_until_ready(f(*args)); ts = []
    for _ in range(31):
        s = time.process_time(); jax.block_until_ready(f(*args)); ts.append(time.process_time() - s)
    return ts
out = {k: [] for k in V}
for _ in range(5):
    for k, f in V.items():
        out[k] += timed(f)
a = np.asarray(V["rows"](*args)[0].covariance); b = np.asarray(V["last"](*args)[0])
print("equal", np.array_equal(a, b), np.nanmax(np.abs(a - b)))
for k, f in V.items():
    txt = f.lower(*args).compile().as_text()
    print(f"{k:6} median {statistics.median(out[k])*1e3:.3f} min {min(out[k])*1e3:.3f} ms  fusions {txt.count(' fusion(')}")
