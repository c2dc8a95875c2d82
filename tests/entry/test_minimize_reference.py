"""``fixedopt.minimize`` (L-BFGS, batched, per-row masks) against independent references.

References (the problems and scipy's run: ``tests/helpers.py``):

* scipy's L-BFGS-B, one row at a time, with ``lb == ub`` on the fixed entries (the
  way scipy users fix parameters), run to a tighter tolerance than fixedopt, on the
  Moré, Garbow, Hillstrom (1981) problems and the quadratics below;
* for unbounded convex quadratics, the closed form of the reduced problem, solved with
  numpy on the free block: ``A_FF x_F = b_F - A_FX x_X``.

Objectives are defined once at module level: ``minimize`` compiles once per function.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import fixedopt
from tests.helpers import MGH, bits, extended_rosenbrock, heterogeneous_masks, scipy_lbfgsb

# XLA's expensive backend optimizations off: tolerances far above rounding (conftest.py)
pytestmark = pytest.mark.fewer_optimizations

BATCH = 32


# ----------------------------------------------------------------------------- helpers


def assert_fixed_bits(solution_x, x0, fixed):
    np.testing.assert_array_equal(bits(solution_x)[fixed], bits(x0)[fixed])


def assert_all_fixed_rows_stop_at_once(solution, fixed):
    rows = fixed.all(axis=1)
    assert np.all(np.asarray(solution.status)[rows] == fixedopt.Status.CONVERGED)
    assert np.all(np.asarray(solution.steps)[rows] == 0)


# --------------------------------------------------------------------------- (a) MGH


@pytest.mark.parametrize("name", list(MGH))
def test_mgh_problems_match_scipy_lbfgsb_with_lb_equal_ub(name):
    fun, standard_start = MGH[name]
    rng = np.random.default_rng(sum(map(ord, name)))
    n = standard_start.size
    x0 = standard_start + 0.1 * rng.normal(size=(BATCH, n))
    fixed = heterogeneous_masks(rng, BATCH, n)

    solution = fixedopt.minimize(fun, jnp.asarray(x0), jnp.asarray(fixed), batched=True)

    value_and_grad = jax.jit(jax.value_and_grad(fun))
    reference = np.array([scipy_lbfgsb(value_and_grad, x0[b], fixed[b])[1] for b in range(BATCH)])
    value = np.asarray(solution.value)
    assert_fixed_bits(solution.x, x0, fixed)
    assert_all_fixed_rows_stop_at_once(solution, fixed)
    as_good = value <= reference + 1e-8 * np.maximum(np.abs(reference), 1.0)
    assert as_good.mean() >= 0.95, (value[~as_good], reference[~as_good])
    assert np.asarray(solution.converged).mean() >= 0.95
    assert bool(solution.converged[0]) and as_good[0]  # the none-fixed row
    # The solution's reported value is the objective at the returned x.
    np.testing.assert_allclose(value, jax.vmap(fun)(solution.x), rtol=1e-12, atol=1e-12)


# -------------------------------------------------------------- (b) convex quadratics


def quadratic(x, matrix, linear):
    return 0.5 * x @ matrix @ x - linear @ x


def quadratic_value_and_grad(x, matrix, linear):
    """Numpy value and analytic gradient of :func:`quadratic` (for scipy)."""
    return 0.5 * x @ matrix @ x - linear @ x, matrix @ x - linear


def tridiagonal_spd(rng, n):
    off = -rng.uniform(0.0, 1.0, n - 1)
    return np.diag(2.5 + rng.uniform(0.0, 1.0, n)) + np.diag(off, 1) + np.diag(off, -1)


def dense_spd(rng, n):
    factor = rng.normal(size=(n, n))
    return factor @ factor.T / n + np.eye(n)


def reduced_closed_form(matrix, linear, x0, fixed):
    """Minimizer of the unbounded quadratic with the fixed entries pinned at x0."""
    free = ~fixed
    x = x0.copy()
    rhs = linear[free] - matrix[np.ix_(free, fixed)] @ x0[fixed]
    x[free] = np.linalg.solve(matrix[np.ix_(free, free)], rhs)
    return x


def quadratic_batch(kind, seed, batch=16, n=7):
    rng = np.random.default_rng(seed)
    make = {"tridiagonal": tridiagonal_spd, "dense": dense_spd}[kind]
    matrices = np.stack([make(rng, n) for _ in range(batch)])
    linear = 2.0 * rng.normal(size=(batch, n))
    x0 = rng.normal(size=(batch, n))
    return matrices, linear, x0, heterogeneous_masks(rng, batch, n, rate=0.4)


@pytest.mark.parametrize("kind", ["tridiagonal", "dense"])
def test_quadratic_matches_reduced_closed_form_and_scipy(kind):
    matrices, linear, x0, fixed = quadratic_batch(kind, seed=len(kind))
    solution = fixedopt.minimize(
        quadratic,
        jnp.asarray(x0),
        jnp.asarray(fixed),
        args=(jnp.asarray(matrices), jnp.asarray(linear)),
        batched=True,
        gtol=1e-9,
    )
    x = np.asarray(solution.x)
    assert_fixed_bits(x, x0, fixed)
    assert_all_fixed_rows_stop_at_once(solution, fixed)
    assert np.all(np.asarray(solution.converged))
    for b in range(len(x0)):
        closed = reduced_closed_form(matrices[b], linear[b], x0[b], fixed[b])
        scipy_x, _ = scipy_lbfgsb(
            quadratic_value_and_grad, x0[b], fixed[b], args=(matrices[b], linear[b])
        )
        np.testing.assert_allclose(x[b], closed, atol=1e-6, rtol=0)
        np.testing.assert_allclose(x[b], scipy_x, atol=1e-6, rtol=0)


@pytest.mark.parametrize("kind", ["tridiagonal", "dense"])
def test_bounded_quadratic_matches_scipy(kind):
    matrices, linear, x0, fixed = quadratic_batch(kind, seed=10 + len(kind))
    linear = 3.0 * linear  # pushes the unconstrained optimum out of the box
    lower, upper = -np.full_like(x0, 0.6), np.full_like(x0, 0.8)
    x0 = np.clip(x0, lower, upper)
    solution = fixedopt.minimize(
        quadratic,
        jnp.asarray(x0),
        jnp.asarray(fixed),
        bounds=(lower, upper),
        args=(jnp.asarray(matrices), jnp.asarray(linear)),
        batched=True,
        gtol=1e-9,
    )
    x = np.asarray(solution.x)
    assert_fixed_bits(x, x0, fixed)
    assert np.all(np.asarray(solution.converged))
    active = 0
    for b in range(len(x0)):
        scipy_x, _ = scipy_lbfgsb(
            quadratic_value_and_grad,
            x0[b],
            fixed[b],
            lower[b],
            upper[b],
            args=(matrices[b], linear[b]),
        )
        np.testing.assert_allclose(x[b], scipy_x, atol=1e-6, rtol=0)
        active += np.sum(~fixed[b] & ((scipy_x == lower[b]) | (scipy_x == upper[b])))
    assert active >= len(x0)  # the test exercises active bounds, many of them
    assert np.all((x >= lower) & (x <= upper))


# -------------------------------------------------- (c) active bounds, infeasible start


def test_infeasible_start_is_projected_and_bounded_rosenbrock_matches_scipy():
    """Free entries start outside the box; the optimum has bounds active."""
    rng = np.random.default_rng(7)
    n, batch = 6, 16
    lower = np.tile([-2.0, -1.0], n // 2) + np.zeros((batch, 1))
    upper = np.tile([0.5, 2.0], n // 2) + np.zeros((batch, 1))  # x_odd <= 0.5 is active
    fixed = heterogeneous_masks(rng, batch, n)
    inside = rng.uniform(lower, upper)
    outside = np.where(rng.random((batch, n)) < 0.5, upper + 1.5, lower - 1.5)
    x0 = np.where(fixed, inside, outside)  # fixed values must lie within the bounds
    solution = fixedopt.minimize(
        extended_rosenbrock,
        jnp.asarray(x0),
        jnp.asarray(fixed),
        bounds=(jnp.asarray(lower), jnp.asarray(upper)),
        batched=True,
    )
    x = np.asarray(solution.x)
    assert_fixed_bits(x, x0, fixed)
    assert_all_fixed_rows_stop_at_once(solution, fixed)
    assert np.all((x >= lower) & (x <= upper))
    assert np.asarray(solution.converged).mean() >= 0.95
    value_and_grad = jax.jit(jax.value_and_grad(extended_rosenbrock))
    reference = [
        scipy_lbfgsb(value_and_grad, x0[b], fixed[b], lower[b], upper[b]) for b in range(batch)
    ]
    reference_value = np.array([value for _, value in reference])
    value = np.asarray(solution.value)
    as_good = value <= reference_value + 1e-8 * np.maximum(np.abs(reference_value), 1.0)
    assert as_good.mean() >= 0.95, (value[~as_good], reference_value[~as_good])
    at_upper = np.array([ref_x == upper[b] for b, (ref_x, _) in enumerate(reference)])
    assert np.any(at_upper[0]), "row 0 should have an active bound at the optimum"
    np.testing.assert_allclose(x[0], reference[0][0], atol=1e-6)
