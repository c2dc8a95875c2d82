"""Lowered text of five least-squares solves and one Poisson fit into argv[1]/<name>.txt,
to compare two trees (cmp each file):

    PYTHONPATH=. .venv/bin/python investigations/2026-12-07-poisson-cosine-h4/lowered.py OUT
"""
import sys, pathlib
import numpy as np, jax, jax.numpy as jnp
jax.config.update("jax_enable_x64", True)
import fixedopt

out = pathlib.Path(sys.argv[1]); out.mkdir(parents=True, exist_ok=True)
t = jnp.linspace(0.0, 1.0, 20)
y = jnp.tile(2.0 * jnp.exp(-1.3 * t) + 0.1, (4, 1))
x0 = jnp.tile(jnp.array([1.0, 1.0, 0.0]), (4, 1))
fixed = jnp.zeros((4, 3), bool)

def model(t, a, k, c):
    return a * jnp.exp(-k * t) + c

def resid(p, y):
    return model(t, *p) - y

cases = {
    "lm_bounds": lambda x0, y: fixedopt.least_squares(resid, x0, fixed, args=(y,), batched=True,
                                                      bounds=(-10.0, 10.0)).x,
    "lm_plain": lambda x0, y: fixedopt.curve_fit(model, t, y, x0, batched=True)[0],
    "soft_l1": lambda x0, y: fixedopt.curve_fit(model, t, y, x0, batched=True, loss="soft_l1")[0],
    "gn": lambda x0, y: fixedopt.least_squares(resid, x0, fixed, args=(y,), batched=True,
                                               solver=fixedopt.GaussNewton()).x,
    "vectorized": lambda x0, y: fixedopt.least_squares(
        lambda p, y: jax.vmap(resid)(p, y), x0, fixed, args=(y,), batched=True, vectorized=True).x,
    "poisson": lambda x0, y: fixedopt.curve_fit(model, t, y, x0, batched=True, estimator="poisson")[0],
}
for name, f in cases.items():
    try:
        text = jax.jit(f).lower(x0, y).as_text()
    except Exception as e:
        text = f"ERROR {type(e).__name__}: {e}"
    (out / f"{name}.txt").write_text(text)
    print(name, len(text))
