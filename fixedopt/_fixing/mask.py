"""The fixed-mask operations: select fixed entries, ``fix`` a function, ``project``, and
the one definition of the entries a bound holds (:func:`active_set`).

Masks arrive normalized (:func:`fixedopt._inputs.validate.normalize_fixed`): a tree like the
parameters whose leaves are a Python ``bool`` (static: no operation at all) or a
boolean array of the leaf's shape (data: a new mask never recompiles).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike

from fixedopt._inputs.validate import (
    Bounds,
    Mask,
    PyTree,
    check_params,
    check_values_in_bounds,
    normalize_bounds,
    normalize_fixed,
    normalize_values,
)

Result = TypeVar("Result")  # what the function that ``fix`` wraps returns


def select(mask: bool | jax.Array, if_fixed: ArrayLike, if_free: jax.Array) -> jax.Array:
    """``where(mask, if_fixed, if_free)`` for one leaf; free of ops for a static mask."""
    if mask is True:
        return jnp.broadcast_to(if_fixed, jnp.shape(if_free)).astype(jnp.result_type(if_free))
    if mask is False:
        return if_free
    return jnp.where(mask, if_fixed, if_free)


def tree_select(mask: Mask, if_fixed: PyTree, if_free: PyTree) -> PyTree:
    """Leaf-wise :func:`select` over a normalized mask."""
    return jax.tree.map(select, mask, if_fixed, if_free)


def fix(fun: Callable[..., Result], fixed: Mask, fixed_values: PyTree) -> Callable[..., Result]:
    """Wrap ``fun`` so that its fixed entries are pinned *inside* the function.

    ``fix(fun, fixed, fixed_values)(x, *args)`` evaluates
    ``fun(where(fixed, stop_gradient(fixed_values), x), *args)``. Because the
    ``stop_gradient`` is inside the differentiated function, ``grad``, ``jacfwd``,
    ``jacrev`` and ``hessian`` of the wrapped function are exactly zero in the rows and
    columns of fixed entries, and ``fun`` never sees a drifted fixed value. (Calling
    ``jax.lax.stop_gradient(x)`` *before* the loss does nothing of the kind.)

    Args:
      fun: ``fun(x, *args)``; ``x`` an array or a pytree of arrays.
      fixed: the fixed mask: a bool or boolean array per leaf of ``x``, a tree prefix
        of those, or a callable ``x -> mask``.
      fixed_values: the values of the fixed entries, a tree like ``x`` (leaves
        broadcastable to its leaves; only the fixed entries are read).

    Returns:
      The wrapped function, with the signature of ``fun``.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> import fixedopt
      >>> f = lambda x: jnp.sum(x ** 2)
      >>> x = jnp.array([1.0, 2.0, 3.0])
      >>> fixed = jnp.array([False, True, False])
      >>> print(jax.grad(fixedopt.fix(f, fixed, x))(x))
      [2. 0. 6.]
    """

    @functools.wraps(fun)
    def fixed_fun(x: PyTree, *args: Any) -> Result:
        check_params(x, "x")
        mask = normalize_fixed(fixed, x)
        values = jax.lax.stop_gradient(normalize_values(fixed_values, x))
        return fun(tree_select(mask, values, x), *args)

    return fixed_fun


def clip_to_bounds(x: PyTree, bounds: Bounds | None) -> PyTree:
    """``clip(x, lower, upper)`` leaf-wise; ``bounds`` normalized or ``None``."""
    if bounds is None:
        return x
    return jax.tree.map(jnp.clip, x, *bounds)


def project(x: PyTree, fixed: Mask, fixed_values: PyTree, bounds: object = None) -> PyTree:
    """Project ``x`` onto the feasible set: fixed entries pinned, the rest in bounds.

    Returns ``where(fixed, fixed_values, clip(x, lower, upper))`` leaf-wise. Fixed
    entries are bit-identical to ``fixed_values`` (cast to the dtype of ``x``).

    Args:
      x: an array or a pytree of floating-point arrays.
      fixed: the fixed mask (see :func:`fix`).
      fixed_values: a tree like ``x``; only the fixed entries are read.
      bounds: ``None`` or ``(lower, upper)``, each a scalar or a tree like ``x`` with
        leaves broadcastable to its leaves; ``-inf``/``inf`` allowed.

    Returns:
      The projected tree, with the structure, shapes and dtypes of ``x``.

    Example:
      >>> import jax.numpy as jnp
      >>> import fixedopt
      >>> x = jnp.array([-2.0, 0.5, 7.0])
      >>> fixed = jnp.array([False, True, False])
      >>> print(fixedopt.project(x, fixed, jnp.array([0.0, 0.25, 0.0]), bounds=(-1.0, 1.0)))
      [-1.    0.25  1.  ]
    """
    check_params(x, "x")
    mask = normalize_fixed(fixed, x)
    values = normalize_values(fixed_values, x)
    bounds = normalize_bounds(bounds, x)
    check_values_in_bounds(mask, values, bounds)
    return tree_select(mask, values, clip_to_bounds(x, bounds))


def active_set(
    x: jax.Array,
    grad: jax.Array,
    fixed: jax.Array,
    lower: jax.Array,
    upper: jax.Array,
    margin: ArrayLike = 0.0,
) -> jax.Array:
    """The bound-active entries of one row, flat: free entries within ``margin`` of a
    bound that the gradient pushes against (``grad > 0`` at ``lower``, ``grad < 0`` at
    ``upper``), the bounds whose multipliers are positive.

    The one definition of "at a bound": the solvers' active set (``margin`` > 0 for
    L-BFGS's two-metric projection), the entries the implicit derivative holds at
    their bound, ``Solution.at_bound``, and so the covariances' and the report's
    flags. An entry on its bound whose gradient is zero or points into the box is
    free: the bound does not hold it, and moving it inward is a descent direction
    (or no change).

    Example:
      >>> import jax.numpy as jnp
      >>> x, lower, upper = jnp.array([0.0, 0.0, 1.0, 0.5]), jnp.zeros(4), jnp.ones(4)
      >>> grad = jnp.array([2.0, -2.0, -1.0, 3.0])  # out, in, out, interior
      >>> print(active_set(x, grad, jnp.zeros(4, bool), lower, upper))
      [ True False  True False]
    """
    at_lower = (x <= lower + margin) & (grad > 0)
    at_upper = (x >= upper - margin) & (grad < 0)
    return (at_lower | at_upper) & ~fixed


def unravel_mask(flat: jax.Array, like: PyTree) -> PyTree:
    """A flat boolean ``(n,)`` (``ravel_pytree`` order) as a tree like ``like``, whose
    leaves give the shapes (``ravel_pytree``'s own unravel would cast to their dtype)."""
    leaves, treedef = jax.tree.flatten(like)
    starts = [0]
    for leaf in leaves:
        starts.append(starts[-1] + leaf.size)
    parts = [
        flat[start : start + leaf.size].reshape(leaf.shape) for start, leaf in zip(starts, leaves)
    ]
    return jax.tree.unflatten(treedef, parts)
