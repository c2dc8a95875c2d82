"""Model: names from the signature, prefixes, composition, make_params, guess, eval and
eval_components, each against lmfit's own Model on the same inputs."""

import jax
import jax.numpy as jnp
import lmfit
import numpy as np
import pytest

from fixedopt import models

X = np.linspace(-4.0, 12.0, 81)
VALUES = {
    "g_amplitude": 3.0, "g_center": 2.0, "g_sigma": 0.8,
    "l_amplitude": 2.0, "l_center": 6.5, "l_sigma": 1.1,
    "slope": 0.1, "intercept": 1.5, "c": 2.0,
}  # fmt: skip


def both(kind, prefix=""):
    """Our model and lmfit's of one kind."""
    return getattr(models, kind)(prefix=prefix), getattr(lmfit.models, kind)(prefix=prefix)


def test_names_come_from_the_signature_and_the_prefix():
    def decay(t, amplitude, rate=2.0, form="single"):
        return amplitude * jnp.exp(-rate * t)

    model = models.Model(decay, prefix="d_")
    assert model.param_names == ("d_amplitude", "d_rate")
    assert model.independent_vars == ("t",)
    assert model.options == {"form": "single"}
    with pytest.raises(TypeError, match="unknown options"):
        models.Model(decay, shape="double")
    step = models.Model(models.lineshapes.step, form="erf")
    assert step.param_names == ("amplitude", "center", "sigma")
    np.testing.assert_allclose(
        step.eval(step.make_params(center=1.0), x=jnp.asarray(X)),
        lmfit.lineshapes.step(X, 1.0, 1.0, 1.0, form="erf"),
        rtol=1e-12,
    )


@pytest.mark.parametrize("op", ["+", "-", "*", "/"])
def test_composition_equals_lmfits(op):
    (g, lg), (lo, llo), (lin, llin) = (
        both("GaussianModel", "g_"),
        both("LorentzianModel", "l_"),
        both("LinearModel"),
    )
    combine = {"+": lambda a, b: a + b, "-": lambda a, b: a - b,
               "*": lambda a, b: a * b, "/": lambda a, b: a / b}[op]  # fmt: skip
    ours, theirs = combine(g + lo, lin), combine(lg + llo, llin)
    params = {k: v for k, v in VALUES.items() if k != "c"}
    got = ours.eval(ours.make_params(**params), x=jnp.asarray(X))
    np.testing.assert_allclose(got, theirs.eval(theirs.make_params(**params), x=X), rtol=1e-12)
    parts = ours.eval_components(ours.make_params(**params), x=jnp.asarray(X))
    expected = theirs.eval_components(params=theirs.make_params(**params), x=X)
    assert set(parts) == set(expected)
    for key in parts:
        np.testing.assert_allclose(parts[key], expected[key], rtol=1e-12)


def test_models_made_alike_are_equal_and_others_not():
    """A model made again equals the first (so it finds the programs compiled for
    it); a different function, prefix, option, operator or operand order does not."""
    made = lambda: models.GaussianModel(prefix="g_") + models.LinearModel()
    assert made() == made() and hash(made()) == hash(made())
    assert models.GaussianModel(prefix="g_") != models.GaussianModel(prefix="h_")
    assert models.GaussianModel() != models.LorentzianModel()
    assert models.LinearModel() + models.GaussianModel(prefix="g_") != made()
    assert models.LinearModel() - models.GaussianModel(prefix="g_") != (
        models.LinearModel() + models.GaussianModel(prefix="g_")
    )
    step = lambda form: models.StepModel(form=form)
    assert step("erf") == step("erf") and step("erf") != step("linear")
    unhashable = models.Model(lambda x, a=1.0, table="": a * x, table=[1.0])  # a list
    assert unhashable == unhashable and unhashable != models.Model(unhashable.func, table=[1.0])


def test_a_name_in_both_operands_is_refused():
    with pytest.raises(ValueError, match="use a prefix"):
        models.GaussianModel() + models.LorentzianModel()


@pytest.mark.parametrize(
    "kind", ["GaussianModel", "LorentzianModel", "VoigtModel", "PseudoVoigtModel", "Pearson7Model"]
)
def test_make_params_has_lmfits_hints_and_derived_values(kind):
    ours, theirs = both(kind, "p_")
    given = {"p_amplitude": 4.0, "p_center": 1.0, "p_sigma": 0.7}
    params, reference = ours.make_params(**given), theirs.make_params(**given)
    assert set(params) == set(reference)
    values = ours.eval(params, x=jnp.asarray(X))  # the curve, and the derived values:
    np.testing.assert_allclose(values, theirs.eval(reference, x=X), rtol=1e-12)
    derived = _derived(ours, params)
    for name, parameter in reference.items():
        assert params[name].min == parameter.min and params[name].max == parameter.max, name
        # lmfit writes its factors to 7 decimals (2.3548200 for 2 sqrt(2 ln 2))
        assert derived[name] == pytest.approx(parameter.value, rel=2e-7), name


def _derived(model, params):
    """Every parameter's value, ties computed (through a fit's evaluation of them)."""
    from fixedopt._models.layout import arrays, layout

    plan = layout(params, 1)
    arr = arrays(params, plan, 1, np.float64)
    values = jax.jit(plan.values)(jnp.asarray(arr.p0[0]), None)
    return {name: float(v) for name, v in values.items()}


@pytest.mark.parametrize("kind", ["GaussianModel", "LorentzianModel", "PseudoVoigtModel"])
def test_guess_equals_lmfits_for_each_row(kind):
    ours, theirs = both(kind)
    rng = np.random.default_rng(3)
    rows = np.stack([
        lmfit.lineshapes.gaussian(X, a, c, s) + rng.normal(0, 0.01, X.size)
        for a, c, s in [(3.0, 2.0, 0.8), (1.0, 5.0, 2.0), (2.0, -1.0, 0.5)]
    ])  # fmt: skip
    params = ours.guess(rows, x=X)
    for row, data in enumerate(rows):
        reference = theirs.guess(data, x=X)
        for name in ("amplitude", "center", "sigma"):
            assert params[name].value[row] == pytest.approx(reference[name].value, rel=1e-12)


def test_linear_guess_is_the_least_squares_line():
    rows = np.stack([0.5 * X + 1.0, -2.0 * X + 3.0])
    params = models.LinearModel().guess(rows, x=X)
    np.testing.assert_allclose(params["slope"].value, [0.5, -2.0], rtol=1e-12)
    np.testing.assert_allclose(params["intercept"].value, [1.0, 3.0], rtol=1e-12)


def test_eval_of_a_batch_has_one_row_per_parameter_row():
    model = models.GaussianModel()
    params = model.make_params(amplitude=[1.0, 2.0, 3.0], center=0.5, sigma=1.0)
    got = model.eval(params, x=jnp.asarray(X))
    assert got.shape == (3, X.size)
    for row, amplitude in enumerate([1.0, 2.0, 3.0]):
        np.testing.assert_allclose(got[row], lmfit.lineshapes.gaussian(X, amplitude, 0.5, 1.0))


def test_polynomial_model_equals_numpys_polynomial():
    model = models.PolynomialModel(3)
    assert model.param_names == ("c0", "c1", "c2", "c3")
    params = model.make_params(c0=1.0, c1=-0.5, c2=0.25, c3=0.01)
    expected = np.polynomial.polynomial.polyval(X, [1.0, -0.5, 0.25, 0.01])
    np.testing.assert_allclose(model.eval(params, x=jnp.asarray(X)), expected, rtol=1e-12)
    guessed = model.guess(np.stack([expected, 2 * expected]), x=X)
    np.testing.assert_allclose(guessed["c2"].value, [0.25, 0.5], rtol=1e-9)
    with pytest.raises(ValueError, match="`degree`"):
        models.PolynomialModel(8)


@pytest.mark.parametrize("kind", ["ExponentialModel", "PowerLawModel", "ConstantModel"])
def test_guess_of_the_other_shapes_equals_lmfits(kind):
    ours, theirs = both(kind)
    x = np.linspace(0.5, 5.0, 30)
    data = 3.0 * np.exp(-x / 1.7) + 0.01 * np.sin(7 * x)
    params, reference = ours.guess(np.stack([data, data]), x=x), theirs.guess(data, x=x)
    for name, parameter in reference.items():
        np.testing.assert_allclose(params[name].value, parameter.value, rtol=1e-10, err_msg=name)


def test_each_fit_may_have_its_own_x():
    x = np.stack([np.linspace(0.0, 1.0, 10), np.linspace(2.0, 5.0, 10)])
    rng = np.random.default_rng(4)
    data = np.stack([2.0 * x[0] + 1.0, -x[1] + 3.0]) + rng.normal(0, 0.01, (2, 10))
    model = models.LinearModel()
    result = model.fit(data, model.make_params(slope=0.0, intercept=0.0), x=x)
    for row in range(2):
        slope, intercept = np.polyfit(x[row], data[row], 1)
        assert result.best_values["slope"][row] == pytest.approx(slope, rel=1e-9)
        assert result.best_values["intercept"][row] == pytest.approx(intercept, rel=1e-9)
        np.testing.assert_allclose(result.eval(row=row), result.best_fit[row], rtol=1e-12)
    np.testing.assert_allclose(result.eval(), result.best_fit, rtol=1e-12)
