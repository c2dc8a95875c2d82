"""Issue 63's edges of ``curve_fit`` and ``least_squares``, each the truth, an error
naming the argument and its fix, or a warning: mixed dtypes follow JAX's promotion,
a ``sigma`` the cast would zero is refused, options that would be dropped are
refused or warned, scipy-style tuple bounds, a shared start under ``batched=True``,
0/1 integer masks, the messages of the usual mistakes, undetermined parameters
(``inf`` errors, one warning counting the fits) and ``nan_unconverged``."""

import re

import jax.numpy as jnp
import numpy as np
import pytest
import scipy.optimize

import fixedopt

T = np.linspace(0.0, 3.0, 30)


def decay(t, a, rate):
    return a * jnp.exp(-rate * t)


def two_decays(t, a1, r1, a2, r2):
    return a1 * jnp.exp(-r1 * t) + a2 * jnp.exp(-r2 * t)


Y = decay(np.asarray(T), 2.0, 1.3)


def test_a_float32_start_with_float64_data_fits_in_float64_as_jax_promotes():
    """A detail of 3e-8 in float64 data: lost in float32 (the start's dtype, before),
    kept under JAX's promotion, which the answer equals: the same fit from a float64
    start, bit for bit."""
    y = np.asarray(Y) + 3e-8 * np.sin(7 * T)
    popt32, _ = fixedopt.curve_fit(decay, T, y, np.float32([1.0, 1.0]))
    popt64, _ = fixedopt.curve_fit(decay, T, y, np.float64([1.0, 1.0]))
    assert popt32.dtype == jnp.float64
    np.testing.assert_array_equal(popt32, popt64)
    reference, _ = scipy.optimize.curve_fit(lambda t, a, r: a * np.exp(-r * t), T, y, [1, 1])
    np.testing.assert_allclose(popt32, reference, rtol=1e-7)


def test_a_sigma_the_cast_turns_to_zero_is_refused_naming_it():
    """float32 data and a float64 ``sigma`` of 1e-50 (0 in float32): a ValueError
    naming ``sigma`` and the fix, in curve_fit and least_squares (was: the rows ended
    NONFINITE, or 'must be positive, got a minimum of 0.0')."""
    t, y = np.float32(T), np.float32(Y)
    with pytest.raises(ValueError, match=r"`sigma` holds 1e-50, which is 0\.0 in float32"):
        fixedopt.curve_fit(decay, t, y, np.float32([1, 1]), sigma=np.full(30, 1e-50))
    residual = lambda p: decay(t, *p) - y
    with pytest.raises(ValueError, match="`sigma` holds 1e-50"):
        fixedopt.least_squares(residual, jnp.ones(2, jnp.float32), False, sigma=np.full(30, 1e-50))


def test_options_that_would_be_dropped_are_refused_or_warned():
    with pytest.raises(ValueError, match="give one of full_output=True"):
        fixedopt.curve_fit(decay, T, Y, [1.0, 1.0], result=True, full_output=True)
    with pytest.raises(ValueError, match="give one iteration limit"):
        fixedopt.curve_fit(decay, T, Y, [1.0, 1.0], max_steps=10, max_nfev=10)
    residual = lambda p: decay(T, *p) - Y
    with pytest.raises(ValueError, match="give one of `max_steps` and `max_nfev`"):
        fixedopt.least_squares(residual, jnp.ones(2), False, max_steps=1000, max_nfev=20)
    with pytest.warns(UserWarning, match="f_scale=3.0 has no effect with loss='linear'"):
        fixedopt.curve_fit(decay, T, Y, [1.0, 1.0], f_scale=3.0)


def test_scipy_style_tuple_bounds_are_arrays():
    """``((0, 0), (10, 10))``: two (k,) arrays as scipy reads them (was a pytree-prefix
    error), the same fit as with lists."""
    tuples, _ = fixedopt.curve_fit(decay, T, Y, [1.0, 1.0], bounds=((0, 0), (10, 10)))
    lists, _ = fixedopt.curve_fit(decay, T, Y, [1.0, 1.0], bounds=([0, 0], [10, 10]))
    np.testing.assert_array_equal(tuples, lists)
    np.testing.assert_allclose(tuples, [2.0, 1.3], rtol=1e-9)


def test_a_shared_start_under_batched_is_every_fits_start():
    ys = np.stack([Y, 0.5 * Y, 3.0 * Y])
    shared, _ = fixedopt.curve_fit(decay, T, ys, [1.0, 1.0], batched=True)
    rows, _ = fixedopt.curve_fit(decay, T, ys, np.ones((3, 2)), batched=True)
    np.testing.assert_array_equal(shared, rows)
    np.testing.assert_allclose(shared[:, 0], [2.0, 1.0, 6.0], rtol=1e-9)


def test_fixed_takes_0_1_integers_and_names_a_wrong_shape():
    ints, _ = fixedopt.curve_fit(decay, T, Y, [2.5, 1.0], fixed=np.array([1, 0]))
    bools, _ = fixedopt.curve_fit(decay, T, Y, [2.5, 1.0], fixed=np.array([True, False]))
    np.testing.assert_array_equal(ints, bools)
    assert ints[0] == 2.5
    message = "`fixed` must have shape (k,), one flag per parameter of `p0` (shape (2,)), got"
    with pytest.raises(ValueError, match=re.escape(message)):
        fixedopt.curve_fit(decay, T, Y, [1.0, 1.0], fixed=[True, False, False])
    with pytest.raises(TypeError, match=r"0/1 integers, got values \[0, 2\]"):
        fixedopt.curve_fit(decay, T, Y, [1.0, 1.0], fixed=np.array([0, 2]))


def test_the_usual_mistakes_say_what_to_do():
    ys = np.stack([Y] * 4)
    with pytest.raises(ValueError, match="pass batched=True to fit one curve per row"):
        fixedopt.curve_fit(decay, T, ys, np.ones((4, 2)))
    with pytest.raises(
        ValueError, match=r"one fit's xdata of shape \(29,\) \(xdata read per fit\)"
    ):
        fixedopt.curve_fit(decay, np.ones((4, 29)), ys, np.ones((4, 2)), batched=True)


def test_an_undetermined_decay_gets_an_inf_error_and_one_warning_counting_fits():
    """Fit 1's data are all zero with the amplitude at its bound 0: its rate has no
    effect (a zero Jacobian column): ``inf`` error, not 0; fit 0 is determined. One
    OptimizeWarning counting 1 of 2 fits. ``at_bound='fixed'`` too."""
    ys = np.stack([Y, np.zeros_like(Y)])
    p0 = np.array([[1.0, 1.0], [0.0, 1.0]])
    for at_bound in ("free", "fixed"):
        with pytest.warns(fixedopt.OptimizeWarning, match=r"in 1 of 2 fits \(1\)") as caught:
            _, pcov, res = fixedopt.curve_fit(decay, T, ys, p0, bounds=(0, np.inf),
                                              batched=True, result=True, at_bound=at_bound)  # fmt: skip
        assert len(caught) == 1
        assert np.all(np.isfinite(res.perr[0])) and np.isinf(res.perr[1, 1])
        assert np.all(np.isinf(pcov[1, 1])) and np.all(np.isinf(pcov[1, :, 1]))


def test_all_zero_weights_leave_every_parameter_undetermined():
    with pytest.warns(fixedopt.OptimizeWarning, match="could not be estimated"):
        _, _, res = fixedopt.curve_fit(decay, T, Y, [1.0, 1.0], sigma=np.full(30, np.inf),
                                       result=True, method="trf")  # fmt: skip
    assert np.all(np.isinf(res.perr))


def test_nan_unconverged_returns_nan_where_rows_did_not_converge():
    """Four steps: fit 1 stops MAX_STEPS: NaN in its free parameter and errors, its
    fixed one kept; fit 0 (its rate fixed at the truth: linear) converges, unchanged,
    bit for bit. Default: the last iterate."""
    ys = np.stack([Y, Y])
    p0, fixed = np.array([[1.0, 1.3], [1.0, 0.5]]), np.array([[False, True], [True, False]])
    kept, _, plain = fixedopt.curve_fit(decay, T, ys, p0, fixed=fixed, batched=True,
                                        result=True, max_nfev=4)  # fmt: skip
    popt, _, res = fixedopt.curve_fit(decay, T, ys, p0, fixed=fixed, batched=True,
                                      result=True, max_nfev=4, nan_unconverged=True)  # fmt: skip
    np.testing.assert_array_equal(res.solution.converged, [True, False])
    assert np.all(np.isfinite(kept))
    np.testing.assert_array_equal(popt[0], kept[0])
    assert popt[1, 0] == 1.0 and np.isnan(popt[1, 1]) and np.isnan(res.perr[1, 1])
    assert np.all(np.isfinite(plain.perr[0])) and np.all(np.isfinite(res.perr[0]))
    residual = lambda p, y: decay(T, *p) - y
    sol = fixedopt.least_squares(residual, p0, fixed, args=(ys,), batched=True, max_steps=4,
                                 nan_unconverged=True)  # fmt: skip
    np.testing.assert_array_equal(sol.x, popt)
