"""``ModelResult.conf_interval2d`` against lmfit's ``conf_interval2d``, fit by fit."""

import jax.numpy as jnp
import lmfit
import numpy as np
import pytest

from fixedopt.models import ConstantModel, GaussianModel

X = np.linspace(-4.0, 6.0, 41)
TIGHT = {"ftol": 1e-15, "xtol": 1e-15, "gtol": 1e-15}
START = {"amplitude": 4.0, "center": 0.5, "sigma": 1.2, "c": 0.1}
LIMITS = ((6.5, 4.5), (1.45, 0.75))  # lmfit's ((x_upper, x_lower), (y_upper, y_lower))


def _data(rows):
    truth = np.asarray(GaussianModel().func(X, 5.5, 0.8, 1.1)) + 0.3
    return truth + np.random.default_rng(7).normal(0.0, 0.05, (rows, X.size))


def _lmfit_grid(data, chi2_out):
    model = lmfit.models.GaussianModel() + lmfit.models.ConstantModel()
    result = model.fit(data, model.make_params(**START), x=X, fit_kws=TIGHT)
    return lmfit.conf_interval2d(result, result, "amplitude", "sigma", nx=5, ny=4,
                                 limits=LIMITS, chi2_out=chi2_out)  # fmt: skip


@pytest.fixture(scope="module")
def fitted():
    data = _data(3)
    model = GaussianModel() + ConstantModel()
    params = model.make_params(**START)
    params["sigma"].set(value=[1.2, 1.1, 1.2], vary=[True, False, True])  # fit 1 knows sigma
    return data, model.fit(data, params, x=X, **TIGHT)


@pytest.mark.parametrize("chi2_out", [False, True])
def test_each_fits_grid_equals_lmfits(fitted, chi2_out):
    """Fits 0 and 2 against lmfit's grid of the same spectrum, both fitted to 1e-15
    (measured: 6e-12 apart; the distances are differences of chi-squares, so they
    lose digits near the best fit); fit 1 holds ``sigma`` fixed: no grid (NaN)."""
    data, result = fitted
    x, y, grid = result.conf_interval2d("amplitude", "sigma", nx=5, ny=4, limits=LIMITS,
                                        chi2_out=chi2_out)  # fmt: skip
    assert x.shape == (3, 5) and y.shape == (3, 4) and grid.shape == (3, 4, 5)
    assert np.isnan(grid[1]).all()
    for row in (0, 2):
        their_x, their_y, theirs = _lmfit_grid(data[row], chi2_out)
        np.testing.assert_allclose(x[row], their_x, rtol=1e-15)
        np.testing.assert_allclose(y[row], their_y, rtol=1e-15)
        np.testing.assert_allclose(grid[row], theirs, rtol=1e-9 if chi2_out else 1e-8)


def test_default_limits_are_nsigma_errors_and_rows_pick_fits(fitted):
    _, result = fitted
    x, y, grid = result.conf_interval2d("center", "amplitude", nx=3, ny=3, nsigma=2, rows=[2])
    for points, name in ((x, "center"), (y, "amplitude")):
        best, error = result.best_values[name], result.stderr[name]
        expected = np.column_stack([best - 2 * error, best, best + 2 * error])
        np.testing.assert_allclose(points, expected, rtol=1e-14)
    assert np.isnan(grid[:2]).all() and np.isfinite(grid[2]).all()
    # the middle of the grid is the best fit: no distance; the corners are ~2 sqrt(2)
    # standard deviations out less the parameters' correlation
    assert grid[2, 1, 1] == pytest.approx(0.0, abs=1e-6)
    assert np.all(grid[2, [0, 0, 2, 2], [0, 2, 0, 2]] > 1.5)


@pytest.mark.parametrize(
    ("names", "options", "match"),
    [
        (("amplitude", "amplitude"), {}, "two different"),
        (("amplitude", "fwhm"), {}, "fitted"),
        (("amplitude", "sigma"), {"nx": 0}, "nx"),
        (("amplitude", "sigma"), {"ny": 2.5}, "ny"),
        (("amplitude", "sigma"), {"limits": (6.5, 4.5)}, "limits"),
        (("amplitude", "sigma"), {"limits": ((6.5, 4.5), ([1.4, 1.5], 0.7))}, "limits"),
    ],
)
def test_bad_requests_are_named(fitted, names, options, match):
    with pytest.raises(ValueError, match=match):
        fitted[1].conf_interval2d(*names, **options)


def test_the_distances_do_not_depend_on_the_data_units(fitted):
    """The same spectra in units 1e6 times larger: the grid over the centre and the width
    (parameters in the units of x) holds the same distances (a ratio of chi-squares)."""
    data, result = fitted
    model = GaussianModel() + ConstantModel()
    start = {k: 1e6 * v if k in ("amplitude", "c") else v for k, v in START.items()}
    scaled = model.fit(1e6 * data, model.make_params(**start), x=X, **TIGHT)
    _, _, grid = result.conf_interval2d("center", "sigma", nx=3, ny=3, rows=[0, 2])
    _, _, grid_scaled = scaled.conf_interval2d("center", "sigma", nx=3, ny=3, rows=[0, 2])
    np.testing.assert_allclose(grid_scaled[[0, 2]], grid[[0, 2]], rtol=1e-6, atol=1e-6)


def test_a_poisson_fits_grid_is_the_rise_of_its_deviance():
    """Counts fitted by Poisson maximum likelihood: the grid's middle is the best fit (the
    deviance's own value with ``chi2_out``, distance 0), every other point lies above."""
    rng = np.random.default_rng(3)
    expected = np.asarray(GaussianModel().func(X, 400.0, 0.8, 1.1)) + 20.0
    counts = rng.poisson(expected, (2, X.size)).astype(float)
    model = GaussianModel() + ConstantModel()
    params = model.make_params(amplitude=300.0, center=0.5, sigma=1.0, c=15.0)
    result = model.fit(jnp.asarray(counts), params, x=X, estimator="poisson", **TIGHT)
    _, _, deviance = result.conf_interval2d("center", "sigma", nx=3, ny=3, chi2_out=True)
    _, _, grid = result.conf_interval2d("center", "sigma", nx=3, ny=3)
    np.testing.assert_allclose(deviance[:, 1, 1], result.deviance, rtol=1e-9)
    assert np.all(np.abs(grid[:, 1, 1]) < 1e-4)
    outer = np.ones((3, 3), bool)
    outer[1, 1] = False
    assert np.all(grid[:, outer] > 1.0)  # 5 standard errors out in one or both
