"""The projected gradient of a bound-constrained row, written so that it keeps small
gradients (shared by the solvers' tests and the implicit derivative's measure)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike


def projected_gradient(
    x: jax.Array, grad: jax.Array, lower: ArrayLike, upper: ArrayLike
) -> jax.Array:
    """``x - clip(x - grad, lower, upper)``, but ``grad`` itself where ``x - grad`` is
    within the bounds: computed as written, a gradient below ``eps |x|`` rounds to 0 (a
    bounded float32 fit at ``x = 2500`` passed ``gtol`` at its start).

    Example:
      >>> import jax.numpy as jnp
      >>> from fixedopt._numerics.bounds import projected_gradient
      >>> x, g = jnp.array([2500.0, 1.0]), jnp.array([1e-10, -3.0])
      >>> projected_gradient(x, g, 0.0, jnp.array([jnp.inf, 2.0])).tolist()
      [1e-10, -1.0]
    """
    trial = x - grad
    return jnp.where(trial < lower, x - lower, jnp.where(trial > upper, x - upper, grad))


def box_share(x: jax.Array, step: jax.Array, lower: ArrayLike, upper: ArrayLike) -> jax.Array:
    """Entry by entry, the share of the coordinate step ``step`` from ``x`` that stays
    within the bounds: ``min(1, room / |step|)``, ``room`` the distance to the bound the
    step heads for; 1 for a zero step, 0 on a bound the step pushes against.

    A share has no units: it compares the step with the room the box leaves, both in
    the parameter's units (the projected gradient ``x - clip(x - g)`` compares ``g``,
    in the objective's units per parameter's, with a distance).

    Example:
      >>> import jax.numpy as jnp
      >>> from fixedopt._numerics.bounds import box_share
      >>> x, step = jnp.array([0.5, 0.0, 0.5, 0.5]), jnp.array([-2.0, -1.0, 1.0, 0.1])
      >>> box_share(x, step, 0.0, 1.0).tolist()
      [0.25, 0.0, 0.5, 1.0]
    """
    room = jnp.maximum(jnp.where(step < 0, x - lower, upper - x), 0.0)
    size = jnp.abs(step)
    return jnp.where(room >= size, 1.0, room / jnp.where(size > 0, size, 1.0)).astype(x.dtype)


def reduction_share(share: jax.Array) -> jax.Array:
    """``sqrt(q (2 - q))`` of a :func:`box_share` ``q``: along one coordinate of a
    quadratic model, the reduction of the step cut to the share ``q`` of the model's
    minimizing step is ``q (2 - q)`` of the reduction of the whole step; its square
    root scales a gradient measure (1 inside the box, 0 where a bound holds the entry).
    """
    return jnp.sqrt(share * (2.0 - share))
