"""``Solver.start``: a row's first evaluation. Levenberg–Marquardt and Gauss–Newton
take the value and gradient from the Jacobian their state needs (one evaluation); they
must equal what the default (``value_and_grad``, then ``init``) gives, and an
independent cost, with fixed entries' gradient zero. Read through ``max_steps=0``."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import fixedopt

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
