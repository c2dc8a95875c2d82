"""Sums of products in a power of two where their squares would underflow or overflow,
in ONE reduction (no pass for the largest entry first).

A sum of squares ``|a|^2`` underflows in float32 for entries of 1e-20 (a fit in units of
1e-20) and overflows for entries of 1e19, though ``|a|`` is in range. Dividing ``a`` by
the power of two of its largest entry first avoids both, but takes a reduction of its
own before the sum: in a least-squares step that is a kernel (and a pass over the
residuals) per norm. Here the products are summed at three scales at once, ``c = 1``,
``2^k`` and ``2^-k`` (:func:`factor`: together they cover the dtype's whole range,
subnormals included), in one variadic reduction
(:func:`fixedopt._numerics.reduce.together`), and each group of sums is read at the
first scale where the largest of its sums is in range (:func:`in_range`). A power of
two scales a product exactly, so where the sums at ``c = 1`` are in range they are the
plain sums, to the bit, and elsewhere the same as the sums of ``a`` divided by the
power of two of its largest entry, to rounding. A least-squares residual's norm takes
only the magnified sum (:func:`magnified`, beside its normal sums): where its square
overflows, so does the cost. Every sum at ``c != 1`` has its gradient stopped.

Example:
  >>> import jax.numpy as jnp
  >>> from fixedopt._numerics import scaled
  >>> a = jnp.array([3e-25, 4e-25], jnp.float32)
  >>> (squares,), c = scaled.sums(((a, a),))
  >>> round(float(jnp.sqrt(squares) / c) / 5e-25, 6)
  1.0
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from fixedopt._numerics import reduce

Pair = tuple[jax.Array, jax.Array]


def factor(dtype: Any) -> float:
    """``2^k`` for ``dtype``: the sums of squares of entries from the smallest subnormal
    to where their plain squares underflow are in range times ``4^k``, and those of
    entries up to the largest float times ``4^-k`` (float32: ``2^102``)."""
    info = jnp.finfo(dtype)
    return float(2.0 ** ((info.maxexp - info.minexp - 2 * info.nmant) // 2 - 2))


def in_range(total: jax.Array) -> jax.Array:
    """Whether a sum of squares is well within its dtype's range (``eps`` away from
    underflow and from overflow): its root is as precise as the entries."""
    info = jnp.finfo(total.dtype)
    in_range: jax.Array = (total >= info.tiny / info.eps) & (total <= info.max * info.eps)
    return in_range


def magnified(pairs: tuple[Pair, ...]) -> tuple[jax.Array, ...]:
    """The ``(n,)`` products ``(c a) * (c b)`` of each pair at ``c = 2^k``
    (:func:`factor`), their gradients stopped (a product that overflows is out of
    range, never read; its derivative would be NaN)."""
    up = factor(pairs[0][0].dtype)
    return tuple(jax.lax.stop_gradient((a * up) * (b * up)) for a, b in pairs)


def terms(pairs: tuple[Pair, ...]) -> tuple[jax.Array, ...]:
    """The ``(n,)`` products ``(c a) * (c b)`` of each pair at each scale ``c`` of
    :func:`scales`, scale by scale (at ``c != 1`` with their gradients stopped): the
    summands of :func:`choose`."""
    down = 1.0 / factor(pairs[0][0].dtype)  # exact: a power of two
    shrunk = tuple(jax.lax.stop_gradient((a * down) * (b * down)) for a, b in pairs)
    return (*(a * b for a, b in pairs), *magnified(pairs), *shrunk)


def scales(dtype: Any) -> tuple[float, float, float]:
    """The scales ``c`` of :func:`terms`, in the order they are tried: 1, ``2^k``,
    ``2^-k``."""
    up = factor(dtype)
    return 1.0, up, 1.0 / up


def choose(sums: tuple[jax.Array, ...]) -> tuple[tuple[jax.Array, ...], jax.Array]:
    """The sums of :func:`terms` of ``len(sums) // 3`` pairs read at one scale: the first
    where the largest of them (in magnitude) is in range, else ``c = 1`` (a zero, an
    infinite or a NaN sum); and that scale ``c`` (the products' sums times ``c^2``)."""
    count = len(sums) // 3
    groups = [sums[k * count : (k + 1) * count] for k in range(3)]
    dtype = sums[0].dtype
    chosen, scale = groups[0], jnp.asarray(1.0, dtype)
    for group, c in reversed(tuple(zip(groups, scales(dtype)))):
        largest = jnp.abs(group[0])
        for total in group[1:]:
            largest = jnp.maximum(largest, jnp.abs(total))
        fits = in_range(largest)
        chosen = tuple(jnp.where(fits, new, old) for new, old in zip(group, chosen))
        scale = jnp.where(fits, jnp.asarray(c, dtype), scale)
    return chosen, scale


def sums(pairs: tuple[Pair, ...]) -> tuple[tuple[jax.Array, ...], jax.Array]:
    """The sums ``a . b`` of the pairs ``(a, b)`` of ``(n,)`` vectors (one dtype), all
    at one scale, in ONE reduction, and that scale ``c`` (:func:`choose`): a ratio of
    two of them, or a comparison between them, is the same at any scale."""
    ((chosen, scale),), _ = grouped((pairs,))
    return chosen, scale


Chosen = tuple[tuple[jax.Array, ...], jax.Array]


def grouped(
    groups: tuple[tuple[Pair, ...], ...], dots: tuple[Pair, ...] = ()
) -> tuple[tuple[Chosen, ...], tuple[jax.Array, ...]]:
    """:func:`sums` of each group of pairs, each group at its own scale, and the plain
    dots ``a . b`` of the pairs ``dots`` (:func:`fixedopt._numerics.reduce.dot`), in ONE
    reduction where the dots' vectors are not folded (else the dots one by one): a
    step's tests share one kernel.

    Example:
      >>> import jax.numpy as jnp
      >>> from fixedopt._numerics import scaled
      >>> a, b = jnp.array([3e-25, 4e-25]), jnp.array([3.0, 4.0])
      >>> (((squares,), c),), (plain,) = scaled.grouped((((a, a),),), ((b, b),))
      >>> round(float(jnp.sqrt(squares) / c) / 5e-25, 6), float(plain)
      (1.0, 25.0)
    """
    together = not dots or not reduce.folds(dots[0][0])
    products = tuple(a * b for a, b in dots) if together else ()
    summed = reduce.together((*(t for pairs in groups for t in terms(pairs)), *products))
    chosen, start = [], 0
    for pairs in groups:
        chosen.append(choose(summed[start : start + 3 * len(pairs)]))
        start += 3 * len(pairs)
    plain = summed[start:] if together else tuple(reduce.dot(a, b) for a, b in dots)
    return tuple(chosen), tuple(plain)
