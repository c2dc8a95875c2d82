"""fix / project / mask normalization: exact zeros, exact pins, clear errors."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import fixedopt
from fixedopt._inputs.validate import normalize_fixed


def quartic(x, scale=1.0):
    # Non-separable, so a fixed entry's value matters to the free entries' gradients.
    return scale * (jnp.sum(x**4) + jnp.sum(x) ** 2 + jnp.sum(x[..., :-1] * x[..., 1:]))


X = jnp.array([0.5, -1.5, 2.0, 0.25])
FIXED = jnp.array([False, True, False, True])


def test_fix_gradient_is_zero_on_fixed_and_unchanged_on_free():
    grad = jax.grad(fixedopt.fix(quartic, FIXED, X))(X)
    reference = jax.grad(quartic)(X)
    assert np.all(np.asarray(grad)[np.asarray(FIXED)] == 0.0)
    np.testing.assert_array_equal(grad[~FIXED], reference[~FIXED])


def test_fix_pins_values_inside_the_function():
    drifted = X + 1.0
    pinned = jnp.where(FIXED, X, drifted)
    assert fixedopt.fix(quartic, FIXED, X)(drifted) == quartic(pinned)


def test_stop_gradient_outside_the_function_does_nothing():
    # The confusion fixedopt removes: stopping the gradient of the input does not
    # stop the gradient of the loss with respect to that input.
    stopped = jnp.where(FIXED, jax.lax.stop_gradient(X), X)
    assert np.all(np.asarray(jax.grad(quartic)(stopped))[np.asarray(FIXED)] != 0.0)


@pytest.mark.parametrize("transform", [jax.hessian, jax.jacfwd, jax.jacrev])
def test_fix_second_derivatives_vanish_in_fixed_rows_and_columns(transform):
    fixed_fun = fixedopt.fix(quartic, FIXED, X)
    inner = jax.grad(fixed_fun) if transform is not jax.hessian else fixed_fun
    matrix = np.asarray(transform(inner)(X))
    reference = np.asarray(jax.hessian(quartic)(X))
    fixed = np.asarray(FIXED)
    assert np.all(matrix[fixed, :] == 0.0) and np.all(matrix[:, fixed] == 0.0)
    free = ~fixed
    np.testing.assert_allclose(matrix[np.ix_(free, free)], reference[np.ix_(free, free)])


def test_fix_composes_with_jit_vmap_and_extra_args():
    rows = jnp.stack([X, 2 * X, -X])
    masks = jnp.array([[True, False, False, False], [False] * 4, [True] * 4])

    def row_grad(x, fixed):
        return jax.grad(fixedopt.fix(quartic, fixed, x))(x, 3.0)

    grads = jax.jit(jax.vmap(row_grad))(rows, masks)
    for row, fixed, grad in zip(rows, masks, grads):
        expected = jnp.where(fixed, 0.0, jax.grad(quartic)(row, 3.0))
        np.testing.assert_allclose(grad, expected, rtol=1e-14)
        assert np.all(np.asarray(grad)[np.asarray(fixed)] == 0.0)


def test_fix_on_pytrees_with_leaf_and_prefix_masks():
    params = {"w": jnp.array([[1.0, 2.0], [3.0, 4.0]]), "b": jnp.array([0.5, -0.5])}

    def loss(p):
        return jnp.sum((p["w"] @ p["b"]) ** 2) + jnp.sum(p["w"] ** 2)

    fixed = {"w": jnp.array([[True, False], [False, False]]), "b": True}
    grads = jax.grad(fixedopt.fix(loss, fixed, params))(params)
    reference = jax.grad(loss)(params)
    assert grads["w"][0, 0] == 0.0 and np.all(np.asarray(grads["b"]) == 0.0)
    np.testing.assert_array_equal(grads["w"][1], reference["w"][1])
    assert fixedopt.fix(loss, True, params)(params) == loss(params)


def test_project_pins_fixed_and_clips_free_bitwise():
    x = jnp.array([-3.0, 0.5, 7.0, -0.0, 2.0])
    fixed = jnp.array([False, True, False, True, False])
    values = jnp.array([9.0, 0.1 + 0.2, 9.0, -0.0, 9.0])
    out = fixedopt.project(x, fixed, values, bounds=(-1.0, jnp.array([1, 1, 1, 1, 1.5])))
    np.testing.assert_array_equal(out, [-1.0, 0.1 + 0.2, 1.0, -0.0, 1.5])
    assert np.signbit(out[3])


def test_project_without_bounds_and_infinite_bounds():
    x = jnp.array([-3.0, 5.0])
    assert np.array_equal(fixedopt.project(x, False, x), x)
    out = fixedopt.project(x, jnp.array([True, False]), 0.0, bounds=(-jnp.inf, 4.0))
    np.testing.assert_array_equal(out, [0.0, 4.0])


def test_project_keeps_dtype_and_casts_values():
    x = jnp.array([1.0, 2.0], dtype=jnp.float32)
    out = fixedopt.project(x, jnp.array([True, False]), jnp.array([0.1, 0.0]))
    assert out.dtype == jnp.float32 and out[0] == jnp.float32(0.1)


def test_callable_mask():
    params = {"a": jnp.ones(3), "b": jnp.ones(2)}
    mask = normalize_fixed(lambda p: {"a": p["a"] > 0, "b": False}, params)
    assert mask["b"] is False and mask["a"].dtype == jnp.bool_


# ------------------------------------------------------------------------ bad input


@pytest.mark.parametrize(
    ("fixed", "error", "words"),
    [
        (jnp.array([True, False]), ValueError, ["`fixed`", "expected (4,)", "got (2,)"]),
        (jnp.array([1.0, 0.0, 0.0, 1.0]), TypeError, ["`fixed`", "boolean", "float"]),
        ({"a": True}, ValueError, ["`fixed`", "tree prefix", "PyTreeDef"]),
        (1, TypeError, ["`fixed`", "bool", "int"]),
    ],
)
def test_bad_masks_are_named(fixed, error, words):
    with pytest.raises(error) as info:
        fixedopt.project(X, fixed, X)
    for word in words:
        assert word in str(info.value)


def test_bad_mask_raises_at_trace_time_under_jit():
    with pytest.raises(ValueError, match="`fixed`"):
        jax.jit(lambda x: fixedopt.project(x, jnp.array([True]), x))(X)


def test_mask_tree_mismatch_with_pytree_params():
    params = {"Dense": {"kernel": jnp.zeros((2, 3))}, "bias": jnp.zeros(2)}
    with pytest.raises(ValueError, match=r"`fixed` must be a tree prefix"):
        fixedopt.project(params, {"Dense": False, "other": True}, params)


def test_lower_above_upper():
    with pytest.raises(ValueError, match=r"`bounds`.*lower=2.0 > upper=1.0 at index \(1,\)"):
        fixedopt.project(X, False, X, bounds=(jnp.array([0.0, 2.0, 0, 0]), 1.0))


def test_fixed_values_outside_bounds():
    with pytest.raises(ValueError, match=r"`fixed_values`.*outside \[-1.0, 1.0\]"):
        fixedopt.project(X, FIXED, X, bounds=(-1.0, 1.0))


def test_bounds_must_be_a_pair_and_broadcastable():
    with pytest.raises(TypeError, match="`bounds` must be a pair"):
        fixedopt.project(X, False, X, bounds=1.0)
    with pytest.raises(ValueError, match=r"broadcastable.*\(4,\), got shape \(3,\)"):
        fixedopt.project(X, False, X, bounds=(jnp.zeros(3), 1.0))


@pytest.mark.parametrize("x", [{"a": "text"}, {"a": 1.0}, {"a": jnp.arange(3)}, {}], ids=str)
def test_non_array_or_non_float_leaves(x):
    with pytest.raises((TypeError, ValueError), match="`x`"):
        fixedopt.project(x, False, x)
