"""Model.fit's Poisson estimator and nan_policy. The Poisson fits are checked against
the likelihood itself (its score is 0 at the fit; the errors are the inverse Fisher
information, from a central-difference Jacobian in NumPy), the omitted points against
lmfit's ``nan_policy="omit"``; each reference costs no compilation (a ``curve_fit``
reference would cost a second one of several seconds)."""

import lmfit
import numpy as np
import pytest
import scipy.optimize

import fixedopt
from fixedopt.models import ConstantModel, GaussianModel

# lmfit's and scipy's values within 1e-12 to 1e-3 and rows equal within one compiled
# fit (a NaN fit isolated): none rests on the backend's rounding.
pytestmark = pytest.mark.fewer_optimizations

X = np.linspace(0.0, 20.0, 41)
NAMES = ["amplitude", "center", "sigma", "c"]
TRUTH = np.array([200.0, 10.0, 1.5, 5.0])
START = np.array([150.0, 9.5, 2.0, 3.0])
FIXED = np.array([[False] * 4, [False, True, False, False], [False] * 3 + [True]] * 2)


def curve(p):
    amplitude, center, sigma, c = p
    return (
        amplitude / (sigma * np.sqrt(2 * np.pi)) * np.exp(-((X - center) ** 2) / (2 * sigma**2)) + c
    )


def _params(model):
    params = model.make_params(**dict(zip(NAMES, START)))
    for j, name in enumerate(NAMES):
        if FIXED[:, j].any():
            params[name].set(value=np.where(FIXED[:, j], TRUTH[j], START[j]), vary=~FIXED[:, j])
    return params


def _jacobian(p, free, step=1e-6):
    columns = []
    for j in np.flatnonzero(free):
        h = step * max(1.0, abs(p[j]))
        up, down = p.copy(), p.copy()
        up[j] += h
        down[j] -= h
        columns.append((curve(up) - curve(down)) / (2 * h))
    return np.stack(columns, axis=1)


def _deviance(q, p, vary, y):
    """The Poisson deviance of ``y`` at ``p`` with its entries ``vary`` set to ``q``."""
    p = p.copy()
    p[vary] = q
    mu = curve(p)
    return 2 * np.sum(mu - y + y * np.log(np.where(y > 0, y / mu, 1.0)))


def test_poisson_fit_is_the_likelihoods_maximum_with_fisher_errors():
    rng = np.random.default_rng(3)
    counts = rng.poisson(curve(TRUTH), (len(FIXED), X.size)).astype(float)
    model = GaussianModel() + ConstantModel()
    ours = model.fit(counts, _params(model), x=X, estimator="poisson")
    assert ours.success.all()
    for row in range(len(FIXED)):
        p, free = np.array([ours.best_values[n][row] for n in NAMES]), ~FIXED[row]
        jac, mu = _jacobian(p, free), curve(p)
        fisher = jac.T @ (jac / mu[:, None])
        score = jac.T @ (1.0 - counts[row] / mu)  # the gradient of sum(mu - y log mu)
        fisher_errors = np.sqrt(np.diag(np.linalg.inv(fisher)))
        newton = np.linalg.solve(fisher, score)  # the step to the maximum: none left
        assert np.max(np.abs(newton) / fisher_errors) < 1e-6
        errors = np.array([ours.stderr[n][row] for n in NAMES])
        np.testing.assert_allclose(errors[free], fisher_errors, rtol=1e-7)  # unscaled
        assert np.all(errors[~free] == 0.0) and np.all(p[~free] == TRUTH[~free])
    mu = ours.best_fit
    np.testing.assert_allclose(ours.chisqr, np.sum((mu - counts) ** 2 / mu, axis=1), rtol=1e-12)
    deviance = 2 * np.sum(mu - counts + counts * np.log(np.where(counts > 0, counts / mu, 1)), 1)
    np.testing.assert_allclose(ours.deviance, deviance, rtol=1e-10)
    np.testing.assert_allclose(ours.aic, deviance + 2 * ours.nvarys, rtol=1e-10)
    assert "poisson (fixedopt)" in ours.fit_report(1)

    # profile likelihood: at each 1-sigma limit, the deviance with the others refitted
    # (by scipy's Nelder-Mead, in NumPy) is the best deviance + chi2.ppf(0.68, 1) = 1
    # (3 fits x 2 sides: the 6 rows of the fit's own compiled solve)
    limits = ours.conf_interval(names=["center"], sigmas=(1,), rows=[0, 2, 3])
    assert np.isnan(limits["center"][[1, 4, 5]]).all()
    j = NAMES.index("center")
    for row in (0, 2, 3):
        p, y = np.array([ours.best_values[n][row] for n in NAMES]), counts[row]
        vary = ~FIXED[row] & (np.arange(len(NAMES)) != j)
        for held in limits["center"][row, [0, 2]]:
            p[j] = held
            refit = scipy.optimize.minimize(
                _deviance, p[vary], args=(p, vary, y), method="Nelder-Mead",
                options={"xatol": 1e-9, "fatol": 1e-11},
            )  # fmt: skip
            assert refit.fun - ours.deviance[row] == pytest.approx(1.0, abs=1e-5), row

    # NaN counts, propagated: only that fit stops (NONFINITE); the same compiled fit
    counts[2, 7] = np.nan
    spread = model.fit(counts, _params(model), x=X, estimator="poisson", nan_policy="propagate")
    assert spread.status[2] == fixedopt.Status.NONFINITE
    others = [0, 1, 3, 4, 5]
    assert spread.success[others].all()
    np.testing.assert_array_equal(spread.values[others], ours.values[others])


NOISE = np.full(X.size, 2.0)
KWS = {"jac": "3-point", "xtol": 1e-15, "ftol": 1e-15, "gtol": 1e-15}  # lmfit's least_squares


@pytest.fixture(scope="module")
def omitted():
    """Six least-squares fits, three NaN points left out of two of them."""
    rng = np.random.default_rng(4)
    data = curve(TRUTH) + rng.normal(0.0, NOISE, (len(FIXED), X.size))
    data[0, [3, 20]] = np.nan  # one of them on the peak
    data[4, 7] = np.nan
    model = GaussianModel() + ConstantModel()
    return data, model.fit(data, _params(model), x=X, weights=1 / NOISE, nan_policy="omit")


def _lmfit(data, row, **method):
    reference = lmfit.models.GaussianModel() + lmfit.models.ConstantModel()
    params = reference.make_params(**dict(zip(NAMES, START)))
    for j in np.flatnonzero(FIXED[row]):
        params[NAMES[j]].set(value=TRUTH[j], vary=False)
    method = method or {"method": "least_squares", "fit_kws": KWS}
    return reference.fit(data[row], params, x=X, weights=1 / NOISE, nan_policy="omit", **method)


def test_nan_policy_omit_leaves_each_point_out_of_its_fit_as_lmfit(omitted):
    data, ours = omitted
    assert ours.success.all()
    np.testing.assert_array_equal(ours.ndata, [39, 41, 41, 41, 40, 41])
    np.testing.assert_array_equal(ours.nfree, ours.ndata - ours.nvarys)
    assert np.isnan(ours.data[0, 3]) and ours.residual[0, 3] == 0.0
    assert "# data points      = 39" in ours.fit_report(0)
    for row in (0, 4):
        theirs = _lmfit(data, row)
        assert ours.ndata[row] == theirs.ndata and ours.nfree[row] == theirs.nfree
        assert ours.redchi[row] == pytest.approx(theirs.redchi, rel=1e-9)
        assert ours.aic[row] == pytest.approx(theirs.aic, rel=1e-9)
        for name in NAMES:
            param = theirs.params[name]
            assert ours.best_values[name][row] == pytest.approx(param.value, rel=1e-7), name
            if param.vary:
                assert ours.stderr[name][row] == pytest.approx(param.stderr, rel=1e-6), name

    # a fit with every point NaN (a masked pixel of a map): NONFINITE, the others unchanged
    empty = data.copy()
    empty[2] = np.nan
    again = ours.model.fit(empty, _params(ours.model), x=X, weights=1 / NOISE, nan_policy="omit")
    assert again.status[2] == fixedopt.Status.NONFINITE and again.ndata[2] == 0
    others = [0, 1, 3, 4, 5]
    assert again.success[others].all()
    np.testing.assert_array_equal(again.values[others], ours.values[others])
    assert np.isnan(again.to_records()["aic"][2])  # and no warning


def test_conf_interval_equals_lmfits_profile_limits(omitted):
    data, ours = omitted
    limits = ours.conf_interval(sigmas=(1, 2))
    assert set(limits) == set(NAMES) and limits["center"].shape == (len(FIXED), 5)
    assert np.isnan(limits["center"][1]).all()  # known in fit 1: no interval
    for row in (0, 1):
        theirs = _lmfit(data, row, method="leastsq").conf_interval(sigmas=(1, 2))
        for name, pairs in theirs.items():
            # lmfit finds each limit to rtol=5e-5 of its value (scipy's toms748)
            expected = [value for _, value in pairs]
            np.testing.assert_allclose(limits[name][row], expected, rtol=1e-4, err_msg=name)
    report, expected = limits.report(1).splitlines(), lmfit.printfuncs.ci_report(theirs).split("\n")
    assert report[0] == expected[0] and len(report) == len(expected)  # their probabilities
    assert ours.ci_report(1, sigmas=(1, 2)) == limits.report(1)  # the same compiled search
    for ours_line, their_line in zip(report[1:], expected[1:]):
        assert ours_line.split(":")[0] == their_line.split(":")[0]
        ours_numbers, their_numbers = (np.array(line.split(":")[1].split(), float)
                                       for line in (ours_line, their_line))  # fmt: skip
        np.testing.assert_allclose(ours_numbers, their_numbers, rtol=1e-3, atol=2e-4)
    # a bound between fit 3's 1- and 2-sigma limits: the 2-sigma limit is beyond it (inf)
    params = _params(ours.model)
    bound = np.where(np.arange(len(FIXED)) == 3, limits["sigma"][3, 3:].mean(), np.inf)
    params["sigma"].set(max=bound)
    bounded = ours.model.fit(data, params, x=X, weights=1 / NOISE, nan_policy="omit")
    again = bounded.conf_interval(sigmas=(1, 2))  # the same compiled profile fits
    assert again["sigma"][3, 4] == np.inf
    np.testing.assert_allclose(again["sigma"][3, :4], limits["sigma"][3, :4], rtol=1e-6)


def test_nan_policy_raise_names_the_point_and_poisson_refuses_weights():
    model = GaussianModel() + ConstantModel()
    data = np.ones((3, X.size))
    data[2, 5] = np.nan
    with pytest.raises(ValueError, match=r"`data` is NaN at fit 2, point 5 \(nan_policy='raise'"):
        model.fit(data, x=X)
    weights = np.ones_like(data)
    weights[1, 0] = np.nan
    with pytest.raises(ValueError, match="`weights` is NaN at fit 1, point 0"):
        model.fit(np.ones_like(data), x=X, weights=weights)
    with pytest.raises(ValueError, match="`nan_policy` must be one of"):
        model.fit(data, x=X, nan_policy="drop")
    with pytest.raises(ValueError, match="`weights` have no effect with estimator='poisson'"):
        model.fit(np.ones_like(data), x=X, weights=weights, estimator="poisson")
    with pytest.raises(ValueError, match="nan_policy='omit' needs a weighted least-squares"):
        model.fit(data, x=X, estimator="poisson", nan_policy="omit")
    with pytest.raises(ValueError, match="`estimator` must be 'least_squares' or 'poisson'"):
        model.fit(data, x=X, estimator="gaussian")


def test_float64_data_with_x64_off_warns_naming_the_arguments():
    """64-bit mode off: float64 data, weights and independent variables are cast to
    float32, and one ``PrecisionWarning`` says which (as ``curve_fit``'s); float32 data
    fits without a word."""
    import warnings

    import jax

    model = GaussianModel() + ConstantModel()
    x = np.linspace(-3.0, 3.0, 30)
    data = np.asarray(model.eval(x=x, amplitude=2.0, center=0.2, sigma=0.7, c=0.1))[None]
    params = model.make_params(amplitude=1.5, center=0.0, sigma=1.0, c=0.0)
    with jax.enable_x64(False), pytest.warns(fixedopt.PrecisionWarning) as caught:
        result = model.fit(data, params, x=x, weights=np.ones(30))
    assert str(caught[0].message).startswith("`data`, `weights`, `x`: float64 data cast")
    assert result.values.dtype == np.float32
    with jax.enable_x64(False), warnings.catch_warnings():
        warnings.simplefilter("error")
        model.fit(data.astype(np.float32), params, x=x.astype(np.float32))


def test_data_that_is_not_numbers_is_named():
    with pytest.raises(TypeError, match=r"^`data` must be numbers .* got str"):
        GaussianModel().fit("not data", x=np.arange(3.0))
