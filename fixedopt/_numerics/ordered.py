"""Sums whose rounding is a function of the summands alone: the same bits whatever the
batch around them.

XLA:CPU chooses how to run a reduction from the whole array's size: its own loops for
a small one, rewritten into a tree of partial sums for a long axis, the YNN library
above about 4096 entries (:mod:`fixedopt._numerics.reduce`). Each adds in its own order,
so a row's sum changed in its last bits with the number of rows reduced beside it (a
covariance of 8 rows against one of 256: ``docs/decisions.md``, "Why the covariance was
slow"). Here the last axis is summed by halving, ``a[:h] + a[h:2h]`` (an odd entry carried
to the next round), as elementwise additions of slices: no ``reduce`` for XLA to
choose a strategy for, one fused loop, the same additions in the same order for every
row and every batch.

Example:
  >>> import jax.numpy as jnp
  >>> from fixedopt._numerics import ordered
  >>> float(ordered.total(jnp.arange(10.0))), float(ordered.dot(jnp.ones(3), jnp.arange(3.0)))
  (45.0, 3.0)
"""

from __future__ import annotations

import jax
import jax.numpy as jnp


def total(a: jax.Array) -> jax.Array:
    """The sum of ``a``'s last axis, in an order set by its length alone."""
    while a.shape[-1] > 1:
        half = a.shape[-1] // 2
        halves = a[..., :half] + a[..., half : 2 * half]
        a = jnp.concatenate([halves, a[..., 2 * half :]], axis=-1) if a.shape[-1] % 2 else halves
    if a.shape[-1] == 0:
        return jnp.zeros(a.shape[:-1], a.dtype)
    return a[..., 0]


def dot(a: jax.Array, b: jax.Array) -> jax.Array:
    """``total(a * b)``: the dot product of the last axes."""
    return total(a * b)


def matmul(a: jax.Array, b: jax.Array) -> jax.Array:
    """``a @ b`` for ``(p, q)`` and ``(q, r)`` matrices, each entry a :func:`dot`."""
    return total(a[:, None, :] * b.T[None, :, :])
