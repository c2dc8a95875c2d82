"""hash_solves.py's two bounded 300-residual fits (float64), their solutions saved to
OUT.npz, to compare two trees' rows: python ls300_dump.py OUT."""
import sys

import jax

jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import fixedopt  # noqa: E402

dt = jnp.float64
rng = np.random.default_rng(0)
B, m = 24, 40
t = jnp.asarray(np.linspace(0, 2, m), dt)
truth = np.column_stack([rng.uniform(1, 3, B), rng.uniform(0.5, 2, B), rng.uniform(-1, 1, B)])
y = jnp.asarray(truth[:, :1] * np.exp(-truth[:, 1:2] * np.asarray(t)) + truth[:, 2:]
                + 0.01 * rng.standard_normal((B, m)), dt)
x0 = jnp.asarray(np.tile([1.0, 1.0, 0.0], (B, 1)) + 0.1 * rng.standard_normal((B, 3)), dt)
fixed = jnp.asarray(rng.random((B, 3)) < 0.3)
lo, hi = jnp.full((B, 3), -0.5, dt), jnp.full((B, 3), 2.5, dt)
ts = jnp.asarray(np.linspace(0, 1, 300), dt)
big = lambda p, y: p[0] * jnp.exp(-p[1] * ts) + p[2] - y  # noqa: E731
yb = jnp.asarray(np.asarray(y[:, :1]) + np.zeros((B, 300)), dt)
bad = x0.at[3, 0].set(jnp.nan).at[5].set(2.5)
out = {}
for name, start in (("bounds", x0), ("bad", bad)):
    sol = fixedopt.least_squares(big, start, fixed, args=(yb,), batched=True, bounds=(lo, hi))
    for field in ("x", "value", "status", "reason", "steps"):
        out[f"{name}_{field}"] = np.asarray(getattr(sol, field))
np.savez(sys.argv[1], **out)
