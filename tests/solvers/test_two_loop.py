"""The L-BFGS two-loop recursion against the inverse Hessian it stands for, materialized.

Reference: ``H`` built in NumPy float64 by the textbook BFGS update
``H <- (I - rho s y^T) H (I - rho y s^T) + rho s s^T`` from ``gamma * diag(free)``,
over the pairs the ring buffer holds, oldest first, skipped pairs (``rho = 0``) left
out: the masked inverse Hessian, zero rows and columns at fixed entries. Every ring
position is visited: the memory empty, partly filled, full, and wrapped around three
times, so the newest pair sits at every slot. Paths: the recursion with the plain
slot read and with ``read_slot``; ``two_loop_by_slots`` under ``vmap`` (the batched
program of every backend) on short and long rows; and the search direction
``LBFGS._direction`` with and without bounds.

Tolerance: the pairs come from a Hessian with eigenvalues in ``[0.5, 4]``, so ``H``
has a condition number of order 10; both computations lose ``O(m eps cond)``
relative to ``|H g|`` (sums of ``n <= 259`` terms add a ``sqrt(n)``), a few ``1e-14``
for ``m <= 6``; observed below ``1e-14``. Checked at ``1e-12``, in max-norm.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fixedopt
from fixedopt import Problem
from fixedopt._derivatives.ring import read_slot
from fixedopt._solvers.lbfgs_memory import LBFGSState, two_loop, two_loop_by_slots
from tests.helpers import heterogeneous_masks

TOLERANCE = 1e-12
# References at 1e-12 against errors below 1e-14, and exact zeros at fixed entries (the
# mask's structure): nothing a backend optimization changes (conftest.py).
pytestmark = pytest.mark.fewer_optimizations


def random_pairs(rng, free, count):
    """``count`` curvature pairs in the free subspace with ``s.y > 0``; about one in
    five is skipped (stored empty, ``rho = 0``), as ``lbfgs_memory.remember`` stores
    a pair without positive curvature."""
    n = free.size
    q, _ = np.linalg.qr(rng.normal(size=(n, n)))
    hessian = (q * rng.uniform(0.5, 4.0, n)) @ q.T
    pairs = []
    for _ in range(count):
        s = np.where(free, rng.normal(size=n), 0.0)
        y = np.where(free, hessian @ s, 0.0)
        pairs.append((s, y, bool(rng.random() >= 0.2 and s @ y > 0)))
    return pairs


def ring(pairs, memory, n):
    """The ring buffer after storing ``pairs`` one per iteration (slot = iteration %
    memory), and ``gamma = s.y / y.y`` of the last good pair (1 before any)."""
    s_history, y_history, rho, gamma = (
        np.zeros((memory, n)),
        np.zeros((memory, n)),
        np.zeros(memory),
        1.0,
    )
    for iteration, (s, y, good) in enumerate(pairs):
        slot = iteration % memory
        s_history[slot], y_history[slot] = (s, y) if good else (0.0, 0.0)
        rho[slot] = 1.0 / (s @ y) if good else 0.0
        gamma = s @ y / (y @ y) if good else gamma
    return s_history, y_history, rho, gamma


def newest_slot(count, memory):
    return (count - 1) % memory  # the slot of the last iteration (count = 0: any slot)


def inverse_hessian(pairs, memory, free, gamma):
    """The masked L-BFGS inverse Hessian, materialized by the BFGS update."""
    n = free.size
    h = gamma * np.diag(free.astype(np.float64))
    for s, y, good in pairs[-memory:]:
        if good:
            rho = 1.0 / (s @ y)
            v = np.eye(n) - rho * np.outer(y, s)  # (I - rho y s^T); its transpose on the left
            h = v.T @ h @ v + rho * np.outer(s, s)
    return h


def assert_close_and_fixed_zero(actual, expected, fixed):
    actual = np.asarray(actual)
    scale = np.max(np.abs(expected), initial=0.0)
    assert np.max(np.abs(actual - expected), initial=0.0) <= TOLERANCE * scale, (actual, expected)
    np.testing.assert_array_equal(actual[fixed], 0.0)


def fixed_pattern(rng, n, pattern):
    fixed = rng.random(n) < rng.uniform(0.1, 0.9)
    if pattern in ("none", "one_free"):
        fixed[:] = pattern == "one_free"
        fixed[rng.integers(n)] = False
    return fixed


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    memory=st.integers(1, 6),
    seed=st.integers(0, 2**31 - 1),
    pattern=st.sampled_from(["random", "none", "one_free"]),
)
@pytest.mark.parametrize("read", [None, read_slot], ids=["dynamic_slice", "read_slot"])
def test_recursion_is_the_materialized_inverse_hessian_at_every_ring_position(
    read, memory, seed, pattern
):
    rng = np.random.default_rng(seed)
    n = 7
    fixed = fixed_pattern(rng, n, pattern)
    all_pairs = random_pairs(rng, ~fixed, 3 * memory + 1)
    grad = np.where(fixed, 0.0, rng.normal(size=n))  # a masked gradient, as solvers see
    kwargs = {} if read is None else {"read": read}
    recursion = jax.jit(lambda *args: two_loop(*args, **kwargs))
    for count in range(len(all_pairs) + 1):
        pairs = all_pairs[:count]
        s_history, y_history, rho, gamma = ring(pairs, memory, n)
        newest = jnp.asarray(newest_slot(count, memory), jnp.int32)
        actual = recursion(grad, s_history, y_history, rho, newest, gamma)
        expected = inverse_hessian(pairs, memory, ~fixed, gamma) @ grad
        assert_close_and_fixed_zero(actual, expected, fixed)


def batch_of_rings(rng, batch, n, memory):
    """Per-row masks (none fixed, all fixed, one fixed, one free, random) and pairs."""
    fixed = heterogeneous_masks(rng, batch, n)
    fixed[3] = True
    fixed[3, rng.integers(n)] = False
    pairs = [random_pairs(rng, ~row, 3 * memory + 1) for row in fixed]
    grad = np.where(fixed, 0.0, rng.normal(size=(batch, n)))
    return fixed, pairs, grad


@pytest.mark.parametrize("n", [24, 259], ids=["short-rows", "long-rows"])
def test_batched_recursion_is_the_materialized_inverse_hessian_at_every_ring_position(n):
    """A batch of 19 rows, the newest slot one unbatched scalar as in the solver."""
    rng = np.random.default_rng(n)
    batch, memory = 19, 3
    fixed, row_pairs, grad = batch_of_rings(rng, batch, n, memory)
    recursion = jax.jit(jax.vmap(two_loop_by_slots, in_axes=(0, 0, 0, 0, None, 0)))
    for count in range(3 * memory + 2):
        rings = [ring(pairs[:count], memory, n) for pairs in row_pairs]
        s_history, y_history, rho, gamma = (np.stack(part) for part in zip(*rings))
        newest = jnp.asarray(newest_slot(count, memory), jnp.int32)
        actual = recursion(grad, s_history, y_history, rho, newest, gamma)
        for row in range(batch):
            h = inverse_hessian(row_pairs[row][:count], memory, ~fixed[row], gamma[row])
            assert_close_and_fixed_zero(actual[row], h @ grad[row], fixed[row])


def direction_reference(pairs, memory, fixed, at_bound, grad, gamma):
    """``-H g`` with ``H`` the inverse Hessian of the pairs restricted to the entries
    neither fixed nor at a bound; ``-gamma g`` at a bound, 0 at fixed entries."""
    free = ~fixed & ~at_bound
    restricted = []
    for s, y, good in pairs:
        s, y = np.where(free, s, 0.0), np.where(free, y, 0.0)
        restricted.append((s, y, good and s @ y > 0))
    direction = -inverse_hessian(restricted, memory, free, gamma) @ np.where(at_bound, 0.0, grad)
    return np.where(at_bound, -gamma * grad, direction)


@pytest.mark.parametrize("scaling", ["scalar", "diagonal"])
@pytest.mark.parametrize("unroll", [False, True], ids=["by-slots", "unrolled"])
@pytest.mark.parametrize("bounded", [False, True], ids=["unbounded", "bounded"])
def test_search_direction_is_minus_the_masked_inverse_hessian_times_the_gradient(
    bounded, unroll, scaling
):
    """``LBFGS._direction``: with bounds, entries at a bound the gradient pushes
    against leave the curvature pairs and take ``-gamma g``; with a diagonal initial
    inverse Hessian ``D``, ``H0 = D`` and ``-D g`` there."""
    rng = np.random.default_rng(5)
    batch, n, memory, count = 8, 9, 3, 8  # 8 pairs in 3 slots: wrapped, newest in slot 1
    fixed, row_pairs, grad = batch_of_rings(rng, batch, n, memory)
    lower, upper = rng.uniform(-3.0, -1.0, (batch, n)), rng.uniform(1.0, 3.0, (batch, n))
    x = lower + rng.uniform(0.1, 0.9, (batch, n)) * (upper - lower)
    pressed = (rng.random((batch, n)) < 0.3) & ~fixed  # at a bound the gradient pushes against
    x = np.where(pressed & (grad > 0), lower, np.where(pressed & (grad < 0), upper, x))
    rings = [ring(pairs[:count], memory, n) for pairs in row_pairs]
    s_history, y_history, rho, gamma = (np.stack(part) for part in zip(*rings))
    if scaling == "diagonal":  # scales spanning 1e6: a different H0 on every entry
        gamma = 10.0 ** rng.uniform(-3.0, 3.0, (batch, n))

    def direction(x, grad, fixed, lower, upper, s_history, y_history, rho, gamma):
        bounds = (lower, upper) if bounded else (None, None)
        differentiate = fixedopt.Unroll() if unroll else fixedopt.Implicit()
        problem = Problem(None, fixed, x, *bounds, differentiate=differentiate)
        scalar, diagonal = (gamma, jnp.ones_like(x)) if scaling == "scalar" else (1.0, gamma)
        state = LBFGSState(s_history, y_history, rho, jnp.asarray(scalar), jnp.asarray(memory),
                           grad, diagonal, jnp.asarray(True))  # fmt: skip
        slot = jnp.asarray(newest_slot(count, memory), jnp.int32)
        solver = fixedopt.LBFGS(memory_size=memory, scaling=scaling)
        return solver._direction(problem, x, grad, state, slot)

    args = (x, grad, fixed, lower, upper, s_history, y_history, rho, gamma)
    actual = jax.jit(jax.vmap(direction))(*args)
    at_bound = pressed & (grad != 0) if bounded else np.zeros_like(fixed)
    for row in range(batch):
        expected = direction_reference(
            row_pairs[row][:count], memory, fixed[row], at_bound[row], grad[row], gamma[row]
        )
        assert_close_and_fixed_zero(actual[row], expected, fixed[row])
