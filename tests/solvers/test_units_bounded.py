"""Least-squares verdicts in any units, with bounds, and where the cost underflows
(issue 59, items 1-2). Each case stopped CONVERGED at its start on ee5305c. Bounded
``minimize`` (L-BFGS) in units 1e-6..1e6: its certification held entries in small units
at their point, and a row restarted after a rejected claim sized its first step and its
backtracking by the gradient of an entry held on its bound, and tested a curvature pair
with the ``y`` of such entries (docs/decisions.md, "Bounded L-BFGS verdicts in units
1e-6..1e6").

References: scipy's ``lsq_linear`` and trf, closed forms (exact data), the same fit in
other units, and a float64 Newton decrement."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.optimize

import fixedopt
from fixedopt import Status
from fixedopt._contract.solver import Problem
from fixedopt._numerics import reduce
from fixedopt._solvers import normal_equations
from fixedopt._solvers.lbfgs import LBFGS, held_by_margin
from fixedopt._solvers.lbfgs_memory import remember
from fixedopt._solvers.linesearch import first_step, path_slope

W = np.linspace(0.0, 1.0, 40)
SPECTRA = np.stack([np.exp(-(((W - 0.3) / 0.1) ** 2)), np.exp(-(((W - 0.6) / 0.15) ** 2))], 1)
A = np.random.default_rng(0).normal(size=(10, 3))
B = A @ np.array([1.0, -1.0, 0.5])
BOX_SOLUTION = scipy.optimize.lsq_linear(A, B, bounds=(-0.3, 0.3), tol=1e-14).x
T = np.linspace(0.0, 3.0, 25)
DECAY = 2.0 * np.exp(-1.3 * T) + 0.5


@pytest.mark.parametrize("dtype, counts", [(np.float32, 10.0), (np.float32, 100.0),
                                           (np.float32, 1e6), (np.float64, 1e4),
                                           (np.float64, 1e12)])  # fmt: skip
def test_a_bounded_unmixing_of_counts_leaves_its_start(dtype, counts):
    """Fractions in [0, 1] of two spectra times ``counts``: from (0.5, 0.5) the fit
    stopped CONVERGED after 0 steps at 100 counts in float32 (1e4 in float64)."""
    spectra = jnp.asarray(SPECTRA * counts, dtype)
    data = spectra @ jnp.asarray([0.3, 0.6], dtype)
    # The spectra are the model's xdata, not constants of its program: one program
    # for each dtype, whatever the counts.
    model = lambda spectra, f1, f2: spectra @ jnp.stack([f1, f2])
    start = jnp.asarray([0.5, 0.5], dtype)
    popt, _ = fixedopt.curve_fit(model, spectra, data, p0=start, bounds=([0, 0], [1, 1]))
    np.testing.assert_allclose(popt, [0.3, 0.6], rtol=100 * np.sqrt(np.finfo(dtype).eps))


def _linear(x, matrix, data):
    return matrix @ x - data


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("power", [-10, -4, 0, 4, 10])
def test_a_linear_fit_in_a_box_reaches_scipys_solution_in_any_units(dtype, power):
    """Residuals times ``10^power``, the solution on the bounds: the same verdict and
    the same point as scipy's ``lsq_linear`` (was CONVERGED at 0 from 30x, float32)."""
    scale = 10.0**power
    matrix, data = jnp.asarray(A * scale, dtype), jnp.asarray(B * scale, dtype)
    # The units travel as data (args): one program for each dtype, whatever the power.
    solution = fixedopt.least_squares(_linear, jnp.zeros(3, dtype), False, args=(matrix, data),
                                      bounds=(-0.3, 0.3))  # fmt: skip
    assert solution.status == Status.CONVERGED and solution.steps > 0
    np.testing.assert_allclose(solution.x, BOX_SOLUTION, atol=1e-5)


def _decay(p, y, x_unit, r_unit):
    return r_unit * (p[0] / x_unit * jnp.exp(-p[1] / x_unit * T) + p[2] / x_unit - y)


@pytest.mark.parametrize("dtype, powers", [(np.float32, (-10, -5, 0, 5, 10)),
                                           (np.float64, (-20, -10, 0, 10, 20))])  # fmt: skip
@pytest.mark.parametrize("start", [[1.0, 0.5, 0.0], [10.0, 1.0, 0.0]])  # inside, on bounds
@pytest.mark.parametrize("solver", [fixedopt.LevenbergMarquardt(), fixedopt.GaussNewton()])
def test_verdicts_of_a_bounded_fit_are_the_same_in_any_units(dtype, powers, start, solver):
    """A decay whose rate's bound [0, 1] holds it (truth 1.3) from a start inside the
    box and one on its bounds: residuals, parameters and both in units ``10^k``; every
    row reaches scipy's float64 solution and reports it CONVERGED."""
    lower, upper = np.zeros(3), np.array([10.0, 1.0, 10.0])
    residual = lambda p: p[0] * np.exp(-p[1] * T) + p[2] - DECAY
    reference = scipy.optimize.least_squares(residual, np.asarray(start), bounds=(lower, upper),
                                             xtol=1e-15, ftol=1e-15, gtol=1e-15).x  # fmt: skip
    units = [(10.0**k if axis != "r" else 1.0, 10.0**k if axis != "x" else 1.0)
             for axis in ("r", "x", "both") for k in powers]  # fmt: skip
    x_unit, r_unit = (np.array(u) for u in zip(*units))
    x0 = np.asarray(start) * x_unit[:, None]
    bounds = (lower * x_unit[:, None], upper * x_unit[:, None])
    solution = fixedopt.least_squares(
        _decay, jnp.asarray(x0, dtype), False, batched=True, solver=solver, args_axes=(None, 0, 0),
        args=(jnp.asarray(DECAY, dtype), jnp.asarray(x_unit, dtype), jnp.asarray(r_unit, dtype)),
        bounds=tuple(jnp.asarray(b, dtype) for b in bounds))  # fmt: skip
    assert np.all(solution.status == Status.CONVERGED), solution.status
    assert np.all(solution.steps > 0)
    x = np.asarray(solution.x, np.float64) / x_unit[:, None]
    np.testing.assert_allclose(x, np.broadcast_to(reference, x.shape),
                               rtol=100 * np.sqrt(np.finfo(dtype).eps), atol=1e-6)  # fmt: skip


def _problem(lower, upper):
    n = len(lower)
    return Problem(None, jnp.zeros(n, bool), jnp.zeros(n), jnp.asarray(lower), jnp.asarray(upper))


def test_the_cosine_holds_only_entries_a_bound_holds():
    """On its lower bound with the gradient pointing out: held (0). On it with the
    gradient pointing in: the whole cosine. Inside, a step the box cuts to the share q:
    the cosine times sqrt(q (2 - q)). Against the cosine computed by hand."""
    problem = _problem([0.0, 0.0, 0.0], [1.0, 1.0, 1.0])
    columns, norm = jnp.array([4.0, 4.0, 4.0]), jnp.asarray(2.0)
    cosine = lambda x, g: float(normal_equations.cosine(problem, x, g, columns, norm))
    assert cosine(jnp.array([0.0, 0.5, 0.5]), jnp.array([3.0, 0.0, 0.0])) == 0.0
    assert cosine(jnp.array([0.0, 0.5, 0.5]), jnp.array([-3.0, 0.0, 0.0])) == 3.0 / 4.0
    # from 0.5, the step -g/|J|^2 = 1.0 upward is cut to 0.5: q = 0.5
    inside = cosine(jnp.array([0.5, 0.5, 0.5]), jnp.array([-4.0, 0.0, 0.0]))
    np.testing.assert_allclose(inside, 4.0 / 4.0 * np.sqrt(0.5 * 1.5), rtol=1e-6)


@pytest.mark.parametrize("r_unit, x_unit", [(1e-20, 1.0), (1e20, 1.0), (1.0, 1e-20),
                                            (1.0, 1e20), (1e15, 1e-15)])  # fmt: skip
def test_the_cosine_is_the_same_in_any_units(r_unit, x_unit):
    """Residuals times ``r_unit`` and parameters times ``x_unit`` scale ``g`` by
    ``r_unit^2 / x_unit``, ``|J_j|`` by ``r_unit / x_unit``, ``|r|`` by ``r_unit``."""
    x, g = jnp.array([0.0, 0.2, 0.9]), jnp.array([1.0, -3.0, -2.0])
    columns, norm = jnp.array([1.0, 2.0, 3.0]), jnp.asarray(1.5)
    plain = normal_equations.cosine(_problem([0.0] * 3, [1.0] * 3), x, g, columns, norm)
    scaled = normal_equations.cosine(
        _problem([0.0] * 3, [x_unit] * 3), x * x_unit, g * r_unit**2 / x_unit,
        columns * (r_unit / x_unit) ** 2, norm * r_unit)  # fmt: skip
    np.testing.assert_allclose(scaled, plain, rtol=1e-12)
    assert float(plain) > 0.1  # not held: the test measures something


@pytest.mark.parametrize("dtype, unit", [(np.float32, 1e-20), (np.float64, 1e-155)])
def test_a_fit_whose_cost_underflows_is_solved(dtype, unit):
    """``x - t`` from ``[1, 1] s`` to ``t = [5, -3] s``: ``|r|^2`` underflows, and the
    start was returned CONVERGED (PRECISION) with value 0. Levenberg–Marquardt now
    compares its reductions in a power of two of ``|r|``; Gauss–Newton does not claim
    its start."""
    target = jnp.asarray(np.array([5.0, -3.0]) * unit, dtype)
    start = jnp.asarray(np.array([1.0, 1.0]) * unit, dtype)
    solution = fixedopt.least_squares(lambda x, t: x - t, start, False, args=(target,))
    assert solution.status == Status.CONVERGED
    np.testing.assert_allclose(np.asarray(solution.x, np.float64) / unit, [5.0, -3.0], rtol=1e-6)
    newton = fixedopt.least_squares(lambda x, t: x - t, start, False, args=(target,),
                                    solver=fixedopt.GaussNewton())  # fmt: skip
    solved = np.allclose(np.asarray(newton.x, np.float64) / unit, [5.0, -3.0], rtol=1e-3)
    assert solved or newton.status != Status.CONVERGED


def test_a_line_in_units_of_1e_20_is_fitted_in_float32():
    """``curve_fit`` on a line in units of 1e-20 returned its start, CONVERGED."""
    t = np.linspace(0.0, 1.0, 10, dtype=np.float32)
    data = jnp.asarray((2.0 * t + 1.0) * 1e-20, jnp.float32)
    popt, _ = fixedopt.curve_fit(lambda t, a, b: a * t + b, t, data,
                                 p0=jnp.asarray([1e-20, 1e-20], jnp.float32))  # fmt: skip
    np.testing.assert_allclose(np.asarray(popt, np.float64) / 1e-20, [2.0, 1.0], rtol=1e-4)


def test_norms_and_relative_steps_do_not_underflow():
    """A vector of 1e-25 in float32 has a norm (its squares underflow); the relative
    step of two such vectors is their ratio, not 0; both bit-identical in range."""
    tiny = jnp.array([3e-25, 4e-25], jnp.float32)
    np.testing.assert_allclose(reduce.scaled_norm(tiny), 5e-25, rtol=1e-6)
    np.testing.assert_allclose(normal_equations.residual_norm(tiny), 5e-25, rtol=1e-6)
    problem = _problem([-np.inf] * 2, [np.inf] * 2)
    ratio = normal_equations.relative_step_size(problem, tiny, 2 * tiny, jnp.ones(2, jnp.float32))
    np.testing.assert_allclose(ratio, 2.0, rtol=1e-6)
    plain = jnp.array([3.0, 4.0], jnp.float32)
    assert normal_equations.residual_norm(plain) == jnp.linalg.norm(plain)


def _quartic(x, a, b, w, units):
    z = x / units
    return 0.5 * z @ (a @ z) - b @ z + 0.25 * jnp.sum(w * z**4)


def _quartic_rows(seed, rows, n=6):
    """The verdict audit's bounded quartic (commit 5c06669, ``benchmarks/verdict_audit.py``):
    units 1e-6..1e6 per entry, ``A``'s eigenvalues 1..1e3, upper bounds that cut the
    minimum in some entries, 25% of the entries fixed; float32."""
    rng = np.random.default_rng(seed)
    units = 10.0 ** rng.uniform(-6, 6, (rows, n))
    q = np.linalg.qr(rng.normal(size=(rows, n, n)))[0]
    a = q @ (10.0 ** rng.uniform(0, 3, (rows, n, 1)) * np.swapaxes(q, 1, 2))
    b = rng.normal(size=(rows, n)) * 10.0
    w = rng.uniform(0.01, 1, (rows, n))
    lower, upper = -3 * units, units * rng.uniform(0.05, 3, (rows, n))
    x0 = units * rng.uniform(-1, 0, (rows, n))
    fixed = rng.random((rows, n)) < 0.25
    single = lambda v: np.asarray(v, np.float32)
    return tuple(map(single, (a, b, w, units))), single(x0), fixed, single(lower), single(upper)


def _exact_test(x, a, b, w, units, fixed, lower, upper):
    """``sqrt(g'H^-1 g / (2|f|))`` in float64 with the exact gradient and Hessian, on the
    free entries not on a bound that the gradient pushes against."""
    a, b, w, units, x = (np.asarray(v, np.float64) for v in (a, b, w, units, x))
    z = x / units
    grad = (a @ z - b + w * z**3) / units
    hessian = (a + np.diag(3 * w * z**2)) / np.outer(units, units)
    value = 0.5 * z @ a @ z - b @ z + 0.25 * np.sum(w * z**4)
    held = fixed | ((x <= lower) & (grad > 0)) | ((x >= upper) & (grad < 0))
    g, h = grad[~held], hessian[np.ix_(~held, ~held)]
    return np.sqrt(g @ np.linalg.solve(h, g) / (2 * abs(value)))


def test_bounded_minimize_in_units_far_apart_converges_only_at_the_minimum():
    """Eight float32 rows (64-bit mode off): row 1 stopped CONVERGED (GTOL) at 56 steps
    with the exact test 1,029 ``sqrt(eps)``: its entries in units 8e-5 and 2e-5 lie
    within the solver's bound margin (1e-3) anywhere in their box, and the check held
    them at their point. Every CONVERGED row now passes the exact test within 10
    ``sqrt(eps)`` (the audit's bar); fixed entries come back bit-identical."""
    args, x0, fixed, lower, upper = _quartic_rows(3, 8)
    with jax.enable_x64(False):
        solution = fixedopt.minimize(_quartic, x0, fixed, bounds=(lower, upper), args=args,
                                     batched=True)  # fmt: skip
        x, status = np.asarray(solution.x), np.asarray(solution.status)
    assert np.array_equal(x[fixed], x0[fixed])
    assert np.sum(status == Status.CONVERGED) >= 7, status
    bar = 10 * np.sqrt(np.finfo(np.float32).eps)
    for row in np.flatnonzero(status == Status.CONVERGED):
        parts = (v[row] for v in (*args, fixed, lower, upper))
        assert _exact_test(x[row], *parts) <= bar, row


@pytest.mark.parametrize("seed", [5, 10])
def test_bounded_minimize_restarted_next_to_a_held_entry_reaches_the_minimum(seed):
    """Sixteen float32 rows: after a rejected claim a row starts again with ``H0 = I``,
    and its first step ``|f| / |g|^2`` and its backtracking's slope counted the gradient
    of an entry held on its bound; the trials then changed ``f`` by rounding and the row
    stopped STALLED far from the minimum (seed 5: rows 0 and 1, exact test 378 and 41
    ``sqrt(eps)``; seed 10: row 2 at 4 steps, 956). Every row now ends within 10
    ``sqrt(eps)`` by the exact test, CONVERGED, or STALLED at the minimum: since the
    two-metric margin is in each entry's units, seed 10's rows 1 and 8 reach the minimum
    after a rejected claim, where the restart's ``H0 = I`` cannot lower ``f`` beyond its
    rounding (exact tests 0.30 and 0.0023 ``sqrt(eps)``; docs/decisions.md, "L-BFGS's
    two-metric margin in the parameters' units"); fixed entries come back bit-identical."""
    args, x0, fixed, lower, upper = _quartic_rows(seed, 16)
    with jax.enable_x64(False):
        solution = fixedopt.minimize(_quartic, x0, fixed, bounds=(lower, upper), args=args,
                                     batched=True)  # fmt: skip
        x, status = np.asarray(solution.x), np.asarray(solution.status)
    assert np.array_equal(x[fixed], x0[fixed])
    bar = 10 * np.sqrt(np.finfo(np.float32).eps)
    for row in range(16):
        parts = (v[row] for v in (*args, fixed, lower, upper))
        assert status[row] in (Status.CONVERGED, Status.STALLED), row
        assert _exact_test(x[row], *parts) <= bar, row
    assert np.sum(status == Status.CONVERGED) >= 14, status


def test_a_held_entry_counts_in_neither_the_first_step_nor_the_slope():
    """Entry 0 on its upper bound with the gradient pushing past it (-1e6), entry 1 free
    (gradient 2), entry 2 fixed: the first step is ``|f| / 2^2`` and the projected path's
    slope along ``-g`` is ``-4``, as without entry 0; off its bound entry 0 counts."""
    fixed = jnp.array([False, False, True])
    lower, upper = jnp.full(3, -1.0), jnp.ones(3)
    problem = Problem(None, fixed, jnp.zeros(3), lower, upper)
    grad, value = jnp.array([-1e6, 2.0, 5.0]), jnp.asarray(8.0)
    on_bound, inside = jnp.array([1.0, 0.0, 0.0]), jnp.array([0.5, 0.0, 0.0])
    direction = jnp.where(fixed, 0.0, -grad)
    assert first_step(problem, on_bound, value, grad) == 2.0
    assert path_slope(problem, on_bound, grad, direction) == -4.0
    np.testing.assert_allclose(first_step(problem, inside, value, grad), 8e-12, rtol=1e-6)
    np.testing.assert_allclose(path_slope(problem, inside, grad, direction), -1e12, rtol=1e-6)


def test_a_pair_is_tested_for_curvature_on_the_entries_the_step_could_move():
    """Entry 0 held on its bound (not moved; its gradient changed by 1, rounding of a
    large one), entry 1 moved by 1e-6 with curvature 1e-2 along it: stored, where the
    held entry's ``y`` made ``y.y`` 1 and the pair was dropped (``s.y / y.y`` 1e-14 and
    ``cos(s, y)`` 1e-8, both below float32's epsilon). Row 211 of the float32 audit,
    restarted at its minimum after a rejected claim with one entry inside its box, stored
    no pair in 993 steps and ran to ``max_steps`` (docs/decisions.md, "Bounded L-BFGS
    verdicts in units 1e-6..1e6")."""
    x = jnp.zeros(2, jnp.float32)
    state = LBFGS(memory_size=3).init(Problem(None, jnp.zeros(2, bool), x), x, 0.0, x)
    s, y = jnp.array([0.0, 1e-6], jnp.float32), jnp.array([1.0, 1e-8], jnp.float32)
    slot, held = jnp.zeros((), jnp.int32), jnp.array([True, False])
    assert remember(state, s, y, jnp.asarray(True), slot, 3, False).pairs == 0
    stored = remember(state, s, y, jnp.asarray(True), slot, 3, False, held=held)
    assert stored.pairs == 1
    np.testing.assert_allclose(stored.rho[0], 1e14, rtol=1e-5)


def test_the_two_metric_margin_is_in_each_entrys_units():
    """The same row in units 1e-6, 1 and 1e6: entry 0 is a tenth of its box's width (4)
    from its upper bound, entries 1 and 2 an eighth of a thousandth of it, entry 2 with
    a scaled step (``0.5 |g|``) that falls short of the bound, entry 3 as close with the
    gradient pointing into the box (toward its lower bound, 4 away). Only entry 1 is
    held, in every unit: the margin ``min(|pg|_inf, 1e-3)`` held all four in units 1e-6
    (the whole box lies within 1e-3 of either bound), entries 1 and 2 in units 1 and
    none in units 1e6 (docs/decisions.md, "L-BFGS's two-metric margin in the
    parameters' units")."""
    for unit in (1e-6, 1.0, 1e6):
        lower, upper = jnp.full(4, -3.0 * unit), jnp.full(4, unit)
        problem = Problem(None, jnp.zeros(4, bool), jnp.zeros(4), lower, upper)
        x = unit * jnp.array([0.6, 0.9995, 0.9995, 0.9995])
        grad = jnp.array([-1.0, -1.0, -1e-4, 1.0]) / unit  # scaled steps 0.5, 0.5, 5e-5
        held = held_by_margin(problem, x, grad, 0.5 * unit**2 * jnp.ones(4))
        assert held.tolist() == [False, True, False, False], unit
