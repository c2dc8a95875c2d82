"""Flax parameters: ``fixedopt.mask_from`` and masks mirroring an ``nnx.State``.

A Flax ``nnx.Param`` is a pytree node that forwards ``dtype`` and ``shape`` to the array it
wraps. A mask built with the parameters' structure (``nnx.map_state``) has such nodes too:
they must be traversed, not mistaken for mask leaves. The references are closed forms: on
a separable quadratic the free entries go to their targets, fixed entries stay bit-identical.
``mask_from`` is checked against masks written out by hand from the parameters' paths.
"""

import dataclasses
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx

import fixedopt

# Closed forms to 1e-8 (a standard error to 1e-12 of sqrt(0.5)), fixed entries' bits (a
# select), masks and tree structures: nothing a backend optimization changes (conftest.py).
pytestmark = pytest.mark.fewer_optimizations


@jax.tree_util.register_dataclass
@dataclasses.dataclass
class Wrapped:
    """A pytree node that, like ``nnx.Param``, exposes its array's dtype and shape."""

    value: jax.Array

    @property
    def dtype(self):
        return self.value.dtype

    @property
    def shape(self):
        return self.value.shape


def _quadratic(target):
    return lambda x: sum(jnp.sum((a - b) ** 2) for a, b in zip(jax.tree.leaves(x), target))


def test_wrapper_nodes_with_dtype_are_traversed_by_minimize():
    x0 = {"w": Wrapped(jnp.array([1.0, 2.0, 3.0])), "b": Wrapped(jnp.array([-1.0]))}
    fixed = {"w": Wrapped(jnp.array([True, False, True])), "b": Wrapped(jnp.array([False]))}
    target = [jnp.array([5.0]), jnp.array([4.0, 5.0, 6.0])]  # leaves in key order: b, w
    sol = fixedopt.minimize(_quadratic(target), x0, fixed)
    np.testing.assert_array_equal(sol.x["w"].value[jnp.array([0, 2])], jnp.array([1.0, 3.0]))
    np.testing.assert_allclose(sol.x["w"].value[1], 5.0, atol=1e-8)
    np.testing.assert_allclose(sol.x["b"].value, [5.0], atol=1e-8)


def _flax_params():
    model = nnx.Linear(3, 2, rngs=nnx.Rngs(0))
    _, params = nnx.split(model, nnx.Param)
    return jax.tree.map(lambda a: a.astype(jnp.float64), params)


def test_keep_fixed_takes_an_nnx_state_mask_per_element():
    params = _flax_params()
    kernel_col0 = jnp.array([True, False])  # freeze the kernel entries of output unit 0
    fixed = fixedopt.mask_from(params, nnx.PathContains("kernel"), kernel_col0)
    tx = fixedopt.keep_fixed(optax.adamw(0.1, weight_decay=0.5), fixed)
    loss = lambda p: sum(jnp.sum((leaf - 1.0) ** 2) for leaf in jax.tree.leaves(p))
    state, new = tx.init(params), params
    for _ in range(5):
        updates, state = tx.update(jax.grad(loss)(new), state, new)
        new = optax.apply_updates(new, updates)
    kernel, kernel0 = new["kernel"].get_value(), params["kernel"].get_value()
    np.testing.assert_array_equal(kernel[:, 0], kernel0[:, 0])  # bit-identical
    assert np.all(kernel[:, 1] != kernel0[:, 1])
    assert np.all(new["bias"].get_value() != params["bias"].get_value())


def test_minimize_takes_an_nnx_state_and_mask():
    params = _flax_params()
    fixed = fixedopt.mask_from(params, nnx.PathContains("bias"), True)
    target = [jnp.zeros(2), jnp.full((3, 2), 2.0)]  # leaves in key order: bias, kernel
    sol = fixedopt.minimize(_quadratic(target), params, fixed)
    np.testing.assert_array_equal(sol.x["bias"].get_value(), params["bias"].get_value())
    np.testing.assert_allclose(sol.x["kernel"].get_value(), 2.0, atol=1e-8)


def test_a_solution_on_an_nnx_state_remembers_its_mask_for_the_covariance():
    """``sol.fixed`` is an ``nnx.State`` like ``sol.x`` (its Variables holding boolean
    arrays); ``hessian_covariance(sol, fun)`` reads it: 0 on the fixed bias, and on the
    separable quadratic ``sum((x - 2)^2)`` (Hessian 2) the variance ``1 / 2``."""
    params = _flax_params()
    fixed = fixedopt.mask_from(params, nnx.PathContains("bias"), True)
    fun = _quadratic([jnp.zeros(2), jnp.full((3, 2), 2.0)])
    sol = fixedopt.minimize(fun, params, fixed)
    assert isinstance(sol.fixed, nnx.State)
    assert jax.tree.structure(sol.fixed) == jax.tree.structure(sol.x)
    np.testing.assert_array_equal(sol.fixed["bias"].get_value(), [True, True])
    cov = fixedopt.hessian_covariance(sol, fun)
    np.testing.assert_array_equal(cov.stderr["bias"].get_value(), [0.0, 0.0])
    np.testing.assert_allclose(cov.stderr["kernel"].get_value(), np.sqrt(0.5), rtol=1e-12)
    assert "fixed" in str(fixedopt.report(sol))


class _Net(nnx.Module):
    def __init__(self, rngs):
        self.dense = nnx.Linear(3, 4, rngs=rngs)
        self.norm = nnx.BatchNorm(4, rngs=rngs)


def test_mask_from_a_path_filter_per_element():
    _, params, _ = nnx.split(_Net(nnx.Rngs(0)), nnx.Param, ...)
    units = jnp.array([True, False, False, True])
    mask = fixedopt.mask_from(
        params, nnx.All(nnx.PathContains("dense"), nnx.PathContains("kernel")), units
    )
    assert jax.tree.structure(mask) == jax.tree.structure(params)
    expected = {("dense", "kernel"): np.broadcast_to(units, (3, 4))}
    for path, variable in nnx.to_flat_state(mask):
        want = expected.get(path, np.zeros(variable.shape, bool))
        np.testing.assert_array_equal(variable.get_value(), want)


def test_mask_from_a_variable_type():
    state = nnx.state(_Net(nnx.Rngs(0)))  # params and batch statistics
    mask = fixedopt.mask_from(state, nnx.BatchStat)
    for path, variable in nnx.to_flat_state(mask):
        assert bool(variable.get_value().all()) == (path[-1] in ("mean", "var")), path
        assert bool(variable.get_value().any()) == (path[-1] in ("mean", "var")), path


def test_mask_from_a_linen_style_dict():
    params = {"params": {"Dense_0": {"kernel": jnp.ones((2, 3)), "bias": jnp.ones(3)}}}
    mask = fixedopt.mask_from(params, nnx.PathContains("kernel"), jnp.array([[True], [False]]))
    np.testing.assert_array_equal(mask["params"]["Dense_0"]["kernel"], [[True] * 3, [False] * 3])
    np.testing.assert_array_equal(mask["params"]["Dense_0"]["bias"], [False] * 3)


def test_masks_from_filters_reuse_the_compiled_step():
    params = _flax_params()
    tx = optax.adam(0.1)

    @jax.jit
    def step(params, state, fixed):
        grads = jax.tree.map(jnp.ones_like, params)
        updates, state = fixedopt.keep_fixed(tx, fixed).update(grads, state, params)
        return optax.apply_updates(params, updates), state

    state = fixedopt.keep_fixed(tx, True).init(params)
    for filter in (nnx.PathContains("kernel"), nnx.PathContains("bias")):
        fixed = fixedopt.mask_from(params, filter)
        new, state = step(params, state, fixed)
        for path, variable in nnx.to_flat_state(new):
            moved = variable.get_value() != params[path[0]].get_value()
            assert bool(moved.any()) != (path[0] == filter.key), path
    assert step._cache_size() == 1


def test_mask_from_bad_input_is_named():
    params = _flax_params()
    with pytest.raises(ValueError, match=r"`filter`.*selects no parameter"):
        fixedopt.mask_from(params, nnx.PathContains("kernal"))
    with pytest.raises(ValueError, match=r"`elements`.*kernel.*\(3, 2\).*\(5,\)"):
        fixedopt.mask_from(params, nnx.PathContains("kernel"), jnp.ones(5, bool))
    with pytest.raises(TypeError, match="`elements` must be a bool or a boolean array, got int"):
        fixedopt.mask_from(params, nnx.PathContains("kernel"), jnp.ones(2, int))


def test_import_fixedopt_does_not_import_flax():
    code = "import sys, fixedopt; assert 'flax' not in sys.modules, 'flax imported'"
    subprocess.run([sys.executable, "-c", code], check=True)
