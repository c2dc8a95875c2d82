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
