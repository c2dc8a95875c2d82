"""The Gauss–Newton / Levenberg–Marquardt step against the reduced normal equations.

Reference: NumPy float64 picks the free columns ``J_F`` and solves
``(J_F^T J_F + damping diag(D_F)) p_F = -g_F`` with ``numpy.linalg.solve``, ``D`` as
``free_block_step`` defines it (``diag(J^T J)``, or the ``scale`` Levenberg–Marquardt
passes, floored at the dtype's ``tiny``), and scatters ``p_F`` into zeros. Entries that
are not free (fixed, with zero Jacobian columns, or bound-active, with non-zero ones)
must get a step of exactly 0. Masks: random, all free, one free, none free; the
damped and the undamped (``damping = 0``) step, alone and batched the way
``LevenbergMarquardt.step`` solves both in one call.

Tolerance: ``J`` has singular values in ``[1, 10]``, so ``J_F`` (a column subset) too
and ``cond(J_F^T J_F + damping D_F) <= 100``; Cholesky and LU both have forward
errors of order ``n cond eps``, about ``1e-13`` for ``n = 6`` (observed below
``1e-14``): checked at ``1e-11`` relative, in max-norm.

Every test runs on both paths: the unrolled elementwise solve of small blocks
(``fixedopt._solvers.small_linalg``, the default for these sizes) and LAPACK's.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fixedopt._numerics import backends, kernels
from fixedopt._solvers.normal_equations import cauchy_reduction, free_block_step
from tests.helpers import float16_compiles

ROWS, N = 15, 6
TOLERANCE = 1e-11


@pytest.fixture(autouse=True, scope="module", params=["unrolled", "lapack"])
def linear_algebra_path(request):
    """Module-scoped (hypothesis rejects function-scoped fixtures): set by hand."""
    # Unrolled: an accelerator's kernels (elementwise, never rolled); else none (LAPACK).
    tuned = backends.GPU.kernels if request.param == "unrolled" else kernels.PLAIN
    both_steps.clear_cache()  # traced for the other path
    with kernels.using(tuned):
        yield request.param
    both_steps.clear_cache()


def well_conditioned_jacobian(rng):
    u, _ = np.linalg.qr(rng.normal(size=(ROWS, N)))
    v, _ = np.linalg.qr(rng.normal(size=(N, N)))
    return (u * rng.uniform(1.0, 10.0, N)) @ v.T


def free_pattern(rng, pattern):
    free = rng.random(N) < rng.uniform(0.2, 0.9)
    if pattern != "random":
        free[:] = pattern == "all_free"
        free[rng.integers(N)] = pattern != "none_free"
    return free


def reference_step(jacobian, grad, free, damping, scale=None):
    diagonal = np.sum(jacobian**2, axis=0) if scale is None else scale
    diagonal = np.maximum(diagonal, np.finfo(np.float64).tiny)
    columns = jacobian[:, free]
    matrix = columns.T @ columns + damping * np.diag(diagonal[free])
    step = np.zeros(N)
    if free.any():
        step[free] = np.linalg.solve(matrix, -grad[free])
    return step


def assert_matches(actual, expected, free):
    actual = np.asarray(actual)
    scale = np.max(np.abs(expected), initial=0.0)
    assert np.max(np.abs(actual - expected)) <= TOLERANCE * scale, (actual, expected)
    np.testing.assert_array_equal(actual[~free], 0.0)


@jax.jit
def both_steps(jacobian, grad, free, damping, scale):
    """The damped and undamped steps in one batched solve, as Levenberg–Marquardt
    takes them, and the damped one alone."""
    dampings = jnp.stack([damping, jnp.zeros_like(damping)])
    pair = jax.vmap(lambda d: free_block_step(jacobian, grad, free, d, scale))(dampings)
    return pair, free_block_step(jacobian, grad, free, damping, scale)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 2**31 - 1),
    pattern=st.sampled_from(["random", "all_free", "one_free", "none_free"]),
    damping=st.sampled_from([1e-6, 1e-3, 1.0, 1e3]),
    scaled=st.booleans(),
)
def test_step_solves_the_reduced_normal_equations(seed, pattern, damping, scaled):
    rng = np.random.default_rng(seed)
    jacobian = well_conditioned_jacobian(rng)
    free = free_pattern(rng, pattern)
    zero_columns = ~free & (rng.random(N) < 0.5)  # fixed entries: zero columns
    jacobian[:, zero_columns] = 0.0  # the rest of ~free: bound-active, columns kept
    grad = jacobian.T @ rng.normal(size=ROWS)
    # Levenberg–Marquardt's scale: a running maximum, at least the current diagonal.
    scale = np.sum(jacobian**2, axis=0) * rng.uniform(1.0, 3.0, N) if scaled else None
    (damped, undamped), alone = both_steps(jacobian, grad, free, jnp.asarray(damping), scale)
    assert_matches(damped, reference_step(jacobian, grad, free, damping, scale), free)
    assert_matches(undamped, reference_step(jacobian, grad, free, 0.0, scale), free)
    assert_matches(alone, reference_step(jacobian, grad, free, damping, scale), free)


def test_a_zero_free_column_gets_a_zero_step_when_damped():
    """A free entry whose column vanished (its gradient 0 too): the step there is 0,
    elsewhere the reference, and nothing is NaN."""
    rng = np.random.default_rng(7)
    jacobian = well_conditioned_jacobian(rng)
    jacobian[:, 2] = 0.0
    free = np.ones(N, bool)
    grad = jacobian.T @ rng.normal(size=ROWS)
    step = np.asarray(free_block_step(jacobian, grad, free, 1e-3))
    assert np.all(np.isfinite(step)) and step[2] == 0.0
    assert_matches(step, reference_step(jacobian, grad, free, 1e-3), free)


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.float64])
def test_columns_of_any_units_keep_their_damping(dtype):
    """Columns scaled by ``S`` (units from 1e-6 to 1e6: squared norms 1e24 apart) with
    Moré's ``D^2 = diag(J^T J)``: the step is ``S^-1`` times the unscaled problem's, as
    in exact arithmetic. A damping weight floored at ``eps`` times the largest (the
    floor before) held the small columns still: off by a factor up to 1e4 in float32."""
    rng = np.random.default_rng(11)
    jacobian = well_conditioned_jacobian(rng)
    grad = jacobian.T @ rng.normal(size=ROWS)
    units = 10.0 ** np.array([-6.0, -3.0, 0.0, 2.0, 4.0, 6.0])
    free = np.ones(N, bool)
    plain = free_block_step(jnp.asarray(jacobian, dtype), jnp.asarray(grad, dtype), free, 1e-2)
    scaled = free_block_step(jnp.asarray(jacobian * units, dtype),
                             jnp.asarray(grad * units, dtype), free, 1e-2)  # fmt: skip
    # float32: the normal matrix's rounding, cond(J) = 10 -> ~1e-5 relative
    rtol = 1e-4 if dtype == jnp.float32 else 1e-10
    np.testing.assert_allclose(np.asarray(scaled) * units, plain, rtol=rtol)


def test_a_nan_column_makes_the_step_nan():
    """A NaN in the Jacobian reaches the step (the solver's NaN wall handles it), where
    a zero column is left out."""
    rng = np.random.default_rng(13)
    jacobian = well_conditioned_jacobian(rng)
    jacobian[3, 2] = np.nan
    grad = np.nan_to_num(jacobian).T @ rng.normal(size=ROWS)
    step = np.asarray(free_block_step(jacobian, grad, np.ones(N, bool), 1e-3))
    assert np.isnan(step).any()


FLOAT16 = pytest.param(
    jnp.float16,
    marks=pytest.mark.skipif(not float16_compiles(), reason="XLA:CPU cannot compile float16 here"),
)


@pytest.mark.parametrize("dtype", [FLOAT16, jnp.bfloat16])
def test_half_precision_is_solved_in_float32_and_returned_in_its_dtype(dtype):
    rng = np.random.default_rng(8)
    jacobian = well_conditioned_jacobian(rng)
    free = free_pattern(rng, "random")
    jacobian[:, ~free] = 0.0
    grad = jacobian.T @ rng.normal(size=ROWS)
    jacobian, grad = jnp.asarray(jacobian, dtype), jnp.asarray(grad, dtype)
    step = free_block_step(jacobian, grad, jnp.asarray(free), jnp.asarray(0.1, dtype))
    assert step.dtype == dtype
    wide = np.asarray(jacobian, np.float64), np.asarray(grad, np.float64)
    expected = reference_step(*wide, free, 0.1)
    np.testing.assert_allclose(
        np.asarray(step, np.float64), expected, rtol=2e-2, atol=1e-2 * np.abs(expected).max()
    )
    np.testing.assert_array_equal(np.asarray(step, np.float64)[~free], 0.0)


@pytest.mark.parametrize("seed", range(4))
def test_cauchy_reduction_is_the_damped_models_minimum_along_the_scaled_gradient(seed):
    """Reference: the model ``q(t) = -t g.v + t^2 v.(N + damping D^2).v / 2`` along
    ``v = D^-2 g`` (free entries), minimized over a fine grid of ``t`` in NumPy."""
    rng = np.random.default_rng(seed)
    n = 5
    jacobian = rng.normal(size=(8, n))
    normal, grad = jacobian.T @ jacobian, rng.normal(size=n)
    scale = np.diag(normal) * rng.uniform(1.0, 3.0, n)  # a running maximum: at least diag
    free = rng.random(n) < 0.7
    free[0] = True
    damping = 10.0 ** rng.uniform(-3, 1)
    v = np.where(free, grad / scale, 0.0)
    curvature = v @ normal @ v + damping * v @ (scale * v)
    t = np.linspace(0.0, 4.0 * (grad @ v) / curvature, 400001)
    reference = np.max(t * (grad @ v) - 0.5 * t**2 * curvature)
    reduction = cauchy_reduction(*map(jnp.asarray, (normal, grad, free, scale)), damping)
    np.testing.assert_allclose(float(reduction), reference, rtol=1e-9)
    nothing_free = np.zeros(n, bool)
    none = cauchy_reduction(*map(jnp.asarray, (normal, grad, nothing_free, scale)), damping)
    assert float(none) == 0.0
