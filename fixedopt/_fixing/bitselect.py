"""``where(mask, constant, x)`` as integer bit operations, for masks fused into a pass.

XLA's CPU backend compiles ``select`` on a boolean mask into code that slows the
whole fused loop, while AND/OR on the bit patterns keep it close to the unmasked loop
(an Adam step at 2^24 float32: ``docs/decisions.md``, "The fixed mask fused into the
plain passes"). The result is the same bits as ``where``: the constant's pattern where
``mask`` is True, ``x``'s own bits (NaN, Inf and -0.0 included) elsewhere. The mask is
widened to an integer inside the fusion only, never stored.

Bit casts have no derivative (JAX treats them as integer operations, so a gradient
through them is silently zero). The bit select therefore carries its own rule, that of
``where``: the tangent is zero where ``mask`` is True and the tangent of ``x``
elsewhere. The rule is a ``where`` on the tangent, linear, so reverse mode transposes
it; the undifferentiated program keeps the bit operations alone.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from fixedopt._fixing import mask as _mask

_BITS = {2: jnp.uint16, 4: jnp.uint32, 8: jnp.uint64}


def select_constant(mask: jax.Array | bool, constant: float, x: jax.Array) -> jax.Array:
    """``where(mask, constant, x)`` for one leaf, bit for bit, with ``where``'s derivative.

    Args:
      mask: a boolean array broadcastable to ``x``, or a Python bool (then no ops).
      constant: a Python scalar, converted to ``x.dtype``.
      x: the array.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> select_constant(jnp.array([True, False]), -0.0, jnp.array([1.0, jnp.nan], "float32"))
      Array([-0., nan], dtype=float32)
      >>> mask = jnp.array([True, False])
      >>> print(jax.grad(lambda x: jnp.sum(select_constant(mask, 0.0, x) ** 2))(jnp.ones(2)))
      [0. 2.]
    """
    bits = _BITS.get(jnp.dtype(x.dtype).itemsize)
    if isinstance(mask, bool) or bits is None or not jnp.issubdtype(x.dtype, jnp.floating):
        plain: jax.Array = _mask.select(mask, jnp.asarray(constant, x.dtype), x)
        return plain
    selected: jax.Array = _bit_select(constant, jnp.asarray(mask), x)
    return selected


@functools.partial(jax.custom_jvp, nondiff_argnums=(0,))
def _bit_select(constant: float, mask: jax.Array, x: jax.Array) -> jax.Array:
    """The bit operations of :func:`select_constant` (a floating ``x`` of 2, 4 or 8
    bytes, a boolean array ``mask``)."""
    bits = _BITS[jnp.dtype(x.dtype).itemsize]
    pattern = jnp.asarray(np.asarray(constant, x.dtype).view(bits))
    keep = mask.astype(bits) - jnp.asarray(1, bits)  # all ones where free
    raw = jax.lax.bitcast_convert_type(x, bits)
    selected: jax.Array = jax.lax.bitcast_convert_type((raw & keep) | (pattern & ~keep), x.dtype)
    return selected


@_bit_select.defjvp
def _bit_select_jvp(
    constant: float, primals: tuple[jax.Array, jax.Array], tangents: tuple[jax.Array, jax.Array]
) -> tuple[jax.Array, jax.Array]:
    """``where``'s derivative: the constant's entries do not move, the rest are ``x``'s."""
    mask, x = primals
    x_dot = tangents[1]
    tangent = jnp.where(mask, jnp.zeros_like(x_dot), x_dot)
    return _bit_select(constant, mask, x), tangent
