"""Derivatives at degenerate rows (issue 43): row-isolated, defined everywhere.

One residual function describes every row; per-row data make a row well posed,
rank-deficient (two columns that differ only by a factor: only ``p0 + 2 p1`` is
identifiable; or a column of zeros: ``p1`` enters nothing), ``NONFINITE`` (a NaN in
its data) or ``MAX_STEPS`` (a decay rate started far away). Each row's derivative in
a batch must equal the same row's solved alone, rows with no weight in the loss must
get exact zeros, and the gradient must be finite. The rank-deficient rule (the
minimum-norm derivative in units scaled to the Hessian's diagonal) is checked
against central differences of scipy's optima: MINPACK's Levenberg–Marquardt with
its column scaling (``x_scale="jac"``), whose steps never move along a flat
direction, so the point it reaches from a given start moves with the data exactly
as the rule says.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.optimize

import fixedopt

M = 12
T = np.linspace(0.0, 3.0, M)
TRUE = np.array([0.5, 0.3, 2.0, 1.2])
START = np.array([0.0, 0.0, 1.0, 0.5])
KINDS = ("well", "scaled", "absent", "nan", "slow", "well", "scaled", "absent")
MAX_STEPS = 15  # "slow" rows need ~30 steps; the others stop within 10


def residuals(p, t, u, v, y):
    return p[0] * u + p[1] * v + p[2] * jnp.exp(-p[3] * t) - y


def columns(kind):
    """``(u, v)``: independent columns, one twice the other, or ``v = 0``."""
    v = {"scaled": 2.0 * np.ones(M), "absent": np.zeros(M)}.get(kind, T)
    return np.ones(M), v


def batch(size, seed=0):
    """``(x0, u, v, y)`` of ``size`` rows cycling through :data:`KINDS`."""
    rng = np.random.default_rng(seed)
    kinds = [KINDS[i % len(KINDS)] for i in range(size)]
    u, v = map(np.array, zip(*(columns(kind) for kind in kinds)))
    y = (
        TRUE[0] * u
        + TRUE[1] * v
        + TRUE[2] * np.exp(-TRUE[3] * T)
        + 0.01 * rng.normal(size=(size, M))
    )
    x0 = np.tile(START, (size, 1))
    for i, kind in enumerate(kinds):
        if kind == "nan":
            y[i, 4] = np.nan
        if kind == "slow":
            x0[i, 3] = 60.0
    return kinds, x0, u, v, y


def solve(x0, u, v, y, t, batched):
    fixed = jnp.zeros(x0.shape, bool)
    options = {"batched": True, "args_axes": (None, 0, 0, 0)} if batched else {}
    return fixedopt.least_squares(
        residuals, x0, fixed, args=(t, u, v, y), max_steps=MAX_STEPS, **options
    )


def test_each_row_of_a_mixed_batch_has_its_own_derivative():
    """64 rows: the batch's gradient of ``sum(weights * x)`` equals, row by row, the
    gradient of the same row solved alone (to 1e-10), rows of weight 0 get exact
    zeros (NaN and rank-deficient rows included), the shared ``t`` gets the sum of the
    rows' own, and everything is finite. Forward mode is isolated too."""
    kinds, x0, u, v, y = batch(64)
    weights = np.random.default_rng(1).normal(size=(64, 4))
    weights[::9] = 0.0  # rows 0, 9, ..., 63: every kind at least once
    t = jnp.asarray(T)

    def loss(u, v, y, t):
        return jnp.sum(weights * solve(jnp.asarray(x0), u, v, y, t, batched=True).x)

    solution = solve(jnp.asarray(x0), u, v, y, t, batched=True)
    status = np.asarray(solution.status)
    expected = {"nan": fixedopt.Status.NONFINITE, "slow": fixedopt.Status.MAX_STEPS}
    for kind, code in zip(kinds, status):
        assert code == expected.get(kind, fixedopt.Status.CONVERGED), (kind, code)
    grads = jax.grad(loss, argnums=(0, 1, 2, 3))(u, v, y, t)
    assert all(np.all(np.isfinite(g)) for g in grads)

    def row_loss(x0, u, v, y, t, w):
        return jnp.sum(w * solve(x0, u, v, y, t, batched=False).x)

    # Not jitted: the one-row solve is then compiled as a plain call is, by the batch's
    # code generator, and its x is the batch row's bit for bit (inside a jit of the
    # test's own, XLA's other generator rounds differently: 4e-10 in a row that
    # stopped on ftol, which its derivative would inherit).
    row_grad = jax.grad(row_loss, argnums=(1, 2, 3, 4))
    t_total = np.zeros(M)
    for i in range(64):
        alone = row_grad(x0[i], u[i], v[i], y[i], t, weights[i])
        for batched_grad, row in zip(grads[:3], alone[:3]):
            np.testing.assert_allclose(batched_grad[i], row, rtol=1e-10, atol=1e-10)
            if not weights[i].any():
                assert np.all(np.asarray(batched_grad[i]) == 0.0)  # exactly, not 0 * nan
        t_total += np.asarray(alone[3])
    np.testing.assert_allclose(grads[3], t_total, rtol=1e-10, atol=1e-10)
    free_kinds = {kinds[i] for i in range(64) if weights[i].any()}
    assert np.all(np.asarray(grads[2])[[k == "nan" for k in kinds]] == 0.0)  # no solution
    assert {"well", "scaled", "absent", "slow"} <= free_kinds

    # Forward mode: a tangent in one row moves that row's x only.
    tangent = np.zeros_like(y)
    tangent[1] = 1.0  # a rank-deficient row
    x_dot = jax.jvp(lambda y: solve(jnp.asarray(x0), u, v, y, t, batched=True).x, (y,), (tangent,))[
        1
    ]
    x_dot = np.asarray(x_dot)
    assert np.all(np.isfinite(x_dot)) and np.any(x_dot[1] != 0.0)
    assert np.all(np.delete(x_dot, 1, axis=0) == 0.0)


def scipy_optimum(y, kind):
    u, v = columns(kind)

    def fun(p):
        return np.asarray(residuals(p, T, u, v, y))

    return scipy.optimize.least_squares(fun, START, xtol=1e-15, ftol=1e-15, gtol=1e-15).x


# What the data determine: p0 + 2 p1 (or p0 alone), p2 and p3.
IDENTIFIABLE = {"scaled": np.array([[1.0, 2.0, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]]),
                "absent": np.array([[1.0, 0, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]])}  # fmt: skip


# The tests below compare with scipy's central differences (to 5e-6) and closed forms (to
# 1e-8 and beyond), and check messages: no backend optimization changes what they see
# (conftest.py). After the first test, which compares two programs' rows to 1e-10 and
# keeps every optimization (a marked test before it would have its programs compiled again).
@pytest.mark.fewer_optimizations
@pytest.mark.parametrize("kind", ["scaled", "absent"])
def test_rank_deficient_rows_follow_the_scaled_minimum_norm_rule(kind):
    """``d x / d y`` of a rank-deficient row: what the data determine (``p0 + 2 p1``
    or ``p0``, and ``p2``, ``p3``) against central differences of scipy's optima;
    along the flat direction, the rule: no move in units scaled to the Hessian's
    diagonal (columns ``1`` and ``2``, norms ``sqrt(m)`` and ``2 sqrt(m)``: ``p0`` moves
    twice as much as ``p1``), and no move at all of a ``p1`` that nothing depends on.
    (scipy's own optima drift along the flat direction with the data: its
    Gauss-Newton steps there are basic, not minimum-norm, solutions.)"""
    _, v = columns(kind)
    y = TRUE[0] + TRUE[1] * v + TRUE[2] * np.exp(-TRUE[3] * T)
    y = y + 0.01 * np.random.default_rng(2).normal(size=M)
    u, t = np.ones(M), jnp.asarray(T)
    jacobian = jax.jacrev(
        lambda y: (
            fixedopt.least_squares(
                residuals, jnp.asarray(START), jnp.zeros(4, bool), args=(t, u, v, y), gtol=1e-12
            ).x
        )
    )(jnp.asarray(y))
    jacobian = np.asarray(jacobian)
    assert np.all(np.isfinite(jacobian))
    # scipy's optima here are good to ~1e-9 (a rank-deficient Jacobian): a wide step.
    h = 1e-3
    steps = h * np.eye(M)
    differences = [scipy_optimum(y + e, kind) - scipy_optimum(y - e, kind) for e in steps]
    expected = IDENTIFIABLE[kind] @ np.stack(differences, axis=1) / (2 * h)
    np.testing.assert_allclose(IDENTIFIABLE[kind] @ jacobian, expected, atol=5e-6)
    assert np.abs(expected).max() > 0.1
    if kind == "scaled":
        np.testing.assert_allclose(jacobian[0], 2.0 * jacobian[1], rtol=1e-8, atol=1e-12)
    else:
        assert np.all(jacobian[1] == 0.0)


def linear_residuals(x, b):
    """Two residuals, ``x2`` fixed: the fit is ``x_i = (b_i - x2 / 2) / scale_i``."""
    return jnp.array([2.0, 3.0]) * x[:2] + 0.5 * x[2] - b


@pytest.mark.fewer_optimizations
def test_unroll_from_a_converged_start_gives_the_fixed_points_derivative():
    """From the exact fit the solve moves by rounding at most, so no iteration
    carries a derivative; unrolled, the derivative is still the fixed point's (the
    closed form ``diag(1/2, 1/3)``), not 0."""
    fixed = jnp.array([False, False, True])
    b = jnp.array([1.0, -0.5])
    start = jnp.array([(1.0 - 0.25) / 2.0, (-0.5 - 0.25) / 3.0, 0.5])

    def x_of(b):
        return fixedopt.least_squares(
            linear_residuals, start, fixed, args=(b,), differentiate="unroll", max_steps=5
        ).x

    np.testing.assert_allclose(x_of(b), start, rtol=0, atol=1e-15)
    expected = np.array([[0.5, 0.0], [0.0, 1.0 / 3.0], [0.0, 0.0]])
    np.testing.assert_allclose(jax.jacrev(x_of)(b), expected, atol=1e-12)


@pytest.mark.fewer_optimizations
def test_a_closure_over_a_differentiated_value_names_args():
    def loss(c):
        fun = lambda x: jnp.sum((x - c) ** 2)
        return fixedopt.minimize(fun, jnp.zeros(2), jnp.zeros(2, bool)).x.sum()

    message = r"`fun` closes over a value that is being differentiated \(`c`\).*through `args`"
    for transform in (jax.grad, jax.jacfwd):
        with pytest.raises(ValueError, match=message):
            transform(loss)(jnp.array([1.0, 2.0]))
    # Through args it is differentiated; a closure under vmap alone is no derivative.
    through_args = lambda c: fixedopt.minimize(
        lambda x, c: jnp.sum((x - c) ** 2), jnp.zeros(2), jnp.zeros(2, bool), args=(c,)
    ).x.sum()
    np.testing.assert_allclose(jax.grad(through_args)(jnp.array([1.0, 2.0])), [1.0, 1.0], atol=1e-8)
    np.testing.assert_allclose(jax.vmap(loss)(jnp.ones((2, 2))), [2.0, 2.0], atol=1e-8)


class _Shifted:
    """A callable object holding the value differentiated as an attribute."""

    def __init__(self, c):
        self.c = c

    def __call__(self, x):
        return jnp.sum((x - self.c) ** 2)


@pytest.mark.fewer_optimizations
def test_a_callable_object_or_a_curve_fit_model_over_a_differentiated_value_names_it():
    """Issue 63: these ended in JAX's UnexpectedTracerError."""
    by_object = lambda c: fixedopt.minimize(_Shifted(c), jnp.zeros(2), False).x.sum()
    with pytest.raises(ValueError, match=r"differentiated \(its attribute `c`\).*through `args`"):
        jax.grad(by_object)(jnp.array([1.0, 2.0]))
    t = jnp.linspace(0.0, 1.0, 5)

    def fitted(c):
        model = lambda t, a: a * t + c
        return fixedopt.curve_fit(model, t, 2.0 * t, p0=[1.0])[0].sum()

    with pytest.raises(ValueError, match=r"differentiated \(`c`\)"):
        jax.grad(fitted)(1.0)


@pytest.mark.fewer_optimizations
def test_a_closure_message_names_the_argument_of_the_call_made():
    """Issue 63/64: each entry point names the argument its user passed (curve_fit's
    ``f``, least_squares' ``residual_fun``), with where the value goes instead (raised
    before anything compiles)."""
    t = jnp.linspace(0.0, 1.0, 5)

    def fitted(c, **options):
        model = lambda t, a: a * t + c
        return fixedopt.curve_fit(model, t, 2.0 * t, p0=[1.0], **options)[0].sum()

    curve_fit = r"^`f` closes over a value .*\(`c`\).* through `xdata` .*`f\(xdata, \*params\)`"
    for options in ({}, {"sigma": jnp.full(5, 0.5)}, {"estimator": "poisson"}):
        with pytest.raises(ValueError, match=curve_fit):
            jax.grad(functools.partial(fitted, **options))(1.0)
    residuals = lambda c: fixedopt.least_squares(lambda x: x - c, jnp.zeros(2), False).x.sum()
    least_squares = r"^`residual_fun` closes over .*\(`c`\).* through `args` \(`residual_fun\(x"
    with pytest.raises(ValueError, match=least_squares):
        jax.grad(residuals)(jnp.ones(2))


@pytest.mark.fewer_optimizations
def test_curve_fit_differentiates_a_value_passed_in_xdata_as_its_message_advises():
    """The advice of the message above holds: ``c`` in ``xdata`` is differentiated;
    the closed form of ``y = a t + c`` fitted for ``a`` is ``da/dc = -sum t / sum t^2``."""
    t = jnp.linspace(0.0, 1.0, 5)
    model = lambda xdata, a: a * xdata[0] + xdata[1]
    fitted = lambda c: fixedopt.curve_fit(model, (t, c), 2.0 * t + 1.0, p0=[1.0])[0][0]
    np.testing.assert_allclose(jax.grad(fitted)(1.0), -jnp.sum(t) / jnp.sum(t**2), rtol=1e-5)
