"""Read and write one slot of a ring buffer whose slot index is shared by a batch.

In a batched solve every running row stores its curvature pair at the same slot
(the batch's iteration count, one unbatched scalar). Plain indexing under ``vmap``
turns ``history[slot]`` into a gather and ``history.at[slot].set`` into a scatter,
which XLA's CPU backend runs element by element (at n=8 they took most of an L-BFGS
step). With an unbatched slot these are a ``dynamic_slice`` and an in-place
``dynamic_update_slice`` along the slot axis of the batched buffer. Reverse mode
cannot pass these custom batching rules: :func:`plain_read_slot` and
:func:`plain_write_slot` are the plain slices, for a solve differentiated by unrolling
(``fixedopt.Unroll``).
"""

from __future__ import annotations

from collections.abc import Sequence

import jax
import jax.numpy as jnp


def _broadcast(axis_size: int, value: jax.Array, batched: bool) -> jax.Array:
    return value if batched else jnp.broadcast_to(value, (axis_size, *jnp.shape(value)))


def plain_read_slot(history: jax.Array, slot: jax.Array) -> jax.Array:
    """``history[slot]`` as a ``dynamic_slice`` (a gather under ``vmap``)."""
    row: jax.Array = jax.lax.dynamic_index_in_dim(history, slot, keepdims=False)
    return row


def plain_write_slot(history: jax.Array, slot: jax.Array, value: jax.Array) -> jax.Array:
    """``history.at[slot].set(value)`` as a ``dynamic_update_slice`` (a scatter under
    ``vmap``)."""
    written: jax.Array = jax.lax.dynamic_update_index_in_dim(history, value, slot, axis=0)
    return written


@jax.custom_batching.custom_vmap
def read_slot(history: jax.Array, slot: jax.Array) -> jax.Array:
    """``history[slot]`` for ``0 <= slot < len(history)``.

    ``history``: ``(slots, ...)``; ``slot``: an ``()`` integer array; the result has
    shape ``history.shape[1:]``.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> history = jnp.arange(12).reshape(2, 3, 2)  # 2 rows, 3 slots
      >>> jax.vmap(read_slot, in_axes=(0, None))(history, jnp.array(1)).tolist()
      [[2, 3], [8, 9]]
    """
    row: jax.Array = jax.lax.dynamic_index_in_dim(history, slot, keepdims=False)
    return row


@read_slot.def_vmap
def _read_slot_batched(
    axis_size: int, in_batched: Sequence[bool], history: jax.Array, slot: jax.Array
) -> tuple[jax.Array, bool]:
    history_batched, slot_batched = in_batched
    if slot_batched:  # rows at different slots: a gather, as plain vmap does
        read = jax.vmap(read_slot.fun, in_axes=(0 if history_batched else None, 0))
        return read(history, slot), True
    history = _broadcast(axis_size, history, history_batched)
    return jax.lax.dynamic_index_in_dim(history, slot, axis=1, keepdims=False), True


@jax.custom_batching.custom_vmap
def write_slot(history: jax.Array, slot: jax.Array, value: jax.Array) -> jax.Array:
    """``history.at[slot].set(value)`` for ``0 <= slot < len(history)``.

    ``history``: ``(slots, ...)``; ``slot``: an ``()`` integer array; ``value``:
    ``history.shape[1:]``. The result has the shape of ``history``.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> write_slot(jnp.zeros((3, 2), int), jnp.array(2), jnp.ones(2, int)).tolist()
      [[0, 0], [0, 0], [1, 1]]
    """
    written: jax.Array = jax.lax.dynamic_update_index_in_dim(history, value, slot, axis=0)
    return written


@write_slot.def_vmap
def _write_slot_batched(
    axis_size: int,
    in_batched: Sequence[bool],
    history: jax.Array,
    slot: jax.Array,
    value: jax.Array,
) -> tuple[jax.Array, bool]:
    history_batched, slot_batched, value_batched = in_batched
    if slot_batched:
        axes = tuple(0 if b else None for b in in_batched)
        return jax.vmap(write_slot.fun, in_axes=axes)(history, slot, value), True
    history = _broadcast(axis_size, history, history_batched)
    value = _broadcast(axis_size, value, value_batched)
    return jax.lax.dynamic_update_index_in_dim(history, value, slot, axis=1), True
