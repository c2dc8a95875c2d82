"""The strict xfail's row (docs/decisions.md, "Saddles on a bound of least squares"):
``PYTHONPATH=<tree> .venv/bin/python saddle_row.py float64`` (or float32)."""
import warnings, numpy as np, jax, sys
jax.config.update("jax_enable_x64", sys.argv[1] == "float64")
import jax.numpy as jnp, fixedopt
def peak(x, a, mu, s, c):
    return a * jnp.exp(-0.5 * ((x - mu) / s) ** 2) + c
dt = sys.argv[1]
x = np.linspace(500.0, 700.0, 101).astype(dt)
counts = np.round(5e4 * np.exp(-0.5 * ((x - 585.0) / 10.0) ** 2) + 1e4).astype(dt)
start = np.array([[5e4, 500.0, 7.0, 1.1e4]], dt)
lower, upper = np.array([0.0, 500.0, 0.1, 0.0], dt), np.array([np.inf, 700.0, 100.0, np.inf], dt)
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    popt, _, result = fixedopt.curve_fit(peak, x, counts[None], start, fixed=np.array([[True, False, False, False]]),
        bounds=(lower, upper), batched=True, estimator="poisson", result=True)
s = result.solution
print(popt, fixedopt.Status(int(s.status[0])).name, fixedopt.Reason(int(s.reason[0])).name, s.steps, s.value)
