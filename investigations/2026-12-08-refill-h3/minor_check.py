"""Solves through lanes that refill, with the CPU's lanes carried rows last (a TPU's
minor_rows), hashed bit for bit: python minor_check.py from a tree's root."""
import hashlib

import jax

jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp
import numpy as np

from fixedopt._numerics import backends

backends.BACKENDS["cpu"] = backends.CPU._replace(minor_rows=True)
import fixedopt  # noqa: E402


def h(tree):
    d = hashlib.sha256()
    for leaf in jax.tree.leaves(tree):
        d.update(np.asarray(leaf).tobytes())
    return d.hexdigest()[:16]


for dt in (jnp.float32, jnp.float64):
    rng = np.random.default_rng(0)
    B, m = 40, 30
    t = jnp.asarray(np.linspace(0, 2, m), dt)
    y = jnp.asarray(rng.uniform(1, 3, (B, 1)) * np.exp(-rng.uniform(0.5, 2, (B, 1)) * np.asarray(t)), dt)
    x0 = jnp.asarray(np.tile([1.0, 1.0, 0.0], (B, 1)) + 0.1 * rng.standard_normal((B, 3)), dt)
    fixed = jnp.asarray(rng.random((B, 3)) < 0.3)
    res = lambda p, y: p[0] * jnp.exp(-p[1] * t) + p[2] - y
    fun = lambda p, y: 0.5 * jnp.sum(res(p, y) ** 2) + 0.01 * jnp.sum(p**4)
    ls = fixedopt.least_squares(res, x0, fixed, args=(y,), batched=True, lanes=8)
    mn = fixedopt.minimize(fun, x0, fixed, args=(y,), batched=True, lanes=8)
    print(jnp.dtype(dt).name, "ls", h((ls.x, ls.status, ls.steps, ls.value)), "min",
          h((mn.x, mn.status, mn.steps, mn.value)), int(np.sum(np.asarray(ls.status) == 1)), flush=True)
