"""Masks that mirror a tree of wrapper nodes, such as Flax's ``nnx.State`` of ``nnx.Param``.

A Flax ``nnx.Param`` is a pytree node that forwards ``dtype`` and ``shape`` to the array it
wraps. A mask built with the parameters' structure (``nnx.map_state``) has such nodes too:
they must be traversed, not mistaken for mask leaves. The references are closed forms: on
a separable quadratic the free entries go to their targets, fixed entries stay bit-identical.
"""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

import fixedopt


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


def _mask_from_filter(params, filter, elements):
    selected = nnx.filterlib.to_predicate(filter)

    def leaf(path, variable):
        chosen = selected(path, variable)
        mask = (
            jnp.broadcast_to(elements, variable.shape)
            if chosen
            else jnp.zeros(variable.shape, bool)
        )
        return variable.replace(mask)

    return nnx.map_state(leaf, params)


def test_keep_fixed_takes_an_nnx_state_mask_per_element():
    params = _flax_params()
    kernel_col0 = jnp.array([True, False])  # freeze the kernel entries of output unit 0
    fixed = _mask_from_filter(params, nnx.PathContains("kernel"), kernel_col0)
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
    fixed = _mask_from_filter(params, nnx.PathContains("bias"), True)
    target = [jnp.zeros(2), jnp.full((3, 2), 2.0)]  # leaves in key order: bias, kernel
    sol = fixedopt.minimize(_quadratic(target), params, fixed)
    np.testing.assert_array_equal(sol.x["bias"].get_value(), params["bias"].get_value())
    np.testing.assert_allclose(sol.x["kernel"].get_value(), 2.0, atol=1e-8)
