"""``fixedopt.least_squares`` against ``scipy.optimize.least_squares``, one shared
keyword at a time: ``bounds``, ``jac``, ``loss`` with ``f_scale``, ``x_scale`` and
``max_nfev`` (docs/scipy.md lists where they differ; the named robust losses are
compared with scipy's in ``tests/objective/test_losses.py``).

Reference: scipy's ``least_squares`` (its default ``method="trf"``) on the same
problem, with the exact Jacobian; both at tolerances of 1e-15 where the optimum is
compared (at its defaults, ``sqrt(eps)``, fixedopt stops within 1e-8 of it).
"""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.optimize

import fixedopt

T = np.linspace(0.0, 3.0, 30)
# A small, fixed misfit, and three outliers (every tenth point 0.3 high).
Y = 2.0 * np.exp(-1.3 * T) + 0.5 + 0.01 * np.sin(7.0 * T) + np.where(np.arange(30) % 10, 0, 0.3)
X0 = np.array([1.0, 1.0, 0.7])
TIGHT = dict(ftol=1e-15, xtol=1e-15, gtol=1e-15)


def residual(p, y):
    return p[0] * jnp.exp(-p[1] * T) + p[2] - y


def jacobian(p, y):
    """The exact Jacobian, in scipy's signature ``jac(x, *args) -> (m, n)``."""
    e = jnp.exp(-p[1] * T)
    return jnp.stack([e, -p[0] * T * e, jnp.ones_like(T)], axis=1)


def scipy_fit(x0=X0, **options):
    fun = lambda p, y: np.asarray(residual(p, y))
    jac = lambda p, y: np.asarray(jacobian(p, y))
    return scipy.optimize.least_squares(fun, x0, jac=jac, args=(Y,), **TIGHT | options)


def fit(x0=X0, **options):
    return fixedopt.least_squares(residual, jnp.asarray(x0), False, args=(jnp.asarray(Y),),
                                  **TIGHT | options)  # fmt: skip


def test_bounds_as_a_pair_or_scipys_bounds_give_scipys_constrained_fit():
    """The offset's lower bound 0.6 excludes its free optimum (0.5): active at the
    solution, where fixedopt's entry sits on the bound exactly (scipy's trf, an
    interior method, ends within ~1e-10 of it)."""
    lower, upper = [0.0, 0.0, 0.6], [5.0, 5.0, 5.0]
    reference = scipy_fit(bounds=(lower, upper))
    for bounds in ((lower, upper), scipy.optimize.Bounds(lower, upper)):
        solution = fit(bounds=bounds)
        assert solution.status == fixedopt.Status.CONVERGED
        assert float(solution.x[2]) == 0.6
        np.testing.assert_allclose(solution.x, reference.x, rtol=1e-8)
        np.testing.assert_allclose(solution.value, reference.cost, rtol=1e-12)  # scipy's cost
    outside = np.array([1.0, 1.0, 0.0])
    with pytest.raises(ValueError, match="Initial guess is outside of provided bounds"):
        scipy_fit(outside, bounds=(lower, upper))
    with pytest.raises(ValueError, match=re.escape("`x0` is infeasible: entry 2 is 0.0, outside")):
        fit(outside, bounds=(lower, upper))


def test_jac_is_scipys_callable_and_a_difference_scheme_is_the_exact_derivative():
    """The same callable ``jac(x, *args)`` in both gives scipy's fit; ``"2-point"``
    gives fixedopt JAX's exact derivative (scipy differences the residuals)."""
    reference = scipy_fit()
    exact = fit(jac=jacobian)
    np.testing.assert_allclose(exact.x, reference.x, rtol=1e-9)
    np.testing.assert_allclose(exact.value, reference.cost, rtol=1e-12)
    np.testing.assert_allclose(fit(jac="2-point").x, exact.x, rtol=1e-12)


def test_a_callable_loss_is_rho_alone_with_scipys_f_scale():
    """scipy's callable loss returns ``rho`` and its two derivatives, ``(3, m)``;
    fixedopt's returns ``rho`` (JAX differentiates it). The same ``rho`` (soft_l1)
    with ``f_scale=0.05`` gives scipy's robust fit and its cost."""

    def scipy_rho(z):
        return np.stack([2.0 * (np.sqrt(1.0 + z) - 1.0), (1.0 + z) ** -0.5,
                         -0.5 * (1.0 + z) ** -1.5])  # fmt: skip

    reference = scipy_fit(loss=scipy_rho, f_scale=0.05)
    solution = fit(loss=lambda z: 2.0 * (jnp.sqrt(1.0 + z) - 1.0), f_scale=0.05)
    np.testing.assert_allclose(solution.x, reference.x, rtol=1e-8)
    np.testing.assert_allclose(solution.value, reference.cost, rtol=1e-10)
    assert not np.allclose(reference.x, scipy_fit().x, rtol=1e-3)  # the loss mattered


def test_x_scale_is_jac_only():
    """``x_scale="jac"`` (and None, the same) on a decay in physical units (an
    amplitude of 2000 counts, a rate of 1.3e-3 per ms: 1e6 apart) gives scipy's
    ``x_scale="jac"`` fit; scipy's numeric scales are refused."""
    milliseconds = 1e3 * T
    y = 2e3 * np.exp(-1.3e-3 * milliseconds) + 5e2 + 10.0 * np.sin(7.0 * T)

    def counts(p, y):
        return p[0] * jnp.exp(-p[1] * milliseconds) + p[2] - y

    start = np.array([1.5e3, 1e-3, 7e2])
    derivative = jax.jacfwd(counts)  # scipy's differences leave its fit 1e-8 off here
    reference = scipy.optimize.least_squares(
        lambda p: np.asarray(counts(p, y)), start, x_scale="jac", **TIGHT,
        jac=lambda p: np.asarray(derivative(p, y)),
    )  # fmt: skip
    solutions = [fixedopt.least_squares(counts, jnp.asarray(start), False,
                                        args=(jnp.asarray(y),), x_scale=x_scale, **TIGHT)
                 for x_scale in ("jac", None)]  # fmt: skip
    np.testing.assert_array_equal(solutions[0].x, solutions[1].x)
    np.testing.assert_allclose(solutions[0].x, reference.x, rtol=1e-8)
    message = "`x_scale` must be 'jac' (or None), got 1.0"
    with pytest.raises(ValueError, match="^" + re.escape(message)):
        fit(x_scale=1.0)


def test_max_nfev_counts_iterations_where_scipy_counts_evaluations():
    """Both stop short at ``max_nfev=3``, unconverged: scipy after 3 evaluations of
    the residuals, fixedopt after 3 iterations (4 evaluations of the residuals and
    their Jacobian, the start's included)."""
    reference = scipy_fit(np.array([1.0, 1.0, 0.0]), max_nfev=3)
    assert reference.status == 0 and reference.nfev == 3  # max_nfev reached
    solution = fit(np.array([1.0, 1.0, 0.0]), max_nfev=3)
    assert solution.status == fixedopt.Status.MAX_STEPS and int(solution.steps) == 3
