"""scipy's ``curve_fit`` test problems batched: 64 fits per problem, each with its own
data and its own fixed parameters, against scipy on each fit's reduced model.

Origin of the problems: ``scipy/optimize/tests/test_minpack.py``, ``TestCurveFit``
(scipy 1.17): their models, data, starts, bounds and ``sigma``. Each of the 64 rows
perturbs the data (its own noise) and fixes its own random subset of parameters (row 0
none, row 1 all) at values near scipy's fit. The reference for a row is
``scipy.optimize.curve_fit`` of the reduced model, whose parameters are that row's free
ones (the fixed ones substituted), at tolerances of 1e-15 (converged past 1e-6);
``popt`` must agree to 1e-6 relative, row by row. One compiled fit per problem.
"""

import functools

import jax.numpy as jnp
import numpy as np
import pytest
import scipy.optimize

import fixedopt

# scipy's fit of each row's reduced model to 1e-6 relative, fixed entries' bits: none
# rests on the backend's rounding (XLA's expensive backend optimizations off, conftest.py).
pytestmark = pytest.mark.fewer_optimizations

B = 64
TIGHT = dict(ftol=1e-15, xtol=1e-15, gtol=1e-15)


def power(x, a, b, xp=jnp):
    return b * x**a


def double_gauss(x, x0, x1, a0, a1, sigma, c, xp=jnp):
    return (a0 * xp.exp(-((x - x0) ** 2) / (2.0 * sigma**2))
            + a1 * xp.exp(-((x - x1) ** 2) / (2.0 * sigma**2)) + c)  # fmt: skip


def line(x, a, b, xp=jnp):
    return a * x + b


def decay(x, a, b, xp=jnp):
    return a * xp.exp(-b * x)


def decay_offset(x, a, b, c, xp=jnp):
    return a * xp.exp(-b * x) + c


def growth(x, a, b, xp=jnp):
    return b * xp.exp(a * x)


def hyperbola(x, s_1, s_2, o_x, o_y, c, xp=jnp):
    b_2 = (s_1 + s_2) / 2
    b_1 = (s_2 - s_1) / 2
    return o_y + b_1 * (x - o_x) + b_2 * xp.sqrt((x - o_x) ** 2 + c**2 / 4)


def gh4555b_data():
    rng = np.random.default_rng(408113519974467917)
    x = np.linspace(0, 4, 50)
    return x, decay_offset(x, 2.5, 1.3, 0.5, np) + 0.2 * rng.normal(size=x.size)


def regression_2639_data():
    x = np.array([574.142, 574.154, 574.165, 574.177, 574.188, 574.199, 574.211, 574.222,
                  574.234, 574.245])  # fmt: skip
    y = np.array([859.0, 997.0, 1699.0, 2604.0, 2013.0, 1964.0, 2435.0, 1550.0, 949.0, 841.0])
    return x, y


X_HYPERBOLA = np.array([-32.0, -16, -8, 4, 4, 8, 16, 32])
X_PCOV = np.arange(6.0)
X_EXP = np.linspace(0, 1, 11)
X_TWO = np.array([1.0, 2.0, 3.0, 4.0])
PROBLEMS = {  # name: model, x, y, p0, options (bounds, sigma), relative noise per row
    "test_two_argument": (power, X_TWO, np.array([1.0, 3.2, 9.5, 13.7]), [1.0, 1.0], {}, 0.02),
    "test_regression_2639": (
        double_gauss, *regression_2639_data(),
        [574.1861428571428, 574.2155714285715, 1302.0, 1302.0, 0.0035019999999983615, 859.0],
        {}, 0.002,
    ),
    "test_pcov": (
        line, X_PCOV, np.array([1.0, 1, 5, 7, 8, 12]), [2.0, 0.0],
        {"sigma": np.array([1.0, 2, 1, 2, 1, 2])}, 0.05,
    ),
    "test_bounds": (
        decay, X_EXP, decay(X_EXP, 2.0, 2.0, np), [1.25, 1.5],
        {"bounds": (np.array([1.0, 0.0]), np.array([1.5, 3.0]))}, 0.02,
    ),
    "test_gh4555b": (decay_offset, *gh4555b_data(), [1.0, 1.0, 1.0], {}, 0.02),
    "test_dtypes2": (
        hyperbola, X_HYPERBOLA, hyperbola(X_HYPERBOLA, -2, 0.4, -1, -5, 9.5, np),
        [-2.5 / 3.0, 4 / 3.0, 1.0, -4.0, 0.5],
        {"bounds": (np.array([-3.0, 0.0, -2.0, -10.0, 0.0]), np.array([0.0, 3.0, 3.0, 0.0, 10.0]))},
        0.01,
    ),
}  # fmt: skip


def rows(name):
    """Per row: data, start and fixed mask (fixed values near scipy's fit of the
    unperturbed problem, inside the bounds)."""
    f, x, y, p0, options, noise = PROBLEMS[name]
    rng = np.random.default_rng(len(name))
    numpy_f = functools.partial(f, xp=np)
    center, _ = scipy.optimize.curve_fit(numpy_f, x, y, p0, **options, **TIGHT)
    y_rows = y * (1 + noise * rng.normal(size=(B, y.size)))
    k = len(p0)
    fixed = rng.random((B, k)) < 0.35
    fixed[0], fixed[1] = False, True
    values = center * (1 + 1e-3 * rng.normal(size=(B, k)))
    if "bounds" in options:
        values = np.clip(values, *options["bounds"])
    p0_rows = np.where(fixed, values, np.asarray(p0, float))
    return f, numpy_f, x, y_rows, p0_rows, fixed, options


def reduced_fit(numpy_f, x, y, p0, fixed, options):
    """scipy on the model whose parameters are the free ones of ``p0``."""
    free = ~fixed

    def model(x, *q):
        p = p0.copy()
        p[free] = q
        return numpy_f(x, *p)

    kwargs = dict(TIGHT)
    if "sigma" in options:
        kwargs["sigma"] = options["sigma"]
    if "bounds" in options:
        kwargs["bounds"] = tuple(b[free] for b in options["bounds"])
    popt, _ = scipy.optimize.curve_fit(model, x, y, p0[free], **kwargs)
    return popt


KNOWN = {  # measured 2026-12-04: the data do not determine popt to 1e-6 (see the reason)
    "test_regression_2639": (
        "40 of 63 rows differ from scipy's fit at tolerances 1e-15 by more than 1e-6 (up to "
        "1.5e-2), as scipy's own fits at its default tolerances do (31 rows, up to 2.1e-2): "
        "both stop on xtol, whose scaled norm |D x| the two peak positions dominate (574, "
        "Jacobian columns ~1e6), so 1.5e-8 of it leaves amplitudes and the width up to 1e-4 "
        "off. With every tolerance 1e-15 fixedopt's cost is at or below the reference's on "
        "every row, and 30 rows still differ by more than 1e-6 (up to 3.5e-3): parameters "
        "the data barely determine (an amplitude whose peak sits off the data moves 3.5e-3 "
        "for 2e-9 of the cost), where the reference, whose Jacobian is differenced, stops "
        "elsewhere"
    ),
}
CASES = [pytest.param(name, marks=pytest.mark.xfail(strict=True, raises=AssertionError,
                                                    reason=KNOWN[name]))
         if name in KNOWN else name for name in PROBLEMS]  # fmt: skip


# regression_2639: rows whose fixed values leave the Jacobian rank-deficient get lm's
# inf pcov and its OptimizeWarning (popt is what is compared here).
@pytest.mark.filterwarnings("ignore::fixedopt.OptimizeWarning")
@pytest.mark.parametrize("name", CASES)
def test_64_fits_with_their_own_fixed_parameters_match_scipy_row_by_row(name):
    f, numpy_f, x, y_rows, p0_rows, fixed, options = rows(name)
    popt, _, result = fixedopt.curve_fit(
        f, x, y_rows, p0_rows, fixed=fixed, batched=True, result=True, **options
    )
    popt = np.asarray(popt)
    assert np.all(np.asarray(result.solution.converged)), name
    np.testing.assert_array_equal(popt[1], p0_rows[1])  # all fixed
    np.testing.assert_array_equal(popt[fixed], p0_rows[fixed])  # bit for bit
    for b in range(B):
        if fixed[b].all():
            continue
        reference = reduced_fit(numpy_f, x, y_rows[b], p0_rows[b], fixed[b], options)
        np.testing.assert_allclose(popt[b][~fixed[b]], reference, rtol=1e-6, err_msg=f"row {b}")


def test_64_fits_omitting_their_own_nan_points_match_scipy():
    """``test_curvefit_omitnan`` (1-D sigma) batched: each row loses its own points
    (NaN in its ydata, and the NaN of the shared xdata); scipy deletes them."""
    rng = np.random.default_rng(578285731148908)
    n = 100
    x = np.linspace(1, 10, n)
    sigma = x * 0.05
    y = growth(x, 0.2, 0.5, np) + sigma * rng.normal(size=(B, n))
    x[rng.integers(n, size=5)] = np.nan
    for b in range(B):
        y[b, rng.integers(n, size=5)] = np.nan
    popt, pcov = fixedopt.curve_fit(growth, x, y, np.tile([0.1, 1.0], (B, 1)), sigma=sigma,
                                    batched=True, nan_policy="omit")  # fmt: skip
    numpy_f = functools.partial(growth, xp=np)
    for b in range(B):
        keep = ~(np.isnan(x) | np.isnan(y[b]))
        ref_popt, ref_pcov = scipy.optimize.curve_fit(
            numpy_f, x[keep], y[b, keep], [0.1, 1.0], sigma=sigma[keep], **TIGHT
        )
        np.testing.assert_allclose(popt[b], ref_popt, rtol=1e-6, err_msg=f"row {b}")
        np.testing.assert_allclose(pcov[b], ref_pcov, rtol=1e-5, err_msg=f"row {b}")
