"""The line searches' acceptance conditions and failure flags, checked from outside.

Projected backtracking (``fixedopt._solvers.linesearch.projected_backtracking``): an accepted
point satisfies the Armijo test its docstring states for the projected path,
``f(x+) <= f(x) + armijo * g . (x+ - x)`` (or, where ``f`` is flat to rounding, the
approximate Wolfe test), recomputed with ``jax.value_and_grad`` at the returned point;
it is feasible and its fixed entries are bit-identical. A search that cannot succeed
says why, with the flags as the code defines them: ``accepted`` False, ``flat`` when
``x`` or ``f`` stopped changing, ``nonfinite`` when some trial was NaN/Inf; no NaN
reaches the returned point. Hager–Zhang (``fixedopt._solvers.wolfe.hager_zhang``): only what
``tests/solvers/test_wolfe.py`` does not check (the weak Wolfe variant, a direction that is
not a descent direction, NaN trials).
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from fixedopt import Implicit, Problem, Unroll
from fixedopt._solvers.linesearch import SearchStart, projected_backtracking
from fixedopt._solvers.wolfe import hager_zhang
from tests.helpers import bits, smooth, smooth_batch

ARMIJO = 1e-4


def bounds_around(x, seed):
    """Bounds that hold ``x``; about one entry in five sits exactly on one."""
    rng = np.random.default_rng(seed)
    lower = x - rng.uniform(0.0, 1.5, x.shape)
    upper = x + rng.uniform(0.0, 1.5, x.shape)
    lower = np.where(rng.random(x.shape) < 0.1, x, lower)
    upper = np.where(rng.random(x.shape) < 0.1, x, upper)
    return jnp.asarray(lower), jnp.asarray(upper)


def run_search(search, fun, x, fixed, bounds, direction_of, step, unroll=False, **options):
    """One row: ``search`` from ``x`` along ``direction_of(grad)``; the gradient is
    masked as ``Problem`` promises (exact zeros at fixed entries)."""

    def value_and_grad(z):
        value, grad = jax.value_and_grad(fun)(z)
        return value, jnp.where(fixed, 0.0, grad)

    differentiate = Unroll() if unroll else Implicit()
    problem = Problem(value_and_grad, fixed, x, *bounds, differentiate=differentiate)
    value, grad = value_and_grad(x)
    direction = jnp.where(fixed, 0.0, direction_of(grad))
    evaluate = lambda z: (*value_and_grad(z), None)
    start = SearchStart(problem, evaluate, x, value, grad, direction, step)
    result = search(start, **options)
    return result, value, grad


def smooth_rows(bounded, seed=0):
    """The line-search rows of ``tests/helpers.py``: nonconvex, badly scaled, 30% fixed,
    steps 1e-3 to 1e2."""
    x, weights, shift, curvature, fixed, step = smooth_batch(seed)
    bounds = bounds_around(np.asarray(x), seed) if bounded else (None, None)
    return x, (weights, shift, curvature), fixed, bounds, step


def assert_fixed_bits_and_feasible(result_x, x, fixed, bounds):
    result_x, fixed = np.asarray(result_x), np.asarray(fixed)
    np.testing.assert_array_equal(bits(result_x)[fixed], bits(x)[fixed])
    assert np.all(np.isfinite(result_x))
    if bounds[0] is not None:
        assert np.all((result_x >= np.asarray(bounds[0])) & (result_x <= np.asarray(bounds[1])))


@pytest.mark.parametrize("armijo", [ARMIJO, 0.5], ids=["default", "armijo=0.5"])
@pytest.mark.parametrize("unroll", [False, True], ids=["while", "unrolled"])
@pytest.mark.parametrize("bounded", [False, True], ids=["unbounded", "bounded"])
def test_accepted_backtracking_steps_satisfy_armijo_on_the_projected_path(bounded, unroll, armijo):
    """Scaled steepest descent ``-D g`` (``D`` random, positive), trial steps from
    ``1e-3`` to ``1e2`` times it, on nonconvex rows with and without bounds. With
    ``armijo = 0.5`` the test binds on many trials (the default rarely does)."""
    x, data, fixed, bounds, step = smooth_rows(bounded)
    scaling = jnp.exp(jnp.asarray(np.random.default_rng(1).uniform(-1.0, 1.0, x.shape)))

    def row(x, data, fixed, bounds, step, scaling):
        objective = lambda z: smooth(z, *data)
        search = functools.partial(projected_backtracking, max_steps=30, armijo=armijo)
        return run_search(search, objective, x, fixed, bounds, lambda g: -scaling * g, step,
                          unroll)  # fmt: skip

    result, value, grad = jax.jit(jax.vmap(row))(x, data, fixed, bounds, step, scaling)
    assert bool(jnp.all(result.accepted))
    assert not bool(jnp.any(result.nonfinite))
    phi, grad_at = jax.vmap(jax.value_and_grad(smooth))(result.x, *data)
    grad_at = jnp.where(fixed, 0.0, grad_at)
    np.testing.assert_allclose(result.value, phi, rtol=1e-13)
    np.testing.assert_allclose(result.grad, grad_at, rtol=1e-12, atol=1e-13)
    move = result.x - x  # zero at fixed entries (checked below)
    decrease = jnp.sum(grad * move, axis=1)  # g . (x(step) - x): the projected step
    sufficient = phi <= value + armijo * decrease
    trial_slope = jnp.sum(grad_at * move, axis=1)
    rounding = 10 * jnp.finfo(value.dtype).eps * jnp.abs(value)
    approximate = (phi <= value + rounding) & (trial_slope >= 0.9 * decrease)
    approximate = approximate & (trial_slope <= -0.8 * decrease)
    assert bool(jnp.all(sufficient | approximate))
    assert bool(jnp.all(decrease < 0)) and bool(jnp.all(phi < value))
    assert_fixed_bits_and_feasible(result.x, x, fixed, bounds)


X0 = jnp.asarray(np.random.default_rng(2).normal(size=6))
FIXED = jnp.asarray([False, True, False, False, True, False])
SEARCHES = {
    "backtracking": projected_backtracking,
    "hager-zhang": functools.partial(hager_zhang, patience=40),
}


def quadratic(z):
    return 0.5 * jnp.sum(jnp.arange(1.0, 7.0) * (z - 1.0) ** 2)


def far(z, radius=0.3):
    return jnp.max(jnp.abs(z - X0)) > radius


def nan_value_far(z):
    return jnp.where(far(z), jnp.nan, quadratic(z))


def nan_grad_far(z):
    """Finite value everywhere; a NaN gradient (``0 * inf``) far from ``X0``."""
    return quadratic(z) + jnp.sqrt(jnp.where(far(z), 0.0, 1.0) + 0.0 * jnp.sum(z))


def nan_but_at_start(z):
    return jnp.where(far(z, 0.0), jnp.nan, quadratic(z))


def counted_search(name, fun, direction_of, step, max_steps):
    """One search from ``X0`` without bounds, and the number of its trials."""
    calls = []

    def counted(z):
        jax.debug.callback(lambda: calls.append(1))
        return fun(z)

    search = functools.partial(SEARCHES[name], max_steps=max_steps)
    run = jax.jit(lambda x: run_search(search, counted, x, FIXED, (None, None), direction_of, step))
    result, value, grad = jax.block_until_ready(run(X0))
    return result, value, grad, len(calls) - 1  # one call evaluates the start


def flags(result):
    return bool(result.accepted), bool(result.nonfinite), bool(result.flat)


@pytest.mark.parametrize("name", list(SEARCHES))
def test_an_uphill_direction_is_never_accepted(name):
    result, _, _, trials = counted_search(name, quadratic, lambda g: g, 1.0, max_steps=5)
    assert flags(result) == (False, False, False)
    assert trials == 5
    assert_fixed_bits_and_feasible(result.x, X0, FIXED, (None, None))


def test_an_uphill_direction_is_not_accepted_below_rounding():
    """Uphill, the steps shrink until ``x`` stops changing, which ends the search.
    At a step of a few ulps ``f(x+) == f(x) <= f(x) + armijo * g.(x+ - x)`` holds (the
    right side is above ``f(x)`` for an uphill move): the Armijo test must also ask
    for a downhill move, ``g.(x+ - x) < 0``."""
    result, _, _, trials = counted_search("backtracking", quadratic, lambda g: g, 1.0, 500)
    assert flags(result) == (False, False, True)
    assert trials < 100


def flat_value_steep_slope(x, max_steps):
    """``f`` constant while the gradient insists on descent (rounding noise); the
    search and its number of trials."""
    trials = []

    def evaluate(z):
        jax.debug.callback(lambda: trials.append(1))
        return jnp.ones(()), jnp.where(FIXED, 0.0, 1.0), None

    problem = Problem(lambda z: evaluate(z)[:2], FIXED, x)
    grad = jnp.where(FIXED, 0.0, 1.0)
    search = jax.jit(
        lambda x: projected_backtracking(
            SearchStart(problem, evaluate, x, jnp.ones(()), grad, -grad, 1.0), max_steps=max_steps
        )
    )
    result = jax.block_until_ready(search(x))
    return result, len(trials)


def test_backtracking_on_a_value_flat_to_rounding_reports_flat():
    """No trial passes either test: ``f`` did not fall, the slope did not flatten."""
    result, trials = flat_value_steep_slope(X0, 5)
    assert flags(result) == (False, False, True)
    assert trials == 5


def test_backtracking_ends_flat_once_x_stops_moving_before_max_steps():
    """At ``|x| ~ 1e8`` the steps fall below the rounding of ``x`` before the Armijo
    test passes by rounding: the trial that leaves ``x`` unchanged ends the search."""
    x = 1e8 + X0
    result, trials = flat_value_steep_slope(x, 500)
    assert flags(result) == (False, False, True)
    assert trials < 100
    np.testing.assert_array_equal(result.x, x)


@pytest.mark.parametrize("fun", [nan_value_far, nan_grad_far], ids=["nan-value", "nan-grad"])
@pytest.mark.parametrize("name", list(SEARCHES))
def test_a_search_backs_out_of_a_nan_region(name, fun):
    """A first trial deep in a NaN region; the accepted point is finite and sufficient.
    ``nonfinite``: backtracking reports that a trial was NaN even when it then
    accepts; Hager–Zhang clears it on acceptance (``nonfinite & ~accepted``)."""
    result, value, grad, _ = counted_search(name, fun, lambda g: -g, 10.0, max_steps=40)
    accepted, nonfinite, _ = flags(result)
    assert accepted and nonfinite == (name == "backtracking")
    assert bool(jnp.isfinite(result.value)) and bool(jnp.all(jnp.isfinite(result.grad)))
    assert not bool(far(result.x))
    phi = quadratic(result.x) + (fun is nan_grad_far)  # nan_grad_far adds 1 near X0
    np.testing.assert_allclose(result.value, phi, rtol=1e-14)
    assert float(result.value) <= float(value) + ARMIJO * float(jnp.dot(grad, result.x - X0))
    assert_fixed_bits_and_feasible(result.x, X0, FIXED, (None, None))


@pytest.mark.parametrize("name", list(SEARCHES))
def test_nan_at_every_trial_is_reported_nonfinite_and_stays_out_of_x(name):
    result, _, _, trials = counted_search(name, nan_but_at_start, lambda g: -g, 1.0, 12)
    assert flags(result) == (False, True, False)
    assert trials == 12
    assert_fixed_bits_and_feasible(result.x, X0, FIXED, (None, None))


def test_hager_zhang_weak_wolfe_steps_satisfy_the_weak_conditions():
    """``strong=False``: ``phi'(t) >= curvature phi'(0)`` and sufficient (or
    approximate) decrease, ``decrease = curvature = 0.1`` (``tests/solvers/test_wolfe.py``
    checks the strong default only)."""
    x, data, fixed, _, step = smooth_rows(False, seed=4)
    search = functools.partial(hager_zhang, max_steps=40, patience=40, strong=False)

    def row(x, data, fixed, step):
        objective = lambda z: smooth(z, *data)
        return run_search(search, objective, x, fixed, (None, None), lambda g: -g, step)

    result, value, grad = jax.jit(jax.vmap(row))(x, data, fixed, step)
    assert bool(jnp.all(result.accepted))
    phi, grad_at = jax.vmap(jax.value_and_grad(smooth))(result.x, *data)
    slope0 = -jnp.sum(grad * grad, axis=1)
    slope = -jnp.sum(jnp.where(fixed, 0.0, grad_at) * grad, axis=1)
    sufficient = phi <= value + 0.1 * jnp.sum(grad * (result.x - x), axis=1)
    rounding = 10 * jnp.finfo(value.dtype).eps * jnp.abs(value)
    approximate = (phi <= value + rounding) & (slope <= (2 * 0.1 - 1) * slope0)
    assert bool(jnp.all(sufficient | approximate))
    assert bool(jnp.all(slope >= 0.1 * slope0))
    assert_fixed_bits_and_feasible(result.x, x, fixed, (None, None))
