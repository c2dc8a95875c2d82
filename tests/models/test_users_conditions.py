"""Model.fit the way a scientist meets it: float32 with JAX's 64-bit mode off (the
default), data in physical units, a parameter the data cannot determine, per-fit known
parameters and ties, and the errors a mistyped call gets. References: lmfit's fit of
each row (float64), and the same fit in float64."""

import warnings

import jax
import lmfit
import numpy as np
import pytest

import fixedopt
from fixedopt.models import ConstantModel, Gaussian2dModel, GaussianModel, LinearModel, Model

X = np.linspace(0.0, 20.0, 41)
SPOT = np.mgrid[0:11, 0:11].reshape(2, -1).astype(float)  # (y, x) of an 11 x 11 image


def _peak_data():
    """Three noisy Gaussians on a constant (noise 1: a chi-square of about 40)."""
    model = GaussianModel() + ConstantModel()
    truth = model.make_params(amplitude=200.0, center=10.0, sigma=1.5, c=5.0)
    clean = np.asarray(model.eval(truth, x=X), float)
    rng = np.random.default_rng(7)
    return model, clean + rng.normal(0.0, 1.0, (3, X.size))


def _undetermined_fit():
    """Two Gaussians and a line; the second peak, held 80 sigma outside ``x`` in fit
    0, leaves its free amplitude and width undetermined there (their Jacobian columns
    are 0); in fit 1 it sits inside and is fitted."""
    model = GaussianModel(prefix="a_") + GaussianModel(prefix="b_") + LinearModel()
    truth = model.make_params(a_amplitude=100.0, a_center=8.0, a_sigma=1.0, b_amplitude=50.0,
                              b_center=14.0, b_sigma=1.0, slope=0.1, intercept=1.0)  # fmt: skip
    rng = np.random.default_rng(1)
    data = np.asarray(model.eval(truth, x=X)) + rng.normal(0.0, 0.1, (2, X.size))
    params = truth.copy()
    params["b_center"].set(value=[100.0, 14.0], vary=False)
    params["b_amplitude"].set(value=10.0)
    with pytest.warns(fixedopt.OptimizeWarning, match=r"in 1 of 2 fits \(0\)") as caught:
        result = model.fit(data, params, x=X)
    assert len(caught) == 1  # one warning, counting the fits
    return result


def test_a_parameter_the_data_cannot_determine_is_reported_so():
    """lmfit's ``errorbars`` and its report's warning: the undetermined amplitude has
    an ``inf`` error (the pseudo-inverse's was 0), which the report does not print;
    the determined parameters keep their errors, the held centre its value bit for
    bit."""
    result = _undetermined_fit()
    assert result.success.all()
    np.testing.assert_array_equal(result.errorbars, [False, True])
    assert np.isinf(result.stderr["b_amplitude"][0]) and result.stderr["b_amplitude"][1] > 0
    assert result.best_values["b_amplitude"][0] == 10.0  # it never moved
    np.testing.assert_array_equal(result.best_values["b_center"], [100.0, 14.0])
    report = result.fit_report(0)
    assert "##  Warning: uncertainties could not be estimated:" in report
    assert "    b_amplitude:  not determined by the data" in report
    assert "    b_sigma:      not determined by the data" in report
    assert "    b_amplitude:  10 (init = 10)" in report  # no '+/- 0'
    assert "a_amplitude:" in report and "+/- 0 " not in report.split("a_amplitude:")[1][:40]
    assert "Warning" not in result.fit_report(1)


def test_spots_in_pixels_with_known_centres_and_a_tie_in_float32_equal_lmfit():
    """2-D Gaussian spots of 1e5 photons on pixels, float32 (64-bit mode off): the
    centre ``x`` known in fit 0, ``sigmay`` tied to ``sigmax`` in fit 1. The known centre
    comes back bit for bit, the tie exactly, and every value within 0.05 standard
    errors of lmfit's float64 fit (float32 rounding of a chi-square of ~1e6 moves
    the minimum by ~0.01 of an error); the confidence band float32 too."""
    model, reference = Gaussian2dModel(), lmfit.models.Gaussian2dModel()
    y, x = SPOT
    truth = model.make_params(amplitude=1e5, centerx=5.3, centery=4.8, sigmax=1.4, sigmay=1.8)
    rng = np.random.default_rng(2)
    data = rng.poisson(np.asarray(model.eval(truth, x=x, y=y)), (2, x.size)).astype(np.float32)
    params = model.make_params(amplitude=8e4, centerx=[5.25, 5.0], centery=5.0, sigmax=1.2,
                               sigmay=1.2)  # fmt: skip
    params["centerx"].set(vary=[False, True])
    params["sigmay"].set(expr=[None, "sigmax"])
    with jax.enable_x64(False):
        result = model.fit(data, params, x=x.astype(np.float32), y=y.astype(np.float32))
    assert result.success.all() and result.values.dtype == np.float32
    assert result.best_values["centerx"][0] == np.float32(5.25)
    assert result.best_values["sigmay"][1] == result.best_values["sigmax"][1]
    for row in range(2):
        start = reference.make_params(amplitude=8e4, centerx=[5.25, 5.0][row], centery=5.0,
                                      sigmax=1.2, sigmay=1.2)  # fmt: skip
        start["centerx"].set(vary=row == 1)
        if row == 1:
            start["sigmay"].set(expr="sigmax")
        theirs = reference.fit(data[row].astype(float), start, x=x, y=y)
        for name, param in theirs.params.items():
            if param.vary:
                shift = (result.best_values[name][row] - param.value) / param.stderr
                assert abs(shift) < 0.05, (row, name, shift)
        # the band in float32 (it came back float64); lmfit's, from its own numerical
        # derivatives at its float64 values, within 1% (measured: 5e-4)
        band = result.eval_uncertainty(row)
        assert band.dtype == np.float32
        np.testing.assert_allclose(band, theirs.eval_uncertainty(), rtol=1e-2)


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda m, d: m.fit(d, x=X[:-1]), ValueError, r"curve at `x` \(40,\) has shape \(40,\)"),
        (lambda m, d: m.fit(d, x=np.stack([X, X])), ValueError, r"a row of `data` \(41,\)"),
        (lambda m, d: m.fit(d, x=1.0), ValueError, r"curve at `x` \(\) has shape \(\)"),
        (lambda m, d: m.fit(d[:0], x=X), ValueError, r"`data` must have shape .* got \(0, 41\)"),
        (lambda m, d: m.fit(d + 1j, x=X), TypeError, "`data` must be real numbers"),
        (lambda m, d: m.fit(d, x=X, xx=X), TypeError, r"unexpected keywords \['xx'\]"),
        (lambda m, d: m.fit(d, x=X, bounds=(0, 1)), TypeError, "bounds"),
        (lambda m, d: m.guess(d[None], X), ValueError, r"`data` must have shape .* \(1, 3, 41\)"),
        (lambda m, d: m.make_params(center={"vary": "False"}), TypeError, "`vary` of parameter"),
        (lambda m, d: m.make_params(center="ten"), TypeError, "`value` of parameter 'center'"),
    ],
)
def test_a_mistyped_call_names_its_argument(call, error, message):
    """Each mistake is a ValueError or TypeError that names the argument (before, JAX's
    broadcasting errors from deep in the solve, an IndexError, or a silent cast:
    complex data lost its imaginary part, ``vary="False"`` meant True)."""
    model = GaussianModel()
    data = np.asarray(model.eval(model.make_params(amplitude=3.0, center=9.0), x=X))
    with pytest.raises(error, match=message):
        call(model, np.stack([data] * 3))


@pytest.mark.parametrize(
    "call",
    [
        lambda r: r.eval(5),
        lambda r: r.eval_components(-6),
        lambda r: r.eval_uncertainty(5),
        lambda r: r.conf_interval(rows=[0, 5]),
        lambda r: r.fit_report(5),
    ],
)
def test_a_row_that_indexes_no_fit_is_a_value_error(call):
    result = _undetermined_fit()
    with pytest.raises(ValueError, match=r"must index one of the 2 fits, got (5|-6)"):
        call(result)


def test_a_row_given_as_a_negative_index_is_that_fit():
    result = _undetermined_fit()
    np.testing.assert_array_equal(result.eval(-1), result.eval(1))
    assert result.eval_uncertainty(-1).shape == (X.size,)
    assert isinstance(fixedopt.Status(int(result.status[-1])), fixedopt.Status)


def test_data_the_model_reproduces_exactly_has_lmfits_finite_statistics():
    """Zero-residual data in float32 (the model's own float32 curve): the fit ends on
    it, chi-square 0, errors 0 (printed as such: they are estimated), and AIC and BIC
    finite as lmfit's (which counts a chi-square of 0 as 1e-250 per point), not -inf."""
    model = GaussianModel() + ConstantModel()
    with jax.enable_x64(False):
        truth = model.make_params(amplitude=200.0, center=10.0, sigma=1.5, c=5.0)
        x = X.astype(np.float32)
        clean = np.asarray(model.eval(truth, x=x))
        start = model.make_params(amplitude=150.0, center=9.5, sigma=2.0, c=3.0)
        result = model.fit(np.stack([clean, clean]), start, x=x)
    assert result.success.all() and (result.chisqr == 0).all()
    expected = X.size * np.log(1e-250) + 2 * 4  # lmfit: n log(max(chisqr, 1e-250 n) / n)
    np.testing.assert_allclose(result.aic, expected, rtol=1e-6)  # float32's rounding
    np.testing.assert_allclose(result.bic, expected + (np.log(X.size) - 2) * 4, rtol=1e-6)
    assert result.errorbars.all() and "    center:     10 +/- 0 (0.00%)" in result.fit_report(0)


def test_a_tie_that_turns_infinite_fails_its_own_fit_alone():
    """``c = 2/k`` with ``k = 0`` known in fit 1: that fit stops NONFINITE, its report
    warns without calling its parameters undetermined (their errors are NaN, not the
    pseudo-inverse's 0), and fits 0 and 2 equal, bit for bit, the same batch with the
    tie in fit 0 only."""
    model, data = _peak_data()
    params = model.make_params(amplitude=150.0, center=9.5, sigma=2.0, c=3.0)
    params.add("k", value=[1.0, 0.0, 1.0], vary=False)
    params["c"].set(expr=["2.0/k", "2.0/k", None])
    result = model.fit(data, params, x=X)
    np.testing.assert_array_equal(result.status, [0, fixedopt.Status.NONFINITE, 0])
    report = result.fit_report(1)
    assert "uncertainties could not be estimated" in report and "not determined" not in report
    params.add("k", value=1.0, vary=False)
    params["c"].set(expr=["2.0/k", None, None])
    alone = model.fit(data, params, x=X)
    np.testing.assert_array_equal(alone.values[[0, 2]], result.values[[0, 2]])


def test_the_fit_runs_in_the_promoted_dtype_of_data_x_and_weights():
    """As ``curve_fit`` (JAX's promotion): float32 data (a camera's) with float64 ``x``
    fits in float64, the same fit as the data cast to float64 (it was float32, ``x``
    rounded to float32 without a word); integer counts with float32 ``x`` fit in float32."""
    model, data = _peak_data()
    start = model.make_params(amplitude=150.0, center=9.5, sigma=2.0, c=3.0)
    single = data.astype(np.float32)
    mixed = model.fit(single, start, x=X)
    assert mixed.values.dtype == np.float64
    np.testing.assert_array_equal(mixed.values, model.fit(single.astype(float), start, x=X).values)
    counts = np.round(np.abs(data) * 10).astype(np.uint16)
    start = model.make_params(amplitude=1500.0, center=9.5, sigma=2.0, c=30.0)
    assert model.fit(counts, start, x=X.astype(np.float32)).values.dtype == np.float32
    weighted = model.fit(single, start, x=X.astype(np.float32), weights=0.5)  # weak: a number
    assert weighted.values.dtype == np.float32


def test_a_float32_fit_on_its_bound_is_reported_at_boundary():
    """lmfit's report names a parameter on its bound where the errors could not be
    estimated; a float32 fit's value on ``max=0.1`` is float32's 0.1, which the
    float64 bound never equals."""

    def line(x, slope=1.0, intercept=0.0, unused=0.0):
        return slope * x + intercept + 0.0 * unused  # unused: a column of zeros

    model = Model(line)
    params = model.make_params(slope=1.0, intercept=0.0, unused=1.0)
    params["intercept"].set(max=0.1)  # the data want 0.5
    with jax.enable_x64(False):
        x = X.astype(np.float32)
        with pytest.warns(fixedopt.OptimizeWarning, match="in 1 of 1 fits"):  # unused
            result = model.fit((2.0 * x + 0.5)[None], params, x=x)
    assert result.best_values["intercept"][0] == np.float32(0.1)
    report = result.fit_report(0)
    assert "    unused:     not determined by the data" in report
    assert "    intercept:  at boundary" in report


# Last in the module, and the only test marked so: a reference within 0.01 of a standard
# error, far above rounding (conftest.py's rule), whose conf_interval programs (19.6 CPU s
# optimized) compile without XLA's expensive optimizations, while its float64 fit reuses
# the earlier tests' optimized program. An unmarked test after it would drop the
# compiled programs and compile them again (conftest.py).
@pytest.mark.fewer_optimizations
def test_conf_interval_in_float32_finds_every_limit():
    """In float32, ``u = sqrt(chisqr(v) - chisqr)`` is known to ~1e-5 of its target, and
    conf_interval's rtol=1e-6 was never met: 26 of the 48 limits came back NaN. Each
    limit now equals the float64 fit's to 0.01 of a standard error (the float32 and
    float64 best fits differ by ~0.002 standard errors; the tolerance on u adds
    ~1e-4)."""
    model, data = _peak_data()
    start = model.make_params(amplitude=150.0, center=9.5, sigma=2.0, c=3.0)
    reference = model.fit(data, start, x=X)
    expected = reference.conf_interval(sigmas=(1, 2))
    with jax.enable_x64(False), warnings.catch_warnings():
        warnings.simplefilter("error")  # the old failure was a RuntimeWarning
        result = model.fit(data.astype(np.float32), start, x=X.astype(np.float32))
        limits = result.conf_interval(sigmas=(1, 2))
    assert result.values.dtype == np.float32
    for name, table in expected.items():
        scale = reference.stderr[name][:, None]
        np.testing.assert_array_less(np.abs(limits[name] - table) / scale, 0.01, err_msg=name)
