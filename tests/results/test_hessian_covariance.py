"""``fixedopt.hessian_covariance`` against closed forms and finite differences.

References: the inverse of the free block of a quadratic's matrix (not the free block
of its inverse), the inverse of a Poisson likelihood's Hessian written out by hand,
and, for a linear least-squares problem, ``(J^T J)^{-1}`` computed in NumPy.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import fixedopt

# Covariances against closed forms and NumPy (to 1e-10 of matrices of small condition),
# statuses of rows with NaN data or on bounds: nothing XLA's backend optimizations
# change (conftest.py).
pytestmark = pytest.mark.fewer_optimizations


def random_spd(rng, n):
    a = rng.normal(size=(n, n))
    return a @ a.T + n * np.eye(n)


def quadratic(x, matrix, centre):
    d = x - centre
    return 0.5 * d @ matrix @ d


def test_quadratic_gives_the_inverse_of_the_free_block_per_row():
    rng = np.random.default_rng(0)
    batch, n = 5, 4
    matrices = np.stack([random_spd(rng, n) for _ in range(batch)])
    centres = rng.normal(size=(batch, n))
    fixed = rng.random((batch, n)) < 0.4
    fixed[0] = False
    x0 = np.where(fixed, 0.3, 0.0)
    sol = fixedopt.minimize(
        quadratic, jnp.asarray(x0), jnp.asarray(fixed), args=(matrices, centres), batched=True
    )
    cov = fixedopt.hessian_covariance(
        sol, quadratic, jnp.asarray(fixed), args=(matrices, centres), batched=True, scale=2.0
    )
    covariance = np.asarray(cov.covariance)
    for b in range(batch):
        free = ~fixed[b]
        expected = 2.0 * np.linalg.inv(matrices[b][np.ix_(free, free)])
        np.testing.assert_allclose(covariance[b][np.ix_(free, free)], expected, rtol=1e-10)
        assert np.all(covariance[b][fixed[b]] == 0.0) and np.all(covariance[b][:, fixed[b]] == 0.0)
    assert not np.any(np.asarray(cov.rank_deficient))
    np.testing.assert_array_equal(np.asarray(cov.residual_variance), 2.0)


def poisson_nll(p, t, counts):
    mu = p[0] * jnp.exp(-p[1] * t) + p[2]
    return jnp.sum(mu - jax.scipy.special.xlogy(counts, mu))


def poisson_hessian(a, rate, c, t, counts):
    """The Hessian of ``poisson_nll`` in ``(a, rate)``, by hand:
    ``sum((1 - y / mu) d2mu + (y / mu**2) dmu dmu^T)``."""
    e = np.exp(-rate * t)
    mu = a * e + c
    dmu = np.stack([e, -a * t * e])
    d2mu = np.array([[np.zeros_like(t), -t * e], [-t * e, a * t**2 * e]])
    first = np.einsum("m,ijm->ij", 1.0 - counts / mu, d2mu)
    return first + np.einsum("m,im,jm->ij", counts / mu**2, dmu, dmu)


def test_negative_log_likelihood_gives_the_inverse_observed_information():
    rng = np.random.default_rng(1)
    t = np.linspace(0.0, 3.0, 40)
    counts = rng.poisson(200.0 * np.exp(-1.2 * t) + 5.0).astype(float)
    fixed = np.array([False, False, True])
    start = np.array([150.0, 1.0, 5.0])
    sol = fixedopt.minimize(poisson_nll, jnp.asarray(start), fixed, args=(t, counts), gtol=1e-12)
    cov = fixedopt.hessian_covariance(sol, poisson_nll, fixed, args=(t, counts))
    expected = np.linalg.inv(poisson_hessian(*np.asarray(sol.x), t, counts))
    np.testing.assert_allclose(np.asarray(cov.covariance)[:2, :2], expected, rtol=1e-10)
    assert np.asarray(cov.stderr)[2] == 0.0 and int(cov.dof) == -1


def test_linear_least_squares_matches_the_normal_matrix():
    rng = np.random.default_rng(2)
    design = rng.normal(size=(30, 3))
    y = design @ np.array([1.0, -2.0, 0.5]) + 0.1 * rng.normal(size=30)
    half_chi2 = lambda p: 0.5 * jnp.sum((design @ p - y) ** 2)
    sol = fixedopt.minimize(half_chi2, jnp.zeros(3), False)
    cov = fixedopt.hessian_covariance(sol, half_chi2, False)
    np.testing.assert_allclose(cov.covariance, np.linalg.inv(design.T @ design), rtol=1e-10)


def test_a_row_with_nan_data_has_no_covariance():
    """A quadratic's Hessian does not read its centre: a row whose centre holds a NaN
    (its solve NONFINITE) still gets a NaN free block, the other rows theirs."""
    rng = np.random.default_rng(3)
    matrices = np.stack([random_spd(rng, 3) for _ in range(4)])
    centres = rng.normal(size=(4, 3))
    centres[1, 2] = np.nan
    fixed = np.array([[False, True, False]] * 4)
    x0 = jnp.zeros((4, 3))
    sol = fixedopt.minimize(quadratic, x0, fixed, args=(matrices, centres), batched=True)
    assert np.asarray(sol.status)[1] == fixedopt.Status.NONFINITE
    covariance = np.asarray(
        fixedopt.hessian_covariance(sol, quadratic, args=(matrices, centres)).covariance
    )
    free = ~fixed[1]
    assert np.all(np.isnan(covariance[1][np.ix_(free, free)])) and np.all(
        covariance[1][fixed[1]] == 0
    )
    for b in (0, 2, 3):
        expected = np.linalg.inv(matrices[b][np.ix_(free, free)])
        np.testing.assert_allclose(covariance[b][np.ix_(free, free)], expected, rtol=1e-10)


def test_a_row_stopped_at_a_nan_wall_has_no_covariance():
    """NaN beyond x[0] = 2, the first row's minimum at 3: it stops NONFINITE at a finite
    point (no minimum; an x alone there would get the Hessian's inverse) and its free
    block is NaN; the second row's minimum is inside: the closed form."""
    fun = lambda x, c: jnp.where(x[0] > 2.0, jnp.nan, (x[0] - c) ** 2 + 3 * x[1] ** 2 + x[2] ** 2)
    fixed = jnp.array([[False, False, True]] * 2)
    centres = jnp.array([3.0, 1.0])
    sol = fixedopt.minimize(fun, jnp.zeros((2, 3)), fixed, args=(centres,), batched=True)
    status = [fixedopt.Status(int(s)) for s in sol.status]
    assert status == [fixedopt.Status.NONFINITE, fixedopt.Status.CONVERGED]
    assert np.isfinite(float(sol.value[0]))
    covariance = np.asarray(fixedopt.hessian_covariance(sol, fun, args=(centres,)).covariance)
    assert np.all(np.isnan(covariance[0, :2, :2])) and np.all(covariance[0, 2] == 0)
    np.testing.assert_allclose(covariance[1], np.diag([0.5, 1.0 / 6.0, 0.0]), rtol=1e-10)
    alone = fixedopt.hessian_covariance(sol.x, fun, fixed, args=(centres,), batched=True)
    assert np.all(np.isfinite(np.asarray(alone.covariance)[0]))


def test_saddle_is_flagged_and_nan():
    saddle = lambda x: x[0] ** 2 - x[1] ** 2 + x[2] ** 2
    x = jnp.zeros((2, 3))
    fixed = jnp.array([[False, False, False], [False, True, False]])  # row 1: no saddle
    cov = fixedopt.hessian_covariance(x, saddle, fixed, batched=True)
    np.testing.assert_array_equal(np.asarray(cov.rank_deficient), [True, False])
    assert np.all(np.isnan(np.asarray(cov.stderr)[0]))
    np.testing.assert_allclose(np.asarray(cov.stderr)[1], [np.sqrt(0.5), 0.0, np.sqrt(0.5)])


def test_at_bound_free_keeps_and_fixed_holds_a_parameter_on_its_bound():
    matrix = np.array([[2.0, 0.8], [0.8, 1.0]])
    fun = lambda x: quadratic(x, matrix, np.array([1.0, -1.0]))
    bounds = (np.array([-np.inf, 0.0]), np.array([np.inf, np.inf]))
    sol = fixedopt.minimize(fun, jnp.array([0.0, 1.0]), False, bounds=bounds)
    assert float(sol.x[1]) == 0.0
    free = fixedopt.hessian_covariance(sol, fun, False, bounds=bounds, at_bound="free")
    held = fixedopt.hessian_covariance(sol, fun, False, bounds=bounds, at_bound="fixed")
    np.testing.assert_array_equal(np.asarray(free.at_bound), [False, True])
    np.testing.assert_array_equal(np.asarray(held.at_bound), [False, True])
    np.testing.assert_allclose(free.covariance, np.linalg.inv(matrix), rtol=1e-12)
    np.testing.assert_allclose(held.covariance, [[0.5, 0.0], [0.0, 0.0]], rtol=1e-12)


def test_float32_and_bad_input():
    matrix = random_spd(np.random.default_rng(3), 3).astype(np.float32)
    fun = lambda x: quadratic(x, matrix, np.zeros(3, np.float32))
    cov = fixedopt.hessian_covariance(jnp.zeros(3, jnp.float32), fun, False)
    assert cov.covariance.dtype == jnp.float32
    np.testing.assert_allclose(cov.covariance, np.linalg.inv(matrix), rtol=1e-4)
    with pytest.raises(ValueError, match="`scale` must be a positive number"):
        fixedopt.hessian_covariance(jnp.zeros(3), fun, False, scale=0.0)
    with pytest.raises(ValueError, match="`at_bound` must be one of"):
        fixedopt.hessian_covariance(jnp.zeros(3), fun, False, at_bound="drop")
    with pytest.raises(TypeError, match="`fun` must be callable"):
        fixedopt.hessian_covariance(jnp.zeros(3), None, False)
