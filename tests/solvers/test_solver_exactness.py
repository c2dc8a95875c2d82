"""Fixed entries are bit-identical to their fixed values for every solver (hypothesis).

Reference: the raw bits of the fixed values, cast to the dtype of ``x0``; random mask
patterns (none fixed, all fixed, one row all fixed, random), explicit fixed values that
differ from ``x0``, starts outside the bounds, float64 and float32.
"""

import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fixedopt
from tests.helpers import SOLVERS, bits

# XLA's expensive backend optimizations off: tolerances far above rounding (conftest.py)
pytestmark = pytest.mark.fewer_optimizations

BATCH, N = 4, 5


def residuals(x, target):
    return jnp.concatenate([x - target, 0.5 * x[:-1] * x[1:], 0.1 * jnp.sum(x)[None]])


def objective(x, target):
    return 0.5 * jnp.sum(residuals(x, target) ** 2)


@st.composite
def problems(draw):
    seed = draw(st.integers(0, 2**31 - 1))
    pattern = draw(st.sampled_from(["random", "none", "all", "one_row"]))
    rng = np.random.default_rng(seed)
    fixed = rng.random((BATCH, N)) < rng.uniform(0.1, 0.9)
    if pattern == "none":
        fixed[...] = False
    elif pattern == "all":
        fixed[...] = True
    elif pattern == "one_row":
        fixed[rng.integers(BATCH)] = True
    x0 = 3.0 * rng.normal(size=(BATCH, N))  # often outside the bounds below
    values = rng.uniform(-1.5, 1.5, size=(BATCH, N))
    values[rng.random((BATCH, N)) < 0.2] = -0.0  # signed zeros must survive too
    return x0, fixed, values, 2.0 * rng.normal(size=(BATCH, N))


def solve(name, dtype, bounded, problem):
    x0, fixed, values, target = problem
    solver = SOLVERS[name]
    call, fun = (
        (fixedopt.least_squares, residuals)
        if solver.needs_residuals
        else (fixedopt.minimize, objective)
    )
    if solver.needs_residuals and bounded:
        # least_squares refuses a start outside its bounds (scipy's "x0 is infeasible");
        # minimize projects it, and keeps the start that is often outside them.
        x0 = np.clip(x0, -2.0, 2.0)
    return call(
        fun,
        jnp.asarray(x0, dtype),
        jnp.asarray(fixed),
        fixed_values=jnp.asarray(values),
        bounds=(-2.0, 2.0) if bounded else None,
        args=(jnp.asarray(target, dtype),),
        batched=True,
        solver=solver,
        gtol=1e-4,
        max_steps=200,
    )


@pytest.mark.parametrize("dtype", [jnp.float64, jnp.float32], ids=["float64", "float32"])
@pytest.mark.parametrize("name", list(SOLVERS))
@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problem=problems(), bounded=st.booleans())
def test_fixed_entries_are_bit_identical_to_their_fixed_values(name, dtype, problem, bounded):
    _, fixed, values, _ = problem
    solution = solve(name, dtype, bounded, problem)
    x = np.asarray(solution.x)
    assert x.dtype == dtype
    expected = np.asarray(values).astype(dtype)
    np.testing.assert_array_equal(bits(x)[fixed], bits(expected)[fixed])
    assert np.all(np.isfinite(x))
    if bounded:
        assert np.all((x >= -2.0) & (x <= 2.0))
    all_fixed = fixed.all(axis=1)
    assert np.all(np.asarray(solution.steps)[all_fixed] == 0)
    assert np.all(np.asarray(solution.converged)[all_fixed])
    # Free entries moved off the start (nothing was frozen that should not be).
    moving = ~all_fixed & (np.asarray(solution.steps) > 0)
    assert np.all(np.any((x != problem[0].astype(dtype)) & ~fixed, axis=1)[moving])


def bfloat16_problem():
    """One fixed batch: the first row all fixed, random masks elsewhere."""
    rng = np.random.default_rng(12)
    fixed = rng.random((BATCH, N)) < 0.4
    fixed[0] = True
    values = rng.uniform(-1.5, 1.5, size=(BATCH, N))
    return 3.0 * rng.normal(size=(BATCH, N)), fixed, values, rng.normal(size=(BATCH, N))


@pytest.mark.parametrize("name", list(SOLVERS))
def test_bfloat16_solvers_keep_fixed_bits(name):
    """bfloat16: the first-order solvers, and the least-squares ones, which form and
    solve their normal equations in float32 (on the CPU, ``J^T J``, ``J^T r`` and
    ``|r|^2`` in one reduction: ``small_linalg.normal_sums``, whose sums of two
    precisions XLA would refuse)."""
    problem = bfloat16_problem()
    solution = solve(name, jnp.bfloat16, True, problem)
    _, fixed, values, _ = problem
    assert solution.x.dtype == jnp.bfloat16
    expected = np.asarray(jnp.asarray(values, jnp.bfloat16))
    np.testing.assert_array_equal(bits(solution.x)[fixed], bits(expected)[fixed])
    assert np.all(np.isfinite(np.asarray(solution.x, np.float32)))
