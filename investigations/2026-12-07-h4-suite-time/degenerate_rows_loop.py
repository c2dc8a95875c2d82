"""The first test of tests/derivatives/test_degenerate_rows.py by part (process CPU s):
the batch's gradient, the first row alone's, the other 63 rows'. Run from the root."""
import time, sys
sys.path.insert(0, ".")
import conftest  # the suite's settings (x64, BLAS threads)
import jax, jax.numpy as jnp, numpy as np
from fixedopt.testing import no_compiles_ahead
import tests.derivatives.test_degenerate_rows as m
with no_compiles_ahead():
    kinds, x0, u, v, y = m.batch(64)
    weights = np.random.default_rng(1).normal(size=(64, 4)); weights[::9] = 0.0
    t = jnp.asarray(m.T)
    c = time.process_time()
    def loss(u, v, y, t):
        return jnp.sum(weights * m.solve(jnp.asarray(x0), u, v, y, t, batched=True).x)
    grads = jax.grad(loss, argnums=(0, 1, 2, 3))(u, v, y, t)
    jax.block_until_ready(grads); print("batch grad", time.process_time() - c)
    def row_loss(x0, u, v, y, t, w):
        return jnp.sum(w * m.solve(x0, u, v, y, t, batched=False).x)
    row_grad = jax.grad(row_loss, argnums=(1, 2, 3, 4))
    c = time.process_time()
    jax.block_until_ready(row_grad(x0[0], u[0], v[0], y[0], t, weights[0])); print("first row", time.process_time() - c)
    c = time.process_time()
    for i in range(1, 64):
        jax.block_until_ready(row_grad(x0[i], u[i], v[i], y[i], t, weights[i]))
    print("63 rows", time.process_time() - c)
