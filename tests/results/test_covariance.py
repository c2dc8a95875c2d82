"""``fixedopt.covariance`` against ``scipy.optimize.curve_fit`` and lmfit.

References: ``curve_fit`` (``method="lm"``, analytic Jacobian, tight tolerances) on
the reduced function of each row, whose only parameters are the free ones (fixed ones
closed over, as a curve_fit user would write it), and lmfit with ``vary=False`` on
the fixed parameters. Each starts from fixedopt's solution and re-fits, so the
comparison also checks that both reach the same optimum.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.optimize

import fixedopt

# scipy's and lmfit's covariances within tolerances far above rounding (XLA's expensive
# backend optimizations off, conftest.py).
pytestmark = pytest.mark.fewer_optimizations

T = np.linspace(0.0, 4.0, 40)
TRUTH = np.array([2.0, 1.3, 0.5, 0.4])  # amplitude, rate, offset, slope


def model(p, t=T):
    return p[0] * jnp.exp(-p[1] * t) + p[2] + p[3] * t


def residual(p, y, sigma):
    return (model(p) - y) / sigma


@functools.cache
def jitted():
    return jax.jit(model), jax.jit(jax.jacfwd(model))


def make_rows(batch, seed, noise=0.05):
    """Truth, noisy data, per-point sigma, a fixed mask (rows differ) and a start."""
    rng = np.random.default_rng(seed)
    truth = TRUTH * (1.0 + 0.1 * rng.normal(size=(batch, 4)))
    sigma = noise * rng.uniform(0.5, 1.5, (batch, T.size))
    data = np.asarray(jax.vmap(model)(jnp.asarray(truth))) + sigma * rng.normal(size=sigma.shape)
    fixed = rng.random((batch, 4)) < 0.3
    fixed[0] = False  # a row with nothing fixed
    start = np.where(fixed, truth, truth * (1.0 + 0.1 * rng.normal(size=truth.shape)))
    return truth, data, sigma, fixed, start


def fit(data, sigma, fixed, start, **options):
    return fixedopt.least_squares(
        residual, jnp.asarray(start), jnp.asarray(fixed), args=(data, sigma), batched=True,
        gtol=1e-12, max_steps=200, **options,
    )  # fmt: skip


def curve_fit_row(x, fixed, y, sigma, absolute_sigma, frozen=None):
    """curve_fit on the free (and not frozen) parameters of one row: (popt, pcov)."""
    free = ~fixed if frozen is None else ~(fixed | frozen)
    model_jit, jacobian_jit = jitted()

    def full(z):
        p = x.copy()
        p[free] = z
        return p

    return scipy.optimize.curve_fit(
        lambda t, *z: np.asarray(model_jit(full(np.array(z)))),
        T, y, p0=x[free], sigma=sigma, absolute_sigma=absolute_sigma, method="lm",
        jac=lambda t, *z: np.asarray(jacobian_jit(full(np.array(z))))[:, free],
        ftol=1e-15, xtol=1e-15, gtol=0.0,
    )  # fmt: skip


@pytest.mark.parametrize("absolute_sigma", [False, True])
def test_stderr_and_covariance_match_curve_fit_per_row(absolute_sigma):
    _, data, sigma, fixed, start = make_rows(12, seed=1)
    solution = fit(data, sigma, fixed, start)
    ones = jnp.ones_like(data)  # plain residuals; the weights come from sigma=
    result = fixedopt.covariance(
        solution, residual, jnp.asarray(fixed), args=(data, ones), batched=True,
        sigma=sigma, absolute_sigma=absolute_sigma,
    )  # fmt: skip
    x, stderr, cov = (np.asarray(a) for a in (solution.x, result.stderr, result.covariance))
    assert not np.any(np.asarray(result.rank_deficient))
    np.testing.assert_array_equal(np.asarray(result.dof), T.size - (~fixed).sum(axis=1))
    for b in range(len(x)):
        free = ~fixed[b]
        popt, pcov = curve_fit_row(x[b], fixed[b], data[b], sigma[b], absolute_sigma)
        np.testing.assert_allclose(popt, x[b][free], rtol=1e-7)
        np.testing.assert_allclose(stderr[b][free], np.sqrt(np.diag(pcov)), rtol=1e-6)
        np.testing.assert_allclose(cov[b][np.ix_(free, free)], pcov, rtol=1e-6, atol=1e-14)


def test_sigma_argument_equals_weighted_residuals():
    """``sigma=`` on unweighted residuals is the same as residuals divided by sigma,
    and, as in curve_fit, a common factor on sigma changes nothing without
    ``absolute_sigma``."""
    _, data, sigma, fixed, start = make_rows(6, seed=2)
    solution = fit(data, sigma, fixed, start)
    ones = jnp.ones_like(data)
    weighted = fixedopt.covariance(solution, residual, fixed, args=(data, sigma), batched=True)
    for factor in (1.0, 3.0):
        plain = fixedopt.covariance(
            solution, residual, fixed, args=(data, ones), batched=True, sigma=factor * sigma
        )
        np.testing.assert_allclose(plain.covariance, weighted.covariance, rtol=1e-10)


def test_stderr_matches_lmfit_with_vary_false():
    lmfit = pytest.importorskip("lmfit")
    _, data, sigma, fixed, start = make_rows(6, seed=3)
    solution = fit(data, sigma, fixed, start)
    stderr = np.asarray(
        fixedopt.covariance(solution, residual, fixed, args=(data, sigma), batched=True).stderr
    )
    x = np.asarray(solution.x)
    for b in range(len(x)):
        params = lmfit.Parameters()
        for k in range(4):
            params.add(f"p{k}", value=x[b, k], vary=not fixed[b, k])

        def vector(params):
            return np.array([params[f"p{k}"].value for k in range(4)])

        def weighted(params, b=b):
            return (np.asarray(jitted()[0](vector(params))) - data[b]) / sigma[b]

        def jacobian(params, b=b):  # analytic, like curve_fit's: no finite differences
            full = np.asarray(jitted()[1](vector(params))) / sigma[b][:, None]
            return full[:, ~fixed[b]]

        out = lmfit.minimize(
            weighted, params, method="leastsq", Dfun=jacobian, xtol=1e-15, ftol=1e-15
        )
        for k in np.flatnonzero(~fixed[b]):
            np.testing.assert_allclose(stderr[b, k], out.params[f"p{k}"].stderr, rtol=1e-6)
        for k in np.flatnonzero(fixed[b]):
            assert out.params[f"p{k}"].stderr in (None, 0.0) and stderr[b, k] == 0.0


def test_at_bound_fixed_holds_bound_active_parameters_with_zero_variance():
    """The offset's upper bound lies below every row's true offset, so it is active;
    with ``at_bound="fixed"`` the rest matches curve_fit with the offset removed as
    well."""
    _, data, sigma, fixed, start = make_rows(8, seed=4)
    fixed[:, 2] = False
    lower = np.array([-np.inf, -np.inf, -np.inf, -np.inf])
    upper = np.array([np.inf, np.inf, 0.2, np.inf])
    start = np.minimum(start, upper)
    solution = fit(data, sigma, fixed, start, bounds=(lower, upper))
    result = fixedopt.covariance(
        solution, residual, fixed, args=(data, sigma), batched=True, bounds=(lower, upper),
        at_bound="fixed",
    )  # fmt: skip
    x, stderr, cov = (np.asarray(a) for a in (solution.x, result.stderr, result.covariance))
    at_bound = np.asarray(result.at_bound)
    np.testing.assert_array_equal(at_bound[:, 2], True)
    frozen = fixed | at_bound
    assert np.all(stderr[frozen] == 0.0)
    for b in range(len(x)):
        assert np.all(cov[b][frozen[b], :] == 0.0) and np.all(cov[b][:, frozen[b]] == 0.0)
        assert np.all(stderr[b][~frozen[b]] > 0.0)
        _, pcov = curve_fit_row(x[b], fixed[b], data[b], sigma[b], False, at_bound[b])
        np.testing.assert_allclose(stderr[b][~frozen[b]], np.sqrt(np.diag(pcov)), rtol=1e-6)
        assert result.dof[b] == T.size - (~frozen[b]).sum()


def bounded_rows(seed):
    """Rows whose offset's upper bound lies below every true offset: active."""
    _, data, sigma, fixed, start = make_rows(8, seed=seed)
    fixed[:, 2] = False
    bounds = (np.full(4, -np.inf), np.array([np.inf, np.inf, 0.2, np.inf]))
    solution = fit(data, sigma, fixed, np.minimum(start, bounds[1]), bounds=bounds)
    return solution, data, sigma, fixed, bounds


def assert_same_covariance(result, reference):
    for mine, theirs in zip(jax.tree.leaves(result), jax.tree.leaves(reference)):
        np.testing.assert_array_equal(mine, theirs)


@pytest.mark.parametrize("at_bound", ["free", "fixed"])
def test_a_solution_brings_its_mask_bounds_and_active_set(at_bound):
    """``covariance(sol, residual_fun, args=...)``: the mask, the bounds (with the
    solve's own active set) and the batch come from the Solution; the same arrays as
    with all of them restated (the active set then from ``J^T r``)."""
    solution, data, sigma, fixed, bounds = bounded_rows(seed=4)
    remembered = fixedopt.covariance(solution, residual, args=(data, sigma), at_bound=at_bound)
    restated = fixedopt.covariance(
        solution, residual, fixed, args=(data, sigma), batched=True, bounds=bounds,
        at_bound=at_bound,
    )  # fmt: skip
    assert_same_covariance(remembered, restated)
    np.testing.assert_array_equal(remembered.at_bound, solution.at_bound)
    np.testing.assert_array_equal(remembered.fixed, fixed)


def test_a_given_mask_is_the_one_used():
    """A mask other than the solve's (here one more parameter held at its fitted
    value) is used as given: the covariance of ``x`` alone with that mask."""
    solution, data, sigma, fixed, bounds = bounded_rows(seed=5)
    more = fixed.copy()
    more[:, 3] = True
    given = fixedopt.covariance(solution, residual, more, args=(data, sigma))
    alone = fixedopt.covariance(
        solution.x, residual, more, args=(data, sigma), batched=True, bounds=bounds
    )
    assert_same_covariance(given, alone)
    assert np.all(np.asarray(given.stderr)[:, 3] == 0.0)
    with pytest.raises(TypeError, match="`fixed` is required when `sol` is not a"):
        fixedopt.covariance(solution.x, residual, args=(data, sigma), batched=True)


def test_on_a_bound_with_an_inward_gradient_is_free_everywhere():
    """One definition of "at a bound" (``fixedopt._fixing.mask.active_set``): both rows start
    on the slope's lower bound 0 and take no step; row 0's data pull the slope up
    (into the box: the bound does not hold it), row 1's push it down (the bound holds
    it). The solve's ``at_bound``, the covariance from the Solution and from ``x``
    alone, and the report agree; with ``at_bound="fixed"`` only row 1's slope is
    held. (Before, the covariance and the report flagged every entry equal to a
    bound, row 0's slope too, which the implicit derivative treated as free.)"""
    t = jnp.linspace(0.0, 1.0, 8)
    line = lambda p, y: p[0] * t + p[1] - y
    y = jnp.stack([2.0 * t + 1.0, -2.0 * t + 1.0])
    x0 = jnp.array([[0.0, 1.0], [0.0, 1.0]])
    bounds = (jnp.array([0.0, -jnp.inf]), jnp.array([jnp.inf, jnp.inf]))
    sol = fixedopt.least_squares(line, x0, False, args=(y,), batched=True, bounds=bounds,
                                 max_steps=0)  # fmt: skip
    expected = [[False, False], [True, False]]
    np.testing.assert_array_equal(sol.at_bound, expected)
    remembered = fixedopt.covariance(sol, line, args=(y,), at_bound="fixed")
    alone = fixedopt.covariance(sol.x, line, False, args=(y,), batched=True, bounds=bounds,
                                at_bound="fixed")  # fmt: skip
    for result in (remembered, alone):
        np.testing.assert_array_equal(result.at_bound, expected)
        stderr = np.asarray(result.stderr)
        assert stderr[0, 0] > 0.0 and stderr[1, 0] == 0.0
    notes = [[cells[3] for cells in fixedopt.report(sol, row).table] for row in (0, 1)]
    assert notes == [["", ""], ["at bound", ""]]


def scipy_pseudo_inverse(jacobian, residual, dof):
    """scipy's ``curve_fit`` (``least_squares`` branch): ``VT.T / s**2 @ VT`` with the
    cut-off ``eps * max(m, n) * s_max``, times ``s^2``."""
    _, s, vt = np.linalg.svd(jacobian, full_matrices=False)
    kept = s > np.finfo(float).eps * max(jacobian.shape) * s[0]
    return (vt[kept].T / s[kept] ** 2) @ vt[kept] * (residual @ residual / dof)


def test_rank_deficient_free_block_is_scipys_pseudo_inverse():
    """``p[0] + p[1]`` enters only as a sum: not identifiable unless one is fixed (row
    0); the pseudo-inverse, as scipy's ``curve_fit`` with ``least_squares``, for the
    parameter the data determine (``p[2]``), ``inf`` for the two they cannot (scipy:
    an error bar of 1.6e-5 for each, though any split of the sum fits as well)."""
    t = jnp.linspace(0.0, 1.0, 10)
    y = jnp.stack([2.0 * t + 1.0 + 0.01 * jnp.sin(9 * t), 2.0 * t + 1.0, 2.0 * t + 1.1])
    line = lambda p, y: (p[0] + p[1]) * t + p[2] - y
    fixed = jnp.array([[False, False, False], [False, True, False], [True, False, False]])
    x = jnp.array([[1.0, 1.0, 1.0], [1.0, 1.0, 1.0], [0.5, 1.5, 1.1]])
    result = fixedopt.covariance(x, line, fixed, args=(y,), batched=True)
    np.testing.assert_array_equal(result.rank_deficient, [True, False, False])
    jacobian = np.stack([t, t, np.ones_like(t)], axis=1)
    residual = np.asarray(line(x[0], y[0]))
    reference = scipy_pseudo_inverse(jacobian, residual, 10 - 3)
    np.testing.assert_allclose(result.covariance[0, 2, 2], reference[2, 2], rtol=1e-10)
    undetermined = np.array([True, True, False])
    either = undetermined[:, None] | undetermined[None, :]
    assert np.all(np.isinf(result.covariance[0][either]))
    np.testing.assert_array_equal(np.isinf(result.stderr[0]), undetermined)
    assert np.all(np.isfinite(result.covariance[1:]))
    assert result.stderr[1, 1] == 0.0 and result.stderr[2, 0] == 0.0
    held = fixedopt.covariance(x, line, fixed, args=(y,), batched=True, pseudo_inverse=False)
    assert np.all(np.isinf(held.covariance[0]))  # leastsq's convention: inf
    np.testing.assert_array_equal(held.covariance[1:], result.covariance[1:])


def test_a_parameter_the_model_ignores_keeps_the_others_error_bars():
    """An absent peak: its amplitude 0 makes its centre's column exactly 0. The centre
    gets ``inf`` variance (scipy's pseudo-inverse: 0) and the other parameters the
    error bars of the model without it, its dof counting all three (as scipy's);
    leastsq's convention, inf for all."""
    t = jnp.linspace(-2.0, 2.0, 30)
    y = 1.5 * jnp.exp(-(t**2)) + 0.05 * jnp.cos(7 * t)
    peaks = lambda p, y: p[0] * jnp.exp(-(t**2)) + p[1] * jnp.exp(-((t - p[2]) ** 2)) - y
    x = jnp.array([1.5, 0.0, 1.0])
    result = fixedopt.covariance(x, peaks, False, args=(y,))
    reduced = fixedopt.covariance(x[:2], lambda p, y: peaks(jnp.append(p, 1.0), y), False,
                                  args=(y,))  # fmt: skip
    assert bool(result.rank_deficient)
    # s^2 divides by m - 3 (scipy's m - p0.size), the reduced model's by m - 2:
    expected = reduced.covariance * (30 - 2) / (30 - 3)
    np.testing.assert_allclose(result.covariance[:2, :2], expected, rtol=1e-12)
    assert np.all(np.isinf(result.covariance[2])) and np.all(np.isinf(result.covariance[:, 2]))
    held = fixedopt.covariance(x, peaks, False, args=(y,), pseudo_inverse=False)
    assert np.all(np.isinf(held.covariance))


def test_a_row_with_empty_bounds_has_no_covariance():
    """Bounds known only under jit, empty on a free entry of row 1: that row reports
    INFEASIBLE at its start (x0, no fit) and its free block is NaN; row 0 is fitted.
    The same x alone (no status) gets the covariance at that point."""
    t = jnp.linspace(0.0, 1.0, 10)
    y = jnp.stack([2.0 * t + 1.0 + 0.01 * jnp.sin(7 * t), 2.0 * t + 1.0])
    line = lambda p, y: p[0] * t + p[1] + p[2] - y
    fixed = jnp.array([[False, False, True]] * 2)
    lower = jnp.array([[0.0, 0.0, 0.0], [0.0, 3.0, 0.0]])
    upper = jnp.array([[5.0, 5.0, 5.0], [5.0, 2.0, 5.0]])

    @jax.jit
    def solve(lower, upper):
        return fixedopt.least_squares(line, jnp.ones((2, 3)), fixed, args=(y,),
                                      bounds=(lower, upper), batched=True)  # fmt: skip

    sol = solve(lower, upper)
    status = [fixedopt.Status(int(s)) for s in sol.status]
    assert status == [fixedopt.Status.CONVERGED, fixedopt.Status.INFEASIBLE]
    result = fixedopt.covariance(sol, line, args=(y,))
    assert np.all(np.isnan(result.covariance[1, :2, :2])) and np.all(result.stderr[1, 2] == 0)
    alone = fixedopt.covariance(sol.x, line, fixed, args=(y,), batched=True)
    np.testing.assert_array_equal(result.covariance[0], alone.covariance[0])
    assert np.all(np.isfinite(alone.covariance[1]))


def test_pytree_parameters_under_jit_match_the_flat_vector():
    _, data, sigma, fixed, start = make_rows(4, seed=5)
    solution = fit(data, sigma, fixed, start)
    flat = fixedopt.covariance(solution, residual, fixed, args=(data, sigma), batched=True)
    x = np.asarray(solution.x)
    tree = {"decay": jnp.asarray(x[:, :2]), "line": {"offset": x[:, 2], "slope": x[:, 3]}}
    mask = {"decay": fixed[:, :2], "line": {"offset": fixed[:, 2], "slope": fixed[:, 3]}}

    def tree_residual(p, y, s):
        vector = jnp.stack([p["decay"][0], p["decay"][1], p["line"]["offset"],
                            p["line"]["slope"]])  # fmt: skip
        return residual(vector, y, s)

    @jax.jit
    def compute(tree, mask, data, sigma):
        return fixedopt.covariance(tree, tree_residual, mask, args=(data, sigma), batched=True)

    result = compute(tree, mask, jnp.asarray(data), jnp.asarray(sigma))
    # ravel order: leaves sorted by key, "decay" (2 entries), then offset, slope.
    line = result.index["line"]
    order = np.concatenate([np.asarray(result.index["decay"]), [line["offset"], line["slope"]]])
    np.testing.assert_array_equal(order, [0, 1, 2, 3])
    np.testing.assert_allclose(result.covariance, flat.covariance, rtol=1e-12, atol=1e-300)
    np.testing.assert_allclose(result.stderr["line"]["slope"], flat.stderr[:, 3], rtol=1e-12)
    corr = np.asarray(flat.correlation())
    assert np.all(np.abs(corr) <= 1.0 + 1e-12)
    np.testing.assert_allclose(np.diagonal(corr, axis1=1, axis2=2), np.where(fixed, 0.0, 1.0))


def test_one_sigma_intervals_cover_the_truth_68_percent_of_the_time():
    """2400 synthetic fits with known truth and per-row fixed sets: the interval
    ``x +- stderr`` holds the truth in 68% +- 3% of the (row, free parameter) pairs,
    pooled and per parameter."""
    truth, data, sigma, fixed, start = make_rows(2400, seed=6, noise=0.02)
    solution = fit(data, sigma, fixed, start)
    result = fixedopt.covariance(solution, residual, fixed, args=(data, sigma), batched=True)
    assert np.all(np.asarray(solution.status) != fixedopt.Status.NONFINITE)
    x, stderr = np.asarray(solution.x), np.asarray(result.stderr)
    covered = np.abs(x - truth) <= stderr
    free = ~fixed
    assert abs(covered[free].mean() - 0.68) < 0.03, covered[free].mean()
    for k in range(4):
        assert free[:, k].sum() > 1500
        assert abs(covered[free[:, k], k].mean() - 0.68) < 0.03, (k, covered[free[:, k], k].mean())


def test_bad_arguments_are_named():
    x = jnp.zeros((2, 3))
    line = lambda p, y: p - y
    with pytest.raises(TypeError, match="absolute_sigma"):
        fixedopt.covariance(x, line, False, args=(x,), batched=True, absolute_sigma=1)
    with pytest.raises(TypeError, match="sigma"):
        fixedopt.covariance(x, line, False, args=(x,), batched=True, sigma=jnp.ones(3, int))
    with pytest.raises(ValueError, match="`sigma` must have the leading batch axis of size 2"):
        fixedopt.covariance(x, line, False, args=(x,), batched=True, sigma=jnp.ones(3))
    with pytest.raises(ValueError, match="args"):
        fixedopt.covariance(x, line, False, args=(jnp.zeros(3),), batched=True)
    with pytest.raises(ValueError, match="fixed"):
        fixedopt.covariance(x, line, jnp.zeros(3, bool), args=(x,), batched=True)


def test_standard_errors_are_differentiable():
    """``jax.grad`` of the standard errors with respect to the point (fixed value
    included) and the data agrees with central differences (the zero columns of
    fixed entries would make an SVD's derivative NaN; the QR route is not)."""
    _, data, sigma, fixed, start = make_rows(2, seed=7)
    fixed[1] = [False, True, False, False]
    solution = fit(data, sigma, fixed, start)
    x, y, s = solution.x[1], jnp.asarray(data[1]), jnp.asarray(sigma[1])

    def total(x, y):
        return jnp.sum(fixedopt.covariance(x, residual, jnp.asarray(fixed[1]), args=(y, s)).stderr)

    grad_x, grad_y = jax.grad(total, argnums=(0, 1))(x, y)
    h = 1e-6
    for k in range(4):
        step = h * jnp.eye(4)[k]
        central = (total(x + step, y) - total(x - step, y)) / (2 * h)
        np.testing.assert_allclose(grad_x[k], central, rtol=1e-5, atol=1e-9)
    for i in (0, 13, 39):
        step = h * jnp.eye(T.size)[i]
        central = (total(x, y + step) - total(x, y - step)) / (2 * h)
        np.testing.assert_allclose(grad_y[i], central, rtol=1e-5, atol=1e-9)
    # k = 1 is fixed: the free block's errors still depend on its value (checked above).


@pytest.mark.parametrize("dtype", [jnp.float64, jnp.float32], ids=["float64", "float32"])
def test_standard_errors_follow_the_units_of_the_data(dtype):
    """Data in physical units from 1e-6 to 1e6: amplitude and offset carry the data's
    units, the rate does not. Their standard errors scale with them, and no scale
    makes the fit look rank-deficient (in float32 the raw Jacobian's columns, 1e6
    apart, would fall under ``curve_fit``'s cut-off)."""
    t = jnp.linspace(0.0, 1.0, 30, dtype=dtype)
    noise = 0.01 * np.random.default_rng(0).normal(size=t.size)

    def residuals(p, y):
        return p[0] * jnp.exp(-p[1] * t) + p[2] - y

    relative = []
    for scale in (1e-6, 1.0, 1e6):
        y = jnp.asarray(scale * (2.0 * np.exp(-3.0 * np.asarray(t)) + 0.5 + noise), dtype)
        x0 = jnp.asarray([2.0 * scale, 3.0, 0.5 * scale], dtype)
        fit = fixedopt.least_squares(residuals, x0, jnp.zeros(3, bool), args=(y,))
        result = fixedopt.covariance(fit, residuals, jnp.zeros(3, bool), args=(y,))
        assert not bool(result.rank_deficient), scale
        relative.append(np.asarray(result.stderr, np.float64) / [scale, 1.0, scale])
    tolerance = 1e-6 if dtype == jnp.float64 else 1e-2
    np.testing.assert_allclose(relative[0], relative[1], rtol=tolerance)
    np.testing.assert_allclose(relative[2], relative[1], rtol=tolerance)
