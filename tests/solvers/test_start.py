"""``Solver.start``: a row's first evaluation. Levenberg–Marquardt and Gauss–Newton
take the value and gradient from the Jacobian their state needs (one evaluation); they
must equal what the default (``value_and_grad``, then ``init``) gives, and an
independent cost, with fixed entries' gradient zero. Read through ``max_steps=0``."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import fixedopt
from fixedopt.testing import compiled_solves

T = np.linspace(0.0, 2.0, 7)
Y = 2.0 * np.exp(-1.3 * T) + 0.5
X0 = np.array([[1.0, 1.0, 0.0], [3.0, 0.5, 1.0], [2.0, 2.0, -1.0]])
FIXED = np.array([[False, True, False], [False, False, False], [True, False, True]])


def residuals(p, y):
    return p[0] * jnp.exp(-p[1] * T) + p[2] - y


@pytest.mark.parametrize("loss", ["linear", "soft_l1"])
@pytest.mark.parametrize("solver", [fixedopt.LevenbergMarquardt(), fixedopt.GaussNewton(),
                                    fixedopt.LBFGS()], ids=["lm", "gn", "lbfgs"])  # fmt: skip
def test_the_first_evaluation_is_the_cost_and_its_free_gradient(loss, solver):
    def cost(p):  # scipy's: 0.5 sum rho(r^2), soft_l1's rho(z) = 2 (sqrt(1 + z) - 1)
        squared = residuals(p, Y) ** 2
        return 0.5 * jnp.sum(squared if loss == "linear" else 2 * (jnp.sqrt(1 + squared) - 1))

    value = np.array([cost(jnp.asarray(x)) for x in X0])
    grad = np.array([np.where(f, 0.0, jax.grad(cost)(jnp.asarray(x))) for x, f in zip(X0, FIXED)])
    sol = fixedopt.least_squares(residuals, X0, FIXED, args=(np.tile(Y, (3, 1)),), batched=True,
                                 loss=loss, solver=solver, max_steps=0)  # fmt: skip
    np.testing.assert_allclose(sol.value, value, rtol=1e-14)
    np.testing.assert_allclose(sol.grad_norm, np.abs(grad).max(axis=1), rtol=1e-13, atol=1e-14)
    np.testing.assert_array_equal(sol.x, X0)


class StartedApart(fixedopt.LevenbergMarquardt):
    """Levenberg–Marquardt with its rows started by ``start`` before their first step,
    as every solver without ``starts_in_step`` is."""

    starts_in_step = False


LONG_T = np.linspace(0.0, 2.0, 300)  # enough residuals to start rows in their steps


def long_residuals(p, y):
    return p[0] * jnp.exp(-p[1] * LONG_T) + p[2] - y


@pytest.mark.parametrize("dtype, scale", [("float64", 1.0), ("float32", 1e6)])
def test_a_row_started_in_its_step_matches_one_started_before_it(dtype, scale):
    # Levenberg–Marquardt starts a lane's new row in the lane's next step where the
    # model has 256 residuals or more; 40 rows through 8 lanes (refills), with bounds,
    # a start outside them (INFEASIBLE: traced, under jit), a NaN datum (NONFINITE at
    # the start), a row at its optimum: the statuses and steps of rows started by
    # `start` before the step, the same x to rounding, fixed bits; in float32 too, with
    # data and amplitudes in units of 1e6.
    rng = np.random.default_rng(3)
    y = 2.0 * np.exp(-1.3 * LONG_T) + 0.5 + rng.normal(0.0, 0.01, (40, LONG_T.size))
    x0 = np.array([2.0, 1.3, 0.5]) * rng.uniform(0.5, 1.5, (40, 3))
    fixed = rng.random((40, 3)) < 0.3
    x0[1] = [2.0, 9.0, 0.5]  # outside the bounds on its free width
    fixed[1] = False
    y[2, 3] = np.nan
    x0[3], y[3] = [2.0, 1.3, 0.5], 2.0 * np.exp(-1.3 * LONG_T) + 0.5
    units = np.array([scale, 1.0, scale])
    y, x0 = (y * scale).astype(dtype), (x0 * units).astype(dtype)
    bounds = (np.zeros(3, dtype), (np.array([10.0, 5.0, 10.0]) * units).astype(dtype))

    @functools.partial(jax.jit, static_argnums=(2, 3))
    def solve(x0, y, max_steps, solver):
        options = dict(bounds=bounds, batched=True, lanes=8, max_steps=max_steps)
        return fixedopt.least_squares(long_residuals, x0, fixed, args=(y,), solver=solver,
                                      **options)  # fmt: skip

    for max_steps in (0, 1, 50):
        new = solve(x0, y, max_steps, fixedopt.LevenbergMarquardt())
        old = solve(x0, y, max_steps, StartedApart())
        np.testing.assert_array_equal(new.status, old.status, err_msg=f"{max_steps}")
        np.testing.assert_array_equal(new.steps, old.steps, err_msg=f"{max_steps}")
        rtol = 1e-12 if dtype == "float64" else 1e-6
        np.testing.assert_allclose(new.x, old.x, rtol=rtol, atol=0, err_msg=f"{max_steps}")
        np.testing.assert_array_equal(np.asarray(new.x)[fixed], x0[fixed])
    assert new.status[1] == fixedopt.Status.INFEASIBLE
    assert new.status[2] == fixedopt.Status.NONFINITE
    assert np.sum(new.status == fixedopt.Status.CONVERGED) == 38


@pytest.mark.parametrize("points", [7, 300])
def test_a_long_model_is_evaluated_in_one_place_through_lanes(points):
    # A Levenberg–Marquardt solve through lanes of a model of 256 residuals or more
    # holds the model's evaluation once (in the step): half the model's operations of
    # one that starts its rows apart. A shorter model keeps the refill's start (its
    # rows' extra trip would cost more than the refill: fixedopt._driver.engine).
    t = np.linspace(0.0, 2.0, points)

    def model(p, y):
        return p[0] * jnp.tanh(p[1] * t) + p[2] - y

    def tanh_count(solver):
        solve = jax.jit(lambda x0, fixed, y: fixedopt.least_squares(
            model, x0, fixed, args=(y,), batched=True, lanes=8, solver=solver))  # fmt: skip
        text = solve.lower(np.ones((40, 3)), np.zeros((40, 3), bool), np.ones((40, points)))
        return text.as_text().count("stablehlo.tanh")

    # Both also hold the check of starts that meet a test (fixedopt._driver.loop.certify,
    # in the lanes' lax.cond for at most a few rows: a Hessian-vector product and the
    # start of a row that leaves a saddle point), 2 evaluations of the model.
    checks = 2
    apart, default = tanh_count(StartedApart()), tanh_count(fixedopt.LevenbergMarquardt())
    step = default - checks
    assert step > 0 and (2 * step if points >= 256 else step) == apart - checks, (default, apart)


def test_a_row_started_in_its_step_keeps_its_bits_whoever_its_neighbours():
    # Rows started in their lanes' steps: a row gets the same bits, and takes the same
    # steps, in any order of the batch and in a batch of its first rows alone, through
    # lanes of the same width (fixedopt._driver.lanes); a new mask compiles nothing.
    rng = np.random.default_rng(5)
    y = 2.0 * np.exp(-1.3 * LONG_T) + 0.5 + rng.normal(0.0, 0.01, (60, LONG_T.size))
    x0 = np.array([2.0, 1.3, 0.5]) * rng.uniform(0.5, 1.5, (60, 3))
    fixed = rng.random((60, 3)) < 0.3
    order = rng.permutation(60)

    def solve(rows):
        return fixedopt.least_squares(long_residuals, x0[rows], fixed[rows], args=(y[rows],),
                                      batched=True, lanes=8)  # fmt: skip

    whole = solve(slice(None))
    before = compiled_solves()
    shuffled, first = solve(order), solve(slice(0, 13))
    np.testing.assert_array_equal(np.asarray(whole.x)[order], shuffled.x)
    np.testing.assert_array_equal(np.asarray(whole.steps)[order], shuffled.steps)
    np.testing.assert_array_equal(np.asarray(whole.x)[:13], first.x)
    assert bool(np.all(whole.converged))
    fixed[:] = ~fixed  # a new mask in every row
    fixed[:, 1] = False
    other = solve(slice(None))
    assert compiled_solves() == before + 1, "a batch of 13 rows (bucket 16), not the mask"
    np.testing.assert_array_equal(np.asarray(other.x)[fixed], x0[fixed])
