"""``fixedopt.least_squares`` against scipy on the reduced (free-parameters-only) problem.

Reference: ``scipy.optimize.least_squares`` (method ``"trf"``, tight tolerances) run on
a vector holding only the free parameters of each row, the fixed ones scattered back
inside the residual function (scipy rejects ``lb == ub``, so this is how scipy users
fix parameters). Costs follow scipy's convention, ``0.5 * sum(r**2)``.
"""

import functools
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.optimize

import fixedopt
from tests.helpers import RESIDUAL_SOLVERS, bits

# scipy's least_squares within 1e-10 to 1e-6, fixed entries' bits, and scipy's names for
# the same options giving the same program: none rests on the backend's rounding.
pytestmark = pytest.mark.fewer_optimizations

T = np.linspace(0.0, 4.0, 40)
BATCH = 16


def decay(p, y):
    """Exponential decay with an offset: ``a exp(-k t) + c``."""
    return p[0] * jnp.exp(-p[1] * T) + p[2] - y


def gaussian(t, amplitude, center, width):
    return amplitude * jnp.exp(-0.5 * ((t - center) / width) ** 2)


def two_peaks(p, y):
    """The sum of two Gaussian peaks (amplitude, center, width each)."""
    return gaussian(T, p[0], p[1], p[2]) + gaussian(T, p[3], p[4], p[5]) - y


MODELS = {
    # name: (residual function, true parameters, standard start)
    "decay": (decay, [2.0, 1.3, 0.5], [1.0, 1.0, 0.0]),
    "two_peaks": (two_peaks, [1.0, 1.2, 0.4, 0.7, 2.8, 0.5], [0.8, 1.0, 0.5, 0.5, 3.0, 0.6]),
}


# ----------------------------------------------------------------------------- helpers


def noisy_fits(name, seed, batch=BATCH):
    """Per-row true parameters, noisy data, a start and a mask fixing true values."""
    residual, truth, start = MODELS[name]
    rng = np.random.default_rng(seed)
    n = len(truth)
    truths = np.asarray(truth) * (1.0 + 0.1 * rng.normal(size=(batch, n)))
    clean = np.stack([np.asarray(residual(p, np.zeros_like(T))) for p in truths])
    data = clean + 0.02 * rng.normal(size=clean.shape)
    fixed = rng.random((batch, n)) < 0.3
    fixed[0], fixed[1] = False, True  # a none-fixed and an all-fixed row
    x0 = np.where(fixed, truths, np.asarray(start) + 0.05 * rng.normal(size=(batch, n)))
    return x0, fixed, data


@functools.cache
def compiled(residual):
    """The residual function and its Jacobian, jitted once per model."""
    return jax.jit(residual), jax.jit(jax.jacfwd(residual))


def scipy_reduced(residual, x0, fixed, data, lower=None, upper=None):
    """scipy's least_squares over the free parameters only; returns (x, cost)."""
    free = ~fixed
    residual_jit, jacobian_jit = compiled(residual)

    def full(z):
        p = x0.copy()
        p[free] = z
        return p

    if not free.any():
        return x0, 0.5 * float(np.sum(np.asarray(residual_jit(x0, data)) ** 2))
    bounds = (-np.inf, np.inf) if lower is None else (lower[free], upper[free])
    result = scipy.optimize.least_squares(
        lambda z: np.asarray(residual_jit(full(z), data)),
        x0[free],
        jac=lambda z: np.asarray(jacobian_jit(full(z), data))[:, free],
        bounds=bounds,
        method="trf",
        ftol=1e-14,
        xtol=1e-14,
        gtol=1e-14,
    )
    return full(result.x), result.cost


def solve(name, x0, fixed, data, **options):
    residual = MODELS[name][0]
    return fixedopt.least_squares(
        residual,
        jnp.asarray(x0),
        jnp.asarray(fixed),
        args=(jnp.asarray(data),),
        batched=True,
        **options,
    )


def assert_cost_as_low_as(cost, reference, rtol=1e-8):
    ok = cost <= reference * (1.0 + rtol) + 1e-300
    assert ok.all(), (np.flatnonzero(~ok), cost[~ok], reference[~ok])


# ------------------------------------------------------------------------- the fits


@pytest.mark.parametrize("solver_name", list(RESIDUAL_SOLVERS))
@pytest.mark.parametrize("name", list(MODELS))
def test_batched_fits_match_scipy_on_the_free_parameters(name, solver_name):
    x0, fixed, data = noisy_fits(name, seed=len(name))
    solution = solve(name, x0, fixed, data, solver=RESIDUAL_SOLVERS[solver_name])
    residual = MODELS[name][0]
    reference = np.array(
        [scipy_reduced(residual, x0[b], fixed[b], data[b])[1] for b in range(len(x0))]
    )
    np.testing.assert_array_equal(bits(solution.x)[fixed], bits(x0)[fixed])
    assert np.all(np.asarray(solution.converged))
    assert int(solution.steps[1]) == 0  # the all-fixed row
    cost = np.asarray(solution.value)
    assert_cost_as_low_as(cost, reference)
    # scipy's convention: the value is half the sum of squared residuals at x.
    at_x = 0.5 * jnp.sum(jax.vmap(residual)(solution.x, jnp.asarray(data)) ** 2, axis=1)
    np.testing.assert_allclose(cost, at_x, rtol=1e-12)


def test_minimize_solvers_work_on_least_squares_too():
    """LBFGS on the sum of squares reaches the same cost as scipy's reduced fit."""
    x0, fixed, data = noisy_fits("decay", seed=3)
    solution = solve("decay", x0, fixed, data, solver=fixedopt.LBFGS(), gtol=1e-10)
    reference = np.array(
        [scipy_reduced(decay, x0[b], fixed[b], data[b])[1] for b in range(len(x0))]
    )
    np.testing.assert_array_equal(bits(solution.x)[fixed], bits(x0)[fixed])
    assert_cost_as_low_as(np.asarray(solution.value), reference)


# ---------------------------------------------------- fixed entries kill Jacobian columns


@pytest.mark.parametrize("solver_name", list(RESIDUAL_SOLVERS))
def test_zero_jacobian_columns_from_a_fixed_zero_amplitude(solver_name):
    """Fixing the second peak's amplitude at 0 makes its center and width columns of
    the Jacobian exactly zero though they are free: no NaN, and the fit of the first
    peak matches scipy's fit of a one-peak model."""
    x0, fixed, data = noisy_fits("two_peaks", seed=11)
    x0[:, 3], fixed[:, 3] = 0.0, True
    fixed[:, 4:] = False
    solution = solve("two_peaks", x0, fixed, data, solver=RESIDUAL_SOLVERS[solver_name])
    x = np.asarray(solution.x)
    assert np.all(np.isfinite(x)) and np.all(np.isfinite(np.asarray(solution.value)))
    assert np.all(np.asarray(solution.converged))
    np.testing.assert_array_equal(bits(x)[fixed], bits(x0)[fixed])
    np.testing.assert_allclose(x[:, 4:], x0[:, 4:], atol=1e-12)  # zero gradient there
    reduced_fixed = fixed.copy()
    reduced_fixed[:, 4:] = True  # the dead parameters are not parameters of the fit
    reference = np.array(
        [scipy_reduced(two_peaks, x0[b], reduced_fixed[b], data[b])[1] for b in range(BATCH)]
    )
    assert_cost_as_low_as(np.asarray(solution.value), reference)


# ------------------------------------------------------------------------------ bounds


@pytest.mark.parametrize("solver_name", list(RESIDUAL_SOLVERS))
def test_bounds_match_scipy_trf_on_the_free_parameters(solver_name):
    """Bounds exclude the true rate and offset, so they are active at the solution."""
    x0, fixed, data = noisy_fits("decay", seed=5)
    lower = np.broadcast_to([0.0, 0.2, -1.0], x0.shape).copy()
    upper = np.broadcast_to([5.0, 1.0, 0.3], x0.shape).copy()
    fixed[:, 1:] = False  # fixed rates/offsets would lie outside the bounds
    x0 = np.clip(x0, lower, upper)
    solution = solve(
        "decay", x0, fixed, data, solver=RESIDUAL_SOLVERS[solver_name], bounds=(lower, upper)
    )
    x = np.asarray(solution.x)
    np.testing.assert_array_equal(bits(x)[fixed], bits(x0)[fixed])
    assert np.all((x >= lower) & (x <= upper))
    assert np.all(np.asarray(solution.converged))
    reference = [
        scipy_reduced(decay, x0[b], fixed[b], data[b], lower[b], upper[b]) for b in range(BATCH)
    ]
    assert_cost_as_low_as(np.asarray(solution.value), np.array([c for _, c in reference]))
    reference_x = np.stack([p for p, _ in reference])
    assert np.sum(np.isclose(reference_x, upper, rtol=0, atol=1e-9)) >= BATCH
    np.testing.assert_allclose(x, reference_x, atol=1e-6)


# -------------------------------------------------------- residual shapes and pytrees


def decay_tree(p, y):
    """:func:`decay` with dict parameters and 2-D residuals."""
    residual = p["amplitude"] * jnp.exp(-p["rate"] * T) + p["offset"] - y
    return residual.reshape(4, -1)


def test_pytree_parameters_and_2d_residuals_match_the_flat_problem():
    x0, fixed, data = noisy_fits("decay", seed=8)
    flat = solve("decay", x0, fixed, data)
    names = ("amplitude", "rate", "offset")
    tree = {key: jnp.asarray(x0[:, i]) for i, key in enumerate(names)}
    tree_fixed = {key: jnp.asarray(fixed[:, i]) for i, key in enumerate(names)}
    solution = fixedopt.least_squares(
        decay_tree, tree, tree_fixed, args=(jnp.asarray(data),), batched=True
    )
    assert set(solution.x) == set(names)
    x = np.stack([np.asarray(solution.x[key]) for key in names], axis=1)
    np.testing.assert_array_equal(bits(x)[fixed], bits(x0)[fixed])
    np.testing.assert_allclose(np.asarray(solution.value), np.asarray(flat.value), rtol=1e-10)
    np.testing.assert_allclose(x, np.asarray(flat.x), atol=1e-8)


def test_scipy_names_max_nfev_and_x_scale():
    """``max_nfev`` is ``max_steps`` by scipy's name; ``x_scale`` is ``"jac"`` or refused."""
    residual = lambda p: jnp.array([p[0] ** 2 - 2.0, p[1] - 1.0, p[0] * p[1] - 1.5])
    x0 = jnp.array([3.0, 0.0])
    by_scipy = fixedopt.least_squares(residual, x0, False, max_nfev=2, x_scale="jac")
    by_ours = fixedopt.least_squares(residual, x0, False, max_steps=2)
    assert int(by_scipy.steps) == 2 and by_scipy.status == fixedopt.Status.MAX_STEPS
    np.testing.assert_array_equal(by_scipy.x, by_ours.x)
    message = (
        "`x_scale` must be 'jac' (or None), got 2.0: Levenberg-Marquardt scales the "
        "parameters by the Jacobian's column norms (scipy's x_scale='jac')"
    )
    with pytest.raises(ValueError, match="^" + re.escape(message) + "$"):
        fixedopt.least_squares(residual, x0, False, x_scale=2.0)
    with pytest.raises(ValueError, match=re.escape("give one of `max_steps` and `max_nfev`")):
        fixedopt.least_squares(residual, x0, False, max_steps=5, max_nfev=3)


def test_jac_is_scipys_callable_jacobian_per_row():
    """A callable ``jac`` gives the derivative the solver uses (one whose column for
    x[1] is 0 never moves x[1]); the true one gives scipy's optimum, per row."""
    t = jnp.linspace(0.0, 1.0, 8)
    y = jnp.stack([2.0 * jnp.exp(-1.5 * t), 1.0 * jnp.exp(-0.5 * t)])
    residual = lambda p, y: p[0] * jnp.exp(-p[1] * t) - y

    def jac(p, y):
        e = jnp.exp(-p[1] * t)
        return jnp.stack([e, -p[0] * t * e], axis=1)

    x0 = jnp.ones((2, 2))
    sol = fixedopt.least_squares(residual, x0, False, args=(y,), batched=True, jac=jac)
    np.testing.assert_allclose(sol.x, [[2.0, 1.5], [1.0, 0.5]], rtol=1e-10)
    blind = lambda p, y: jac(p, y) * jnp.array([[1.0, 0.0]])
    held = fixedopt.least_squares(residual, x0, False, args=(y,), batched=True, jac=blind)
    np.testing.assert_array_equal(held.x[:, 1], x0[:, 1])
    same = fixedopt.least_squares(residual, x0, False, args=(y,), batched=True, jac="3-point")
    np.testing.assert_allclose(same.x, sol.x, rtol=1e-10)
