"""Levenberg–Marquardt on a bound where the model's derivative vanishes.

A long step clipped ``c`` of a model in ``c**2`` onto its bound ``c = 0``, where the
column of ``J`` is zero whatever the other parameters: the entry could never leave, and
the fit stopped CONVERGED at a saddle of the bounded problem. Such an entry now stops
short of the bound, as scipy's trf keeps every iterate inside. References: the exact
parameters of noise-free data (scipy's ``test_dtypes2`` reaches them with ``"trf"``),
and a closed-form minimum on the bound.
"""

import jax.numpy as jnp
import numpy as np

import fixedopt

X = np.array([-32.0, -16, -8, 4, 4, 8, 16, 32])


def hyperbola(p, y):
    """scipy's ``test_dtypes2`` model (slopes, corner ``(o_x, o_y)``, curvature ``c``)."""
    s_1, s_2, o_x, o_y, c = p
    b_2, b_1 = (s_1 + s_2) / 2, (s_2 - s_1) / 2
    return o_y + b_1 * (X - o_x) + b_2 * jnp.sqrt((X - o_x) ** 2 + c**2 / 4) - y


def test_a_curvature_clipped_to_zero_by_the_first_step_recovers():
    """From scipy's start the first step takes ``c`` (0.5) below its lower bound 0: the
    fit reaches the exact parameters, ``c = 9.5``, as scipy's trf does (it stopped at
    ``c = 0``, CONVERGED, at a cost of 0.14 instead of 0)."""
    truth = np.array([-2.0, 0.4, -1.0, -5.0, 9.5])
    y = np.asarray(hyperbola(truth, 0.0))
    bounds = ([-3.0, 0.0, -2.0, -10.0, 0.0], [0.0, 3.0, 3.0, 0.0, 10.0])
    x0 = jnp.array([-2.5 / 3.0, 4 / 3.0, 1.0, -4.0, 0.5])
    solution = fixedopt.least_squares(hyperbola, x0, False, args=(y,), bounds=bounds)
    assert solution.status == fixedopt.Status.CONVERGED
    np.testing.assert_allclose(solution.x, truth, rtol=1e-6)


def test_a_minimum_on_such_a_bound_is_approached_from_inside():
    """``(a - 1)^2 + (c^2 + 1)^2``, ``c >= 0``: the minimum is on the bound, ``c = 0``,
    where the column of ``c`` vanishes. The row converges there from inside (``c``
    never negative), at the minimum's cost 0.5."""

    def residuals(p):
        return jnp.stack([p[0] - 1.0, p[1] ** 2 + 1.0])

    solution = fixedopt.least_squares(residuals, jnp.array([3.0, 0.5]), False,
                                      bounds=([-10.0, 0.0], [10.0, 10.0]))  # fmt: skip
    assert solution.status == fixedopt.Status.CONVERGED
    assert 0.0 <= float(solution.x[1]) < 1e-6
    np.testing.assert_allclose(solution.x[0], 1.0, rtol=1e-12)
    np.testing.assert_allclose(solution.value, 0.5, rtol=1e-12)
