"""lmfit's vocabulary after a batch fit: ``result.params[name].value``, ``.stderr``,
``.correl``, ``.vary``, ``.expr``, ``valuesdict()``, ``covar``/``var_names``,
``chisqr``/``redchi``/``aic``/``bic``, ``eval``/``eval_components`` at new x,
``plot_fit``; and ``Model.eval``'s keyword values overriding a tie. Reference: lmfit,
one fit at a time, run to its optimum (tolerances of 1e-15: at lmfit's defaults its
fits stop ~1e-5 (relative) short of it); values to 1e-6 relative, errors and
correlations to lmfit's finite-difference Jacobian's 1e-4."""

import lmfit
import numpy as np
import pytest

from fixedopt.models import GaussianModel, LinearModel, VoigtModel

X = np.linspace(-4.0, 6.0, 120)
CENTERS = (0.3, 1.1, -0.6)


def _data():
    rng = np.random.default_rng(7)
    rows = [3.0 * np.exp(-((X - c) ** 2) / (2 * 0.8**2)) + 0.1 * X + 0.5 for c in CENTERS]
    return np.stack(rows) + 0.05 * rng.standard_normal((len(CENTERS), X.size))


def _model(module):
    return module.GaussianModel(prefix="g_") + module.LinearModel()


@pytest.fixture(scope="module")
def fits():
    data = _data()
    start = dict(g_amplitude=5.0, g_center=0.5, g_sigma=1.0, slope=0.0, intercept=0.0)
    model = GaussianModel(prefix="g_") + LinearModel()
    params = model.make_params(**start)
    params["intercept"].set(vary=[True, True, False])  # fit 2: intercept fixed at 0
    ours = model.fit(data, params, x=X)
    theirs = []
    for row in range(len(CENTERS)):
        reference = _model(lmfit.models)
        their_params = reference.make_params(**start)
        their_params["intercept"].set(vary=row != 2)
        tight = dict(ftol=1e-15, xtol=1e-15, gtol=1e-15)  # lmfit's own optimum, to rounding
        theirs.append(reference.fit(data[row], their_params, x=X, fit_kws=tight))
    return ours, theirs


def test_params_hold_lmfits_values_errors_and_correlations(fits):
    ours, theirs = fits
    for row, reference in enumerate(theirs):
        for name, param in reference.params.items():
            mine = ours.params[name]
            assert mine.value.shape == (len(CENTERS),)
            assert mine.value[row] == pytest.approx(param.value, rel=1e-6, abs=1e-9)
            assert bool(mine.vary[row]) == param.vary
            assert (mine.expr is None) == (param.expr is None)  # fwhm, height: ties
            assert mine.expr is None or mine.expr.split("*")[-1] == param.expr.split("*")[-1]
            if param.vary or param.expr:
                assert mine.stderr[row] == pytest.approx(param.stderr, rel=1e-4)
            else:
                assert mine.stderr[row] == 0.0
            for other, correlation in (param.correl or {}).items():
                # lmfit's Jacobian is finite differences: ~1e-5 of each correlation's scale
                assert mine.correl[other][row] == pytest.approx(correlation, abs=1e-4)


def test_valuesdict_covar_and_statistics_are_lmfits(fits):
    ours, theirs = fits
    values = ours.params.valuesdict()
    for row, reference in enumerate(theirs):
        for name, value in reference.params.valuesdict().items():
            assert values[name][row] == pytest.approx(value, rel=1e-6, abs=1e-9)
        for stat in ("chisqr", "redchi", "aic", "bic"):
            assert getattr(ours, stat)[row] == pytest.approx(getattr(reference, stat), rel=1e-8)
    with pytest.raises(ValueError, match="vary different parameters"):
        ours.covar  # noqa: B018  fit 2 fixes the intercept
    same = GaussianModel(prefix="g_") + LinearModel()
    data = _data()[:2]
    start = same.make_params(g_amplitude=5.0, g_center=0.5, g_sigma=1.0, slope=0.0, intercept=0.0)
    two = same.fit(data, start, x=X)
    assert two.var_names == theirs[0].var_names
    np.testing.assert_allclose(two.covar[0], theirs[0].covar, rtol=1e-4, atol=1e-12)


def test_eval_and_eval_components_at_new_x(fits):
    # lmfit's model evaluated at fixedopt's best values: eval's own arithmetic, exactly.
    ours, theirs = fits
    x = np.linspace(-2.0, 2.0, 9)
    curves = np.asarray(ours.eval(x=x))
    parts = ours.eval_components(x=x)
    for row, reference in enumerate(theirs):
        at_ours = reference.params.copy()
        for name, param in at_ours.items():
            if param.expr is None:
                param.set(value=float(ours.params[name].value[row]))
        expected = reference.model.eval(at_ours, x=x)
        np.testing.assert_allclose(curves[row], expected, rtol=1e-12, atol=1e-14)
        for key, part in reference.model.eval_components(params=at_ours, x=x).items():
            got = np.broadcast_to(np.asarray(parts[key])[row], x.shape)
            np.testing.assert_allclose(got, part, rtol=1e-12, atol=1e-14)


def test_plot_fit_draws_data_and_best_fit(fits):
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    ours, _ = fits
    ax = ours.plot_fit(row=1, show_init=True)
    labels = [line.get_label() for line in ax.get_lines()]
    assert labels == ["data", "initial fit", "best fit"]
    np.testing.assert_array_equal(ax.get_lines()[2].get_ydata(), ours.best_fit[1])
    matplotlib.pyplot.close("all")


def test_eval_keywords_override_a_tie_as_lmfits():
    x = np.linspace(-5.0, 5.0, 101)
    keywords = dict(amplitude=3.0, center=0.7, sigma=1.3, gamma=0.4)  # gamma's tie: sigma
    ours = np.asarray(VoigtModel().eval(x=x, **keywords))
    theirs = lmfit.models.VoigtModel().eval(x=x, **keywords)
    np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=1e-15)
    tied = np.asarray(VoigtModel().eval(x=x, amplitude=3.0, center=0.7, sigma=1.3))
    assert np.max(np.abs(tied - ours)) > 0.1 * np.max(ours)  # the tie, when not overridden
