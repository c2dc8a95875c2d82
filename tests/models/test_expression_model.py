"""ExpressionModel: lmfit's model from a string, against lmfit's own."""

import jax.numpy as jnp
import lmfit
import lmfit.lineshapes as reference
import numpy as np
import pytest

from fixedopt.models import ExpressionModel, LinearModel

X = np.linspace(0.0, 5.0, 50)
DECAY = "amplitude * exp(-x / tau) + offset"


def test_parameters_are_the_other_names_in_order():
    assert ExpressionModel(DECAY).param_names == ("amplitude", "tau", "offset")
    assert ExpressionModel("a * t + b", independent_vars=["t"]).param_names == ("a", "b")
    assert ExpressionModel("sqrt(pi) * c + 0 * x").param_names == ("c",)  # pi: a constant


@pytest.mark.parametrize(
    ("expr", "options", "message"),
    [
        ("a * b", {}, "has no `x`"),
        ("a * x", {"independent_vars": ["t"]}, "not in `expr`"),
        ("a * x", {"prefix": "p_"}, "no `prefix`"),
        ("open(x)", {}, "unknown function 'open'"),
        ("x.real * a", {}, "is not allowed"),
    ],
)
def test_bad_expressions_are_refused_by_name(expr, options, message):
    with pytest.raises(ValueError, match=message):
        ExpressionModel(expr, **options)


def test_a_lineshape_can_be_called_in_the_expression():
    model = ExpressionModel("gaussian(x, amp, cen, sig) + c")
    params = model.make_params(amp=3.0, cen=2.0, sig=0.7, c=0.1)
    expected = reference.gaussian(X, 3.0, 2.0, 0.7) + 0.1
    np.testing.assert_allclose(model.eval(params, x=jnp.asarray(X)), expected, rtol=1e-13)


def test_a_constant_expression_is_a_curve():
    model = ExpressionModel("0 * x + c")
    assert model.eval(model.make_params(c=2.0), x=jnp.asarray(X)).shape == X.shape


def test_a_batch_fit_equals_lmfit_row_by_row():
    """Four noisy decays; values to 1e-6 relative, standard errors to 1e-4 (lmfit's
    forward-difference Jacobian, ~sqrt(eps) relative, is the larger error)."""
    rng = np.random.default_rng(1)
    data = 3.0 * np.exp(-X / 1.3) + 0.4 + 0.01 * rng.normal(size=(4, X.size))
    ours = ExpressionModel(DECAY)
    result = ours.fit(data, ours.make_params(amplitude=1.0, tau=1.0, offset=0.0), x=X)
    theirs = lmfit.models.ExpressionModel(DECAY)
    for row in range(4):
        start = theirs.make_params(amplitude=1.0, tau=1.0, offset=0.0)
        fitted = theirs.fit(data[row], start, x=X).params
        for name in ours.param_names:
            np.testing.assert_allclose(result.best_values[name][row], fitted[name].value, rtol=1e-6)
            np.testing.assert_allclose(result.stderr[name][row], fitted[name].stderr, rtol=1e-4)


def test_composed_with_a_builtin_keeps_a_fixed_parameter_bit_identical():
    rng = np.random.default_rng(2)
    data = 3.0 * np.exp(-X / 1.3) + 0.2 * X + 0.4 + 0.01 * rng.normal(size=(2, X.size))
    model = ExpressionModel("amplitude * exp(-x / tau)") + LinearModel()
    params = model.make_params(amplitude=1.0, tau=1.0, slope=0.1, intercept=0.3)
    params["slope"].vary = np.array([True, False])
    params["slope"].value = np.array([0.1, 0.2 + 1e-9])
    result = model.fit(data, params, x=X)
    assert result.success.all()
    assert result.best_values["slope"][1] == 0.2 + 1e-9
    np.testing.assert_allclose(result.best_values["tau"], 1.3, rtol=0.02)
