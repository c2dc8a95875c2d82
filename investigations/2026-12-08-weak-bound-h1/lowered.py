"""Programs of least-squares solves, to compare two trees: the lowered text of each solve
inside jit (the lanes' path) into argv[1]/<name>.txt, and the top-level calls (the
after-loop path) run under XLA_FLAGS=--xla_dump_to=argv[1]/dump (compare the modules'
text before optimizations):

    XLA_FLAGS=--xla_dump_to=OUT/dump PYTHONPATH=. .venv/bin/python lowered.py OUT
"""
import pathlib
import sys

import jax
import jax.numpy as jnp
import numpy as np

jax.config.update("jax_enable_x64", True)
import fixedopt  # noqa: E402

out = pathlib.Path(sys.argv[1])
out.mkdir(parents=True, exist_ok=True)
t = jnp.linspace(0.0, 1.0, 20)
y = jnp.tile(2.0 * jnp.exp(-1.3 * t) + 0.1, (4, 1))
x0 = jnp.tile(jnp.array([1.0, 1.0, 0.0]), (4, 1))
fixed = jnp.zeros((4, 3), bool)


def model(t, a, k, c):
    return a * jnp.exp(-k * t) + c


def resid(p, y):
    return model(t, *p) - y


cases = {
    "lm_plain": lambda x0, y: fixedopt.curve_fit(model, t, y, x0, batched=True)[0],
    "soft_l1": lambda x0, y: fixedopt.curve_fit(model, t, y, x0, batched=True, loss="soft_l1")[0],
    "gn": lambda x0, y: fixedopt.least_squares(resid, x0, fixed, args=(y,), batched=True,
                                               solver=fixedopt.GaussNewton()).x,
    "vectorized": lambda x0, y: fixedopt.least_squares(
        lambda p, y: jax.vmap(resid)(p, y), x0, fixed, args=(y,), batched=True,
        vectorized=True).x,
    "poisson": lambda x0, y: fixedopt.curve_fit(model, t, y, x0, batched=True,
                                                estimator="poisson")[0],
    "lm_one": lambda x0, y: fixedopt.least_squares(resid, x0[0], fixed[0], args=(y[0],)).x,
    "bounded": lambda x0, y: fixedopt.least_squares(resid, x0, fixed, args=(y,), batched=True,
                                                    bounds=(-10.0, 10.0)).x,
}
for name, f in cases.items():
    text = jax.jit(f).lower(x0, y).as_text()
    (out / f"{name}.txt").write_text(text)
    top = f(np.asarray(x0), np.asarray(y))  # the top-level call: after-loop path
    print(name, len(text), np.asarray(top).ravel()[:3])
