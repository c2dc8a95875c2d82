"""``where(mask, constant, x)`` as integer bit operations, for masks fused into a pass.

XLA's CPU backend compiles ``select`` on a boolean mask into code that slows the
whole fused loop, while AND/OR on the bit patterns keep it close to the unmasked loop
(an Adam step at 2^24 float32: ``benchmarks/results/cpu-fusion-2026-11-30.md``). The
result is the same bits as ``where``: the constant's pattern where
``mask`` is True, ``x``'s own bits (NaN, Inf and -0.0 included) elsewhere. The mask
is widened to an integer inside the fusion only, never stored.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from fixedopt import _mask

_BITS = {2: jnp.uint16, 4: jnp.uint32, 8: jnp.uint64}


def select_constant(mask: jax.Array | bool, constant: float, x: jax.Array) -> jax.Array:
    """``where(mask, constant, x)`` for one leaf, bit for bit.

    Args:
      mask: a boolean array broadcastable to ``x``, or a Python bool (then no ops).
      constant: a Python scalar, converted to ``x.dtype``.
      x: the array.

    Example:
      >>> import jax.numpy as jnp
      >>> select_constant(jnp.array([True, False]), -0.0, jnp.array([1.0, jnp.nan], "float32"))
      Array([-0., nan], dtype=float32)
    """
    bits = _BITS.get(jnp.dtype(x.dtype).itemsize)
    if isinstance(mask, bool) or bits is None or not jnp.issubdtype(x.dtype, jnp.floating):
        plain: jax.Array = _mask.select(mask, jnp.asarray(constant, x.dtype), x)
        return plain
    pattern = jnp.asarray(np.asarray(constant, x.dtype).view(bits))
    keep = jnp.asarray(mask).astype(bits) - jnp.asarray(1, bits)  # all ones where free
    raw = jax.lax.bitcast_convert_type(x, bits)
    selected: jax.Array = jax.lax.bitcast_convert_type((raw & keep) | (pattern & ~keep), x.dtype)
    return selected
