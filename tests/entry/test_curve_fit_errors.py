"""``curve_fit``'s errors and warnings, each message quoted: scipy's refusals (a start
outside the bounds, too few points, empty data, ``args`` in the keywords), a model
JAX cannot trace, a model whose output does not match the data (one message per
mistake), and the float64 data cast to float32 when JAX's 64-bit mode is off."""

import re
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.optimize
from numpy.testing import assert_allclose

import fixedopt

T = np.linspace(0.0, 2.0, 20)
Y = 2.0 * np.exp(-1.5 * T)


def decay(t, a, rate):
    return a * jnp.exp(-rate * t)


def quoted(message):
    """``message`` as a regular expression matching it exactly."""
    return "^" + re.escape(message) + "$"


def test_a_start_outside_the_bounds_is_scipys_error_naming_p0_row_and_entry():
    message = (
        "Initial guess is outside of provided bounds: `p0` (entry 1) is -1.0, outside "
        "[0.0, inf]. Start inside the bounds (curve_fit does not move a start onto them)"
    )
    with pytest.raises(ValueError, match=quoted(message)):
        fixedopt.curve_fit(decay, T, Y, [1.0, -1.0], bounds=(0.0, np.inf))
    rows = np.array([[1.0, 1.0], [1.0, 1.0], [3.0, 1.0]])
    with pytest.raises(ValueError, match=re.escape("`p0` (row 2, entry 0) is 3.0, outside")):
        fixedopt.curve_fit(decay, T, np.stack([Y] * 3), rows, bounds=(0.0, 2.5), batched=True)


def test_crossed_bounds_are_named_before_the_start():
    """lower > upper: no start fits, so the bounds are the mistake (issue 63's probe:
    it was reported as a start outside ``[2.0, 1.0]``)."""
    message = "`bounds`: lower must not exceed upper, got lower=2.0 > upper=1.0 (entry 1)"
    with pytest.raises(ValueError, match="^" + re.escape(message)):
        fixedopt.curve_fit(decay, T, Y, [1.0, 1.5], bounds=([0.0, 2.0], [5.0, 1.0]))


def test_a_traced_start_outside_the_bounds_stops_its_row_infeasible():
    """Under ``jit`` the start cannot be read: its row stops INFEASIBLE at its start
    (NaN pcov), never projected; the other rows fit."""
    rows = jnp.array([[1.0, 1.0], [1.0, -1.0], [1.5, 1.0]])

    @jax.jit
    def fit(p0):
        return fixedopt.curve_fit(decay, T, np.stack([Y] * 3), p0, bounds=(0.0, 5.0),
                                  batched=True, result=True)  # fmt: skip

    popt, pcov, result = fit(rows)
    status = np.asarray(result.solution.status)
    assert status.tolist() == [fixedopt.Status.CONVERGED, fixedopt.Status.INFEASIBLE] * 1 + [0]
    np.testing.assert_array_equal(popt[1], rows[1])
    assert np.all(np.isnan(pcov[1]))
    np.testing.assert_allclose(np.asarray(popt)[[0, 2]], [[2.0, 1.5]] * 2, rtol=1e-8)


def test_too_few_points_empty_data_and_args_are_scipys_errors():
    message = (
        "The number of func parameters=2 must not exceed the number of data points=1: a fit "
        "with more free parameters than data has no unique answer; give more data, or fix "
        "parameters (`fixed`)"
    )
    with pytest.raises(TypeError, match=quoted(message)):
        fixedopt.curve_fit(decay, T[:1], Y[:1])
    # Per fit, counting free parameters: fit 1 has two free, fit 0 one.
    fixed = np.array([[True, False], [False, False]])
    with pytest.raises(TypeError, match=re.escape("points=1 (fit 1): a fit with")):
        fixedopt.curve_fit(decay, T[:1], np.stack([Y[:1]] * 2), np.ones((2, 2)), fixed=fixed,
                           batched=True)  # fmt: skip
    with pytest.raises(ValueError, match=quoted("`ydata` must not be empty! Got shape (0,)")):
        fixedopt.curve_fit(decay, [], [])
    message = (
        "'args' is not a supported keyword argument: curve_fit calls f(xdata, *params); "
        "give other inputs of `f` by closing over them (a lambda or functools.partial)"
    )
    with pytest.raises(ValueError, match=quoted(message)):
        fixedopt.curve_fit(decay, T, Y, args=(1,))
    with pytest.raises(ValueError, match=re.escape("Unable to determine number of fit param")):
        fixedopt.curve_fit(lambda t, *p: t * p[0], T, Y)


def test_a_numpy_model_runs_on_the_host_and_the_warning_names_it_and_says_to_use_jax_numpy():
    def numpy_decay(t, a, rate):
        return a * np.exp(-rate * t)

    message = (
        "`f` (test_a_numpy_model_runs_on_the_host_and_the_warning_names_it_and_says_to_use_"
        "jax_numpy.<locals>.numpy_decay) runs on the host through jax.pure_callback, one Python "
        "call per fit and evaluation, its derivatives by finite differences ('2-point', as "
        "scipy): JAX could not trace it (TracerArrayConversionError: "
    )
    fix = (
        "To run it compiled, with exact derivatives: write it with jax.numpy (import jax.numpy "
        "as jnp; jnp.exp, not np.exp), with jnp.where instead of a Python `if` on a parameter, "
        "and keep no state between calls"
    )
    pattern = "^" + re.escape(message) + ".*" + re.escape(fix) + "$"
    with pytest.warns(fixedopt.HostFunctionWarning, match=pattern):
        popt, _ = fixedopt.curve_fit(numpy_decay, T, Y)
    assert_allclose(popt, fixedopt.curve_fit(decay, T, Y)[0], rtol=1e-7)


def test_a_parameter_count_that_f_cannot_take_is_named():
    message = (
        "fixedopt called `f` (decay) as f(xdata, *p) with xdata of shape (20,) and k = 3 "
        "parameters, but `f` cannot take them: too many positional arguments. `p0` (or the "
        "parameters after x in `f`'s signature, when p0 is None) gives k: make the two agree"
    )
    with pytest.raises(TypeError, match=quoted(message)):
        fixedopt.curve_fit(decay, T, Y, [1.0, 1.0, 1.0])


CALLED = "fixedopt called `f` ({}) as f(xdata, *p) with xdata of shape (20,) and k = 2 parameters: "
SHAPES = {  # a model's mistake -> its message
    "scalar": (
        lambda t, a, rate: jnp.sum(a * jnp.exp(-rate * t)),
        "`f` returned shape () for `ydata` of shape (20,): a scalar where one model value per "
        "data point is due. Return the curve at every x (a sum or a mean over x reduces it to "
        "one number)",
    ),
    "one short": (
        lambda t, a, rate: jnp.diff(a * jnp.exp(-rate * t)),
        "`f` returned shape (19,) for `ydata` of shape (20,): 19 model values for 20 data "
        "points (a slice or np.diff shortens the curve by one; a grid other than xdata gives "
        "another length); return one value per data point",
    ),
    "column": (
        lambda t, a, rate: (a * jnp.exp(-rate * t))[:, None],
        "`f` returned shape (20, 1) for `ydata` of shape (20,): the same 20 values in another "
        "shape (a column (m, 1) against a row (m,) would broadcast f - ydata to (20, 20)); "
        "reshape the output to (20,) (e.g. `.ravel()` or `[:, 0]`)",
    ),
    "broadcast": (
        lambda t, a, rate: a * jnp.exp(-rate * t[:, None] * jnp.ones((1, 20))),
        "`f` returned shape (20, 20) for `ydata` of shape (20,): f - ydata would broadcast to "
        "(20, 20), 400 residuals for 20 data points: an accidental broadcast (an axis added to "
        "x or to a parameter?); return one value per data point",
    ),
}


@pytest.mark.parametrize("mistake", list(SHAPES))
def test_an_output_that_does_not_match_the_data_gets_its_own_message(mistake):
    f, message = SHAPES[mistake]
    with pytest.raises(ValueError, match=quoted(CALLED.format("<lambda>") + message)):
        fixedopt.curve_fit(f, T, Y, [1.0, 1.0])


def test_a_batched_fit_names_the_shape_mistake_too():
    f, message = SHAPES["one short"]
    with pytest.raises(ValueError, match=re.escape(message.replace("(20,)", "(20,)"))):
        fixedopt.curve_fit(f, T, np.stack([Y, Y]), np.ones((2, 2)), batched=True)


def test_float64_data_with_x64_off_warns_once_naming_the_arguments():
    """x64 off: the fit runs in float32; one warning names what was cast and the fix;
    a fixed parameter comes back as the float32 cast of its start, bit for bit."""
    start = np.array([2.1, 1.3])  # float64: not representable in float32
    with jax.enable_x64(False), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        popt, _ = fixedopt.curve_fit(decay, T, Y, start, fixed=np.array([True, False]))
    assert [w.category for w in caught] == [fixedopt.PrecisionWarning], [
        str(w.message) for w in caught
    ]
    message = (
        "`xdata`, `ydata`, `p0`: float64 data cast to float32, because JAX's 64-bit mode is "
        "off (its default): the solve runs in float32 and returns float32 values (fixed values "
        "come back as their float32 casts, bit for bit). To solve in float64, run "
        'jax.config.update("jax_enable_x64", True) at the start of the program; to stay in '
        "float32 without this warning, pass float32 arrays."
    )
    assert str(caught[0].message) == message
    assert popt.dtype == jnp.float32
    assert np.asarray(popt)[0].tobytes() == np.float32(start[0]).tobytes()
    with jax.enable_x64(False), pytest.warns(fixedopt.PrecisionWarning, match="^`x0`, `args`:"):
        fixedopt.least_squares(lambda p, y: p - y, np.zeros(2), False, args=(np.ones(2),))
    with jax.enable_x64(False), warnings.catch_warnings():
        warnings.simplefilter("error")  # float32 data: nothing to say
        fixedopt.curve_fit(decay, T.astype(np.float32), Y.astype(np.float32), [1.0, 1.0])


def test_optimize_warning_is_scipys_when_scipy_is_imported():
    with pytest.warns(scipy.optimize.OptimizeWarning) as caught:
        fixedopt.curve_fit(lambda t, a, b: a * t, T, Y, method="lm")
    assert isinstance(caught[0].message, fixedopt.OptimizeWarning)
    assert str(caught[0].message).startswith("Covariance of the parameters could not be estimated")


@pytest.mark.parametrize("argument", ["xdata", "ydata", "p0"])
def test_an_argument_that_is_not_numbers_is_named(argument):
    """Strings where numbers belong: a TypeError naming the argument and what it holds
    (JAX's own message names neither)."""
    given = {"xdata": T, "ydata": Y, "p0": [1.0, 1.0]} | {argument: ["one", "two"]}
    message = rf"^`{argument}` must be numbers .* got (list|str) of dtype <U3"
    with pytest.raises(TypeError, match=message):
        fixedopt.curve_fit(decay, given["xdata"], given["ydata"], given["p0"])
