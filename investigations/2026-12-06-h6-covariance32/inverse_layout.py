"""A 5x5 normal-equations inverse (normal_inverse.inverse_of_normal) of 4096 rows under
vmap with the batch first against the batch last (process CPU time, medians)."""
import time, statistics, warnings, functools
import jax, jax.numpy as jnp, numpy as np
warnings.simplefilter("ignore")
jax.config.update("jax_enable_x64", True)
from fixedopt._results.normal_inverse import inverse_of_normal
from fixedopt._numerics import cpu_compiler
B, n = 4096, 5
rng = np.random.default_rng(0)
J = rng.normal(size=(B, 25, n))
G = np.einsum("bmi,bmj->bij", J, J)
d = np.sqrt(np.einsum("bii->bi", G))
G = G / d[:, :, None] / d[:, None, :]
held = np.zeros((B, n), bool)
opts = cpu_compiler.ROW_WISE_OPTIONS
def row(g, h):
    return inverse_of_normal(g, h, 25, jnp.float64)
first = jax.jit(jax.vmap(row), compiler_options=opts)
last = jax.jit(jax.vmap(row, in_axes=(-1, -1), out_axes=-1), compiler_options=opts)
lastT = jax.jit(lambda g, h: jax.tree.map(lambda a: jnp.moveaxis(a, -1, 0), jax.vmap(row, in_axes=(-1, -1), out_axes=-1)(jnp.moveaxis(g, 0, -1), jnp.moveaxis(h, 0, -1))), compiler_options=opts)
Gt, ht = np.ascontiguousarray(np.moveaxis(G, 0, -1)), np.ascontiguousarray(held.T)
def t(f, *a):
    jax.block_until_ready(f(*a)); ts=[]
    for _ in range(30):
        s=time.process_time(); jax.block_until_ready(f(*a)); ts.append(time.process_time()-s)
    return statistics.median(ts)*1e3
for _ in range(2):
    print("batch-first %.3f ms  batch-last %.3f ms  moved in program %.3f ms" % (t(first, G, held), t(last, Gt, ht), t(lastT, G, held)))
a = first(G, held); b = lastT(G, held)
print(np.array_equal(a[0], b[0]), np.array_equal(a[1], b[1]))
print("fusions first", first.lower(G, held).compile().as_text().count(" fusion("), "last", last.lower(Gt, ht).compile().as_text().count(" fusion("))
def barrier_last(g, h):
    g, h = jax.lax.optimization_barrier((jnp.moveaxis(g, 0, -1), jnp.moveaxis(h, 0, -1)))
    out = jax.vmap(row, in_axes=(-1, -1), out_axes=-1)(g, h)
    return jnp.moveaxis(out[0], -1, 0), out[1]
bl = jax.jit(barrier_last, compiler_options=opts)
for _ in range(2):
    print("barrier %.3f ms" % t(bl, G, held), "first %.3f" % t(first, G, held))
b = bl(G, held)
print(np.array_equal(a[0], b[0]), np.array_equal(a[1], b[1]))
txt = bl.lower(G, held).compile().as_text()
print("fusions", txt.count(" fusion("), "copies/transposes", txt.count(" copy("), txt.count(" transpose("))
