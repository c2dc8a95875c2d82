"""least_squares with a ``residual_fun`` JAX cannot trace (NumPy): it runs on the
host, as in curve_fit (tests/entry/test_curve_fit_host.py). References: the same
residuals in ``jax.numpy`` and ``scipy.optimize.least_squares``."""

import jax.numpy as jnp
import numpy as np
import pytest
import scipy.optimize
from numpy.testing import assert_allclose, assert_array_equal

import fixedopt

pytestmark = pytest.mark.filterwarnings("ignore::fixedopt.HostFunctionWarning")

T = np.linspace(0.0, 1.0, 20)
Y = np.stack([2.0 * np.exp(-3.0 * T), np.exp(-0.5 * T) + 0.01 * np.sin(7 * T)])


def numpy_residuals(p, y):
    return p[0] * np.exp(-p[1] * T) - y


def jax_residuals(p, y):
    return p[0] * jnp.exp(-p[1] * T) - y


def numpy_jacobian(p, y):
    e = np.exp(-p[1] * T)
    return np.stack([e, -p[0] * T * e], axis=-1)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_numpy_batch_with_fixed_entries(dtype):
    x0 = np.array([[1.0, 1.0], [1.2, 1.0]], dtype)
    fixed = np.array([[False, False], [True, False]])
    args = (Y.astype(dtype),)
    sol = fixedopt.least_squares(numpy_residuals, x0, fixed, args=args, batched=True)
    exact = fixedopt.least_squares(jax_residuals, x0, fixed, args=args, batched=True)
    assert sol.x.dtype == dtype
    assert_array_equal(np.asarray(sol.x)[fixed], x0[fixed])  # bit-identical
    assert np.all(np.asarray(sol.status) == fixedopt.Status.CONVERGED)
    assert_allclose(sol.x, exact.x, rtol=1e-7 if dtype == np.float64 else 1e-3)


@pytest.mark.parametrize("jac", [None, "2-point", "3-point", "cs", numpy_jacobian])
def test_one_problem_as_scipy(jac):
    sol = fixedopt.least_squares(numpy_residuals, np.ones(2), False, args=(Y[1],), jac=jac)
    reference = scipy.optimize.least_squares(
        numpy_residuals, np.ones(2), args=(Y[1],), jac=jac or "2-point", xtol=1e-15,
        ftol=1e-15, gtol=1e-15,
    )  # fmt: skip
    assert_allclose(sol.x, reference.x, rtol=1e-7)
