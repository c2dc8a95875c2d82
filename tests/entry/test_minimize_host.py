"""minimize with a ``fun`` JAX cannot trace (NumPy): it runs on the host, its gradient
by scipy's finite differences, as least_squares' residuals do
(tests/entry/test_least_squares_host.py). Reference: ``scipy.optimize.minimize``
(L-BFGS-B, the same differences) on the free entries."""

import warnings

import numpy as np
import pytest
import scipy.optimize
from numpy.testing import assert_allclose, assert_array_equal

import fixedopt

pytestmark = pytest.mark.filterwarnings("ignore::fixedopt.HostFunctionWarning")

X0 = np.array([-1.2, 1.0, 0.5, 0.7])
FIXED = np.array([False, False, True, False])


def numpy_rosenbrock(x, a):
    x = np.asarray(x)  # NumPy only: JAX cannot trace this
    return np.sum(a * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2)


def scipy_free(x0, fixed, jac, bounds=None):
    """scipy's L-BFGS-B on the free entries of one problem, its gradient by the same
    finite differences."""

    def free(z):
        return numpy_rosenbrock(_put(x0, fixed, z), 10.0)

    limits = None if bounds is None else [bounds] * int(np.sum(~fixed))
    return scipy.optimize.minimize(free, x0[~fixed].astype(np.float64), method="L-BFGS-B",
                                   jac=jac, bounds=limits,
                                   options={"gtol": 1e-10, "ftol": 1e-15}).x  # fmt: skip


def _put(x0, fixed, z):
    x = np.array(x0, np.float64)
    x[~fixed] = z
    return x


def test_one_problem_as_scipy():
    sol = fixedopt.minimize(numpy_rosenbrock, X0, FIXED, args=(10.0,), jac="3-point",
                            gtol=1e-10)  # fmt: skip
    assert sol.x[2] == X0[2]  # bit-identical
    assert int(sol.status) == fixedopt.Status.CONVERGED
    assert_allclose(np.asarray(sol.x)[~FIXED], scipy_free(X0, FIXED, "3-point"), rtol=1e-6)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_numpy_batch_with_fixed_entries_as_scipy(dtype):
    x0 = np.stack([X0, X0 + 0.1]).astype(dtype)
    fixed = np.stack([FIXED, ~FIXED])
    sol = fixedopt.minimize(numpy_rosenbrock, x0, fixed, args=(10.0,), batched=True,
                            bounds=(-2.0, 2.0))  # fmt: skip
    assert sol.x.dtype == dtype
    assert_array_equal(np.asarray(sol.x)[fixed], x0[fixed])  # bit-identical
    assert np.all(np.asarray(sol.converged))
    for row in range(2):
        reference = scipy_free(x0[row], fixed[row], "2-point", (-2.0, 2.0))
        # float32: the gradient's differences carry errors of sqrt(eps) ~ 3e-4.
        assert_allclose(np.asarray(sol.x)[row][~fixed[row]], reference,
                        rtol=1e-6 if dtype == np.float64 else 2e-3)  # fmt: skip


def test_one_warning_and_a_clear_error():
    def numpy_quadratic(x):
        return float(np.sum((np.asarray(x) - 1.0) ** 2))

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(2):
            sol = fixedopt.minimize(numpy_quadratic, np.zeros(3, np.float32), False)
    hosts = [w for w in caught if issubclass(w.category, fixedopt.HostFunctionWarning)]
    assert len(hosts) == 1 and "`fun` (" in str(hosts[0].message)
    assert_allclose(sol.x, 1.0, rtol=1e-3)
    with pytest.raises(ValueError, match=r"`jac` must be None or one of"):
        fixedopt.minimize(numpy_quadratic, np.zeros(3, np.float32), False, jac=np.gradient)
