"""The Hager–Zhang line search: the conditions it claims hold at the step it accepts.

Checked independently of its internals: ``phi(t) = f(x + t d)`` and ``phi'(t)`` are
recomputed with ``jax.value_and_grad`` at the returned point, ``t d`` is the move.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import fixedopt
from fixedopt import Problem
from fixedopt._solvers.linesearch import SearchStart
from fixedopt._solvers.wolfe import hager_zhang
from tests.helpers import MGH, heterogeneous_masks, scipy_lbfgsb, smooth, smooth_batch

DECREASE, CURVATURE = 0.1, 0.1


def search_row(x, weights, shift, curvature, fixed, step, patience=5):
    value_and_grad = jax.value_and_grad(lambda z: smooth(z, weights, shift, curvature))
    problem = Problem(value_and_grad, fixed, x)
    value, grad = value_and_grad(x)
    grad = jnp.where(fixed, 0.0, grad)
    direction = -grad

    def evaluate(z):
        value, grad = value_and_grad(z)
        return value, jnp.where(fixed, 0.0, grad), None

    start = SearchStart(problem, evaluate, x, value, grad, direction, step)
    result = hager_zhang(start, max_steps=40, patience=patience)
    return result, value, grad, direction


@pytest.mark.parametrize("patience", [40, 5])
def test_accepted_steps_satisfy_the_conditions(patience):
    """Sufficient (or approximate) decrease always; the strong curvature condition too
    unless the search settled early (``patience`` trials) for the lowest point with
    enough decrease."""
    inputs = smooth_batch(0)
    result, value, grad, direction = jax.vmap(search_row, (0,) * 6 + (None,))(*inputs, patience)
    x, weights, shift, curvature, fixed, _ = inputs
    assert bool(jnp.all(result.accepted))
    phi, grad_at = jax.vmap(jax.value_and_grad(smooth))(result.x, weights, shift, curvature)
    slope0 = jnp.sum(grad * direction, axis=1)
    slope = jnp.sum(grad_at * direction, axis=1)
    np.testing.assert_allclose(phi, result.value, rtol=1e-13)
    move = jnp.sum(grad * (result.x - x), axis=1)  # t * phi'(0)
    sufficient = phi <= value + DECREASE * move
    rounding = 10 * jnp.finfo(value.dtype).eps * jnp.abs(value)
    approximate = (phi <= value + rounding) & (slope <= (2 * DECREASE - 1) * slope0)
    assert bool(jnp.all(sufficient | approximate))
    curved = jnp.abs(slope) <= CURVATURE * jnp.abs(slope0)
    assert bool(jnp.all(curved)) if patience == 40 else float(jnp.mean(curved)) >= 0.75
    assert bool(jnp.all(phi < value))
    # Fixed entries: bit-identical (the row's fixed values are its x).
    np.testing.assert_array_equal(
        np.asarray(result.x).view(np.uint64)[np.asarray(fixed)],
        np.asarray(x).view(np.uint64)[np.asarray(fixed)],
    )


def count_trials(active):
    """Run the batched search; count its objective calls with a host callback."""
    trials = []

    def row(x, weights, shift, curvature, fixed, step):
        value_and_grad = jax.value_and_grad(lambda z: smooth(z, weights, shift, curvature))
        value, grad = value_and_grad(x)

        def evaluate(z):
            jax.debug.callback(lambda: trials.append(1))
            return (*value_and_grad(z), None)

        problem = Problem(value_and_grad, fixed, x)
        start = SearchStart(problem, evaluate, x, value, grad, -grad, step, active)
        return hager_zhang(start, max_steps=40)

    result = jax.block_until_ready(jax.jit(jax.vmap(row))(*smooth_batch(1)))
    return result, len(trials)


def test_inactive_rows_make_no_trials():
    result, trials = count_trials(jnp.zeros((), bool))
    assert trials == 0
    assert not bool(jnp.any(result.accepted | result.nonfinite))
    result, trials = count_trials(jnp.ones((), bool))  # the same batch, active
    assert trials > 0 and bool(jnp.all(result.accepted))


HESSIAN = jnp.diag(jnp.array([1.0, 3.0, 0.5]))
_trials = []  # one entry per evaluation of the search along the quadratic below


def _quadratic(z):
    return 0.5 * z @ HESSIAN @ z, HESSIAN @ z


def _counted(z):
    jax.debug.callback(lambda: _trials.append(1))
    return (*_quadratic(z), None)


@jax.jit
def _search_the_quadratic(x, direction):
    """One program for every direction (data, not constants: 5 compiles were 1)."""
    problem = Problem(_quadratic, jnp.zeros(3, bool), x)
    start = SearchStart(problem, _counted, x, *_quadratic(x), direction, 1.0)
    return hager_zhang(start, max_steps=40)


@pytest.mark.parametrize("minimizer", [1.3, 2.0, 4.5, 12.0, 40.0])
def test_on_a_quadratic_the_expansion_extrapolates_to_the_minimizer(minimizer):
    """Along a quadratic whose minimizer ``t*`` lies beyond the first trial (``t = 1``,
    slope still falling), the next trial is the secant's zero of the slope, ``t*``
    itself (accepted: 2 trials), not ``expand * t`` (5: past ``t*``, then a secant
    back, 3 trials); on a quadratic (``f`` curves as the slopes say) up to
    ``expand**2`` times the trial, beyond that by ``expand**2`` (40: trials at 1 and
    25, then at ``t*``: 3 trials)."""
    x = jnp.array([1.0, -2.0, 0.5])
    g = HESSIAN @ x
    direction = -g * (g @ g) / (g @ HESSIAN @ g) / minimizer  # t* = minimizer
    _trials.clear()
    result = jax.block_until_ready(_search_the_quadratic(x, direction))
    jax.effects_barrier()
    assert bool(result.accepted)
    exact = x + minimizer * direction
    np.testing.assert_allclose(np.asarray(result.x), np.asarray(exact), rtol=1e-12, atol=1e-14)
    assert len(_trials) == (2 if minimizer <= 25 else 3)


@pytest.mark.parametrize("quartic", [False, True])
def test_the_secant_reaches_far_only_where_f_curves_as_a_quadratic(quartic):
    """Along ``phi(t) = -t + c t**k`` the slope rises from -1 to -0.996 between ``t = 0``
    and 1, so its secant vanishes at ``t = 250``. With ``k = 2`` (a quadratic) ``f``
    curves as the slopes say and the next trial goes ``expand**2 = 25`` times as far;
    with ``k = 4`` it does not, and the next trial is only ``expand = 5`` times as
    far (the secant's zero is a guess there: a valley's straight stretch)."""
    power = 4 if quartic else 2
    scale = 0.004 / power  # phi'(1) = -1 + 0.004 either way

    def value_and_grad(z):
        return jax.value_and_grad(lambda z: -z[0] + scale * z[0] ** power)(z)

    steps = []

    def evaluate(z):
        jax.debug.callback(lambda t: steps.append(float(t)), z[0])
        return (*value_and_grad(z), None)

    x = jnp.zeros(1)
    problem = Problem(value_and_grad, jnp.zeros(1, bool), x)
    start = SearchStart(problem, evaluate, x, *value_and_grad(x), jnp.ones(1), 1.0)
    jax.block_until_ready(jax.jit(lambda: hager_zhang(start, max_steps=3, patience=3))())
    jax.effects_barrier()
    assert steps[:2] == [1.0, 5.0 if quartic else 25.0]


def solve_program(fun, x0, fixed, solver, **options) -> str:
    """The program of a batched solve, as traced (not compiled): two solves whose
    programs are equal give the same bits, whatever the data."""
    solve = lambda x0: fixedopt.minimize(fun, x0, fixed, batched=True, solver=solver, **options)
    return str(jax.make_jaxpr(solve)(x0))


def test_bounds_fall_back_to_projected_backtracking_bit_for_bit():
    """With bounds L-BFGS searches by projected backtracking whatever it is asked: the
    same program (so the same bits) as ``linesearch="backtracking"``."""
    rng = np.random.default_rng(3)
    x0 = jnp.asarray(rng.uniform(-0.5, 0.7, size=(8, 6)))
    fixed = jnp.asarray(rng.random((8, 6)) < 0.3)

    def program(linesearch):
        solver = fixedopt.LBFGS(linesearch=linesearch)
        fun = MGH["extended_rosenbrock"][0]
        return solve_program(fun, x0, fixed, solver, bounds=(-0.5, 0.7))

    assert program("hager-zhang") == program("backtracking")


HAGER_ZHANG_PROBLEMS = ("extended_rosenbrock", "wood", "trigonometric")


def of_the_first(n, fun):
    """``fun`` of the first ``n`` entries of ``x``."""
    return lambda x: fun(x[:n])


@pytest.mark.fewer_optimizations  # a reference: scipy's minimum, to 1e-8 of it
def test_lbfgs_with_hager_zhang_matches_scipy_lbfgsb():
    """16 rows of each problem, started near its standard start with random masks:
    90% of each problem's rows as low as scipy's L-BFGS-B, and converged. The problems
    solve as one batch, each row's objective its index (data: ``lax.switch``), its row
    padded to the largest size with fixed entries (0.0): one program, not three."""
    functions = [MGH[name][0] for name in HAGER_ZHANG_PROBLEMS]
    sizes = [MGH[name][1].size for name in HAGER_ZHANG_PROBLEMS]
    entries, rows = max(sizes), 16
    branches = [of_the_first(n, fun) for fun, n in zip(functions, sizes)]
    one_of = lambda x, index: jax.lax.switch(index, branches, x)
    starts, masks = [], []
    for name, n in zip(HAGER_ZHANG_PROBLEMS, sizes):
        rng = np.random.default_rng(sum(map(ord, name)) + 1)
        starts.append(MGH[name][1] + 0.1 * rng.normal(size=(rows, n)))
        masks.append(heterogeneous_masks(rng, rows, n))
    x0 = np.concatenate([np.pad(s, ((0, 0), (0, entries - s.shape[1]))) for s in starts])
    fixed = np.concatenate([np.pad(m, ((0, 0), (0, entries - m.shape[1])), constant_values=True)
                            for m in masks])  # fmt: skip
    index = np.repeat(np.arange(len(functions), dtype=np.int32), rows)
    solver = fixedopt.LBFGS(linesearch="hager-zhang")
    solution = fixedopt.minimize(one_of, jnp.asarray(x0), jnp.asarray(fixed), batched=True,
                                 args=(jnp.asarray(index),), solver=solver)  # fmt: skip
    np.testing.assert_array_equal(np.asarray(solution.x)[fixed], x0[fixed])
    for k, (fun, n) in enumerate(zip(functions, sizes)):
        value_and_grad = jax.jit(jax.value_and_grad(fun))
        these = slice(k * rows, (k + 1) * rows)
        reference = np.array([scipy_lbfgsb(value_and_grad, start, mask)[1]
                              for start, mask in zip(starts[k], masks[k])])  # fmt: skip
        value = np.asarray(solution.value)[these]
        own = [float(value_and_grad(x[:n])[0]) for x in np.asarray(solution.x)[these]]
        np.testing.assert_allclose(value, own, rtol=1e-9, atol=1e-12)  # its own objective's
        as_good = value <= reference + 1e-8 * np.maximum(np.abs(reference), 1.0)
        assert as_good.mean() >= 0.9, (k, value[~as_good], reference[~as_good])
        assert np.asarray(solution.converged)[these].mean() >= 0.9, k


@pytest.mark.parametrize(
    ("n", "memory_size", "expected"),
    [(10, 10, "hager-zhang"), (8, 4, "backtracking")],  # each side of n = memory_size
)  # fmt: skip
def test_auto_searches_as_hager_zhang_up_to_the_memory_size(n, memory_size, expected):
    """The default ``linesearch="auto"``: Hager-Zhang where the row has at most
    ``memory_size`` entries, else backtracking: the same program as the search named
    (so bit for bit), another than the other search's."""
    fun = MGH["extended_rosenbrock"][0]
    rng = np.random.default_rng(n)
    x0 = jnp.asarray(np.tile([-1.2, 1.0], n // 2) + 0.1 * rng.normal(size=(4, n)))
    fixed = jnp.asarray(heterogeneous_masks(rng, 4, n))

    def program(linesearch):
        solver = fixedopt.LBFGS(memory_size=memory_size, linesearch=linesearch)
        return solve_program(fun, x0, fixed, solver)

    auto = program("auto")
    assert auto == program(expected)
    assert auto != program({"hager-zhang": "backtracking", "backtracking": "hager-zhang"}[expected])
    assert fixedopt.LBFGS().linesearch == "auto"


def test_unknown_linesearch_is_named():
    with pytest.raises(ValueError, match="linesearch"):
        fixedopt.LBFGS(linesearch="zoom")
