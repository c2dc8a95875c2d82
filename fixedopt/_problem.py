"""One row's problem in flat form: what every solver sees.

The public functions ravel each row's pytree into one vector, mask the objective with
the fixed entries (in-function ``stop_gradient``) and hand the solvers a
:class:`Problem`. Solvers never see pytrees, batch axes or unmasked gradients.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp


class Problem(NamedTuple):
    """One problem, flat: ``x`` is a vector of ``n`` entries.

    Attributes:
      value_and_grad: ``x -> (value, grad)``; ``grad`` is exactly zero at fixed entries.
      fixed: boolean vector, ``True`` = fixed.
      fixed_values: the values of the fixed entries (the rest is ignored).
      lower, upper: bound vectors, or ``None`` when there are no bounds (static).
      residual_and_jacobian: ``x -> (r, J)`` for least squares (``J`` has exact zero
        columns at fixed entries), else ``None``.
    """

    value_and_grad: Callable
    fixed: jax.Array
    fixed_values: jax.Array
    lower: jax.Array | None = None
    upper: jax.Array | None = None
    residual_and_jacobian: Callable | None = None

    @property
    def has_bounds(self) -> bool:
        return self.lower is not None

    def project(self, x: jax.Array) -> jax.Array:
        """``where(fixed, fixed_values, clip(x, lower, upper))``: fixed bit-identical."""
        if self.has_bounds:
            x = jnp.clip(x, self.lower, self.upper)
        return jnp.where(self.fixed, self.fixed_values, x)

    def projected_gradient(self, x: jax.Array, grad: jax.Array) -> jax.Array:
        """``x - clip(x - grad, lower, upper)`` on free entries, zero on fixed ones."""
        if self.has_bounds:
            grad = x - jnp.clip(x - grad, self.lower, self.upper)
        return jnp.where(self.fixed, jnp.zeros_like(grad), grad)

    def grad_norm(self, x: jax.Array, grad: jax.Array) -> jax.Array:
        """Max-norm of the projected gradient over free entries (0 when all fixed)."""
        return jnp.max(jnp.abs(self.projected_gradient(x, grad)), initial=0.0)

    def at_bound(self, x: jax.Array, grad: jax.Array, margin) -> jax.Array:
        """Free entries within ``margin`` of a bound that the gradient pushes toward.

        Solvers treat these with a scaled gradient-projection step (Bertsekas'
        two-metric projection) and keep them out of their curvature model, so the
        "active set" is just one more mask on top of ``fixed``.
        """
        if not self.has_bounds:
            return jnp.zeros_like(self.fixed)
        near_lower = (x <= self.lower + margin) & (grad > 0)
        near_upper = (x >= self.upper - margin) & (grad < 0)
        return (near_lower | near_upper) & ~self.fixed
