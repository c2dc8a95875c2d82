"""``Solver.start``: a row's first evaluation. Levenberg–Marquardt and Gauss–Newton
take the value and gradient from the Jacobian their state needs (one evaluation); they
must equal what the default (``value_and_grad``, then ``init``) gives, and an
independent cost, with fixed entries' gradient zero. Read through ``max_steps=0``."""

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


LONG_T = np.linspace(0.0, 2.0, 300)  # a long model: its lanes are wide


def long_residuals(p, y):
    return p[0] * jnp.exp(-p[1] * LONG_T) + p[2] - y


def test_a_row_started_by_a_refill_keeps_its_bits_whoever_its_neighbours():
    # Rows started by the lanes' refills: a row gets the same bits, and takes the same
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
