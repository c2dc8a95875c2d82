"""curve_fit with functions JAX cannot trace (NumPy calls, a Python ``if`` on a
parameter, state kept between calls): they run on the host through
``jax.pure_callback``, with scipy's finite differences or the user's NumPy ``jac``.
References: the same models in ``jax.numpy`` (exact derivatives), scipy's
``approx_derivative`` and ``curve_fit``."""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.optimize
from numpy.testing import assert_allclose, assert_array_equal
from scipy.optimize._numdiff import approx_derivative

import fixedopt
from fixedopt._objective import host_callback
from fixedopt._objective.differences import finite_differences

pytestmark = pytest.mark.filterwarnings("ignore::fixedopt.HostFunctionWarning")

T = np.linspace(0.0, 3.0, 40)


def numpy_decay(t, a, rate, c):
    return a * np.exp(-rate * t) + c


def jax_decay(t, a, rate, c):
    return a * jnp.exp(-rate * t) + c


def numpy_jacobian(t, a, rate, c):
    e = np.exp(-rate * t)
    return np.stack([e, -a * t * e, np.ones_like(t)], axis=-1)


ROWS = np.array([[2.0, 1.5, 0.1], [1.0, 0.5, 0.3], [3.0, 2.5, -0.2], [0.5, 0.8, 1.0]])
Y = np.stack([numpy_decay(T, *row) for row in ROWS])
Y = Y + 0.01 * np.random.default_rng(0).standard_normal(Y.shape)


@pytest.mark.parametrize("scheme", ["2-point", "3-point", "cs"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_finite_differences_are_scipys(scheme, dtype):
    p = np.array([1.7, -0.3, 0.0, 250.0], dtype)
    fun = lambda q: np.stack([q[0] * np.exp(q[1]), np.sin(q[2]), q[3] ** 2, q[0] * q[3]])
    expected = approx_derivative(fun, p, method=scheme)
    got = finite_differences(fun, p, fun(p), scheme)
    if dtype == np.float64:  # the same steps and the same arithmetic: scipy's numbers
        assert_allclose(got, expected, rtol=1e-15, atol=0)
    else:  # scipy steps float32 parameters to float64 points; fixedopt stays in float32
        exact = approx_derivative(fun, p.astype(np.float64), method="cs")
        assert_allclose(got, exact, rtol=2e-4 if scheme != "2-point" else 1e-3, atol=1e-4)


@pytest.mark.parametrize("scheme", ["2-point", "3-point"])
def test_finite_differences_within_bounds_are_scipys(scheme):
    lower = np.array([0.0, -1.0, 1.0, -np.inf, 0.5])
    upper = np.array([1.0, 1.0, np.inf, 0.0, 0.5 + 1e-7])
    p = np.array([1.0, -1.0, 1.0 + 1e-9, 0.0, 0.5])  # at, near and between bounds
    fun = lambda q: np.stack([np.sqrt(1.0 - q[0]) + q[1] ** 3, np.log(q[2]) * q[3], q[4] ** 2])
    expected = approx_derivative(fun, p, method=scheme, bounds=(lower, upper))
    got = finite_differences(fun, p, fun(p), scheme, lower, upper)
    assert_allclose(got, expected, rtol=1e-15, atol=0)


def test_steps_stay_within_the_bounds_of_a_model_undefined_beyond_them():
    def line_up_to_one(x, a):
        if a > 1.0:  # undefined beyond its upper bound
            return np.full_like(x, np.nan)
        return a * x

    popt, _, result = fixedopt.curve_fit(line_up_to_one, T, 2 * T, bounds=(0.0, 1.0), result=True)
    assert popt[0] == 1.0 and result.solution.status == fixedopt.Status.CONVERGED


def test_a_numpy_model_fits_as_the_same_model_in_jax_numpy():
    popt, pcov = fixedopt.curve_fit(numpy_decay, T, Y[0], p0=[1.0, 1.0, 0.0])
    exact, exact_pcov = fixedopt.curve_fit(jax_decay, T, Y[0], p0=[1.0, 1.0, 0.0])
    assert_allclose(popt, exact, rtol=1e-7)
    assert_allclose(pcov, exact_pcov, rtol=1e-5)  # 2-point differences: ~sqrt(eps)
    scipy_popt, scipy_pcov = scipy.optimize.curve_fit(numpy_decay, T, Y[0], p0=[1.0, 1.0, 0.0])
    assert_allclose(popt, scipy_popt, rtol=1e-6)
    assert_allclose(pcov, scipy_pcov, rtol=1e-4)


def test_a_model_that_branches_on_a_parameter_runs():
    def piecewise(t, a, rate, c):
        if rate > 1.0:  # a Python `if` on a value: JAX cannot trace it
            return a * np.exp(-rate * t) + c
        return a * np.exp(-rate * t) + c + 0.0 * t

    popt, _ = fixedopt.curve_fit(piecewise, T, Y[2], p0=[1.0, 2.0, 0.0])
    assert_allclose(popt, fixedopt.curve_fit(jax_decay, T, Y[2], p0=[1.0, 2.0, 0.0])[0], 1e-7)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_batch_runs_in_one_host_call_per_evaluation_and_keeps_fixed_entries(dtype, monkeypatch):
    batches = []
    each = host_callback._each

    def counted(one, leaves, core, p, shape, out_dtype):
        batches.append(np.shape(p)[:-1])
        return each(one, leaves, core, p, shape, out_dtype)

    monkeypatch.setattr(host_callback, "_each", counted)
    p0 = np.array([[1.0, 1.0, 0.1], [1.0, 1.0, 0.0], [2.0, 2.0, -0.2], [1.0, 1.0, 0.7]], dtype)
    fixed = np.array([[False, False, True], [False, False, False], [True, False, False],
                      [False, True, False]])  # fmt: skip
    popt, pcov, result = fixedopt.curve_fit(
        numpy_decay, T.astype(dtype), Y.astype(dtype), p0, fixed=fixed, batched=True, result=True
    )
    assert popt.dtype == dtype
    assert_array_equal(np.asarray(popt)[fixed], p0[fixed])  # bit-identical
    assert_array_equal(np.asarray(pcov)[fixed], 0.0)
    assert np.all(np.asarray(result.solution.status) == fixedopt.Status.CONVERGED)
    exact = fixedopt.curve_fit(jax_decay, T, Y, p0.astype(np.float64), fixed=fixed, batched=True)
    assert_allclose(popt, exact[0], rtol=1e-7 if dtype == np.float64 else 2e-3, atol=1e-6)
    assert max(int(np.prod(b)) for b in batches) >= len(p0)  # the batch in one host call


def test_a_numpy_jac_is_called_on_the_host_and_gives_the_covariance():
    with warnings.catch_warnings(record=True):
        popt, pcov = fixedopt.curve_fit(numpy_decay, T, Y[1], jac=numpy_jacobian)
    exact, exact_pcov = fixedopt.curve_fit(jax_decay, T, Y[1])
    assert_allclose(popt, exact, rtol=1e-9)
    assert_allclose(pcov, exact_pcov, rtol=1e-9)  # the same (exact) Jacobian


def test_the_covariance_uses_the_finite_difference_jacobian_at_popt():
    popt, pcov = fixedopt.curve_fit(numpy_decay, T, Y[3], p0=[1.0, 1.0, 0.5])
    p = np.asarray(popt)
    jacobian = finite_differences(lambda q: numpy_decay(T, *q), p, numpy_decay(T, *p), "2-point")
    residual = numpy_decay(T, *p) - Y[3]
    s2 = residual @ residual / (T.size - 3)
    assert_allclose(pcov, s2 * np.linalg.inv(jacobian.T @ jacobian), rtol=1e-10)


def test_per_fit_xdata_on_the_host():
    x = np.stack([T, 2 * T, T + 1, T / 2])
    y = np.stack([numpy_decay(xi, *row) for xi, row in zip(x, ROWS)])
    popt, _ = fixedopt.curve_fit(numpy_decay, x, y, np.ones((4, 3)), batched=True)
    assert_allclose(popt, ROWS, rtol=1e-6, atol=1e-7)


def test_a_function_is_warned_about_once():
    def once(t, a, rate):
        return a * np.exp(-rate * t)

    with pytest.warns(fixedopt.HostFunctionWarning, match="once"):
        fixedopt.curve_fit(once, T, Y[0] - 0.1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fixedopt.curve_fit(once, T, Y[0] - 0.1)


def test_a_numpy_jac_of_the_wrong_shape_is_named():
    wrong = lambda t, a, rate, c: numpy_jacobian(t, a, rate, c)[:, :2]
    with pytest.raises(ValueError, match=r"`jac` must return .* shape \(40, 3\), got shape"):
        fixedopt.curve_fit(numpy_decay, T, Y[0], jac=wrong)


def test_a_traceable_model_stays_compiled():
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no HostFunctionWarning
        fixedopt.curve_fit(jax_decay, T, Y[0])


def test_the_derivative_in_xdata_of_a_host_model_is_loud():
    model = host_callback.HostCall(lambda x, p: p[0] * np.sin(x))
    with pytest.raises(Exception, match=r"(?i)pure_callback|JVP"):
        jax.jacfwd(lambda x: model(x, jnp.ones(1)))(jnp.linspace(0.0, 1.0, 3))


def test_a_traceable_model_is_tried_once_per_shapes(monkeypatch):
    from fixedopt._entry import host_model

    trials = []
    trial = host_model.tracing_error

    def counted(calls, owners):
        trials.append(len(calls))
        return trial(calls, owners)

    monkeypatch.setattr(host_model, "tracing_error", counted)

    def decay(t, a, rate):
        return a * jnp.exp(-rate * t)

    for _ in range(3):
        fixedopt.curve_fit(decay, T, Y[0] - 0.1)
    assert len(trials) == 1
    fixedopt.curve_fit(decay, T[:20], Y[0, :20] - 0.1)  # new shapes: tried again
    assert len(trials) == 2
