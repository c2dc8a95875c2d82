"""``vectorized=True``: ``fun`` written for the lane batch gives what the per-row
``fun`` gives, row by row; misuse is a clear error."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import fixedopt
from fixedopt import Status
from tests.helpers import bits


def row_objective(x, curvature, target):
    return 0.5 * jnp.sum(curvature * (x - target) ** 2) + 0.25 * jnp.sum(jnp.diff(x) ** 4)


def batch_objective(x, curvature, target):
    value = 0.5 * jnp.sum(curvature * (x - target) ** 2, axis=1)
    return value + 0.25 * jnp.sum(jnp.diff(x, axis=1) ** 4, axis=1)


def row_residuals(x, curvature, target):
    return jnp.concatenate([jnp.sqrt(curvature) * (x - target), 0.3 * x[:-1] * x[1:]])


def batch_residuals(x, curvature, target):
    return jnp.concatenate([jnp.sqrt(curvature) * (x - target), 0.3 * x[:, :-1] * x[:, 1:]], 1)


def batch(size=40, n=6, seed=0):
    rng = np.random.default_rng(seed)
    args = (jnp.asarray(rng.uniform(1, 10, (size, n))), jnp.asarray(rng.normal(size=(size, n))))
    return jnp.asarray(rng.normal(size=(size, n))), jnp.asarray(rng.random((size, n)) < 0.3), args


def assert_same_rows(mine, theirs):
    for field in ("steps", "status"):
        np.testing.assert_array_equal(getattr(mine, field), getattr(theirs, field), field)
    np.testing.assert_allclose(mine.x, theirs.x, rtol=1e-12, atol=1e-14)


def test_minimize_agrees_with_the_per_row_objective():
    """The whole batch in its lanes (40 rows, 40 lanes: started once, never refilled);
    lanes that refill: :func:`test_shared_arguments_and_bounds`."""
    x0, fixed, args = batch()
    per_row = fixedopt.minimize(row_objective, x0, fixed, args=args, batched=True, lanes=40)
    vectorized = fixedopt.minimize(
        batch_objective, x0, fixed, args=args, batched=True, lanes=40, vectorized=True
    )
    assert bool(jnp.all(vectorized.converged))
    assert_same_rows(vectorized, per_row)
    np.testing.assert_array_equal(bits(vectorized.x)[np.asarray(fixed)], bits(x0)[fixed])


@pytest.mark.parametrize(
    ("solver", "loss"),
    [(fixedopt.LevenbergMarquardt(), "linear"), (fixedopt.GaussNewton(), "soft_l1")],
    ids=["LevenbergMarquardt-linear", "GaussNewton-soft_l1"],
)
def test_least_squares_agrees_with_the_per_row_residuals(solver, loss):
    """Each solver, each kind of loss: the loss takes the residuals ``fun`` returns,
    vectorized or not, so a solver's rows are checked once, under one loss (each pair
    more is two programs more, not another guarantee)."""
    x0, fixed, args = batch()
    options = {"args": args, "batched": True, "lanes": 8, "loss": loss, "solver": solver}
    per_row = fixedopt.least_squares(row_residuals, x0, fixed, **options)
    vectorized = fixedopt.least_squares(batch_residuals, x0, fixed, vectorized=True, **options)
    assert bool(jnp.all(vectorized.converged))
    assert_same_rows(vectorized, per_row)


def scaled_row_objective(x, curvature, target, scale):
    return scale * row_objective(x, curvature, target)


def scaled_batch_objective(x, curvature, target, scale):
    return scale * batch_objective(x, curvature, target)


def solve_shared(fun, target, vectorized):
    """40 rows through lanes that refill (the default width here: 8), an argument shared
    by every row, bounds; fixed values within them."""
    x0, fixed, (curvature, _) = batch()
    return fixedopt.minimize(
        fun, jnp.clip(x0, -0.5, 0.5), fixed, args=(curvature, target, jnp.asarray(2.0)),
        batched=True, args_axes=(0, 0, None), bounds=(-0.5, 0.5), vectorized=vectorized,
    )  # fmt: skip


def test_shared_arguments_and_bounds():
    x0, fixed, (_, target) = batch()
    per_row = solve_shared(scaled_row_objective, target, False)
    vectorized = solve_shared(scaled_batch_objective, target, True)
    assert_same_rows(vectorized, per_row)
    np.testing.assert_array_equal(bits(vectorized.x)[np.asarray(fixed)],
                                  bits(jnp.clip(x0, -0.5, 0.5))[fixed])  # fmt: skip


def test_implicit_derivative_agrees_with_the_per_row_objective():
    """The solves of :func:`test_minimize_agrees_with_the_per_row_objective`, their
    programs run again (in one process), differentiated."""
    x0, fixed, (curvature, target) = batch()

    def solve(fun, vectorized, target):
        solution = fixedopt.minimize(fun, x0, fixed, args=(curvature, target), batched=True,
                                     lanes=40, vectorized=vectorized)  # fmt: skip
        return jnp.sum(solution.x**2)

    per_row = jax.grad(lambda t: solve(row_objective, False, t))(target)
    vectorized = jax.grad(lambda t: solve(batch_objective, True, t))(target)
    np.testing.assert_allclose(vectorized, per_row, rtol=1e-10, atol=1e-12)


def test_a_nan_row_stays_in_its_row():
    """The program of :func:`test_shared_arguments_and_bounds`, run again."""
    _, _, (_, target) = batch()
    clean = solve_shared(scaled_batch_objective, target, True)
    broken = solve_shared(scaled_batch_objective, target.at[5].set(jnp.nan), True)
    assert int(broken.status[5]) == Status.NONFINITE
    others = np.arange(40) != 5
    np.testing.assert_array_equal(bits(broken.x)[others], bits(clean.x)[others])


def test_a_coupled_objective_fails_loudly():
    x0, fixed, args = batch()

    def coupled(x, curvature, target):  # every row sees the batch mean
        return batch_objective(x, curvature, target) + jnp.mean(x)

    with pytest.raises(ValueError, match="treat the rows independently"):
        fixedopt.minimize(coupled, x0, fixed, args=args, batched=True, vectorized=True)


@pytest.mark.parametrize(
    ("options", "match"),
    [({"batched": False}, "`vectorized` has no effect without batched=True"),
     ({"differentiate": "unroll"}, '`vectorized` has no effect with differentiate="unroll"'),
     ({"vectorized": 1}, "`vectorized` must be a bool"),
     ({"solver": fixedopt.LBFGS(scaling="hessian")}, "cannot run LBFGS")],
)  # fmt: skip
def test_bad_options(options, match):
    x0, fixed, args = batch()
    options = {"batched": True, "vectorized": True, **options}
    with pytest.raises((ValueError, TypeError), match=match):
        fixedopt.minimize(batch_objective, x0 if options["batched"] else x0[0],
                          fixed if options["batched"] else fixed[0],
                          args=args if options["batched"] else tuple(a[0] for a in args),
                          **options)  # fmt: skip


@pytest.mark.parametrize("jitted", [False, True])
def test_one_value_per_row_is_checked(jitted):
    """On concrete data the row check says it first; under jit, the trace-time check."""
    x0, fixed, args = batch()

    def solve(x0):
        return fixedopt.minimize(lambda x, c, t: jnp.sum(batch_objective(x, c, t)), x0, fixed,
                                 args=args, batched=True, vectorized=True)  # fmt: skip

    match = r"must return \(rows,\) for a batch of rows" if jitted else "one output per row"
    with pytest.raises(ValueError, match=match):
        (jax.jit(solve) if jitted else solve)(x0)


TIMES = jnp.linspace(0.0, 1.0, 12)


def row_decay(p):
    return p[0] * jnp.exp(-p[1] * TIMES) + p[2]


def batch_decay(p):
    times = TIMES[None, :]
    return p[:, :1] * jnp.exp(-p[:, 1:2] * times) + p[:, 2:3]


def test_poisson_counts_reach_the_likelihood_not_fun():
    """With estimator="poisson", ``fun`` returns the expected counts and never receives
    the observed ones (they are the likelihood's): vectorized as per row."""
    rng = np.random.default_rng(3)
    truth = np.array([50.0, 2.0, 5.0]) * rng.uniform(0.8, 1.2, (16, 3))
    counts = rng.poisson(np.asarray(jax.vmap(row_decay)(jnp.asarray(truth)))).astype(float)
    fixed = np.zeros((16, 3), bool)
    fixed[::2, 1] = True
    x0 = jnp.asarray(np.where(fixed, truth, 1.1 * truth))
    options = {"counts": counts, "estimator": "poisson", "batched": True, "lanes": 8}
    per_row = fixedopt.least_squares(row_decay, x0, fixed, **options)
    vectorized = fixedopt.least_squares(batch_decay, x0, fixed, vectorized=True, **options)
    assert bool(jnp.all(vectorized.converged))
    np.testing.assert_array_equal(vectorized.status, per_row.status)
    # The lane batch's Jacobian (one linearization of the batch) rounds otherwise than
    # each row's jacfwd, and these fits are less well conditioned than batch()'s: the
    # same steps reach the same x to 3e-10 here, within the default xtol (sqrt(eps), 1.5e-8).
    # With another CPU's rounding (XLA's SSE4.2 code) a test at its threshold can pass
    # one step later: row 12 took 5 steps against 4, to the same x within 1e-8.
    assert np.max(np.abs(np.asarray(vectorized.steps) - np.asarray(per_row.steps))) <= 1
    np.testing.assert_allclose(vectorized.x, per_row.x, rtol=1e-8)
    np.testing.assert_allclose(vectorized.value, per_row.value, rtol=1e-12)
    np.testing.assert_array_equal(bits(vectorized.x)[fixed], bits(x0)[fixed])


def test_curve_fit_says_it_calls_f_one_fit_at_a_time():
    p0 = jnp.ones((4, 3))
    with pytest.raises(ValueError, match="curve_fit calls `f` for one fit at a time"):
        fixedopt.curve_fit(lambda t, a, k, c: a * jnp.exp(-k * t) + c, TIMES,
                           jnp.ones((4, 12)), p0, batched=True, vectorized=True)  # fmt: skip


def test_poisson_fit_differentiates_with_respect_to_the_counts():
    """The implicit derivative through a vectorized Poisson fit is the per-row fit's.
    The rates are known (fixed): the fit of amplitude and background is well
    conditioned, so both fits reach their optimum to rounding."""
    rng = np.random.default_rng(3)
    truth = np.array([50.0, 2.0, 5.0]) * rng.uniform(0.8, 1.2, (16, 3))
    counts = jnp.asarray(rng.poisson(np.asarray(jax.vmap(row_decay)(jnp.asarray(truth)))), float)
    rates = np.tile([False, True, False], (16, 1))
    x0 = jnp.asarray(np.where(rates, truth, 1.1 * truth))

    def amplitude_sum(model, vectorized, counts):
        solution = fixedopt.least_squares(
            model, x0, rates, counts=counts, estimator="poisson", lanes=8,
            batched=True, vectorized=vectorized, gtol=1e-14, xtol=1e-14, ftol=1e-16,
        )  # fmt: skip
        return jnp.sum(solution.x[:, 0])

    per_row = jax.grad(lambda c: amplitude_sum(row_decay, False, c))(counts)
    vectorized = jax.grad(lambda c: amplitude_sum(batch_decay, True, c))(counts)
    # Both fits stop where no progress is measurable (PRECISION). On these data (those
    # of test_poisson_counts_reach_the_likelihood_not_fun, whose forward programs run
    # again) the derivatives agree to the bit (measured). On six rows of other data
    # the vectorized fit stopped one row 5e-8 (relative) from the per-row fit's point,
    # and that row's derivative was off by 2e-9 of the largest entry (the others
    # agreed to 1e-12); measured: each derivative equals -H^-1 dg/dcounts at its own
    # point to 1e-15, so a difference is the stopping point's, not the derivative's.
    scale = np.max(np.abs(per_row))
    np.testing.assert_allclose(vectorized, per_row, rtol=0, atol=1e-7 * scale)
