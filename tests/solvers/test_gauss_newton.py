"""Gauss–Newton where its model fails: one residual with a non-zero minimum.

There ``J`` vanishes at the minimum while the residual does not: the Gauss–Newton step
(``-r / J``) is far too long, every full step predicts the whole residual away, and no
MINPACK test holds. Such rows ran to ``max_steps`` (1000) at their minimum; they now
stop CONVERGED (PRECISION) within a few steps where a step changes ``f`` by rounding
and its secant predicts no more than rounding to gain. References: the closed-form
minima, and rows that are not stationary keep their verdicts.
"""

import jax.numpy as jnp
import numpy as np
import pytest

import fixedopt
from fixedopt import Reason, Status


def residuals(x, offset, center):
    """One residual, ``(x0 - center)^2 + offset`` plus a fixed entry's contribution:
    the minimum is ``x0 = center``, with residual ``offset`` (non-zero: J vanishes
    there) or, for a negative offset, a zero residual at ``center ± sqrt(-offset)``."""
    return jnp.stack([(x[0] - center) ** 2 + offset + 0.1 * x[1]])


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
def test_one_residual_at_a_non_zero_minimum_converges_at_working_precision(dtype):
    """Rows with a non-zero minimum (offsets 1 and 3, centers 0 and 2) stop CONVERGED
    (PRECISION) in a few steps at the closed-form minimum; rows with a zero residual
    (offset -1) still converge by MINPACK's gradient test; the fixed entry stays."""
    offset = np.array([1.0, 3.0, 1.0, -1.0], dtype)
    center = np.array([0.0, 2.0, 2.0, 0.0], dtype)
    x0 = jnp.asarray([[0.7, 0.5], [2.9, 0.0], [1.2, -1.0], [0.5, 0.0]], dtype)
    fixed = jnp.zeros((4, 2), bool).at[:, 1].set(True)
    sol = fixedopt.least_squares(residuals, x0, fixed, args=(offset, center), batched=True,
                                 solver=fixedopt.GaussNewton(), max_steps=1000)  # fmt: skip
    statuses = [Status(int(s)).name for s in sol.status]
    reasons = [Reason(int(r)).name for r in sol.reason]
    assert statuses == ["CONVERGED"] * 4, statuses
    assert reasons[:3] == ["PRECISION"] * 3, reasons
    assert np.all(np.asarray(sol.steps)[:3] <= 20), sol.steps  # was 1000 (MAX_STEPS)
    eps = float(np.finfo(dtype).eps)
    x, values = np.asarray(sol.x, float), np.asarray(sol.value, float)
    # f - f* = (x - center)^2 (offset + ...): at working precision, |x - center| of
    # order sqrt(eps) (rounding of f) in the units of the problem.
    np.testing.assert_allclose(x[:3, 0], center[:3], atol=30 * np.sqrt(eps))
    f_star = 0.5 * (offset[:3] + 0.1 * np.asarray(x0)[:3, 1]) ** 2
    np.testing.assert_allclose(values[:3], f_star, rtol=10 * eps)
    np.testing.assert_allclose(abs(x[3, 0]), 1.0, rtol=np.sqrt(eps))
    np.testing.assert_array_equal(np.asarray(sol.x)[:, 1], np.asarray(x0)[:, 1])


def test_a_row_far_from_its_minimum_is_not_converged():
    """One residual of three parameters, ``|x|^2 + 1``: the Gauss–Newton direction
    with Marquardt's diagonal ridge is poor (its entries grow as ``1 / x_i``), and the
    row stalls far from the minimum at 0 (f = 0.84 against 0.5): it must not stop
    CONVERGED; Levenberg–Marquardt reaches the minimum."""

    def sphere(x):
        return jnp.stack([jnp.sum(x**2) + 1.0])

    x0 = jnp.linspace(0.2, 0.9, 3)
    free = jnp.zeros(3, bool)
    sol = fixedopt.least_squares(sphere, x0, free, solver=fixedopt.GaussNewton(), max_steps=300)
    reference = fixedopt.least_squares(sphere, x0, free)
    assert bool(reference.converged) and abs(float(reference.value) - 0.5) < 1e-12
    assert not bool(sol.converged) or abs(float(sol.value) - 0.5) < 1e-12
