"""``mask_from``: a fixed mask built from Flax's own filters and paths.

Flax is imported when :func:`mask_from` is called, never by ``import fixedopt``: it is
an optional dependency (the ``notebooks`` and ``test`` extras).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import jax
import jax.numpy as jnp
import numpy as np

from fixedopt._inputs.validate import Mask, PyTree

if TYPE_CHECKING:  # flax is optional: only type checkers import it here
    from flax.nnx.filterlib import Filter
    from flax.typing import PathParts  # a parameter's path as Flax filters see it

Elements = bool | jax.Array | np.ndarray  # True, or a boolean array


def mask_from(params: PyTree, filter: Filter, elements: Elements = True) -> Mask:
    """A fixed mask for Flax parameters: the entries a Flax filter selects.

    Every leaf of the result is a boolean array of its parameter's shape (``True`` =
    fixed), never a Python ``bool``: masks built for different phases of a training run
    have the same shapes and types, so passing a new one to a jitted step (or to
    :func:`fixedopt.minimize`) reuses the compiled program. Combine masks with
    ``jax.tree.map(jnp.logical_or, mask_a, mask_b)``.

    Args:
      params: Flax parameters: an ``nnx.State`` (from ``nnx.split`` or ``nnx.state``;
        the result is an ``nnx.State`` of the same Variables holding boolean arrays), or
        a Linen-style nested dict of arrays.
      filter: a Flax NNX filter: a Variable type (``nnx.Param``),
        ``nnx.PathContains("kernel")``, ``nnx.All(...)``, ``nnx.Any(...)``,
        ``nnx.Not(...)``, a tuple of filters (any of them), or a callable
        ``(path, value) -> bool``; ``path`` is a tuple of keys, e.g.
        ``("layer1", "kernel")``. It must select at least one parameter.
      elements: which entries of each selected parameter are fixed: ``True`` (all of
        them) or a boolean array broadcastable to the parameter's shape.

    Returns:
      A tree with the structure of ``params`` whose leaves are boolean arrays.

    Example:
      >>> import jax.numpy as jnp
      >>> from flax import nnx
      >>> import fixedopt
      >>> _, params = nnx.split(nnx.Linear(2, 3, rngs=nnx.Rngs(0)), nnx.Param)
      >>> mask = fixedopt.mask_from(params, nnx.PathContains("kernel"),
      ...                           elements=jnp.array([True, False, True]))
      >>> print(mask["kernel"].get_value())
      [[ True False  True]
       [ True False  True]]
      >>> print(mask["bias"].get_value())
      [False False False]
    """
    try:
        from flax import nnx
    except ImportError as error:  # pragma: no cover - flax is in the test extra
        raise ImportError("fixedopt.mask_from needs Flax: pip install flax") from error
    selected = nnx.filterlib.to_predicate(filter)
    elements = _check_elements(elements)
    chosen: list[PathParts] = []

    def leaf_mask(path: PathParts, value: Any) -> jax.Array:
        if not selected(path, value):
            return jnp.zeros(np.shape(value), bool)
        chosen.append(path)
        return _broadcast_elements(elements, np.shape(value), path)

    if isinstance(params, nnx.State):
        mask = nnx.map_state(lambda path, v: v.replace(leaf_mask(path, v)), params)
    else:
        mask = jax.tree_util.tree_map_with_path(
            lambda keys, leaf: leaf_mask(_flax_path(keys), leaf), params
        )
    if not chosen:
        raise ValueError(f"`filter` {filter!r} selects no parameter of `params`")
    return mask


def _check_elements(elements: Elements) -> Elements:
    if isinstance(elements, (bool, np.bool_)):
        return bool(elements)
    if not (hasattr(elements, "dtype") and elements.dtype == np.bool_):
        kind = getattr(elements, "dtype", type(elements).__name__)
        raise TypeError(f"`elements` must be a bool or a boolean array, got {kind}")
    return elements


def _broadcast_elements(elements: Elements, shape: Sequence[int], path: PathParts) -> jax.Array:
    if isinstance(elements, bool):
        return jnp.full(shape, elements)
    try:
        if np.broadcast_shapes(np.shape(elements), shape) != tuple(shape):
            raise ValueError
    except ValueError:
        raise ValueError(
            f"`elements` must broadcast to the shape of parameter {'/'.join(map(str, path))}: "
            f"expected a shape broadcastable to {tuple(shape)}, got {np.shape(elements)}"
        ) from None
    return jnp.broadcast_to(jnp.asarray(elements), shape)


def _flax_path(keys: tuple[Any, ...]) -> PathParts:
    """A JAX key path as the tuple of keys Flax filters see: ``("params", "kernel")``."""
    names = []
    for key in keys:
        for attribute in ("key", "name", "idx"):
            if hasattr(key, attribute):
                names.append(getattr(key, attribute))
                break
    return tuple(names)
