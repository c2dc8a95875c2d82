"""Model.fit against lmfit, fit by fit: two pseudo-Voigt peaks and a linear baseline,
with per-fit fixed parameters, bounds and a tie in half of the fits."""

import dataclasses

import lmfit
import numpy as np
import pytest

from fixedopt.models import LinearModel, PseudoVoigtModel

# lmfit's and closed forms' values within 1e-12 to 1e-6 and rows equal within one
# compiled fit (a new batch size compiles none): none rests on the backend's rounding.
pytestmark = pytest.mark.fewer_optimizations

X = np.linspace(0.0, 30.0, 301)
SIGMA = 0.05 * (1.0 + 0.5 * np.sin(X / 5.0))  # the noise, point by point: weights 1/SIGMA
TRUTH = {
    "p1_amplitude": 10.0, "p1_center": 10.0, "p1_sigma": 1.0, "p1_fraction": 0.3,
    "p2_amplitude": 6.0, "p2_center": 18.0, "p2_sigma": 1.5, "p2_fraction": 0.6,
    "slope": 0.02, "intercept": 0.5,
}  # fmt: skip
START = {
    "p1_amplitude": 8.0, "p1_center": 9.5, "p1_sigma": 1.2, "p1_fraction": 0.5,
    "p2_amplitude": 5.0, "p2_center": 18.5, "p2_sigma": 1.2, "p2_fraction": 0.5,
    "slope": 0.0, "intercept": 0.3,
}  # fmt: skip
# Per fit: which parameters are known (fixed at the truth), and whether p2_sigma is
# tied to p1_sigma.
KNOWN = [(), ("p1_fraction",), ("p2_center", "slope"), ("p1_fraction", "p2_fraction")]
TIED = [True, False, False, True]


def spectra():
    rng = np.random.default_rng(7)
    rows = []
    for tied in TIED:
        truth = dict(TRUTH, p2_sigma=TRUTH["p1_sigma"] if tied else TRUTH["p2_sigma"])
        model = lmfit.models.PseudoVoigtModel(prefix="p1_")
        model = model + lmfit.models.PseudoVoigtModel(prefix="p2_") + lmfit.models.LinearModel()
        rows.append(model.eval(model.make_params(**truth), x=X) + rng.normal(0, SIGMA))
    return np.array(rows)


def lmfit_fit(data, row):
    model = lmfit.models.PseudoVoigtModel(prefix="p1_")
    model = model + lmfit.models.PseudoVoigtModel(prefix="p2_") + lmfit.models.LinearModel()
    params = model.make_params(**START)
    for name in KNOWN[row]:
        params[name].set(value=TRUTH[name], vary=False)
    params["p1_amplitude"].set(min=0.0)
    params["p2_amplitude"].set(min=0.0)
    if TIED[row]:
        params["p2_sigma"].set(expr="p1_sigma")
    # scipy's least_squares with a central-difference Jacobian: lmfit's default (leastsq)
    # takes its error bars from MINPACK's forward differences, 2e-5 from the exact ones here
    kws = {"jac": "3-point", "xtol": 1e-15, "ftol": 1e-15, "gtol": 1e-15}
    return model.fit(data, params, x=X, weights=1 / SIGMA, method="least_squares", fit_kws=kws)


@pytest.fixture(scope="module")
def fits():
    data = spectra()
    model = PseudoVoigtModel(prefix="p1_") + PseudoVoigtModel(prefix="p2_") + LinearModel()
    params = model.make_params(**START)
    for name in TRUTH:
        known = np.array([name in k for k in KNOWN])
        if known.any():
            params[name].set(value=np.where(known, TRUTH[name], START[name]), vary=~known)
    params["p1_amplitude"].set(min=0.0)
    params["p2_amplitude"].set(min=0.0)
    params["p2_sigma"].set(expr=["p1_sigma" if tied else None for tied in TIED])
    ours = model.fit(data, params, x=X, weights=1 / SIGMA)
    return ours, [lmfit_fit(data[row], row) for row in range(len(TIED))]


def test_values_and_errors_equal_lmfits(fits):
    ours, theirs = fits
    assert ours.success.all()
    for row, reference in enumerate(theirs):
        for name, param in reference.params.items():
            value, error = ours.best_values[name][row], ours.stderr[name][row]
            assert value == pytest.approx(param.value, rel=1e-6, abs=1e-9), (row, name)
            if param.stderr is not None and (param.vary or param.expr):
                assert error == pytest.approx(param.stderr, rel=1e-6), (row, name)
            elif not param.vary and not param.expr:
                assert error == 0.0 and value == TRUTH[name], (row, name)


def test_statistics_equal_lmfits(fits):
    ours, theirs = fits
    for row, reference in enumerate(theirs):
        assert ours.nvarys[row] == reference.nvarys
        assert ours.chisqr[row] == pytest.approx(reference.chisqr, rel=1e-9)
        assert ours.redchi[row] == pytest.approx(reference.redchi, rel=1e-9)
        assert ours.aic[row] == pytest.approx(reference.aic, rel=1e-9)
        assert ours.bic[row] == pytest.approx(reference.bic, rel=1e-9)
        for a, b in (("p1_amplitude", "p1_fraction"), ("slope", "intercept")):
            if reference.params[a].vary and reference.params[b].vary:
                expected = reference.params[a].correl[b]
                assert ours.correlation(a, b)[row] == pytest.approx(expected, rel=1e-5)


def test_a_tie_is_computed_and_its_error_propagated(fits):
    ours, _ = fits
    tied, free = 0, 1
    p1, p2 = ours.best_values["p1_sigma"], ours.best_values["p2_sigma"]
    assert p2[tied] == p1[tied] and p2[free] != p1[free]
    assert ours.stderr["p2_sigma"][tied] == ours.stderr["p1_sigma"][tied] > 0
    report = ours.fit_report(tied)
    assert "p2_sigma:" in report and "== 'p1_sigma'" in report
    assert "p1_fraction:   0.3 (fixed)" in ours.fit_report(3)


def test_records_have_a_column_per_parameter_and_error(fits):
    ours, _ = fits
    records = ours.to_records()
    assert records["p1_sigma"].shape == records["p1_sigma_stderr"].shape == (len(TIED),)
    np.testing.assert_array_equal(records["redchi"], ours.redchi)
    pandas = pytest.importorskip("pandas")
    frame = ours.to_dataframe()
    assert isinstance(frame, pandas.DataFrame) and len(frame) == len(TIED)
    assert list(frame["status"]) == ["CONVERGED"] * len(TIED)


def test_the_fitted_components_add_up_to_the_best_fit(fits):
    ours, _ = fits
    parts = ours.eval_components(row=2)
    np.testing.assert_allclose(sum(parts.values()), ours.best_fit[2], rtol=1e-12)
    np.testing.assert_allclose(ours.eval(row=2), ours.best_fit[2], rtol=1e-12)


def test_plot_shows_the_data_fit_components_and_residuals(fits):
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    ours, _ = fits
    figure = ours.plot(row=1, initial=True)
    top, bottom = figure.axes
    np.testing.assert_array_equal(top.lines[0].get_ydata(), ours.residual[1])
    labels = [line.get_label() for line in bottom.lines]
    assert labels == ["data", "initial fit", "best fit", "p1_", "p2_", "linear"]
    np.testing.assert_array_equal(bottom.lines[2].get_ydata(), ours.best_fit[1])
    matplotlib.pyplot.close(figure)


def test_eval_uncertainty_equals_lmfits(fits):
    ours, theirs = fits
    band = ours.eval_uncertainty(sigma=2)
    assert band.shape == ours.best_fit.shape
    for row, reference in enumerate(theirs):
        # lmfit's derivatives: central differences of 1e-4 standard errors
        expected = reference.eval_uncertainty(sigma=2, dscale=1e-4)
        np.testing.assert_allclose(band[row], expected, rtol=1e-6)
    np.testing.assert_allclose(ours.eval_uncertainty(row=1, sigma=2), band[1], rtol=1e-12)


def test_a_model_without_ties_or_derived_parameters_has_polyfits_errors():
    """No parameter computed by an expression: values and errors straight from the fit
    (the propagation's unit rows alone), as NumPy's weighted-free ``polyfit``."""
    x = np.linspace(0.0, 1.0, 20)
    noise = 0.01 * np.random.default_rng(0).normal(size=(2, 20))
    data = np.stack([2.0 * x + 1.0, 3.0 * x - 1.0]) + noise
    result = LinearModel().fit(data, x=x)
    assert result.names == ("slope", "intercept")
    for row in range(2):
        line, unscaled = np.polyfit(x, data[row], 1, cov="unscaled")
        residual = data[row] - np.polyval(line, x)
        cov = unscaled * (residual @ residual) / (x.size - 2)
        np.testing.assert_allclose(result.values[row], line, rtol=1e-10)
        np.testing.assert_allclose(result.covariance[row], cov, rtol=1e-8)


def test_per_fit_independent_variables_give_each_fit_its_own_curves():
    """``x`` of shape ``(B, m)``: each fit's best and initial curves and residuals are
    the model evaluated on its own ``x`` (the curves' per-fit axis)."""
    from fixedopt.models import ConstantModel, GaussianModel

    model = GaussianModel() + ConstantModel()
    x = np.stack([np.linspace(-3.0, 3.0, 40) + shift for shift in (0.0, 0.5, -0.7)])
    truth = {"amplitude": 2.0, "center": 0.3, "sigma": 0.8, "c": 0.1}
    noise = 0.01 * np.random.default_rng(0).normal(size=x.shape)
    data = np.stack([model.eval(x=row, **truth) for row in x]) + noise
    start = {"amplitude": 1.0, "center": 0.0, "sigma": 1.0, "c": 0.0}
    result = model.fit(data, model.make_params(**start), x=x)
    for i, row in enumerate(x):
        best = {name: result.best_values[name][i] for name in truth}
        np.testing.assert_allclose(result.best_fit[i], model.eval(x=row, **best), rtol=1e-12)
        np.testing.assert_allclose(result.init_fit[i], model.eval(x=row, **start), rtol=1e-12)
        np.testing.assert_allclose(result.residual[i], result.best_fit[i] - data[i], atol=1e-12)


@pytest.mark.parametrize("loss", ["linear", "soft_l1"])
def test_chisqr_is_the_sum_of_squared_residuals_and_the_curves_wait_until_read(loss):
    """A least-squares ``chisqr`` is twice the solve's ``value`` (no curve computed for
    it, nor for the report or the records); with a robust ``loss`` (whose ``value`` is
    not that sum) it is the residuals' own sum. Both against NumPy, with weights and a
    point omitted; the curves, read later, against NumPy too."""
    x = np.linspace(0.0, 1.0, 12)
    weights = 1.0 / (0.1 + 0.05 * x)
    data = 2.0 * x + 1.0 + np.random.default_rng(3).normal(0.0, 0.1, (3, 12))
    data[1, 4] = np.nan
    model = LinearModel()
    result = model.fit(data, model.make_params(slope=1.0, intercept=0.0), x=x, weights=weights,
                       nan_policy="omit", loss=loss)  # fmt: skip
    result.to_records(), result.fit_report(1)
    assert ("_curves" in vars(result)) == (loss != "linear")
    line = result.best_values["slope"][:, None] * x + result.best_values["intercept"][:, None]
    residual = np.where(np.isnan(data), 0.0, (line - data) * weights)
    np.testing.assert_allclose(result.chisqr, np.sum(residual**2, axis=1), rtol=1e-12)
    np.testing.assert_allclose(result.best_fit, line, rtol=1e-12)
    np.testing.assert_allclose(result.residual, residual, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(result.init_fit, np.broadcast_to(x, (3, 12)), rtol=1e-12)
    bare = dataclasses.replace(result, problem=None)  # a result not made by Model.fit
    with pytest.raises(ValueError, match="problem"):
        _ = bare.best_fit


def test_a_new_batch_size_compiles_no_solve_and_no_curves():
    """Batches of more than 8 fits run in blocks and chunks of one size per model: a
    fit of 30 or 50 spectra after one of 20 compiles no solve, no covariance (with the
    derived parameters) and no curves, also by a model made again (a notebook cell run
    again: equal to the first, it compiled everything again)."""
    from fixedopt._models import curves
    from fixedopt._results import covariance
    from fixedopt.models import GaussianModel
    from fixedopt.testing import compiled_solves

    x = np.linspace(-3.0, 3.0, 25)
    data = np.exp(-(x**2)) + 0.01 * np.random.default_rng(1).normal(size=(50, 25))
    model = GaussianModel()
    params = model.make_params(amplitude=1.5, center=0.2, sigma=0.8)
    programs = lambda: (compiled_solves(), covariance._compiled._cache_size(),  # type: ignore[attr-defined]
                        curves._curves._cache_size())  # type: ignore[attr-defined]  # fmt: skip
    first = model.fit(data[:20], params, x=x)
    assert first.best_fit.shape == (20, 25) and first.success.all()
    before = programs()
    for rows, again in ((30, model), (50, GaussianModel())):
        result = again.fit(data[:rows], params, x=x)
        assert result.best_fit.shape == (rows, 25)
        np.testing.assert_array_equal(result.values[:20], first.values)
    assert programs() == before
