"""``fixedopt.minimize`` (L-BFGS, batched, per-row masks) against independent references.

References:

* scipy's L-BFGS-B, one row at a time, with ``lb == ub`` on the fixed entries (the
  way scipy users fix parameters), run to a tighter tolerance than fixedopt;
* for unbounded convex quadratics, the closed form of the reduced problem, solved with
  numpy on the free block: ``A_FF x_F = b_F - A_FX x_X``.

Objectives are defined once at module level: ``minimize`` compiles once per function.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.optimize

import fixedopt

BATCH = 32
SCIPY_OPTIONS = {"gtol": 1e-10, "ftol": 1e-15, "maxiter": 10_000, "maxfun": 50_000}


# ------------------------------------------------- Moré, Garbow, Hillstrom (1981) problems


def extended_rosenbrock(x):
    odd, even = x[0::2], x[1::2]
    return jnp.sum(100.0 * (even - odd**2) ** 2 + (1.0 - odd) ** 2)


def extended_powell_singular(x):
    a, b, c, d = x[0::4], x[1::4], x[2::4], x[3::4]
    return jnp.sum(
        (a + 10.0 * b) ** 2 + 5.0 * (c - d) ** 2 + (b - 2.0 * c) ** 4 + 10.0 * (a - d) ** 4
    )


def trigonometric(x):
    n = x.shape[0]
    i = jnp.arange(1, n + 1, dtype=x.dtype)
    residuals = n - jnp.sum(jnp.cos(x)) + i * (1.0 - jnp.cos(x)) - jnp.sin(x)
    return jnp.sum(residuals**2)


def wood(x):
    x1, x2, x3, x4 = x[0], x[1], x[2], x[3]
    return (
        100.0 * (x2 - x1**2) ** 2
        + (1.0 - x1) ** 2
        + 90.0 * (x4 - x3**2) ** 2
        + (1.0 - x3) ** 2
        + 10.1 * ((x2 - 1.0) ** 2 + (x4 - 1.0) ** 2)
        + 19.8 * (x2 - 1.0) * (x4 - 1.0)
    )


def broyden_tridiagonal(x):
    padded = jnp.concatenate([jnp.zeros(1, x.dtype), x, jnp.zeros(1, x.dtype)])
    residuals = (3.0 - 2.0 * x) * x - padded[:-2] - 2.0 * padded[2:] + 1.0
    return jnp.sum(residuals**2)


MGH = {
    "extended_rosenbrock": (extended_rosenbrock, np.tile([-1.2, 1.0], 4)),
    "extended_powell_singular": (extended_powell_singular, np.tile([3.0, -1.0, 0.0, 1.0], 2)),
    "trigonometric": (trigonometric, np.full(6, 1.0 / 6.0)),
    "wood": (wood, np.array([-3.0, -1.0, -3.0, -1.0])),
    "broyden_tridiagonal": (broyden_tridiagonal, -np.ones(8)),
}


# ----------------------------------------------------------------------------- helpers


def bits(array):
    """Raw bits of a float64 array (so -0.0 and 0.0 differ)."""
    return np.asarray(array, np.float64).view(np.uint64)


def heterogeneous_masks(rng, batch, n, rate=0.3):
    """Random per-row masks; row 0 none fixed, row 1 all fixed, row 2 one fixed."""
    fixed = rng.random((batch, n)) < rate
    fixed[0] = False
    fixed[1] = True
    fixed[2] = False
    fixed[2, n // 2] = True
    return fixed


def scipy_lbfgsb(value_and_grad, x0, fixed, lower=None, upper=None, args=()):
    """scipy's L-BFGS-B on one row, with ``lb == ub == x0`` on the fixed entries."""
    n = x0.size
    lower = np.full(n, -np.inf) if lower is None else np.array(lower, np.float64)
    upper = np.full(n, np.inf) if upper is None else np.array(upper, np.float64)
    lower[fixed], upper[fixed] = x0[fixed], x0[fixed]
    bounds = [
        (lo if np.isfinite(lo) else None, hi if np.isfinite(hi) else None)
        for lo, hi in zip(lower, upper)
    ]

    def fun(z):
        value, grad = value_and_grad(z, *args)
        return float(value), np.asarray(grad, np.float64)

    result = scipy.optimize.minimize(
        fun, x0, jac=True, method="L-BFGS-B", bounds=bounds, options=SCIPY_OPTIONS
    )
    return result.x, result.fun


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
