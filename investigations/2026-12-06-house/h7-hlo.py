"""Lowered StableHLO text of a few solves (inside jax.jit), hashed: python hlo.py > file."""
import hashlib

import jax

jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp
import numpy as np

import fixedopt

t = np.linspace(0, 2, 40)
res = lambda p, y: p[0] * jnp.exp(-p[1] * t) + p[2] - y
fun = lambda p, y: 0.5 * jnp.sum(res(p, y) ** 2) + 0.01 * jnp.sum(p**4)
cases = {
    "ls_batched": lambda x0, f, y: fixedopt.least_squares(res, x0, f, args=(y,), batched=True).x,
    "ls_lanes8_bounds": lambda x0, f, y: fixedopt.least_squares(
        res, x0, f, args=(y,), batched=True, lanes=8, bounds=(x0 - 1, x0 + 1)).x,
    "min_batched": lambda x0, f, y: fixedopt.minimize(fun, x0, f, args=(y,), batched=True).x,
    "min_single": lambda x0, f, y: fixedopt.minimize(fun, x0[0], f[0], args=(y[0],)).x,
    "grad_min": lambda x0, f, y: jax.grad(lambda y: jnp.sum(
        fixedopt.minimize(fun, x0, f, args=(y,), batched=True).x))(y),
}
for dt in ("float32", "float64"):
    x0 = np.ones((24, 3), dt); f = np.zeros((24, 3), bool); y = np.ones((24, 40), dt)
    for name, c in cases.items():
        text = jax.jit(c).lower(x0, f, y).as_text()
        print(dt, name, len(text), hashlib.sha256(text.encode()).hexdigest()[:16])
