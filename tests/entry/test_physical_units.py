"""Fits in physical units in float32 (JAX's default): parameters whose Jacobian columns
are many orders of magnitude apart, and gradients far below ``eps |x|``. Each case ended
CONVERGED at a wrong answer before (found by testing fixedopt.models as users use it)."""

import jax.numpy as jnp
import numpy as np

import fixedopt
from fixedopt import Status

T = np.linspace(0.0, 20e-9, 256, dtype=np.float32)  # seconds
DECAY = (1.1e4 * np.exp(-T / 2.33e-9)).astype(np.float32)  # counts, lifetime 2.33 ns
X = np.linspace(1000.0, 4000.0, 601, dtype=np.float32)  # wavenumbers
PEAK = (1e-6 * np.exp(-((X - 2500.0) ** 2) / (2 * 30.0**2))).astype(np.float32)  # absorbance


def decay_residual(p):
    return p[0] * jnp.exp(-T / p[1]) - DECAY


def peak_residual(p):
    return p[0] * jnp.exp(-((X - p[1]) ** 2) / (2 * p[2] ** 2)) - PEAK


def test_a_decay_in_seconds_and_counts_reaches_its_lifetime():
    """Squared column norms ~1e25 apart: the counts' damping weight was floored at
    eps times the lifetime's, and the fit stopped CONVERGED at its start."""
    start = jnp.array([8e3, 1.5e-9], jnp.float32)
    solution = fixedopt.least_squares(decay_residual, start, jnp.zeros(2, bool))
    assert solution.status == Status.CONVERGED
    np.testing.assert_allclose(solution.x, [1.1e4, 2.33e-9], rtol=1e-4)
    popt, _ = fixedopt.curve_fit(lambda t, a, tau: a * jnp.exp(-t / tau), T, DECAY, p0=start)
    np.testing.assert_allclose(popt, [1.1e4, 2.33e-9], rtol=1e-4)


def test_an_inactive_bound_does_not_stop_a_small_gradient():
    """A peak of height 1e-6 at x = 2500: its gradient is below eps |x|, and
    ``x - clip(x - g)`` rounded it to 0, so a bound that is never active (sigma >= 0)
    made the fit pass gtol at its second step. Bounded and unbounded now agree."""
    start = jnp.array([1.3e-6, 2490.0, 35.0], jnp.float32)
    lower = jnp.array([-jnp.inf, -jnp.inf, 0.0], jnp.float32)
    bounds = (lower, jnp.full(3, jnp.inf, jnp.float32))
    fixed = jnp.zeros(3, bool)
    bounded = fixedopt.least_squares(peak_residual, start, fixed, bounds=bounds)
    free = fixedopt.least_squares(peak_residual, start, fixed)
    assert bounded.status == free.status == Status.CONVERGED
    np.testing.assert_allclose(bounded.x, [1e-6, 2500.0, 30.0], rtol=1e-3)
    np.testing.assert_allclose(bounded.x, free.x, rtol=1e-5)


def test_the_projected_gradient_inside_the_bounds_is_the_gradient():
    x = jnp.array([2500.0, 1.0], jnp.float32)
    grad = jnp.array([1e-10, -3.0], jnp.float32)
    problem = fixedopt.Problem(
        value_and_grad=None, fixed=jnp.zeros(2, bool), fixed_values=jnp.zeros(2, jnp.float32),
        lower=jnp.array([0.0, 0.0], jnp.float32), upper=jnp.array([jnp.inf, 2.0], jnp.float32),
    )  # fmt: skip
    # inside: the gradient itself; at the upper bound of 2, x - upper
    expected = np.array([1e-10, -1.0], np.float32)
    np.testing.assert_array_equal(problem.projected_gradient(x, grad), expected)
