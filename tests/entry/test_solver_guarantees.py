"""The guarantees of DESIGN.md for ``minimize`` / ``least_squares``, for every solver.

References: the same batch without its bad rows (fault isolation), the closed form of
a reduced quadratic (pytrees), a float64 run (float32), the batched call (``vmap``),
jit cache sizes (recompilation), and the raw bits of the fixed values (exactness).
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import fixedopt
from fixedopt import Status
from fixedopt.testing import compiled_solves
from tests.helpers import SOLVERS, assert_rows_identical, bits

# A first-order method with a fixed learning rate has no model of the objective, so
# none of the relative tests applies: it stops on the absolute gradient test.
LOOSE_GTOL = {"optax_adam": {"abs_gtol": 1e-3}}


def residuals(x, target, limit):
    """Coupled residuals; NaN once ``x[0]`` exceeds ``limit`` (a NaN wall)."""
    r = jnp.concatenate([x - target, 0.3 * x[:-1] * x[1:]])
    return jnp.where(x[0] > limit, jnp.nan, r)


def objective(x, target, limit):
    return 0.5 * jnp.sum(residuals(x, target, limit) ** 2)


def entry_point(solver, scalar_fun, residual_fun):
    """``least_squares`` with the residuals for residual solvers, else ``minimize``."""
    if solver.needs_residuals:
        return fixedopt.least_squares, residual_fun
    return fixedopt.minimize, scalar_fun


def solve(name, x0, fixed, target, limit=None, **options):
    """Solve the batch with solver ``name``: least squares for the residual solvers."""
    solver = SOLVERS[name]
    limit = np.full(len(x0), np.inf) if limit is None else limit
    call, fun = entry_point(solver, objective, residuals)
    options = {**LOOSE_GTOL.get(name, {}), **options}
    args = (jnp.asarray(target), jnp.asarray(limit))
    return call(
        fun, jnp.asarray(x0), jnp.asarray(fixed), args=args, batched=True, solver=solver, **options
    )


def random_batch(seed, batch, n=5, rate=0.3):
    rng = np.random.default_rng(seed)
    fixed = rng.random((batch, n)) < rate
    return rng.normal(size=(batch, n)), fixed, rng.normal(size=(batch, n))


# --------------------------------------------------------------- (a) fault isolation


@pytest.mark.parametrize("name", list(SOLVERS))
def test_bad_rows_do_not_change_other_rows(name):
    """64 rows; rows 3, 5, 9 go bad; the others are bit-identical to a batch without
    them (both run through 8 lanes). Row 0 is all fixed: CONVERGED at step zero, its
    gradient zero, its bits kept; row 1 none fixed: CONVERGED after steps of its own."""
    x0, fixed, target = random_batch(seed=1, batch=64)
    fixed[0], fixed[1] = True, False
    limit = np.full(64, np.inf)
    fixed[3, 0] = False  # row 3 runs into a NaN wall at x[0] = 0.5 mid-solve
    x0[3, 0], target[3, 0], limit[3] = 0.0, 5.0, 0.5
    fixed[5, 1] = False
    x0[5, 1] = np.nan  # row 5: NaN objective at the start (a free NaN entry)
    target[9] = np.inf  # row 9: Inf objective at the start (bad data)
    bad = [3, 5, 9]
    good = np.setdiff1d(np.arange(64), bad)
    solution = solve(name, x0, fixed, target, limit, max_steps=300)
    alone = solve(name, x0[good], fixed[good], target[good], limit[good], max_steps=300)
    assert_rows_identical(solution, alone, good)
    status, steps = np.asarray(solution.status), np.asarray(solution.steps)
    assert status[5] == status[9] == Status.NONFINITE and steps[5] == steps[9] == 0
    # The diverging row stops as NONFINITE or holds a finite iterate short of the wall.
    row = np.asarray(solution.x)[3]
    assert status[3] == Status.NONFINITE or (
        np.all(np.isfinite(row)) and np.isfinite(solution.value[3]) and row[0] <= 0.5
    )
    np.testing.assert_array_equal(bits(solution.x)[fixed], bits(x0)[fixed])
    assert status[0] == Status.CONVERGED and int(solution.steps[0]) == 0
    assert float(solution.grad_norm[0]) == 0.0
    assert status[1] == Status.CONVERGED and int(solution.steps[1]) > 0


def straggling_batch(seed, batch=72):
    """Every 7th row starts far from its optimum: it needs many more steps."""
    x0, fixed, target = random_batch(seed=seed, batch=batch)
    target[::7] *= 30.0
    return x0, fixed, target, np.full(batch, np.inf)


@pytest.mark.parametrize("lanes", [None, 72], ids=["lanes", "whole_batch"])
@pytest.mark.parametrize("seed", range(2, 5))
def test_a_diverging_row_does_not_change_other_rows(seed, lanes):
    """Row 0 runs into a NaN wall; it must not change any other row, bit for bit:
    through lanes too, where its step count changes which lane every later row runs
    in and when (a row's arithmetic does not depend on its lane)."""
    x0, fixed, target, limit = straggling_batch(seed)
    clean = solve("lbfgs", x0, fixed, target, limit, max_steps=300, lanes=lanes)
    fixed[0, 0] = False
    x0[0, 0], target[0, 0], limit[0] = 0.0, 5.0, 0.5
    diverging = solve("lbfgs", x0, fixed, target, limit, max_steps=300, lanes=lanes)
    assert int(diverging.status[0]) != Status.CONVERGED
    others = np.arange(1, len(x0))
    assert_rows_identical(diverging, jax.tree.map(lambda a: a[1:], clean), others)


def nan_wall(x):
    """Finite up to ``x[0] = 0.5``, NaN beyond; the minimum lies beyond the wall."""
    return jnp.where(x[0] > 0.5, jnp.nan, jnp.sum((x - 5.0) ** 2))


def nan_wall_residuals(x):
    return jnp.where(x[0] > 0.5, jnp.nan, x - 5.0)


@pytest.mark.fewer_optimizations
@pytest.mark.parametrize(
    "name", ["lbfgs", "gradient_descent", "levenberg_marquardt", "gauss_newton"]
)
def test_a_row_stuck_at_a_nan_wall_stops_instead_of_running_to_max_steps(name):
    """Every move from (0.5, 0.5) along the search direction is NaN: no acceptable
    step exists. The row must report that (NONFINITE or LINESEARCH_FAILED) at its
    last finite iterate, not accept zero-length steps until ``max_steps``."""
    solver = SOLVERS[name]
    call, fun = entry_point(solver, nan_wall, nan_wall_residuals)
    solution = call(fun, jnp.zeros(2), jnp.array([False, False]), solver=solver, max_steps=1000)
    assert np.all(np.isfinite(solution.x)) and np.isfinite(solution.value)
    assert float(solution.x[0]) <= 0.5
    assert int(solution.status) in (Status.NONFINITE, Status.LINESEARCH_FAILED), (
        Status(int(solution.status)).name,
        int(solution.steps),
    )


# --------------------------------------------------------------------------- (c) float32


@pytest.mark.fewer_optimizations
@pytest.mark.parametrize("name", ["lbfgs", "levenberg_marquardt"])
def test_float32_converges_with_its_default_tolerances_and_keeps_fixed_bits(name):
    """The tolerances default to the dtype's: no float32-specific setting needed."""
    x0, fixed, target = random_batch(seed=5, batch=8)
    x0_32, target_32 = x0.astype(np.float32), target.astype(np.float32)
    limit = np.full(8, np.inf, np.float32)
    solution = solve(name, x0_32, fixed, target_32, limit)
    for field in ("x", "value", "grad_norm"):
        assert getattr(solution, field).dtype == jnp.float32, field
    assert np.all(np.asarray(solution.converged))
    np.testing.assert_array_equal(bits(solution.x)[fixed], bits(x0_32)[fixed])
    reference = solve(name, x0_32.astype(np.float64), fixed, target_32.astype(np.float64))
    np.testing.assert_allclose(solution.x, reference.x, atol=2e-3)


# -------------------------------------------------------------------------- (d) pytrees


def tree_quadratic(params, matrix, linear):
    """A quadratic in the concatenation (scale, bias, weights) of the tree."""
    x = jnp.concatenate([params["scale"][None], params["bias"], params["weights"].ravel()])
    return 0.5 * x @ matrix @ x - linear @ x


@pytest.mark.fewer_optimizations
def test_pytree_with_leaf_and_element_masks_matches_the_reduced_closed_form():
    rng = np.random.default_rng(6)
    batch, n = 6, 1 + 2 + 6
    factor = rng.normal(size=(batch, n, n))
    matrix = factor @ factor.transpose(0, 2, 1) / n + np.eye(n)
    linear = rng.normal(size=(batch, n))
    params = {
        "scale": rng.normal(size=batch),
        "bias": rng.normal(size=(batch, 2)),
        "weights": rng.normal(size=(batch, 2, 3)),
    }
    weights_fixed = rng.random((batch, 2, 3)) < 0.4
    fixed = {"scale": False, "bias": True, "weights": jnp.asarray(weights_fixed)}
    solution = fixedopt.minimize(
        tree_quadratic,
        jax.tree.map(jnp.asarray, params),
        fixed,
        args=(jnp.asarray(matrix), jnp.asarray(linear)),
        batched=True,
        gtol=1e-10,
    )
    assert jax.tree.structure(solution.x) == jax.tree.structure(params)
    np.testing.assert_array_equal(bits(solution.x["bias"]), bits(params["bias"]))
    np.testing.assert_array_equal(
        bits(solution.x["weights"])[weights_fixed], bits(params["weights"])[weights_fixed]
    )
    flat = lambda p: np.concatenate(
        [
            np.asarray(p["scale"])[:, None],
            np.asarray(p["bias"]),
            np.asarray(p["weights"]).reshape(batch, -1),
        ],
        axis=1,
    )
    flat_fixed = np.concatenate(
        [np.zeros((batch, 1), bool), np.ones((batch, 2), bool), weights_fixed.reshape(batch, -1)],
        axis=1,
    )
    x0, x = flat(params), flat(solution.x)
    for b in range(batch):
        free, pinned = ~flat_fixed[b], flat_fixed[b]
        rhs = linear[b][free] - matrix[b][np.ix_(free, pinned)] @ x0[b][pinned]
        expected = np.linalg.solve(matrix[b][np.ix_(free, free)], rhs)
        np.testing.assert_allclose(x[b][free], expected, atol=1e-8)


# ------------------------------------------------------------------ (e) vmap and jit


def test_vmap_of_the_unbatched_call_agrees_with_batched():
    """The batched solve runs the program of the float32 test's float64 reference (8
    rows, L-BFGS) again, when they run in one process. With XLA's optimizations, as a
    user runs it: the vmapped solve is another program whose rows must agree with the
    batched ones (bit for bit today; to 1e-12 asserted)."""
    x0, fixed, target = random_batch(seed=7, batch=8)
    limit = np.full(8, np.inf)
    batched = solve("lbfgs", x0, fixed, target, limit)

    def one(x0, fixed, target, limit):
        return fixedopt.minimize(objective, x0, fixed, args=(target, limit))

    arrays = tuple(map(jnp.asarray, (x0, fixed, target, limit)))
    for mapped in (jax.vmap(one)(*arrays), jax.jit(jax.vmap(one))(*arrays)):
        np.testing.assert_allclose(mapped.x, batched.x, rtol=0, atol=1e-12)
        np.testing.assert_allclose(mapped.value, batched.value, rtol=1e-12)
        np.testing.assert_array_equal(mapped.status, batched.status)


# -------------------------------------------------------------------- (f) recompilation


@pytest.mark.fewer_optimizations  # what compiles, and fixed bits (a select)
@pytest.mark.parametrize("lanes", [None, 2], ids=["whole_batch", "refilled_lanes"])
def test_new_masks_fixed_values_and_tolerances_reuse_the_compiled_solve(lanes):
    """Also through 2 lanes for 8 rows, the path with a refill (the default of
    batches over 8 rows): the masks go through it as data. The whole batch's program
    may have compiled before (the float32 test's float64 reference): the count is
    compared between the calls here."""
    x0, _, target = random_batch(seed=8, batch=8)
    limit = np.full(8, np.inf)
    rng = np.random.default_rng(8)
    settings = [
        {"fixed": rng.random(x0.shape) < 0.5, "fixed_values": None, "gtol": 1e-6},
        {"fixed": rng.random(x0.shape) < 0.5, "fixed_values": x0 + 1.0, "gtol": 1e-6},
        {"fixed": np.ones(x0.shape, bool), "fixed_values": x0 - 2.0, "gtol": 1e-8},
    ]
    sizes = []
    for setting in settings:
        values = setting["fixed_values"]
        solution = fixedopt.minimize(
            objective,
            jnp.asarray(x0),
            jnp.asarray(setting["fixed"]),
            fixed_values=None if values is None else jnp.asarray(values),
            args=(jnp.asarray(target), jnp.asarray(limit)),
            batched=True,
            gtol=setting["gtol"],
            solver=fixedopt.LBFGS(),  # a new, equal solver object each time
            lanes=lanes,
        )
        sizes.append(compiled_solves())
        pinned = x0 if values is None else values
        np.testing.assert_array_equal(
            bits(solution.x)[setting["fixed"]], bits(pinned)[setting["fixed"]]
        )
    assert sizes[1] == sizes[0] and sizes[2] == sizes[0], sizes
