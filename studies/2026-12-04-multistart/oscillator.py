"""A damped oscillator with a sinusoidal drive, 64 fits: the drive amplitude starts at 0
and the drive frequency is a guess within 25% of the truth. A row whose drive frequency
is wrong keeps its amplitude near 0 (the drive's columns of the Jacobian vanish with
it): a local minimum, honestly CONVERGED. Does ``fixedopt.multistart`` (K = 8) get out?

    python studies/2026-12-04-multistart/oscillator.py
"""

import jax

jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import fixedopt  # noqa: E402

rng = np.random.default_rng(1)
ROWS = 64
T = jnp.linspace(0.0, 30.0, 300)
TRUE = np.stack([rng.uniform(0.5, 1.5, ROWS), rng.uniform(0.05, 0.2, ROWS),
                 rng.uniform(0.8, 1.2, ROWS), rng.uniform(0.5, 2.0, ROWS),
                 rng.uniform(1.5, 2.5, ROWS)], axis=1)  # fmt: skip


def model(p, t):
    """Transient ``a exp(-g t) cos(w t)`` plus drive ``f sin(W t)``."""
    return p[0] * jnp.exp(-p[1] * t) * jnp.cos(p[2] * t) + p[3] * jnp.sin(p[4] * t)


Y = jax.vmap(model, in_axes=(0, None))(jnp.asarray(TRUE), T) + 0.02 * rng.normal(size=(ROWS, 300))


def residual(p, y):
    return model(p, T) - y


def report(label, solution):
    amplitude = np.asarray(solution.x)[:, 3]
    found = int(np.sum(np.abs(amplitude - TRUE[:, 3]) / TRUE[:, 3] < 0.05))
    converged = int(np.sum(np.asarray(solution.converged)))
    stuck = int(np.sum(np.abs(amplitude) < 0.1))
    print(f"{label}: CONVERGED {converged}/{ROWS}, drive amplitude within 5% {found}/{ROWS}, "
          f"|amplitude| < 0.1 {stuck}")  # fmt: skip


if __name__ == "__main__":
    x0 = jnp.tile(jnp.array([1.0, 0.1, 1.0, 0.0, 2.0]), (ROWS, 1))
    options = dict(args=(Y,), batched=True, max_steps=500)
    report("least_squares (K = 1)", fixedopt.least_squares(residual, x0, False, **options))
    report(
        "multistart (K = 8)",
        fixedopt.multistart(fixedopt.least_squares, residual, x0, False, **options),
    )
    box = (jnp.array([0.0, 0.0, 0.5, -5.0, 1.0]), jnp.array([5.0, 1.0, 2.0, 5.0, 3.0]))
    report(
        "multistart (K = 8), bounds",
        fixedopt.multistart(fixedopt.least_squares, residual, x0, False, bounds=box, **options),
    )
    report("multistart (K = 32), bounds",
           fixedopt.multistart(fixedopt.least_squares, residual, x0, False, bounds=box, starts=32,
                               **options))  # fmt: skip
