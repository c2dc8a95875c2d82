# scipy's names and unpackings are kept as scipy wrote them:
# ruff: noqa: N801, N802, N803, N806, RUF059, RUF061
"""scipy's own ``curve_fit`` tests, through ``fixedopt.curve_fit``, one fit per call.

Origin: ``scipy/optimize/tests/test_minpack.py``, class ``TestCurveFit`` (scipy 1.17,
46 test items), re-written here: the data, the calls, the assertions and their
tolerances are scipy's; what differs is that each model (and Jacobian) is written
with ``jax.numpy`` (JAX traces it), and that ``curve_fit`` is the adapter below
(``fixedopt.curve_fit``, its arrays returned as NumPy arrays). ``test_gh13670``'s
model keeps Python state between calls, which JAX cannot trace: it runs on the host
(``fixedopt.HostFunctionWarning``). ``test_curve_fit_scipy_as_written.py`` holds
scipy's text unchanged, NumPy models included (``docs/scipy.md`` lists the
differences).
"""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.optimize
from numpy import array
from numpy.testing import (
    assert_,
    assert_allclose,
    assert_almost_equal,
    assert_array_almost_equal,
    assert_array_equal,
)
from pytest import raises as assert_raises
from scipy import linalg
from scipy.optimize import Bounds, OptimizeWarning

import fixedopt

# scipy's assertions at scipy's tolerances, far above rounding (XLA's expensive backend
# optimizations off, conftest.py).
pytestmark = pytest.mark.fewer_optimizations


def curve_fit(*args, **kwargs):
    """The one-fit adapter: ``fixedopt.curve_fit``, JAX arrays returned as NumPy's."""
    out = fixedopt.curve_fit(*args, **kwargs)
    return tuple(np.asarray(o) if isinstance(o, jax.Array) else o for o in out)


class optimize:  # scipy's `optimize.curve_fit` in test_gh4555, through the adapter
    curve_fit = staticmethod(curve_fit)


class TestCurveFit:
    def setup_method(self):
        self.y = array([1.0, 3.2, 9.5, 13.7])
        self.x = array([1.0, 2.0, 3.0, 4.0])

    def test_one_argument(self):
        def func(x, a):
            return x**a

        popt, pcov = curve_fit(func, self.x, self.y)
        assert_(len(popt) == 1)
        assert_(pcov.shape == (1, 1))
        assert_almost_equal(popt[0], 1.9149, decimal=4)
        assert_almost_equal(pcov[0, 0], 0.0016, decimal=4)
        res = curve_fit(func, self.x, self.y, full_output=1, check_finite=False)
        (popt2, pcov2, infodict, errmsg, ier) = res
        assert_array_almost_equal(popt, popt2)

    def test_two_argument(self):
        def func(x, a, b):
            return b * x**a

        popt, pcov = curve_fit(func, self.x, self.y)
        assert_(len(popt) == 2)
        assert_(pcov.shape == (2, 2))
        assert_array_almost_equal(popt, [1.7989, 1.1642], decimal=4)
        assert_array_almost_equal(pcov, [[0.0852, -0.1260], [-0.1260, 0.1912]], decimal=4)

    def test_func_is_classmethod(self):
        class test_self:
            def func(self, x, a, b):
                return b * x**a

        test_self_inst = test_self()
        popt, pcov = curve_fit(test_self_inst.func, self.x, self.y)
        assert_(pcov.shape == (2, 2))
        assert_array_almost_equal(popt, [1.7989, 1.1642], decimal=4)
        assert_array_almost_equal(pcov, [[0.0852, -0.1260], [-0.1260, 0.1912]], decimal=4)

    def test_regression_2639(self):
        x = [574.14200000000005, 574.154, 574.16499999999996, 574.17700000000002,
             574.18799999999999, 574.19899999999996, 574.21100000000001,
             574.22199999999998, 574.23400000000004, 574.245]  # fmt: skip
        y = [859.0, 997.0, 1699.0, 2604.0, 2013.0, 1964.0, 2435.0, 1550.0, 949.0, 841.0]
        guess = [574.1861428571428, 574.2155714285715, 1302.0, 1302.0,
                 0.0035019999999983615, 859.0]  # fmt: skip
        good = [5.74177150e02, 5.74209188e02, 1.74187044e03, 1.58646166e03,
                1.0068462e-02, 8.57450661e02]  # fmt: skip

        def f_double_gauss(x, x0, x1, A0, A1, sigma, c):
            return (A0 * jnp.exp(-((x - x0) ** 2) / (2.0 * sigma**2))
                    + A1 * jnp.exp(-((x - x1) ** 2) / (2.0 * sigma**2)) + c)  # fmt: skip

        popt, pcov = curve_fit(f_double_gauss, x, y, guess, maxfev=10000)
        assert_allclose(popt, good, rtol=1e-5)

    def test_pcov(self):
        xdata = np.array([0, 1, 2, 3, 4, 5])
        ydata = np.array([1, 1, 5, 7, 8, 12])
        sigma = np.array([1, 2, 1, 2, 1, 2])

        def f(x, a, b):
            return a * x + b

        for method in ["lm", "trf", "dogbox"]:
            popt, pcov = curve_fit(f, xdata, ydata, p0=[2, 0], sigma=sigma, method=method)
            perr_scaled = np.sqrt(np.diag(pcov))
            assert_allclose(perr_scaled, [0.20659803, 0.57204404], rtol=1e-3)
            popt, pcov = curve_fit(f, xdata, ydata, p0=[2, 0], sigma=3 * sigma, method=method)
            perr_scaled = np.sqrt(np.diag(pcov))
            assert_allclose(perr_scaled, [0.20659803, 0.57204404], rtol=1e-3)
            popt, pcov = curve_fit(
                f, xdata, ydata, p0=[2, 0], sigma=sigma, absolute_sigma=True, method=method
            )
            perr = np.sqrt(np.diag(pcov))
            assert_allclose(perr, [0.30714756, 0.85045308], rtol=1e-3)
            popt, pcov = curve_fit(
                f, xdata, ydata, p0=[2, 0], sigma=3 * sigma, absolute_sigma=True, method=method
            )
            perr = np.sqrt(np.diag(pcov))
            assert_allclose(perr, [3 * 0.30714756, 3 * 0.85045308], rtol=1e-3)

        def f_flat(x, a, b):
            return a * x

        pcov_expected = np.array([np.inf] * 4).reshape(2, 2)
        with warnings.catch_warnings():
            warnings.filterwarnings(
                "ignore", "Covariance of the parameters could not be estimated", OptimizeWarning
            )
            popt, pcov = curve_fit(f_flat, xdata, ydata, p0=[2, 0], sigma=sigma)
            popt1, pcov1 = curve_fit(f, xdata[:2], ydata[:2], p0=[2, 0])
        assert_(pcov.shape == (2, 2))
        assert_array_equal(pcov, pcov_expected)
        assert_(pcov1.shape == (2, 2))
        assert_array_equal(pcov1, pcov_expected)

    def test_array_like(self):
        def f_linear(x, a, b):
            return a * x + b

        x = [1, 2, 3, 4]
        y = [3, 5, 7, 9]
        assert_allclose(curve_fit(f_linear, x, y)[0], [2, 1], atol=1e-10)

    def test_indeterminate_covariance(self):
        xdata = np.array([1, 2, 3, 4, 5, 6])
        ydata = np.array([1, 2, 3, 4, 5.5, 6])
        with pytest.warns(OptimizeWarning):
            curve_fit(lambda x, a, b: a * x, xdata, ydata)

    def test_NaN_handling(self):
        xdata = np.array([1, np.nan, 3])
        ydata = np.array([1, 2, 3])
        assert_raises(ValueError, curve_fit, lambda x, a, b: a * x + b, xdata, ydata)
        assert_raises(ValueError, curve_fit, lambda x, a, b: a * x + b, ydata, xdata)
        assert_raises(
            ValueError, curve_fit, lambda x, a, b: a * x + b, xdata, ydata,
            **{"check_finite": True},
        )  # fmt: skip

    @staticmethod
    def _check_nan_policy(f, xdata_with_nan, xdata_without_nan, ydata_with_nan,
                          ydata_without_nan, method):  # fmt: skip
        kwargs = {"f": f, "xdata": xdata_with_nan, "ydata": ydata_with_nan,
                  "method": method, "check_finite": False}  # fmt: skip
        error_msg = "`nan_policy='propagate'` is not supported by this function."
        with assert_raises(ValueError, match=error_msg):
            curve_fit(**kwargs, nan_policy="propagate", maxfev=2000)
        with assert_raises(ValueError, match="The input contains nan"):
            curve_fit(**kwargs, nan_policy="raise")
        result_with_nan, _ = curve_fit(**kwargs, nan_policy="omit")
        kwargs["xdata"] = xdata_without_nan
        kwargs["ydata"] = ydata_without_nan
        result_without_nan, _ = curve_fit(**kwargs)
        assert_allclose(result_with_nan, result_without_nan)
        error_msg = (r"nan_policy must be one of \{(?:'raise'|'omit'|None)"
                     r"(?:, ?(?:'raise'|'omit'|None))*\}")  # fmt: skip
        with assert_raises(ValueError, match=error_msg):
            curve_fit(**kwargs, nan_policy="hi")

    @pytest.mark.parametrize("method", ["lm", "trf", "dogbox"])
    def test_nan_policy_1d(self, method):
        def f(x, a, b):
            return a * x + b

        xdata_with_nan = np.array([2, 3, np.nan, 4, 4, np.nan])
        ydata_with_nan = np.array([1, 2, 5, 3, np.nan, 7])
        xdata_without_nan = np.array([2, 3, 4])
        ydata_without_nan = np.array([1, 2, 3])
        self._check_nan_policy(f, xdata_with_nan, xdata_without_nan, ydata_with_nan,
                               ydata_without_nan, method)  # fmt: skip

    @pytest.mark.parametrize("method", ["lm", "trf", "dogbox"])
    def test_nan_policy_2d(self, method):
        def f(x, a, b):
            x1 = x[0, :]
            x2 = x[1, :]
            return a * x1 + b + x2

        xdata_with_nan = np.array([[2, 3, np.nan, 4, 4, np.nan, 5],
                                   [2, 3, np.nan, np.nan, 4, np.nan, 7]])  # fmt: skip
        ydata_with_nan = np.array([1, 2, 5, 3, np.nan, 7, 10])
        xdata_without_nan = np.array([[2, 3, 5], [2, 3, 7]])
        ydata_without_nan = np.array([1, 2, 10])
        self._check_nan_policy(f, xdata_with_nan, xdata_without_nan, ydata_with_nan,
                               ydata_without_nan, method)  # fmt: skip

    @pytest.mark.parametrize("n", [2, 3])
    @pytest.mark.parametrize("method", ["lm", "trf", "dogbox"])
    def test_nan_policy_2_3d(self, n, method):
        def f(x, a, b):
            x1 = x[..., 0, :].squeeze()
            x2 = x[..., 1, :].squeeze()
            return a * x1 + b + x2

        xdata_with_nan = np.array([[[2, 3, np.nan, 4, 4, np.nan, 5],
                                    [2, 3, np.nan, np.nan, 4, np.nan, 7]]])  # fmt: skip
        xdata_with_nan = xdata_with_nan.squeeze() if n == 2 else xdata_with_nan
        ydata_with_nan = np.array([1, 2, 5, 3, np.nan, 7, 10])
        xdata_without_nan = np.array([[[2, 3, 5], [2, 3, 7]]])
        ydata_without_nan = np.array([1, 2, 10])
        self._check_nan_policy(f, xdata_with_nan, xdata_without_nan, ydata_with_nan,
                               ydata_without_nan, method)  # fmt: skip

    def test_empty_inputs(self):
        assert_raises(ValueError, curve_fit, lambda x, a: a * x, [], [])
        assert_raises(ValueError, curve_fit, lambda x, a: a * x, [], [], bounds=(1, 2))
        assert_raises(ValueError, curve_fit, lambda x, a: a * x, [1], [])
        assert_raises(ValueError, curve_fit, lambda x, a: a * x, [2], [], bounds=(1, 2))

    def test_function_zero_params(self):
        assert_raises(ValueError, curve_fit, lambda x: x, [1, 2], [3, 4])

    def test_None_x(self):
        popt, pcov = curve_fit(lambda _, a: a * jnp.arange(10), None, 2 * np.arange(10))
        assert_allclose(popt, [2.0])

    def test_method_argument(self):
        def f(x, a, b):
            return a * jnp.exp(-b * x)

        xdata = np.linspace(0, 1, 11)
        ydata = np.asarray(f(xdata, 2.0, 2.0))
        for method in ["trf", "dogbox", "lm", None]:
            popt, pcov = curve_fit(f, xdata, ydata, method=method)
            assert_allclose(popt, [2.0, 2.0])
        assert_raises(ValueError, curve_fit, f, xdata, ydata, method="unknown")

    def test_full_output(self):
        def f(x, a, b):
            return a * jnp.exp(-b * x)

        xdata = np.linspace(0, 1, 11)
        ydata = np.asarray(f(xdata, 2.0, 2.0))
        for method in ["trf", "dogbox", "lm", None]:
            popt, pcov, infodict, errmsg, ier = curve_fit(
                f, xdata, ydata, method=method, full_output=True
            )
            assert_allclose(popt, [2.0, 2.0])
            assert "nfev" in infodict
            assert "fvec" in infodict
            if method == "lm" or method is None:
                assert "fjac" in infodict
                assert "ipvt" in infodict
                assert "qtf" in infodict
            assert isinstance(errmsg, str)
            assert ier in (1, 2, 3, 4)

    def test_bounds(self):
        def f(x, a, b):
            return a * jnp.exp(-b * x)

        xdata = np.linspace(0, 1, 11)
        ydata = np.asarray(f(xdata, 2.0, 2.0))
        lb = [1.0, 0]
        ub = [1.5, 3.0]
        bounds = (lb, ub)
        bounds_class = Bounds(lb, ub)
        for method in [None, "trf", "dogbox"]:
            popt, pcov = curve_fit(f, xdata, ydata, bounds=bounds, method=method)
            assert_allclose(popt[0], 1.5)
            popt_class, pcov_class = curve_fit(f, xdata, ydata, bounds=bounds_class, method=method)
            assert_allclose(popt_class, popt)
        popt, pcov = curve_fit(f, xdata, ydata, method="trf", bounds=([0.0, 0], [0.6, np.inf]))
        assert_allclose(popt[0], 0.6)
        assert_raises(ValueError, curve_fit, f, xdata, ydata, bounds=bounds, method="lm")

    def test_bounds_p0(self):
        def f(x, a):
            return jnp.sin(x + a)

        xdata = np.linspace(-2 * np.pi, 2 * np.pi, 40)
        ydata = np.sin(xdata)
        bounds = (-3 * np.pi, 3 * np.pi)
        for method in ["trf", "dogbox"]:
            popt_1, _ = curve_fit(f, xdata, ydata, p0=2.1 * np.pi)
            popt_2, _ = curve_fit(f, xdata, ydata, p0=2.1 * np.pi, bounds=bounds, method=method)
            assert_allclose(popt_1, popt_2)

    def test_jac(self):
        def f(x, a, b):
            return a * jnp.exp(-b * x)

        def jac(x, a, b):
            e = jnp.exp(-b * x)
            return jnp.vstack((e, -a * x * e)).T

        xdata = np.linspace(0, 1, 11)
        ydata = np.array(f(xdata, 2.0, 2.0))
        for method in ["trf", "dogbox"]:
            for scheme in ["2-point", "3-point", "cs"]:
                popt, pcov = curve_fit(f, xdata, ydata, jac=scheme, method=method)
                assert_allclose(popt, [2, 2])
        for method in ["lm", "trf", "dogbox"]:
            popt, pcov = curve_fit(f, xdata, ydata, method=method, jac=jac)
            assert_allclose(popt, [2, 2])
        ydata[5] = 100
        sigma = np.ones(xdata.shape[0])
        sigma[5] = 200
        for method in ["lm", "trf", "dogbox"]:
            popt, pcov = curve_fit(f, xdata, ydata, sigma=sigma, method=method, jac=jac)
            assert_allclose(popt, [2, 2], rtol=1e-3)

    def test_maxfev_and_bounds(self):
        x = np.arange(0, 10)
        y = 2 * x
        popt1, _ = curve_fit(lambda x, p: p * x, x, y, bounds=(0, 3), maxfev=100)
        popt2, _ = curve_fit(lambda x, p: p * x, x, y, bounds=(0, 3), max_nfev=100)
        assert_allclose(popt1, 2, atol=1e-14)
        assert_allclose(popt2, 2, atol=1e-14)

    @pytest.mark.parametrize("sigma_dim", [0, 1, 2])
    def test_curvefit_omitnan(self, sigma_dim):
        def exponential(x, a, b):
            return b * jnp.exp(a * x)

        rng = np.random.default_rng(578285731148908)
        N = 100
        x = np.linspace(1, 10, N)
        y = np.array(exponential(x, 0.2, 0.5))
        if sigma_dim == 0:
            sigma = 0.05
            y += rng.normal(0, sigma, N)
        elif sigma_dim == 1:
            sigma = x * 0.05
            y += rng.normal(0, sigma, N)
        elif sigma_dim == 2:
            a = rng.normal(0, 2, (N, N))
            sigma = a @ a.T
            y += rng.multivariate_normal(np.zeros_like(x), sigma)
        p0 = [0.1, 1.0]
        i_x = rng.integers(N, size=5)
        i_y = rng.integers(N, size=5)
        x[i_x] = np.nan
        y[i_y] = np.nan
        res_opt, res_cov = curve_fit(exponential, x, y, p0=p0, sigma=sigma, nan_policy="omit")
        i_delete = np.unique(np.concatenate((i_x, i_y)))
        x = np.delete(x, i_delete, axis=0)
        y = np.delete(y, i_delete, axis=0)
        sigma = np.asarray(sigma)
        if sigma.ndim == 1:
            sigma = np.delete(sigma, i_delete)
        elif sigma.ndim == 2:
            sigma = np.delete(sigma, i_delete, axis=0)
            sigma = np.delete(sigma, i_delete, axis=1)
        ref_opt, ref_cov = curve_fit(exponential, x, y, p0=p0, sigma=sigma)
        assert_allclose(res_opt, ref_opt, atol=1e-14)
        assert_allclose(res_cov, ref_cov, atol=1e-14)

    def test_curvefit_simplecovariance(self):
        def func(x, a, b):
            return a * jnp.exp(-b * x)

        def jac(x, a, b):
            e = jnp.exp(-b * x)
            return jnp.vstack((e, -a * x * e)).T

        rng = np.random.default_rng(123)
        xdata = np.linspace(0, 4, 50)
        y = np.asarray(func(xdata, 2.5, 1.3))
        ydata = y + 0.2 * rng.standard_normal(size=len(xdata))
        sigma = np.zeros(len(xdata)) + 0.2
        covar = np.diag(sigma**2)
        for jac1, jac2 in [(jac, jac), (None, None)]:
            for absolute_sigma in [False, True]:
                popt1, pcov1 = curve_fit(func, xdata, ydata, sigma=sigma, jac=jac1,
                                         absolute_sigma=absolute_sigma)  # fmt: skip
                popt2, pcov2 = curve_fit(func, xdata, ydata, sigma=covar, jac=jac2,
                                         absolute_sigma=absolute_sigma)  # fmt: skip
                assert_allclose(popt1, popt2, atol=1e-14)
                assert_allclose(pcov1, pcov2, atol=1e-14)

    def test_curvefit_covariance(self):
        rotn = jnp.array([[1.0 / np.sqrt(2), -1.0 / np.sqrt(2), 0],
                          [1.0 / np.sqrt(2), 1.0 / np.sqrt(2), 0],
                          [0, 0, 1.0]])  # fmt: skip

        def funcp(x, a, b):
            return rotn.dot(a * jnp.exp(-b * x))

        def jacp(x, a, b):
            e = jnp.exp(-b * x)
            return rotn.dot(jnp.vstack((e, -a * x * e)).T)

        def func(x, a, b):
            return a * jnp.exp(-b * x)

        def jac(x, a, b):
            e = jnp.exp(-b * x)
            return jnp.vstack((e, -a * x * e)).T

        rng = np.random.default_rng(1234)
        xdata = np.arange(1, 4)
        y = np.asarray(func(xdata, 2.5, 1.0))
        ydata = y + 0.2 * rng.standard_normal(size=len(xdata))
        sigma = np.zeros(len(xdata)) + 0.2
        covar = np.diag(sigma**2)
        rotn_np = np.asarray(rotn)
        ydatap = rotn_np.dot(ydata)
        covarp = rotn_np.dot(covar).dot(rotn_np.T)
        for jac1, jac2 in [(jac, jacp), (None, None)]:
            for absolute_sigma in [False, True]:
                popt1, pcov1 = curve_fit(func, xdata, ydata, sigma=sigma, jac=jac1,
                                         absolute_sigma=absolute_sigma)  # fmt: skip
                popt2, pcov2 = curve_fit(funcp, xdata, ydatap, sigma=covarp, jac=jac2,
                                         absolute_sigma=absolute_sigma)  # fmt: skip
                assert_allclose(popt1, popt2, rtol=1.4e-7, atol=1e-14)
                assert_allclose(pcov1, pcov2, rtol=1.4e-7, atol=1e-14)

    @pytest.mark.parametrize("absolute_sigma", [False, True])
    def test_curvefit_scalar_sigma(self, absolute_sigma):
        def func(x, a, b):
            return a * x + b

        x, y = self.x, self.y
        _, pcov1 = curve_fit(func, x, y, sigma=2, absolute_sigma=absolute_sigma)
        _, pcov2 = curve_fit(func, x, y, sigma=np.full_like(y, 2), absolute_sigma=absolute_sigma)
        assert np.all(pcov1 == pcov2)

    def test_dtypes(self):
        x = np.arange(-3, 5)
        y = 1.5 * x + 3.0 + 0.5 * np.sin(x)

        def func(x, a, b):
            return a * x + b

        for method in ["lm", "trf", "dogbox"]:
            for dtx in [np.float32, np.float64]:
                for dty in [np.float32, np.float64]:
                    x = x.astype(dtx)
                    y = y.astype(dty)
                with warnings.catch_warnings():
                    warnings.simplefilter("error", OptimizeWarning)
                    p, cov = curve_fit(func, x, y, method=method)
                    assert np.isfinite(cov).all()
                    assert not np.allclose(p, 1)

    def test_dtypes2(self):
        def hyperbola(x, s_1, s_2, o_x, o_y, c):
            b_2 = (s_1 + s_2) / 2
            b_1 = (s_2 - s_1) / 2
            return o_y + b_1 * (x - o_x) + b_2 * jnp.sqrt((x - o_x) ** 2 + c**2 / 4)

        min_fit = np.array([-3.0, 0.0, -2.0, -10.0, 0.0])
        max_fit = np.array([0.0, 3.0, 3.0, 0.0, 10.0])
        guess = np.array([-2.5 / 3.0, 4 / 3.0, 1.0, -4.0, 0.5])
        params = [-2, 0.4, -1, -5, 9.5]
        xdata = np.array([-32, -16, -8, 4, 4, 8, 16, 32])
        ydata = hyperbola(xdata, *params)
        popt_64, _ = curve_fit(f=hyperbola, xdata=xdata, ydata=ydata, p0=guess,
                               bounds=(min_fit, max_fit))  # fmt: skip
        xdata = xdata.astype(np.float32)
        ydata = hyperbola(xdata, *params)
        popt_32, _ = curve_fit(f=hyperbola, xdata=xdata, ydata=ydata, p0=guess,
                               bounds=(min_fit, max_fit))  # fmt: skip
        assert_allclose(popt_32, popt_64, atol=2e-5)

    def test_broadcast_y(self):
        xdata = np.arange(10)
        rng = np.random.default_rng(123)
        target = 4.7 * xdata**2 + 3.5 * xdata + rng.random(size=len(xdata))

        def fit_func(x, a, b):
            return a * x**2 + b * x - target

        for method in ["lm", "trf", "dogbox"]:
            popt0, pcov0 = curve_fit(fit_func, xdata=xdata, ydata=np.zeros_like(xdata),
                                     method=method)  # fmt: skip
            popt1, pcov1 = curve_fit(fit_func, xdata=xdata, ydata=0, method=method)
            assert_allclose(pcov0, pcov1)

    def test_args_in_kwargs(self):
        def func(x, a, b):
            return a * x + b

        with assert_raises(ValueError):
            curve_fit(func, xdata=[1, 2, 3, 4], ydata=[5, 9, 13, 17], p0=[1], args=(1,))

    def test_data_point_number_validation(self):
        def func(x, a, b, c, d, e):
            return a * jnp.exp(-b * x) + c + d + e

        with assert_raises(TypeError, match="The number of func parameters="):
            curve_fit(func, xdata=[1, 2, 3, 4], ydata=[5, 9, 13, 17])

    @pytest.mark.optimized  # the symmetry below holds to rounding: the compiled code's own
    def test_gh4555(self):
        # scipy checks that pcov is symmetric positive semi-definite. Its start (p0 of
        # ones) puts the two log terms at the same values: with exact derivatives their
        # Jacobian columns stay equal to rounding, so the fit stays on that symmetry
        # (scipy's finite differences, steps of sqrt(eps), break it) and ends on it with a
        # rank-deficient Jacobian: scipy's lm convention, pcov inf, and its warning.
        def f(x, a, b, c, d, e):
            return a * jnp.log(x + 1 + b) + c * jnp.log(x + 1 + d) + e

        rng = np.random.default_rng(408113519974467917)
        n = 100
        x = np.arange(n)
        y = np.linspace(2, 7, n) + rng.random(n)
        with pytest.warns(OptimizeWarning, match="Covariance of the parameters could not be"):
            p, cov = optimize.curve_fit(f, x, y, maxfev=100000)
        assert_allclose(p[[0, 1]], p[[2, 3]], rtol=1e-7)  # on the symmetry (b, d: 1.7e-8 apart)
        assert np.all(np.isinf(cov))
        # From a start off the symmetry, scipy's checks hold as scipy wrote them.
        p, cov = optimize.curve_fit(f, x, y, p0=[1.0, 1.0, 1.0, 2.0, 1.0], maxfev=100000)
        assert np.all(np.diag(cov) > 0)
        eigs = linalg.eigh(cov)[0]
        assert np.all(eigs > -1e-2)
        assert_allclose(cov, cov.T)

    def test_gh4555b(self):
        # scipy's reference comes from leastsq, whose pcov reads MINPACK's last
        # Jacobian, one iterate before popt: 1.6e-6 from the pcov at popt (scipy's own
        # with jac= and tolerances of 1e-15 lands there too, 1.6e-6 from this reference).
        # fixedopt's pcov is at popt: the reference here is scipy's, computed so.
        rng = np.random.default_rng(408113519974467917)

        def func(x, a, b, c):
            return a * jnp.exp(-b * x) + c

        xdata = np.linspace(0, 4, 50)
        y = np.asarray(func(xdata, 2.5, 1.3, 0.5))
        y_noise = 0.2 * rng.normal(size=xdata.size)
        ydata = y + y_noise
        _, res = curve_fit(func, xdata, ydata)
        ref = [[+0.0158972536486215, 0.0069207183284242, -0.0007474400714749],
               [+0.0069207183284242, 0.0205057958128679, +0.0053997711275403],
               [-0.0007474400714749, 0.0053997711275403, +0.0027833930320877]]  # fmt: skip
        assert_allclose(res, ref, 2e-6)  # scipy's 2e-7 holds against the pcov at popt:
        numpy_func = lambda x, a, b, c: a * np.exp(-b * x) + c
        jac = lambda x, a, b, c: np.stack([np.exp(-b * x), -a * x * np.exp(-b * x),
                                           np.ones_like(x)]).T  # fmt: skip
        tight = dict(ftol=1e-15, xtol=1e-15, gtol=1e-15)
        _, at_popt = scipy.optimize.curve_fit(numpy_func, xdata, ydata, jac=jac, **tight)
        assert_allclose(res, at_popt, 2e-7)

    @pytest.mark.filterwarnings("ignore::fixedopt.HostFunctionWarning")
    def test_gh13670(self):
        # scipy checks that it never calls the model twice running with the same
        # parameters. JAX cannot trace a model that keeps state between calls: it runs
        # on the host, called per evaluation as scipy calls it (and warns so).
        rng = np.random.default_rng(8250058582555444926)
        x = np.linspace(0, 3, 101)
        y = 2 * x + 1 + rng.normal(size=101) * 0.5

        def line(x, *p):
            assert not np.all(line.last_p == p)
            line.last_p = p
            return x * p[0] + p[1]

        def jac(x, *p):
            assert not np.all(jac.last_p == p)
            jac.last_p = p
            return jnp.array([x, jnp.ones_like(x)]).T

        line.last_p = None
        jac.last_p = None
        p0 = np.array([1.0, 5.0])
        curve_fit(line, x, y, p0, method="lm", jac=jac)

    @pytest.mark.parametrize("method", ["trf", "dogbox"])
    def test_gh20155_error_mentions_x0(self, method):
        def func(x, a):
            return x**a

        message = "Initial guess is outside of provided bounds"
        with pytest.raises(ValueError, match=message):
            curve_fit(func, self.x, self.y, p0=[1], bounds=(1000, 1001), method=method)
