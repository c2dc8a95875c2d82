"""The Poisson GTOL reproducer: a peak at 615 started at 700, only the centre free, in
float64 (background 0) and float32 (backgrounds 1e-20..1e-36); prints dtype, background,
centre, status, reason, steps, cost:

    PYTHONPATH=. .venv/bin/python investigations/2026-12-07-poisson-cosine-h4/repro.py
"""
import sys
import numpy as np, jax, jax.numpy as jnp
jax.config.update("jax_enable_x64", True)
import fixedopt

def peak(x, a, mu, s, c):
    return a * jnp.exp(-0.5 * ((x - mu) / s) ** 2) + c

for dtype, bg in [(np.float64, 0.0), (np.float32, 1e-20), (np.float32, 1e-30), (np.float32, 1e-36)]:
    x = np.linspace(500, 700, 101)
    counts = np.round(np.asarray(peak(x, 6e4, 615, 12, 0.0)))
    p0 = np.array([[6e4, 700, 12, bg]])
    fixed = np.array([[True, False, True, True]])
    lb, ub = np.array([0, 500, 0.1, 0]), np.array([np.inf, 700, 100, np.inf])
    popt, _, res = fixedopt.curve_fit(peak, x.astype(dtype), counts[None].astype(dtype), p0.astype(dtype),
        fixed=fixed, bounds=(lb.astype(dtype), ub.astype(dtype)), batched=True, estimator="poisson", result=True)
    s = res.solution
    print(dtype.__name__, bg, np.asarray(popt)[0, 1], fixedopt.Status(int(s.status[0])).name, int(s.reason[0]), int(s.steps[0]), float(s.value[0]))
