"""Issue 63's edges of ``curve_fit`` and ``least_squares``, each the truth, an error
naming the argument and its fix, or a warning: mixed dtypes follow JAX's promotion,
a ``sigma`` the cast would zero is refused, options that would be dropped are
refused or warned, scipy-style tuple bounds, a shared start under ``batched=True``,
0/1 integer masks, the messages of the usual mistakes, undetermined parameters
(``inf`` errors, one warning counting the fits) and ``nan_unconverged``."""

import re
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.optimize

import fixedopt

# scipy's values within 1e-9 to 1e-7, fixed entries' bits, and the same call written two
# ways (tuples or lists, a shared start or its rows, 0/1 or booleans) giving the same
# program's bits: none rests on the backend's rounding.
pytestmark = pytest.mark.fewer_optimizations

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
        jax.eval_shape(lambda: fixedopt.curve_fit(decay, T, Y, [1.0, 1.0], f_scale=3.0))


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
            _, pcov, res = fixedopt.curve_fit(
                decay, T, ys, p0, bounds=(0, np.inf), batched=True, result=True, at_bound=at_bound
            )
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


def test_a_fixed_value_outside_traced_bounds_stops_its_row_infeasible():
    """Under jit the bounds cannot be checked before the solve (a concrete call
    raises): row 0's fixed 5.0 outside [0, 2] stops INFEASIBLE (was CONVERGED), row
    1 is solved."""
    fun = lambda x: jnp.sum((x - 1.0) ** 2)
    fixed = jnp.array([[False, True], [False, True]])

    @jax.jit
    def solve(upper):
        x0 = jnp.array([[0.5, 5.0], [0.5, 0.5]])
        return fixedopt.minimize(fun, x0, fixed, bounds=(0.0, upper), batched=True)

    sol = solve(jnp.array(2.0))
    np.testing.assert_array_equal(sol.status, [fixedopt.Status.INFEASIBLE, 0])
    assert sol.x[0, 1] == 5.0 and sol.x[1, 0] == 1.0
    with pytest.raises(ValueError, match="must lie within the bounds where fixed"):
        fixedopt.minimize(fun, jnp.array([0.5, 5.0]), jnp.array([False, True]), bounds=(0.0, 2.0))


def test_fixed_none_in_the_core_api_says_pass_false():
    with pytest.raises(TypeError, match="`fixed` is None: pass False to fix nothing"):
        fixedopt.minimize(lambda x: jnp.sum(x**2), jnp.ones(2), None)


def test_the_precision_warning_shows_once_per_line_under_the_default_filter():
    """Five identical calls, each compiling or entering ``warnings.catch_warnings``
    (which makes Python forget what it showed): one warning, as the README promises;
    under "always" every call warns."""
    t, y = np.linspace(0.0, 1.0, 8), np.linspace(1.0, 2.0, 8)
    line = lambda t, a, b: a * t + b
    for action, expected in (("default", 1), ("always", 3)):
        with jax.enable_x64(False), warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter(action)
            for _ in range(5 if action == "default" else 3):
                with warnings.catch_warnings():  # as JAX's compiler does
                    pass
                fixedopt.curve_fit(line, t, y, [1.0, 1.0])
        shown = [w for w in caught if issubclass(w.category, fixedopt.PrecisionWarning)]
        assert len(shown) == expected, action


def test_to_dataframe_has_standard_errors_and_at_bound_flags():
    t = np.linspace(0.0, 1.0, 8)
    y = np.stack([2.0 * t + 1.0 + 0.01 * np.cos(9 * t), -t + 3.0])
    line = lambda t, slope, offset: slope * t + offset
    _, _, fit = fixedopt.curve_fit(line, t, y, [1.0, 1.0], batched=True,
                                   bounds=([-0.5, 0.0], 5.0), result=True)  # fmt: skip
    frame = fixedopt.to_dataframe(fit, names=["slope", "offset"])
    np.testing.assert_array_equal(frame["slope_stderr"], fit.perr[:, 0])
    np.testing.assert_array_equal(frame["offset_stderr"], fit.perr[:, 1])
    np.testing.assert_array_equal(frame["slope_at_bound"], [False, True])
    np.testing.assert_array_equal(frame["message"], ["CONVERGED", "CONVERGED"])
    same = fixedopt.to_dataframe(fit.solution, ["slope", "offset"], covariance=fit.covariance)
    assert same.equals(frame)


def test_a_vectorized_fun_that_mixes_rows_five_apart_is_caught():
    """Row i's output reads row i + 5 (a roll along the rows): the check on three rows
    passed it; on the first 16 it names the row whose output changed."""

    def mixed(x, target):
        return jnp.sum((x - target) ** 2, axis=1) + 0.1 * jnp.roll(x[:, 0], -5)

    x0, target = jnp.zeros((20, 2)), jnp.ones((20, 2))
    with pytest.raises(ValueError, match="changing row 0 changed row 11's output"):
        fixedopt.minimize(mixed, x0, False, args=(target,), batched=True, vectorized=True)


def test_a_sigma_of_the_batch_length_that_could_be_per_residual_warns_naming_sigma():
    """20 fits of 20 points: a (20,) sigma is one value per row in least_squares (its
    documented reading); the warning names `sigma` and both fixes. curve_fit reads a
    (m,) sigma per point, as scipy: the fit equals the one with sigma broadcast."""
    t = np.linspace(0.0, 1.0, 20)
    ys = np.stack([2.0 * t + 1.0 + 0.01 * np.cos(k * t) for k in range(20)])
    sigma = np.linspace(1.0, 2.0, 20)
    residual = lambda p, y: p[0] * t + p[1] - y
    x0 = jnp.ones((20, 2))
    # Said by the argument checks, before any program: traced, not compiled nor run.
    with pytest.warns(UserWarning, match=r"`sigma` of shape \(20,\) is read as one standard"):
        jax.eval_shape(
            lambda: fixedopt.least_squares(
                residual, x0, False, args=(ys,), args_axes=(0,), batched=True, sigma=sigma
            )
        )
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a (20, 1) sigma is per row beyond doubt
        jax.eval_shape(lambda: fixedopt.least_squares(residual, x0, False, args=(ys,),
                                                      args_axes=(0,), batched=True,
                                                      sigma=sigma[:, None]))  # fmt: skip
    line = lambda t, a, b: a * t + b
    per_point, _ = fixedopt.curve_fit(line, t, ys, x0, sigma=sigma, batched=True)
    full, _ = fixedopt.curve_fit(line, t, ys, x0, sigma=np.broadcast_to(sigma, (20, 20)),
                                 batched=True)  # fmt: skip
    np.testing.assert_array_equal(per_point, full)
