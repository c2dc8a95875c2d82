"""strategy="split" (index splitting) agrees with strategy="mask", exactly on fixed
entries, and compiles once per packed width."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import fixedopt
from fixedopt._objective.reparam import free_indices, packed_width
from fixedopt.testing import compiled_solves

# XLA's expensive backend optimizations off: tolerances far above rounding (conftest.py)
pytestmark = pytest.mark.fewer_optimizations


def coupled_quadratic(x, curvature, center):
    return 0.5 * jnp.sum(curvature * (x - center) ** 2) + 0.5 * jnp.sum(jnp.diff(x) ** 2)


def exponential_residuals(p, t, y):
    return p[0] * jnp.exp(-p[1] * t) + p[2] - y


def batch(seed=0, batch=24, n=12, fixed_fraction=0.6):
    rng = np.random.default_rng(seed)
    x0 = jnp.asarray(rng.uniform(-1.0, 0.4, (batch, n)))
    fixed = jnp.asarray(rng.random((batch, n)) < fixed_fraction)
    args = (jnp.asarray(rng.uniform(1, 50, (batch, n))), jnp.asarray(rng.normal(size=(batch, n))))
    return x0, fixed, args


def test_free_indices_pack_free_positions_first_and_pad_with_n():
    fixed = np.array([[True, False, True, False, False], [True, True, True, True, False]])
    index = free_indices(fixed)
    assert index.shape == (2, 4)  # 3 free entries at most -> width 4
    np.testing.assert_array_equal(index, [[1, 3, 4, 5], [4, 5, 5, 5]])
    assert packed_width(np.array([0, 0]), 5) == 1
    assert packed_width(np.array([5]), 5) == 5


@pytest.mark.parametrize("bounds", [None, (-5.0, 0.5)], ids=["free", "bounded"])
def test_split_agrees_with_mask_and_keeps_fixed_entries(bounds):
    x0, fixed, args = batch()
    solve = lambda strategy: fixedopt.minimize(
        coupled_quadratic, x0, fixed, args=args, batched=True, bounds=bounds, strategy=strategy
    )
    masked, split = solve("mask"), solve("split")
    assert bool(jnp.all(split.converged))
    np.testing.assert_allclose(split.x, masked.x, rtol=1e-9, atol=1e-9)
    np.testing.assert_array_equal(np.asarray(split.x)[np.asarray(fixed)], x0[fixed])
    np.testing.assert_allclose(split.value, masked.value, rtol=1e-12)


def test_split_least_squares_with_all_fixed_and_none_fixed_rows():
    t = jnp.linspace(0.0, 2.0, 30)
    truth = jnp.array([[2.0, 1.5, 0.3]] * 3)
    y = jax.vmap(lambda p: exponential_residuals(p, t, 0.0))(truth)
    x0 = jnp.array([[1.0, 1.0, 0.3], [2.0, 1.5, 0.3], [1.0, 0.5, 0.0]])
    fixed = jnp.array([[False, False, True], [True, True, True], [False, False, False]])
    shared_t = jnp.broadcast_to(t, (3, 30))
    solution = fixedopt.least_squares(
        exponential_residuals, x0, fixed, args=(shared_t, y), batched=True, strategy="split"
    )
    np.testing.assert_allclose(solution.x, truth, atol=1e-6)
    assert int(solution.steps[1]) == 0 and bool(solution.converged[1])


def test_split_with_a_pytree():
    x0 = {"a": jnp.zeros((4, 3)), "b": jnp.ones((4, 2))}
    fixed = {"a": jnp.array([[True, False, False]] * 4), "b": True}

    def fun(x):
        return jnp.sum((x["a"] - 2.0) ** 2) + jnp.sum(x["a"]) * jnp.sum(x["b"])

    solution = fixedopt.minimize(fun, x0, fixed, batched=True, strategy="split")
    reference = fixedopt.minimize(fun, x0, fixed, batched=True)
    np.testing.assert_allclose(solution.x["a"], reference.x["a"], atol=1e-9)
    np.testing.assert_array_equal(solution.x["b"], 1.0)


def test_split_compiles_once_per_packed_width():
    x0, _, args = batch(seed=3, fixed_fraction=0.0)

    def objective(x, curvature, center):  # a function of its own: a cache of its own
        return coupled_quadratic(x, curvature, center)

    solve = lambda fixed: fixedopt.minimize(
        objective, x0, fixed, args=args, batched=True, strategy="split"
    )
    n = x0.shape[1]
    pattern = lambda free: jnp.broadcast_to(jnp.arange(n) >= free, x0.shape)
    solve(pattern(5))  # 5 free -> width 8
    before = compiled_solves()
    solve(pattern(7))  # 7 free -> still width 8: no new compile
    assert compiled_solves() == before
    solve(pattern(9))  # 9 free -> width 12 (capped at n): one new compile
    assert compiled_solves() == before + 1


def test_split_needs_a_concrete_mask():
    x0, fixed, args = batch()

    @jax.jit
    def solve(fixed):
        return fixedopt.minimize(
            coupled_quadratic, x0, fixed, args=args, batched=True, strategy="split"
        ).x

    with pytest.raises(ValueError, match=r"`fixed` must be concrete for strategy=\"split\""):
        solve(fixed)
