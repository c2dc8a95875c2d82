"""expr: the safe expression language, parameters for a batch, and ties (checked
against the same arithmetic in NumPy and against finite differences)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import fixedopt.testing
from fixedopt.models import GaussianModel, Model, Parameters, parse_expression


def test_an_expression_computes_what_numpy_computes():
    tie = parse_expression("2 * sqrt(a) + max(1e-15, b) ** 2 - pi / e % 1 + -c")
    a, b, c = 2.3, -0.4, 0.7
    expected = 2 * np.sqrt(a) + max(1e-15, b) ** 2 - np.pi / np.e % 1 + -c
    assert tie.names == {"a", "b", "c"}
    assert float(tie({"a": a, "b": b, "c": c})) == pytest.approx(expected, rel=1e-15)
    voigt_height = parse_expression("real(wofz(1j * g / (s * sqrt(2))))")
    assert float(voigt_height({"g": 0.0, "s": 1.0})) == 1.0  # w(0) = 1


def test_an_expression_is_differentiable():
    tie = parse_expression("a * exp(-b) + log(a) * b")
    grad = jax.grad(lambda p: tie({"a": p[0], "b": p[1]}))(jnp.array([1.5, 0.3]))
    h, f = 1e-6, lambda a, b: a * np.exp(-b) + np.log(a) * b
    fd = [
        (f(1.5 + h, 0.3) - f(1.5 - h, 0.3)) / (2 * h),
        (f(1.5, 0.3 + h) - f(1.5, 0.3 - h)) / (2 * h),
    ]
    np.testing.assert_allclose(grad, fd, rtol=1e-8)


@pytest.mark.parametrize(
    "source",
    ['__import__("os")', "a.real", "a[0]", "lambda: 1", "a if b else c", "a < b",
     "max(a, key=b)", "open('f')", "'text'", "(a, b)"],
)  # fmt: skip
def test_only_arithmetic_names_and_listed_functions_are_allowed(source):
    with pytest.raises(ValueError, match="`expr` of 'width'"):
        parse_expression(source, "width")


def test_a_syntax_error_is_named():
    with pytest.raises(ValueError, match="cannot parse"):
        parse_expression("a +* b", "width")


def test_ties_to_unknown_names_and_circles_are_refused():
    model = GaussianModel()
    x, data = np.linspace(-3, 3, 20), np.exp(-(np.linspace(-3, 3, 20) ** 2))
    params = model.make_params(amplitude=1.0, center=0.0, sigma=1.0)
    params["center"].set(expr="shift + 1")
    with pytest.raises(ValueError, match=r"unknown parameters \['shift'\]"):
        model.fit(data, params, x=x)
    params = model.make_params(amplitude=1.0, center=0.0, sigma=1.0)
    params["sigma"].set(expr="fwhm / 2")  # fwhm is 2.35 * sigma
    with pytest.raises(ValueError, match="circle"):
        model.fit(data, params, x=x)


def test_parameters_check_their_rows_and_bounds():
    params = Parameters()
    params.add("a", value=[1.0, 2.0])
    params.add("b", value=1.0, vary=[True, False, True])
    with pytest.raises(ValueError, match="sizes"):
        params.rows()
    with pytest.raises(ValueError, match="`min` must be <= `max`"):
        params.add("c", value=1.0, min=2.0, max=1.0)
    with pytest.raises(ValueError, match="shape"):
        params.add("d", value=np.ones((2, 2)))
    with pytest.raises(ValueError, match="identifier"):
        params.add("not a name", value=1.0)


def test_a_per_row_tie_is_computed_where_given_and_free_elsewhere():
    def two_lines(x, a=1.0, b=1.0):
        return a * x + b * x**2

    model = Model(two_lines)
    x = np.linspace(0.0, 2.0, 15)
    truth_b = np.array([0.5, 0.9, 0.5])
    data = 1.5 * x + truth_b[:, None] * x**2
    params = model.make_params(a=1.0, b=1.0)
    params["b"].set(expr=[None, None, "a / 3"])  # tied in the last fit only
    result = model.fit(data, params, x=x)
    np.testing.assert_allclose(result.best_values["a"][:2], 1.5, rtol=1e-10)
    np.testing.assert_allclose(result.best_values["b"][:2], truth_b[:2], rtol=1e-10)
    a, b = result.best_values["a"][2], result.best_values["b"][2]
    assert b == pytest.approx(a / 3, rel=1e-15)
    # the tied fit is a one-parameter least squares: a x + (a/3) x^2 against the data
    basis = x + x**2 / 3
    assert a == pytest.approx(basis @ data[2] / (basis @ basis), rel=1e-10)
    assert result.stderr["b"][2] == pytest.approx(result.stderr["a"][2] / 3, rel=1e-12)
    assert list(result.nvarys) == [2, 2, 1]
    # a new pattern of ties and known values, same names and shapes: no new solve
    # compiled, nor a covariance (which computes the tied parameters and their errors)
    from fixedopt._results import covariance

    before = fixedopt.testing.compiled_solves()
    covariances = covariance._compiled._cache_size()  # type: ignore[attr-defined]
    params["b"].set(expr=["a / 3", None, None], vary=[True, False, True])
    again = model.fit(data[::-1], params, x=x)
    assert fixedopt.testing.compiled_solves() == before
    assert covariance._compiled._cache_size() == covariances  # type: ignore[attr-defined]
    assert again.stderr["b"][0] == pytest.approx(again.stderr["a"][0] / 3, rel=1e-12)
    assert again.best_values["b"][1] == 1.0  # known (fixed at its value)
    assert again.best_values["b"][0] == pytest.approx(again.best_values["a"][0] / 3, rel=1e-15)


def test_bad_input_to_fit_is_named():
    model = GaussianModel()
    x = np.linspace(-3.0, 3.0, 20)
    data = np.ones((2, 20))
    with pytest.raises(ValueError, match=r"`data` must have shape \(m,\) or \(B, m\)"):
        model.fit(np.ones((2, 3, 20)), x=x)
    with pytest.raises(TypeError, match=r"`params` must be fixedopt\.models\.Parameters"):
        model.fit(data, {"amplitude": 1.0}, x=x)
    with pytest.raises(ValueError, match="`weights` must broadcast"):
        model.fit(data, weights=np.ones(7), x=x)
    with pytest.raises(ValueError, match="3 rows"):
        model.fit(data, model.make_params(amplitude=[1.0, 2.0, 3.0]), x=x)
    with pytest.raises(TypeError, match=r"independent variables \['x'\]"):
        model.fit(data)
    with pytest.raises(ValueError, match=r"`counts` is not a keyword of Model\.fit"):
        model.fit(data, x=x, counts=data)
    with pytest.raises(ValueError, match="batched=False fits one curve"):
        model.fit(data, x=x, batched=False)
