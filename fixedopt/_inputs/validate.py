"""Validation of the tree arguments: the parameters, masks, fixed values and bounds,
normalized into one canonical form. (Scalars, callables, ``args`` and solver options:
:mod:`fixedopt._objective.arguments`.)

A *fixed mask* marks, per array leaf of the parameters ``x``, which entries must never
move (``True`` = fixed). Users may pass, for each leaf, a boolean array of the leaf's
shape or a Python ``bool`` for the whole leaf; a tree *prefix* of those (one ``bool``
for a whole sub-tree); or a callable ``x -> mask``. It is normalized into a tree with
the structure of ``x`` whose leaves are either a Python ``bool`` (static, costs nothing)
or a boolean array of the leaf's shape (data: a new mask with the same shapes never
recompiles).

Inputs a scientist naturally passes (lists, NumPy or JAX arrays and scalars,
``scipy.optimize.Bounds``) are accepted; anything else raises at trace time with a
message naming the argument, the leaf, what was expected and what came.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeGuard

import jax
import jax.numpy as jnp
import numpy as np

from fixedopt._inputs import arrays

PyTree = Any
Mask = PyTree  # leaves: Python bool or boolean array of the parameter leaf's shape
Bounds = tuple[PyTree, PyTree]  # (lower, upper): trees like x, tree prefixes or scalars
KeyPath = tuple[object, ...]  # a leaf's path in a tree (jax.tree_util key entries)
IsLeaf = Callable[[Any], bool]  # a node -> is it a leaf (jax.tree's ``is_leaf``)


def leaf_name(path: KeyPath) -> str:
    return jax.tree_util.keystr(path) or "<root>"


def _is_bool_scalar(value: object) -> TypeGuard[bool | np.bool_]:
    return isinstance(value, (bool, np.bool_))


def is_mask_leaf(value: object) -> bool:
    """A leaf of a mask tree: a bool, None, or an array (not a node wrapping one)."""
    if _is_bool_scalar(value) or value is None:
        return True
    # Only a true pytree leaf: a node that forwards `dtype` to the array it wraps (a Flax
    # `nnx.Param`) is traversed, so a mask may mirror a tree of such nodes.
    return hasattr(value, "dtype") and jax.tree_util.treedef_is_leaf(jax.tree.structure(value))


def is_mask_function(fixed: object) -> TypeGuard[Callable[[PyTree], Mask]]:
    """``fixed`` is a callable ``params -> mask`` rather than a mask."""
    return callable(fixed) and not is_mask_leaf(fixed)


def _describe(value: object) -> str:
    if hasattr(value, "dtype") and hasattr(value, "shape"):
        return f"{value.dtype} array of shape {tuple(value.shape)}"
    return type(value).__name__


def concrete_or_none(value: object) -> np.ndarray | None:
    """Return ``value`` as a NumPy array if it is known at trace time, else None."""
    try:
        return np.asarray(value)
    except (jax.errors.TracerArrayConversionError, jax.errors.ConcretizationTypeError):
        return None


def check_params(x: PyTree, name: str = "x") -> None:
    """Raise TypeError unless every leaf of ``x`` is a floating-point array."""
    leaves = jax.tree_util.tree_leaves_with_path(x)
    if not leaves:
        raise ValueError(f"`{name}` must contain at least one array leaf, got {x!r}")
    for path, leaf in leaves:
        if not (hasattr(leaf, "dtype") and hasattr(leaf, "shape")):
            raise TypeError(
                f"`{name}` leaf {leaf_name(path)} must be a floating-point array, "
                f"got {_describe(leaf)}: {leaf!r}"
            )
        if not jnp.issubdtype(leaf.dtype, jnp.floating):
            raise TypeError(
                f"`{name}` leaf {leaf_name(path)} must be a floating-point array, "
                f"got {_describe(leaf)}"
            )


def _broadcast_prefix(prefix: PyTree, x: PyTree, name: str, is_leaf: IsLeaf | None) -> PyTree:
    try:
        return jax.tree.broadcast(prefix, x, is_leaf=is_leaf)
    except (ValueError, TypeError) as error:
        expected = jax.tree.structure(x)
        actual = jax.tree.structure(prefix, is_leaf=is_leaf)
        raise ValueError(
            f"`{name}` must be a tree prefix of the parameters' tree {expected}, got {actual}"
        ) from error


def _mask_leaf(path: KeyPath, mask: Any, leaf: jax.Array, name: str) -> bool | jax.Array:
    where = f"`{name}` at {leaf_name(path)}"
    if _is_bool_scalar(mask):
        return bool(mask)
    if not hasattr(mask, "dtype"):
        raise TypeError(f"{where} must be a bool or a boolean array, got {_describe(mask)}")
    if mask.dtype != jnp.bool_:
        raise TypeError(
            f"{where} must be boolean (True = fixed), got {_describe(mask)}; "
            "convert it with `.astype(bool)` or a comparison"
        )
    if tuple(mask.shape) != tuple(leaf.shape):
        raise ValueError(
            f"{where} must have the shape of the parameter it masks, "
            f"expected {tuple(leaf.shape)}, got {tuple(mask.shape)}"
        )
    return arrays.asarray(mask)


def _list_as_array(value: PyTree, x: PyTree) -> PyTree:
    """A (nested) list given for a single-array ``x`` is that array's data."""
    if isinstance(value, list) and hasattr(x, "shape"):
        return np.asarray(value)
    return value


def normalize_fixed(fixed: Mask | Callable[[PyTree], Mask], x: PyTree, name: str = "fixed") -> Mask:
    """Canonical mask for ``x``: a tree like ``x`` of Python bools or boolean arrays.

    Args:
      fixed: a bool, a boolean array per leaf, a tree prefix of those, or a callable
        ``x -> mask``.
      x: the parameters the mask applies to.
      name: the argument's name, used in error messages.

    Returns:
      A tree with the structure of ``x``; each leaf a Python ``bool`` or a boolean
      array with the shape of the corresponding leaf of ``x``.

    Example:
      >>> import jax.numpy as jnp
      >>> x = {"a": jnp.zeros(3), "b": jnp.zeros(2)}
      >>> normalize_fixed({"a": jnp.array([True, False, False]), "b": True}, x)["b"]
      True
    """
    if is_mask_function(fixed):
        fixed = fixed(x)
    if fixed is None:
        raise TypeError(
            f"`{name}` is None: pass False to fix nothing (or True to fix everything, or a "
            "boolean mask like x0, True = fixed)"
        )
    fixed = _list_as_array(fixed, x)
    full = _broadcast_prefix(fixed, x, name, is_mask_leaf)
    return jax.tree.map_with_path(
        lambda path, mask, leaf: _mask_leaf(path, mask, leaf, name), full, x
    )


def fixed_arrays(fixed: Mask | Callable[[PyTree], Mask], x: PyTree) -> PyTree:
    """:func:`normalize_fixed`, with every leaf a boolean array of its leaf's shape (a
    Python ``bool`` broadcast): the form the compiled solves take as data."""
    mask = normalize_fixed(fixed, x, "fixed")
    return jax.tree.map(lambda m, leaf: arrays.broadcast_to(m, leaf.shape), mask, x)


def _value_leaf(path: KeyPath, value: Any, leaf: jax.Array, name: str) -> jax.Array:
    if not (hasattr(value, "shape") or isinstance(value, (int, float, np.number))):
        raise TypeError(
            f"`{name}` at {leaf_name(path)} must be a number or an array, got {_describe(value)}"
        )
    given, value = value, arrays.asarray(value)
    if not jnp.issubdtype(value.dtype, jnp.number) or jnp.issubdtype(
        value.dtype, jnp.complexfloating
    ):
        raise TypeError(
            f"`{name}` at {leaf_name(path)} must be real-valued, got {_describe(value)}"
        )
    try:
        np.broadcast_shapes(value.shape, leaf.shape)
        if np.broadcast_shapes(value.shape, leaf.shape) != tuple(leaf.shape):
            raise ValueError
    except ValueError:
        raise ValueError(
            f"`{name}` at {leaf_name(path)} must be broadcastable to the parameter's "
            f"shape {tuple(leaf.shape)}, got shape {tuple(value.shape)}"
        ) from None
    return arrays.broadcast_to(given, leaf.shape, leaf.dtype)


def normalize_values(values: PyTree, x: PyTree, name: str = "fixed_values") -> PyTree:
    """Values shaped and typed like ``x`` (a scalar, or a tree prefix of arrays).

    Each leaf is cast to the dtype of, and broadcast to the shape of, its leaf of ``x``.
    """
    full = _broadcast_prefix(_list_as_array(values, x), x, name, None)
    return jax.tree.map_with_path(
        lambda path, value, leaf: _value_leaf(path, value, leaf, name), full, x
    )


def normalize_bounds(bounds: object, x: PyTree, name: str = "bounds") -> Bounds | None:
    """``(lower, upper)`` trees like ``x``, or ``None`` when there are no bounds.

    Accepts a pair ``(lower, upper)`` (``None`` for no bound on that side, as in
    scipy) or a ``scipy.optimize.Bounds``. Raises ValueError when a concrete bound is
    NaN or ``lower`` exceeds ``upper`` anywhere.
    """
    if bounds is None:
        return None
    if hasattr(bounds, "lb") and hasattr(bounds, "ub"):  # scipy.optimize.Bounds
        bounds = (bounds.lb, bounds.ub)
    if not (isinstance(bounds, (tuple, list)) and len(bounds) == 2):
        raise TypeError(f"`{name}` must be a pair (lower, upper), got {_describe(bounds)}")
    lower, upper = (-jnp.inf if bounds[0] is None else bounds[0]), bounds[1]
    upper = jnp.inf if upper is None else upper
    lower = normalize_values(lower, x, f"{name}[0] (lower)")
    upper = normalize_values(upper, x, f"{name}[1] (upper)")
    for path, lo, hi in zip(_paths(x), jax.tree.leaves(lower), jax.tree.leaves(upper)):
        lo_c, hi_c = concrete_or_none(lo), concrete_or_none(hi)
        for side, bound in (("lower", lo_c), ("upper", hi_c)):
            if bound is not None and np.any(np.isnan(bound)):
                index = tuple(int(i) for i in np.argwhere(np.isnan(bound))[0])
                raise ValueError(
                    f"`{name}` at {leaf_name(path)}: the {side} bound must not be NaN, got NaN "
                    f"at index {index}; use -inf/inf (or None) for no bound"
                )
        if lo_c is not None and hi_c is not None and np.any(lo_c > hi_c):
            index = tuple(int(i) for i in np.argwhere(lo_c > hi_c)[0])
            raise ValueError(
                f"`{name}` at {leaf_name(path)}: lower must not exceed upper, got "
                f"lower={lo_c[index]} > upper={hi_c[index]} at index {index}"
            )
    return lower, upper


def _paths(x: PyTree) -> list[KeyPath]:
    return [path for path, _ in jax.tree_util.tree_leaves_with_path(x)]


def _first_outside(
    mask: Mask, x: PyTree, bounds: Bounds, fixed: bool
) -> tuple[KeyPath, np.ndarray, float, float, tuple[int, ...]] | None:
    """The first concrete entry of ``x`` outside concrete ``bounds`` among its fixed
    (``fixed``) or its free entries: ``(path, leaf, lower, upper, index)``; or None."""
    for path, *traced in zip(_paths(x), *(jax.tree.leaves(t) for t in (mask, x, *bounds))):
        m, v, lo, hi = (concrete_or_none(a) for a in traced)
        if m is None or v is None or lo is None or hi is None:
            continue
        chosen = np.broadcast_to(m, v.shape)
        outside = (chosen if fixed else ~chosen) & ((v < lo) | (v > hi))
        if np.any(outside):
            index = tuple(int(i) for i in np.argwhere(outside)[0])
            lower, upper = (np.broadcast_to(b, v.shape)[index] for b in (lo, hi))
            return path, v, lower, upper, index
    return None


def check_values_in_bounds(
    mask: Mask, values: PyTree, bounds: Bounds | None, name: str = "fixed_values"
) -> None:
    """Raise ValueError if a concrete fixed value lies outside concrete bounds."""
    found = None if bounds is None else _first_outside(mask, values, bounds, fixed=True)
    if found is not None:
        path, v, lower, upper, index = found
        raise ValueError(
            f"`{name}` at {leaf_name(path)} must lie within the bounds where fixed, "
            f"got {v[index]} outside [{lower}, {upper}] at index {index}"
        )


def check_start_in_bounds(mask: Mask, x0: PyTree, bounds: Bounds | None, batched: bool) -> None:
    """Raise ValueError if a concrete free entry of ``x0`` lies outside concrete bounds
    (``scipy.optimize.least_squares``'s "x0 is infeasible"), naming the leaf, the row
    and the entry."""
    found = None if bounds is None else _first_outside(mask, x0, bounds, fixed=False)
    if found is None:
        return
    path, v, lower, upper, index = found
    entry = index[1:] if batched else index
    where = f"entry {entry[0] if len(entry) == 1 else entry}"
    where = f"row {index[0]}, {where}" if batched else where
    if path:  # a leaf of a pytree
        where = f"{leaf_name(path)}, {where}"
    raise ValueError(
        f"`x0` is infeasible: {where} is {v[index]}, outside [{lower}, {upper}]. Start "
        "inside the bounds (least_squares does not move a start onto them, as "
        "scipy.optimize.least_squares)"
    )


def check_has_entries(x0: PyTree, batched: bool, name: str = "x0") -> None:
    """ValueError unless one row of ``x0`` (the whole of it without a batch) has an
    entry to optimize: with none, no solver has anything to do."""
    shapes = [tuple(np.shape(leaf))[1 if batched else 0 :] for leaf in jax.tree.leaves(x0)]
    if sum(int(np.prod(shape)) for shape in shapes) == 0:
        row = "one row's leaves have" if batched else "its leaves have"
        raise ValueError(
            f"`{name}` has no entries to optimize: {row} shapes {shapes}; give it at least "
            "one parameter"
        )


def batch_size(x0: PyTree, name: str = "x0") -> int:
    """The size of the leading (batch) axis, the same on every leaf of ``x0``."""
    sizes: dict[str, int] = {}
    for path, leaf in jax.tree_util.tree_leaves_with_path(x0):
        if leaf.ndim == 0:
            raise ValueError(
                f"`{name}` leaf {leaf_name(path)} has no batch axis "
                "(batched=True needs a leading batch axis on every leaf), got shape ()"
            )
        sizes[leaf_name(path)] = leaf.shape[0]
    if len(set(sizes.values())) > 1:
        raise ValueError(f"`{name}` leaves disagree on the batch size: {sizes}")
    return next(iter(sizes.values()))
