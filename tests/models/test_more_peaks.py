"""lmfit's other built-in models (fixedopt/_models/more_peaks.py): lineshapes against
lmfit.lineshapes to 1e-12 relative, derivatives against central differences, guesses
and derived parameters against lmfit's, and a batched fit that recovers each shape."""

import jax
import jax.numpy as jnp
import lmfit
import lmfit.lineshapes as reference
import numpy as np
import pytest
import scipy.special

import fixedopt
from fixedopt import models
from fixedopt._models import gamma
from fixedopt.models import lineshapes

# References (lmfit's, scipy's, central differences) within 1e-12 relative or wider, and
# fits judged by their success and reduced chi-square: none rests on the backend's rounding.
pytestmark = pytest.mark.fewer_optimizations

X = np.linspace(-6.0, 9.0, 61)
POSITIVE_X = np.linspace(0.05, 6.0, 41)

# name: (x, parameters in signature order, options)
SHAPES = {
    "moffat": (X, (3.0, 0.4, 1.3, 1.7), {}),
    "students_t": (X, (3.0, 0.4, 2.5), {}),
    "lognormal": (POSITIVE_X, (3.0, 0.4, 0.6), {}),
    "split_lorentzian": (X, (3.0, 0.4, 1.3, 0.7), {}),
    "breit_wigner": (X, (3.0, 0.4, 1.3, 2.0), {}),
    "dho": (np.append(X, [0.0, 1e-9]), (3.0, 1.5, 0.4, 2.0), {}),
    "doniach": (X, (3.0, 0.4, 1.3, 0.2), {}),
    "expgaussian": (X, (3.0, 0.4, 1.3, 0.8), {}),
    "skewed_voigt": (X, (3.0, 0.4, 0.9, 0.6, 1.5), {}),
    "pearson4": (X, (3.0, 0.4, 1.3, 1.7, 2.5), {}),
    "sine": (X, (3.0, 1.4, 0.3), {}),
    **{
        f"thermal_distribution-{form}": (X, (1.5, 0.4, 1.3), {"form": form})
        for form in ("bose", "maxwell", "fermi")
    },
}


def _function(name):
    return name.split("-")[0]


def jitted(name):
    """The lineshape of ``name`` as one program, its parameters data (eagerly, each of
    its operations compiled its own: 212 programs over the two tests below, measured)."""
    _, _, options = SHAPES[name]
    shape = getattr(lineshapes, _function(name))
    return jax.jit(lambda x, *params: shape(x, *params, **options))


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_lineshape_equals_lmfit(name):
    x, params, options = SHAPES[name]
    got = np.asarray(jitted(name)(jnp.asarray(x), *params))
    expected = getattr(reference, _function(name))(x.copy(), *params, **options)
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-14 * np.abs(expected).max())


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_lineshape_derivatives_match_finite_differences(name):
    """d(curve)/d(parameter) by JAX against central differences of lmfit's curve."""
    x, params, options = SHAPES[name]
    p = np.asarray(params, float)
    ours = getattr(lineshapes, _function(name))
    theirs = getattr(reference, _function(name))
    curve = jax.jit(jax.jacfwd(lambda p: ours(jnp.asarray(x), *p, **options)))
    jacobian = np.asarray(curve(p))
    for j in range(p.size):
        h = 1e-6 * max(1.0, abs(p[j]))
        up, down = p.copy(), p.copy()
        up[j] += h
        down[j] -= h
        central = (theirs(x.copy(), *up, **options) - theirs(x.copy(), *down, **options)) / (2 * h)
        # central differences: O(h^2) truncation and eps/h rounding, ~1e-9 of the scale
        scale = np.abs(central).max() + 1.0
        np.testing.assert_allclose(jacobian[:, j], central, rtol=0, atol=1e-7 * scale)


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_lineshape_keeps_float32(name):
    x, params, options = SHAPES[name]
    got = jitted(name)(jnp.asarray(x, jnp.float32), *params)
    expected = getattr(reference, _function(name))(x.copy(), *params, **options)
    assert got.dtype == jnp.float32
    # float32: ~6e-8 per operation over a few dozen, and the Faddeeva and gamma series
    # hold 1e-6 relative there
    np.testing.assert_allclose(got, expected, rtol=2e-5, atol=2e-6 * np.abs(expected).max())


def test_exponential_gaussian_is_finite_where_lmfit_overflows():
    """Far left of the peak lmfit's ``exp(a) erfc(b)`` is ``inf * 0``; the value is
    ``exp(a - b**2) erfcx(b)``: checked against scipy's ``erfcx`` in float64, and
    finite in float32 (where ``exp`` overflows beyond 88)."""
    x = np.linspace(-800.0, -5.0, 9)
    a = 0.8 * (0.4 + 0.8 * 1.3**2 / 2 - x)
    b = (0.4 + 0.8 * 1.3**2 - x) / (np.sqrt(2) * 1.3)
    expected = 3.0 * 0.4 * np.exp(a - b**2) * scipy.special.erfcx(b)
    shape = jax.jit(lambda x, center: lineshapes.expgaussian(x, 3.0, center, 1.3, 0.8))
    np.testing.assert_allclose(shape(jnp.asarray(x), 0.4), expected, rtol=1e-12)
    np.testing.assert_allclose(shape(jnp.asarray(x, jnp.float32), 0.4), expected, rtol=1e-5)
    gradient = jax.jit(jax.grad(lambda center: shape(jnp.asarray(x), center).sum()))
    assert np.isfinite(gradient(0.4))


def test_log_gamma_ratio_equals_scipy():
    a = np.array([0.51, 0.6, 1.7, 3.0, 30.0, 900.0])
    b = np.array([0.0, 2.0, 1.25, -7.0, 40.0, 500.0])
    expected = np.real(scipy.special.loggamma(a + 1j * b)) - scipy.special.gammaln(a)
    got = lineshapes.log_gamma_ratio(jnp.asarray(a), jnp.asarray(b))
    np.testing.assert_allclose(got, expected, rtol=1e-13, atol=1e-13)
    # the complex log-gamma of the expressions (lmfit's loggammafcn): its real part
    z = a + 1j * b
    got = np.real(np.asarray(gamma.loggamma(jnp.asarray(z))))
    np.testing.assert_allclose(got, np.real(scipy.special.loggamma(z)), rtol=1e-13, atol=1e-13)


def test_an_unknown_thermal_form_is_named_when_the_model_is_made():
    with pytest.raises(ValueError, match="form"):
        lineshapes.thermal_distribution(X, form="planck")
    with pytest.raises(ValueError, match="form"):
        models.ThermalDistributionModel(form="planck")
    assert models.ThermalDistributionModel(form="Fermi").options["form"] == "Fermi"  # lmfit's


MODELS = [
    "MoffatModel", "LognormalModel", "StudentsTModel", "SplitLorentzianModel",
    "BreitWignerModel", "DampedHarmonicOscillatorModel", "DoniachModel",
    "ExponentialGaussianModel", "SkewedVoigtModel", "Pearson4Model", "SineModel",
    "ThermalDistributionModel",
]  # fmt: skip


def _data(name, rows=1):
    positive = ("LognormalModel", "DampedHarmonicOscillatorModel", "ThermalDistributionModel")
    x = POSITIVE_X if name in positive else X
    rng = np.random.default_rng(MODELS.index(name))
    theirs = getattr(lmfit.models, name)()
    if name == "SineModel":
        curve = 2.0 * np.sin(1.3 * x + 0.5)
    else:
        curve = theirs.eval(theirs.make_params(), x=x)
    noise = 0.01 * np.abs(curve).max() * rng.normal(size=(rows, x.size))
    return x, curve + noise, theirs


@pytest.mark.parametrize("name", MODELS)
def test_guess_equals_lmfit(name):
    x, data, theirs = _data(name)
    expected = theirs.guess(data[0], x=x)
    got = getattr(models, name)().guess(data[0], x)
    for key, parameter in expected.items():
        if parameter.expr is None:
            np.testing.assert_allclose(float(got[key].value), parameter.value, rtol=1e-12)


DERIVED_AT = {
    "MoffatModel": {"amplitude": 3.0, "center": 0.4, "sigma": 1.3, "beta": 1.7},
    "LognormalModel": {"amplitude": 3.0, "center": 0.4, "sigma": 0.6},
    "StudentsTModel": {"amplitude": 3.0, "center": 0.4, "sigma": 2.5},
    "SplitLorentzianModel": {"amplitude": 3.0, "center": 0.4, "sigma": 1.3, "sigma_r": 0.7},
    "DampedHarmonicOscillatorModel": {"amplitude": 3.0, "center": 1.5, "sigma": 0.4, "gamma": 2.0},
    "DoniachModel": {"amplitude": 3.0, "center": 0.4, "sigma": 1.3, "gamma": 0.2},
    "Pearson4Model": {"amplitude": 3.0, "center": 0.4, "sigma": 1.3, "expon": 1.7, "skew": 2.5},
}


@pytest.mark.parametrize("name", sorted(DERIVED_AT))
def test_derived_parameters_equal_lmfit(name):
    """fwhm, height and position: each model's expression, compiled by
    ``parse_expression`` (as a fit compiles it), against lmfit's value of its own at the
    same parameters. lmfit's split-Lorentzian height divides by 3.1415927 (its rounding
    of pi): compared to 1e-7 there. (That a fit reports these: tests/models/test_fit.py.)"""
    values = DERIVED_AT[name]
    ours = getattr(models, name)().make_params(**values)
    expected = getattr(lmfit.models, name)().make_params(**values)
    derived = [k for k, p in expected.items() if p.expr is not None]
    assert derived and set(derived) <= set(ours), derived
    at = {k: jnp.asarray(v) for k, v in values.items()}
    for key in derived:
        got = float(models.parse_expression(ours[key].expr)(at))
        rtol = 1e-7 if name == "SplitLorentzianModel" and key == "height" else 1e-12
        np.testing.assert_allclose(got, expected[key].value, rtol=rtol)


# lmfit's own guesses for these start where lmfit and fixedopt alike end in one poor
# local minimum (the same reduced chi-square to 4 digits, checked): started nearer.
NEAR_TRUTH = ("BreitWignerModel", "ThermalDistributionModel")


@pytest.mark.parametrize("name", MODELS)
def test_a_batch_fit_recovers_each_shape(name):
    """Three noisy rows, started from lmfit's guess of each (:data:`NEAR_TRUTH`: 10%
    and 0.02 off the truth, the thermal pole at ``center`` left of the data); the middle
    row knows its first parameter (fixed at the truth): it stays bit-identical, and
    every fit's reduced chi-square is the noise's, within 4 standard deviations of
    chi-square's (sqrt(2 / nfree))."""
    x, data, theirs = _data(name, rows=3)
    ours = getattr(models, name)()
    params = ours.guess(data, x)
    if name in NEAR_TRUTH:
        truth = theirs.make_params()
        params = ours.make_params(**{k: 1.1 * truth[k].value + 0.02 for k in ours.param_names})
    first = ours.param_names[0]
    truth = 2.0 if name == "SineModel" else theirs.make_params()[first].value
    known = np.broadcast_to(np.asarray(params[first].value, float), (3,)).copy()
    known[1] = truth
    params[first].value = known
    params[first].vary = np.array([True, False, True])
    if name == "ThermalDistributionModel":
        # Its data lie far right of the pole, where A / (exp((x - c) / kt) - 1) is
        # A exp(-(x - c) / kt) to rounding: amplitude and center act alike, and the
        # free rows' Jacobians are rank-deficient (the middle row's amplitude is known).
        with pytest.warns(fixedopt.OptimizeWarning, match=r"in 2 of 3 fits \(0, 2\)"):
            result = ours.fit(data, params, x=x, max_steps=500)
    else:
        result = ours.fit(data, params, x=x, max_steps=500)
    assert result.success.all(), result.status
    assert result.best_values[first][1] == truth
    noise = (0.01 * np.abs(data).max()) ** 2
    spread = 4.0 * np.sqrt(2.0 / result.nfree)
    assert np.all(np.abs(result.redchi / noise - 1.0) < spread), result.redchi / noise
