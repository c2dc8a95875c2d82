"""``fixedopt.curve_fit`` and ``least_squares(sigma=...)`` against scipy's
``curve_fit``, and the Poisson likelihood against its Cramér–Rao bound.

References: ``scipy.optimize.curve_fit`` with tight tolerances (``lm`` without
bounds, ``trf`` with them), on each fit alone; with fixed parameters, on the reduced
model whose only parameters are the free ones. Poisson: ``scipy.optimize.minimize``
of the negative log-likelihood, and the Fisher information ``J^T diag(1/mu) J``
computed here from the true parameters.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.optimize

import fixedopt
import fixedopt.testing
from tests.helpers import bits

TIGHT = dict(ftol=1e-15, xtol=1e-15, gtol=1e-15)  # scipy converged well past 1e-6


def exponential(t, a, rate, c):
    return a * jnp.exp(-rate * t) + c


def gaussian(t, a, centre, width, c):
    return a * jnp.exp(-0.5 * ((t - centre) / width) ** 2) + c


def power_law(t, a, k):
    return a * t**k


MODELS = {  # f, x, truth, start, bounds that hold one parameter on its bound
    "exponential": (
        exponential, np.linspace(0.0, 4.0, 40), [2.0, 1.3, 0.5], [1.5, 1.0, 0.6],
        ([0.0, 0.0, 0.52], [10.0, 10.0, 10.0]),
    ),
    "gaussian": (
        gaussian, np.linspace(-3.0, 3.0, 50), [3.0, 0.2, 0.8, 0.3], [2.5, 0.0, 1.0, 0.35],
        ([0.0, -1.0, 0.1, 0.33], [10.0, 1.0, 5.0, 1.0]),
    ),
    "power_law": (
        power_law, np.linspace(0.5, 5.0, 30), [1.5, -0.7], [1.0, -0.5],
        ([0.0, -0.68], [10.0, 0.0]),
    ),
}  # fmt: skip


def numpy_model(f):
    """``f`` in NumPy for scipy (float64 throughout)."""
    return lambda t, *p: np.asarray(f(jnp.asarray(t), *p))


def simulate(name, batch, seed):
    f, t, truth, start, bounds = MODELS[name]
    rng = np.random.default_rng(seed)
    clean = numpy_model(f)(t, *truth)
    sigma = 0.05 * rng.uniform(0.5, 1.5, (batch, t.size))
    y = clean + sigma * rng.normal(size=sigma.shape)
    return f, t, y, sigma, np.tile(start, (batch, 1)), bounds


def assert_pcov_close(pcov, reference, rtol):
    """Element-wise, relative to ``sqrt(pcov_ii pcov_jj)`` (a correlation of 1e-6:
    an off-diagonal entry near 0 is compared on the scale of its variances)."""
    scale = np.sqrt(np.outer(np.diag(reference), np.diag(reference)))
    np.testing.assert_array_less(np.abs(pcov - reference), rtol * scale + 1e-300)


CASES = [
    (name, options)
    for name in MODELS
    for options in ({}, {"sigma": True}, {"sigma": True, "absolute_sigma": True}, {"bounds": True})
]


@pytest.mark.fewer_optimizations
@pytest.mark.parametrize(("name", "options"), CASES, ids=lambda c: str(c))
def test_popt_and_pcov_match_scipy_curve_fit(name, options):
    f, t, y, sigma, start, bounds = simulate(name, 3, seed=len(name))
    kwargs = {}
    if options.get("sigma"):
        kwargs["sigma"] = sigma
    if options.get("absolute_sigma"):
        kwargs["absolute_sigma"] = True
    if options.get("bounds"):
        kwargs["bounds"] = bounds
    popt, pcov, result = fixedopt.curve_fit(f, t, y, start, batched=True, result=True, **kwargs)
    assert np.all(np.asarray(result.solution.converged))
    if options.get("bounds"):  # the bound holds in every fit: at_bound="free" is tested
        assert np.all(np.asarray(result.covariance.at_bound).sum(axis=1) == 1)
    for b in range(len(y)):
        row = {k: (v[b] if k == "sigma" else v) for k, v in kwargs.items()}
        ref_popt, ref_pcov = scipy.optimize.curve_fit(
            numpy_model(f), t, y[b], start[b], **row, **TIGHT
        )
        np.testing.assert_allclose(popt[b], ref_popt, rtol=1e-6)
        np.testing.assert_allclose(np.diag(pcov[b]), np.diag(ref_pcov), rtol=1e-6)
        assert_pcov_close(np.asarray(pcov[b]), ref_pcov, 1e-6)


@pytest.mark.fewer_optimizations
def test_one_fit_unbatched_matches_scipy():
    f, t, y, sigma, start, _ = simulate("gaussian", 1, seed=3)
    popt, pcov = fixedopt.curve_fit(f, t, y[0], start[0], sigma=sigma[0])
    ref_popt, ref_pcov = scipy.optimize.curve_fit(
        numpy_model(f), t, y[0], start[0], sigma=sigma[0], **TIGHT
    )
    assert popt.shape == (4,) and pcov.shape == (4, 4)
    np.testing.assert_allclose(popt, ref_popt, rtol=1e-6)
    assert_pcov_close(np.asarray(pcov), ref_pcov, 1e-6)


@pytest.mark.fewer_optimizations
def test_lists_are_accepted_as_scipy_accepts_them():
    f, t, y, _, start, _ = simulate("power_law", 1, seed=23)
    popt, _ = fixedopt.curve_fit(f, list(t), list(y[0]), list(start[0]))
    ref_popt, _ = scipy.optimize.curve_fit(numpy_model(f), t, y[0], start[0], **TIGHT)
    np.testing.assert_allclose(popt, ref_popt, rtol=1e-6)


@pytest.mark.fewer_optimizations
def test_fixed_parameters_per_fit_match_scipy_on_the_reduced_model():
    f, t, y, sigma, start, _ = simulate("gaussian", 4, seed=5)
    fixed = np.array([[0, 0, 0, 0], [1, 0, 0, 0], [0, 1, 0, 1], [0, 0, 1, 0]], bool)
    start = np.where(fixed, [3.0, 0.2, 0.8, 0.3], start)  # fixed at the truth
    popt, pcov = fixedopt.curve_fit(f, t, y, start, sigma=sigma, fixed=fixed, batched=True)
    popt, pcov = np.asarray(popt), np.asarray(pcov)
    for b in range(len(y)):
        free = ~fixed[b]
        assert np.all(popt[b][fixed[b]] == start[b][fixed[b]])  # bit-identical
        assert np.all(pcov[b][fixed[b]] == 0.0) and np.all(pcov[b][:, fixed[b]] == 0.0)

        def reduced(t, *q, b=b, free=free):
            p = start[b].copy().astype(object)
            p[free] = q
            return numpy_model(f)(t, *p)

        ref_popt, ref_pcov = scipy.optimize.curve_fit(
            reduced, t, y[b], start[b][free], sigma=sigma[b], **TIGHT
        )
        np.testing.assert_allclose(popt[b][free], ref_popt, rtol=1e-6)
        assert_pcov_close(pcov[b][np.ix_(free, free)], ref_pcov, 1e-6)


@pytest.mark.fewer_optimizations
def test_xdata_per_fit_matches_scipy_and_is_inferred():
    rng = np.random.default_rng(7)
    t = np.sort(rng.uniform(0.0, 4.0, (3, 25)), axis=1)  # each fit its own x values
    y = numpy_model(exponential)(t, 2.0, 1.3, 0.5) + 0.02 * rng.normal(size=t.shape)
    start = np.tile([1.0, 1.0, 0.0], (3, 1))
    popt, pcov = fixedopt.curve_fit(exponential, t, y, start, batched=True)
    for b in range(3):
        ref_popt, ref_pcov = scipy.optimize.curve_fit(
            numpy_model(exponential), t[b], y[b], start[b], **TIGHT
        )
        np.testing.assert_allclose(popt[b], ref_popt, rtol=1e-6)
        assert_pcov_close(np.asarray(pcov[b]), ref_pcov, 1e-6)


@pytest.mark.parametrize("absolute_sigma", [False, True])
def test_nan_in_one_fit_fails_that_fit_only(absolute_sigma):
    """Its pcov is NaN also where the variance is taken as given (absolute_sigma)."""
    f, t, y, sigma, start, _ = simulate("exponential", 4, seed=11)
    options = {"sigma": sigma, "absolute_sigma": absolute_sigma, "batched": True}
    popt, _ = fixedopt.curve_fit(f, t, y, start, **options)
    broken = y.copy()
    broken[2, 5] = np.nan
    popt_nan, pcov_nan, result = fixedopt.curve_fit(f, t, broken, start, result=True,
                                                    **options)  # fmt: skip
    status = np.asarray(result.solution.status)
    assert status[2] == fixedopt.Status.NONFINITE and not result.solution.converged[2]
    assert np.all(np.isnan(pcov_nan[2]))
    others = [0, 1, 3]
    assert np.all(status[others] == fixedopt.Status.CONVERGED)
    np.testing.assert_array_equal(np.asarray(popt_nan)[others], np.asarray(popt)[others])


@pytest.mark.fewer_optimizations
def test_a_fit_stopped_at_a_nan_wall_has_no_error_bars():
    """The model is NaN beyond a slope of 2 and the first fit's data want 3: it stops
    NONFINITE at the last finite point, which is no fit, so its pcov is NaN (0 for its
    fixed parameter). The second fit's minimum is inside the wall: scipy's pcov."""
    t = np.linspace(0.0, 1.0, 20)

    def walled(t, a, b, c):
        return jnp.where(a > 2.0, jnp.nan, a * t + b + c)

    noise = 0.01 * np.random.default_rng(5).normal(size=(2, t.size))
    y = np.array([[3.0], [1.5]]) * t + 1.0 + noise
    fixed = np.array([[False, False, True]] * 2)
    p0 = np.zeros((2, 3))
    popt, pcov, result = fixedopt.curve_fit(walled, t, y, p0, fixed=fixed, batched=True,
                                            result=True)  # fmt: skip
    status = [fixedopt.Status(int(s)) for s in result.solution.status]
    assert status == [fixedopt.Status.NONFINITE, fixedopt.Status.CONVERGED]
    assert np.isfinite(float(result.solution.value[0])) and float(popt[0, 0]) <= 2.0
    np.testing.assert_array_equal(bits(popt[:, 2]), bits(p0[:, 2]))  # fixed: the same bits
    pcov = np.asarray(pcov)
    assert np.all(np.isnan(pcov[0, :2, :2])) and np.all(pcov[0, 2] == 0)
    assert np.all(pcov[0, :, 2] == 0) and np.all(np.isnan(np.asarray(result.perr)[0, :2]))
    ref_popt, ref_pcov = scipy.optimize.curve_fit(lambda t, a, b: a * t + b, t, y[1], [0.0, 0.0])
    np.testing.assert_allclose(np.asarray(popt)[1, :2], ref_popt, rtol=1e-8)
    assert_pcov_close(pcov[1, :2, :2], ref_pcov, 1e-6)


def test_new_sigma_and_data_reuse_the_compiled_fit():
    f, t, y, sigma, start, _ = simulate("exponential", 4, seed=13)
    fixedopt.curve_fit(f, t, y, start, sigma=sigma, batched=True)
    before = fixedopt.testing.compiled_solves()
    fixedopt.curve_fit(f, t, y[::-1], start, sigma=sigma * 2.0, batched=True)
    assert fixedopt.testing.compiled_solves() == before


def test_least_squares_sigma_is_the_weighted_residual():
    _f, t, y, sigma, start, _ = simulate("exponential", 3, seed=17)

    def residual(p, y):
        return exponential(t, *p) - y

    weighted = fixedopt.least_squares(
        residual, jnp.asarray(start), False, args=(y,), batched=True, sigma=sigma
    )
    by_hand = fixedopt.least_squares(
        lambda p, y, s: residual(p, y) / s, jnp.asarray(start), False, args=(y, sigma),
        batched=True,
    )  # fmt: skip
    np.testing.assert_allclose(weighted.x, by_hand.x, rtol=1e-12)
    np.testing.assert_allclose(weighted.value, by_hand.value, rtol=1e-12)


@pytest.mark.fewer_optimizations
def test_float32_fit_agrees_with_float64():
    f, t, y, sigma, start, _ = simulate("gaussian", 3, seed=19)
    popt64, pcov64 = fixedopt.curve_fit(f, t, y, start, sigma=sigma, batched=True)
    popt32, pcov32 = fixedopt.curve_fit(  # every input float32: JAX's promotion of
        f, t.astype(np.float32), y.astype(np.float32), start.astype(np.float32),  # them
        sigma=sigma.astype(np.float32), batched=True,
    )  # fmt: skip
    assert popt32.dtype == jnp.float32 and pcov32.dtype == jnp.float32
    # float32: sqrt(eps) = 3.5e-4 of the parameters' own scale
    np.testing.assert_allclose(popt32, popt64, rtol=1e-3, atol=1e-3)
    np.testing.assert_allclose(jnp.diagonal(pcov32, axis1=1, axis2=2),
                               jnp.diagonal(pcov64, axis1=1, axis2=2), rtol=1e-2)  # fmt: skip


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"sigma": -np.ones(40)}, ValueError, "`sigma` must be positive"),
        ({"sigma": np.ones(7)}, ValueError, "`sigma` has incorrect shape"),
        (
            {"sigma": np.ones((40, 39))},
            ValueError,
            r"covariance matrix of one fit's ydata, \(m, m\)",
        ),
        ({"sigma": -np.eye(40)}, ValueError, "`sigma` must be positive definite"),
        ({"estimator": "gauss"}, ValueError, "`estimator` must be one of"),
        ({"at_bound": "ignore"}, ValueError, "`at_bound` must be one of"),
        ({"absolute_sigma": 1}, TypeError, "`absolute_sigma` must be a bool"),
        ({"estimator": "poisson", "sigma": np.ones(40)}, ValueError, "`sigma` has no effect"),
        ({"xdata_per_fit": True}, ValueError, "no effect without batched"),
    ],
)
def test_bad_input_is_named(kwargs, error, match):
    f, t, y, _, start, _ = simulate("exponential", 1, seed=0)
    with pytest.raises(error, match=match):
        fixedopt.curve_fit(f, t, y[0], start[0], **kwargs)


def test_bad_shapes_are_named():
    f, t, y, _, start, _ = simulate("exponential", 2, seed=0)
    with pytest.raises(ValueError, match="`p0` must have shape"):
        fixedopt.curve_fit(f, t, y, start[None], batched=True)  # (k,): every fit's start
    with pytest.raises(ValueError, match="`ydata` must have the leading batch axis"):
        fixedopt.curve_fit(f, t, y[:1], start, batched=True)
    with pytest.raises(
        ValueError, match=r"xdata of shape \(7,\) \(shared\).*7 model values for 40"
    ):
        fixedopt.curve_fit(f, t[:7], y, start, batched=True)


def test_least_squares_data_arguments_are_checked():
    residual = lambda p, y: p[0] - y
    x0, y = jnp.zeros((2, 1)), jnp.ones((2, 3))
    with pytest.raises(ValueError, match="`counts` has no effect"):
        fixedopt.least_squares(residual, x0, False, args=(y,), batched=True, counts=y)
    with pytest.raises(ValueError, match="`counts` must be given"):
        fixedopt.least_squares(residual, x0, False, args=(y,), batched=True, estimator="poisson")
    with pytest.raises(ValueError, match="`sigma` must have the leading batch axis"):
        fixedopt.least_squares(residual, x0, False, args=(y,), batched=True, sigma=jnp.ones(3))
    with pytest.raises(ValueError, match="cannot be combined"):
        fixedopt.least_squares(
            lambda p: p, x0, False, batched=True, estimator="poisson", counts=y, loss="huber"
        )


def two_exponentials(t, a1, tau1, a2, tau2, background):
    return a1 * jnp.exp(-t / tau1) + a2 * jnp.exp(-t / tau2) + background


def z_spread_at_bound(background, batch, at_bound, seed=0):
    """``median(|z|) / 0.6745`` (1: calibrated, bias included) of the free parameters
    not at a bound, in the fits whose background (bounded below by 0) is on its bound;
    the quick version of the ``at_bound`` benchmark suite."""
    rng = np.random.default_rng(seed)
    t = np.linspace(0.0, 10.0, 128)
    truth = np.array([1000.0, 0.5, 300.0, 3.0, 0.0]) * rng.uniform(0.8, 1.2, (batch, 5))
    truth[:, 4] = background
    a1, tau1, a2, tau2, offset = truth.T[:, :, None]
    clean = a1 * np.exp(-t / tau1) + a2 * np.exp(-t / tau2) + offset
    y = clean + 10.0 * rng.normal(size=clean.shape)
    fixed = np.zeros((batch, 5), bool)
    fixed[::2, 3] = True
    start = np.where(fixed, truth, [1100.0, 0.45, 270.0, 3.3, 1.0])
    _, _, result = fixedopt.curve_fit(
        two_exponentials, t, y, start, sigma=np.full(128, 10.0), absolute_sigma=True,
        bounds=(0.0, np.inf), fixed=fixed, batched=True, at_bound=at_bound, result=True,
    )  # fmt: skip
    on_bound = np.asarray(result.covariance.at_bound)
    perr = np.asarray(result.perr)
    usable = ~fixed & ~on_bound & on_bound.any(axis=1, keepdims=True)
    z = (np.asarray(result.popt) - truth)[usable] / perr[usable]
    return np.median(np.abs(z)) / 0.6745


@pytest.mark.fewer_optimizations
def test_at_bound_error_bars_where_the_truth_is_on_and_inside_the_bound():
    """Measured on 20,000 fits (docs/decisions.md, "Error bars with a bound active"): truth on the
    bound, "fixed" 1.01 and "free" 0.67; truth inside (background 4, 10% of the fits on
    the bound), "free" 1.07 and "fixed" 1.84. The windows leave >= 3 standard
    deviations of the estimate at these batch sizes (~1700 and ~1000 z-scores)."""
    assert abs(z_spread_at_bound(0.0, 1000, "fixed") - 1.0) < 0.1
    assert z_spread_at_bound(0.0, 1000, "free") < 0.85  # conservative
    assert 0.9 < z_spread_at_bound(4.0, 3000, "free") < 1.25
    assert z_spread_at_bound(4.0, 3000, "fixed") > 1.4  # overconfident


@pytest.mark.fewer_optimizations
def test_a_poisson_fit_with_a_nan_count_has_no_error_bars():
    """The Poisson pcov (the inverse Fisher information) reads the model, not the
    counts: a row whose counts hold a NaN still gets NaN, not the information at p0."""
    rng = np.random.default_rng(5)
    t = np.linspace(0.0, 3.0, 20)
    truth = np.array([40.0, 1.2, 3.0]) * rng.uniform(0.9, 1.1, (3, 3))
    counts = rng.poisson(np.stack([numpy_model(exponential)(t, *p) for p in truth]))
    counts = counts.astype(float)
    counts[1, 4] = np.nan
    fixed = np.array([False, False, True])
    start = np.where(fixed, truth, 1.1 * truth)
    _, pcov, result = fixedopt.curve_fit(
        exponential, t, counts, start, fixed=np.tile(fixed, (3, 1)), batched=True,
        estimator="poisson", result=True,
    )  # fmt: skip
    pcov = np.asarray(pcov)
    assert np.asarray(result.solution.status)[1] == fixedopt.Status.NONFINITE
    assert np.all(np.isnan(pcov[1][np.ix_(~fixed, ~fixed)]))
    assert np.all(pcov[1][fixed] == 0) and np.all(np.isfinite(pcov[[0, 2]]))


def test_full_output_is_scipys_per_fit_and_works_under_jit():
    f, t, y, _, start, _ = simulate("exponential", 3, seed=5)
    popt, _, info, mesg, ier = fixedopt.curve_fit(f, t, y, start, batched=True,
                                                     full_output=True)  # fmt: skip
    assert ier.shape == (3,) and set(ier.tolist()) <= {1, 2, 3, 4}
    assert len(mesg) == 3 and all(m.startswith("CONVERGED (") for m in mesg)
    assert info["fvec"].shape == (3, 40) and info["fjac"].shape == (3, 3, 40)
    assert info["qtf"].shape == (3, 3) and info["ipvt"].tolist() == [[1, 2, 3]] * 3
    residual = np.asarray(jax.vmap(lambda p, y: f(t, *p) - y)(popt, y))
    np.testing.assert_allclose(info["fvec"], residual, rtol=1e-12, atol=1e-15)
    # R^T R = J^T J at popt: fjac holds R as scipy's leastsq reads it (triu(fjac.T[:k]))
    r = np.triu(np.swapaxes(np.asarray(info["fjac"]), 1, 2)[:, :3])
    jacobian = np.asarray(jax.vmap(jax.jacfwd(lambda p: f(t, *p)))(popt))
    np.testing.assert_allclose(r.transpose(0, 2, 1) @ r, jacobian.transpose(0, 2, 1) @ jacobian,
                               rtol=1e-10)  # fmt: skip
    traced = jax.jit(lambda y: fixedopt.curve_fit(f, t, y, start, batched=True,
                                                  full_output=True)[4])(y)  # fmt: skip
    np.testing.assert_array_equal(traced, ier)
    one = fixedopt.curve_fit(f, t, y[0], start[0], full_output=True)
    assert isinstance(one[3], str) and isinstance(one[4], int) and one[4] in (1, 2, 3, 4)
