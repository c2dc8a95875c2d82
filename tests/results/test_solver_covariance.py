"""``curve_fit``'s covariance from its solver's ``J^T J`` at ``x``
(``fixedopt._results.solver_covariance``): the matrix is ``J^T J`` of the weighted
residuals at the returned ``x`` (also of rows that stopped while others ran on in the
lanes), the covariance is the one from the Jacobian evaluated again (fixed, bound-active,
undetermined, collinear and NaN rows included), a batch whose rows are all certified
compiles no covariance program with the model, and that program is compiled ahead, in
fixedopt's thread, from the call's start."""

import jax.numpy as jnp
import numpy as np
import pytest

import fixedopt
from fixedopt._driver import ahead
from fixedopt._entry.minimize import solved_least_squares
from fixedopt._results import covariance as covariance_module
from fixedopt._results import solver_covariance
from fixedopt.testing import no_compiles_ahead
from tests.helpers import compiling_threads, persistent_cache

_T = np.linspace(0.0, 3.0, 30)
_ROWS = 24


def _model(t, a, rate, c, d):
    return a * jnp.exp(-rate * t) + c + d * t


def _jacobian(p, sigma):
    """The weighted residuals' Jacobian, analytic (NumPy, float64)."""
    e = np.exp(-p[1] * _T)
    columns = np.stack([e, -p[0] * _T * e, np.ones_like(_T), _T], axis=1)
    return columns / sigma[:, None]


def _data():
    rng = np.random.default_rng(3)
    truth = rng.uniform([1.0, 0.5, 0.1, -0.2], [2.0, 2.0, 0.5, 0.2], (_ROWS, 4))
    truth[3, 2] = -0.3  # its offset ends on the bound 0 (bound-active)
    truth[5, 0] = 0.0  # amplitude fixed at 0: the rate is undetermined (a zero column)
    fixed = rng.random((_ROWS, 4)) < 0.2
    fixed[3] = False
    fixed[5] = [True, False, False, False]
    fixed[7] = [False, True, False, False]  # rate fixed at 0: a and c collinear
    truth[7, 1] = 0.0
    y = _model(_T, *truth.T[:, :, None]) + 0.02 * rng.normal(size=(_ROWS, _T.size))
    y = np.array(y)
    y[9, 4] = np.nan  # left out (nan_policy="omit": its sigma inf)
    start = np.where(fixed, truth, truth * rng.uniform(0.8, 1.2, truth.shape))
    start[3, 2] = 0.1  # inside the bounds
    sigma = rng.uniform(0.01, 0.03, (_ROWS, _T.size))
    return start, fixed, y, sigma


def _fit(side, **options):
    start, fixed, y, sigma = _data()
    old = solver_covariance.ENABLED
    solver_covariance.ENABLED = side
    try:
        with pytest.warns(Warning, match=r"2 of 24 fits \(5, 7\)"):  # the existing warning
            return fixedopt.curve_fit(_model, _T, y, start, sigma=sigma, fixed=fixed, batched=True,
                                      bounds=([-np.inf, -np.inf, 0.0, -np.inf], np.inf),
                                      nan_policy="omit", result=True, **options)  # fmt: skip
    finally:
        solver_covariance.ENABLED = old


def test_the_normal_matrix_is_jtj_at_the_returned_x():
    """Of every row, through two lanes (rows stop while others step on): relative to the
    matrix's largest entry, to float64 rounding; one iterate earlier differs by far more."""
    start, fixed, y, sigma = _data()
    y, sigma = np.nan_to_num(y, nan=0.0), np.where(np.isnan(y), np.inf, sigma)

    def residual(p, y):
        return _model(_T, *p) - y

    sol = solved_least_squares(True, residual, jnp.asarray(start), jnp.asarray(fixed),
                               args=(jnp.asarray(y),), sigma=jnp.asarray(sigma), batched=True,
                               lanes=2)  # fmt: skip
    x, normal = np.asarray(sol.x), np.asarray(sol.normal)
    assert len(set(np.asarray(sol.steps).tolist())) > 1  # rows stopped at different trips
    for b in range(_ROWS):
        jacobian = np.where(fixed[b], 0.0, _jacobian(x[b], sigma[b]))
        expected = jacobian.T @ jacobian
        scale = np.max(np.abs(expected))
        np.testing.assert_allclose(normal[b], expected, rtol=0, atol=1e-12 * scale, err_msg=b)


@pytest.mark.parametrize("options", [{}, {"absolute_sigma": True, "at_bound": "fixed"}])
def test_the_covariance_is_the_one_from_the_jacobian(options):
    """Row by row, with the path that evaluates the Jacobian again, to the certificate's
    accuracy (a relative error of at most sqrt(eps) / 16 each: 1e-9 in float64); inf and
    NaN where it has them; the same flags."""
    popt, pcov, found = _fit(True, **options)
    popt_b, pcov_b, found_b = _fit(False, **options)
    # The same solve (same steps and statuses), in two programs: XLA may round their
    # loops apart in the last bits on AVX-512 (the Levenberg-Marquardt state's two walk
    # leaves moved 4 rows of 24 by up to 4.6e-14 of their value; equal under AVX2).
    assert np.array_equal(found.solution.steps, found_b.solution.steps)
    assert np.array_equal(found.solution.status, found_b.solution.status)
    np.testing.assert_allclose(popt, popt_b, rtol=1e-12, atol=0)
    pcov, pcov_b = np.asarray(pcov), np.asarray(pcov_b)
    np.testing.assert_array_equal(np.isfinite(pcov), np.isfinite(pcov_b))
    np.testing.assert_array_equal(np.isinf(pcov), np.isinf(pcov_b))
    finite = np.isfinite(pcov_b)
    # sqrt(var_i var_j); 0 beside a fixed parameter's 0 and an undetermined one's inf
    scale = np.sqrt(np.abs(np.einsum("bii,bjj->bij", pcov_b, pcov_b)))[finite]
    scale = np.nan_to_num(scale, nan=0.0, posinf=0.0)
    assert np.all(np.abs(pcov[finite] - pcov_b[finite]) <= 2e-9 * scale)
    assert np.all(np.isinf(pcov[5, 1, 1]))  # undetermined rate
    assert np.all(np.isinf(pcov[7][np.ix_([0, 2], [0, 2])]))  # collinear: scipy's, inf
    assert np.asarray(found.covariance.at_bound)[3, 2]
    for field in ("rank_deficient", "dof", "at_bound", "fixed"):
        mine, theirs = getattr(found.covariance, field), getattr(found_b.covariance, field)
        np.testing.assert_array_equal(mine, theirs, err_msg=field)
    np.testing.assert_allclose(found.covariance.residual_variance,
                               found_b.covariance.residual_variance, rtol=1e-12)  # fmt: skip
    assert found.solution.normal is None


def test_a_new_model_compiles_no_covariance_with_the_model():
    """Its rows all certified: the covariance is the solver's matrix inverted (a
    program without the model, compiled once for every model of 4 parameters)."""
    start, fixed, y, sigma = _data()
    rows = [0, 1, 2, 4, 6, 8]  # certified: full rank, finite

    def other(t, a, rate, c, d):  # a model of its own
        return a * jnp.exp(-rate * t) + c + d * t * 1.0

    for f in (_model, other):
        before = covariance_module._compiled._cache_size()
        _, pcov = fixedopt.curve_fit(f, _T, y[rows], start[rows], sigma=sigma[rows],
                                     fixed=fixed[rows], batched=True)  # fmt: skip
        assert covariance_module._compiled._cache_size() == before
        assert np.all(np.isfinite(np.asarray(pcov)))
    # one fit, as a batch of one: the batch's covariance of its row, to rounding
    _, alone = fixedopt.curve_fit(other, _T, y[1], start[1], sigma=sigma[1], fixed=fixed[1])
    assert covariance_module._compiled._cache_size() == before
    np.testing.assert_allclose(alone, np.asarray(pcov)[1], rtol=1e-6, atol=0)


@pytest.mark.compiles_ahead
def test_the_covariance_compiles_ahead_from_the_calls_start(tmp_path):
    """A batched fit's covariance program (no model in it) is lowered at the call's
    start and compiled in fixedopt's thread while the solve is traced: the call's own
    thread compiles none, and the covariance is the one the call compiles itself
    (nothing ahead), bit for bit. Persistent caches of their own (the suite's may
    hold the program). The solve is the one compiled above."""
    start, fixed, y, sigma = _data()
    rows = [0, 1, 2, 4, 6, 8]

    def fit(folder):
        solver_covariance._compiled.tuned.clear_cache()  # compiled anew, in this call
        with ahead._lock:
            for key in [k for k in ahead._started if k[0] == "covariance"]:
                del ahead._started[key]
        with persistent_cache(folder):
            return fixedopt.curve_fit(_model, _T, y[rows], start[rows], sigma=sigma[rows],
                                      fixed=fixed[rows], batched=True)[1]  # fmt: skip

    pcov, threads = compiling_threads(lambda: fit(tmp_path / "ahead"), "jit(_rows)")
    assert threads and all(name.startswith("fixedopt-ahead") for name in threads), threads
    with no_compiles_ahead():
        alone, threads = compiling_threads(lambda: fit(tmp_path / "here"), "jit(_rows)")
    assert threads == ["MainThread"], threads
    np.testing.assert_array_equal(np.asarray(pcov), np.asarray(alone))


def test_nothing_is_compiled_ahead_where_the_solve_reports_no_normal_matrix():
    """``early``: only a batch of a small float64 block (else the covariance takes
    another program, compiled by the call)."""
    options = dict(absolute_sigma=False, at_bound="free", pseudo_inverse=True)
    assert solver_covariance.early(np.zeros((24, 4)), True, **options) is not None
    assert solver_covariance.early(np.zeros((24, 9)), True, **options) is None  # n > 8
    assert solver_covariance.early(np.zeros((24, 4), np.float32), True, **options) is None
    assert solver_covariance.early(np.zeros(4), True, **options) is None  # one fit
