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
from jax.flatten_util import ravel_pytree

from fixedopt._losses import Loss


class Problem(NamedTuple):
    """One problem, flat: ``x`` is a vector of ``n`` entries.

    Attributes:
      value_and_grad: ``x -> (value, grad)``; ``grad`` is exactly zero at fixed entries.
      fixed: boolean vector, ``True`` = fixed.
      fixed_values: the values of the fixed entries (the rest is ignored).
      lower, upper: bound vectors, or ``None`` when there are no bounds (static).
      residual_and_jacobian: ``x -> (r, J)`` for least squares (``J`` has exact zero
        columns at fixed entries), else ``None``.
      unroll: loops run as fixed-length scans, so that a solve can be differentiated
        by unrolling (static).
      robust: ``residual_and_jacobian`` gives scipy's rescaled residuals and Jacobian
        of a robust loss (see ``fixedopt._losses``), whose half sum of squares is not
        the objective (static).
    """

    value_and_grad: Callable
    fixed: jax.Array
    fixed_values: jax.Array
    lower: jax.Array | None = None
    upper: jax.Array | None = None
    residual_and_jacobian: Callable | None = None
    unroll: bool = False
    robust: bool = False

    @property
    def has_bounds(self) -> bool:
        return self.lower is not None

    def residual_value(self, x: jax.Array, residual: jax.Array) -> jax.Array:
        """The objective at ``x``, given ``residual_and_jacobian(x)[0]``."""
        if self.robust:
            return self.value_and_grad(x)[0]
        return 0.5 * jnp.dot(residual, residual)

    def project(self, x: jax.Array) -> jax.Array:
        """``where(fixed, fixed_values, clip(x, lower, upper))``: fixed bit-identical."""
        if self.has_bounds:
            x = jnp.clip(x, self.lower, self.upper)
        return jnp.where(self.fixed, self.fixed_values, x)

    def free_part(self, v: jax.Array) -> jax.Array:
        """``v`` with fixed entries zeroed: differences and directions use it, so a
        NaN or infinite fixed value never enters an inner product."""
        return jnp.where(self.fixed, jnp.zeros_like(v), v)

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


def row_problem(fun, least_squares: bool, x0, mask, values, bounds, args):
    """One row's :class:`Problem`, its flat starting point and the ``unravel`` back.

    ``fun`` sees ``unravel(where(fixed, values, x))``: gradients and Jacobian
    columns of fixed entries are exactly zero, and ``fun`` never sees a drifted fixed
    value. (``values`` is a separate variable from ``x``, so it needs no
    ``stop_gradient`` here; keeping its gradient path lets an unrolled solve be
    differentiated with respect to the fixed values.)
    """
    flat_x0, unravel = ravel_pytree(x0)
    flat_fixed = ravel_pytree(mask)[0]
    flat_values = ravel_pytree(values)[0]

    def call(flat_x):
        out = fun(unravel(jnp.where(flat_fixed, flat_values, flat_x)), *args)
        # Data in a wider dtype than x0 (float64 data, float32 x0) must not widen the
        # loop's carry: the solve runs in the dtype of x0.
        return _cast_floating(out, flat_x.dtype)

    if least_squares:  # True, or the robust Loss of least_squares(loss=...)
        objective = _residual_objective(call, flat_x0, _loss(least_squares))
    else:
        objective = _scalar_objective(call, flat_x0)
    lower, upper = (None, None) if bounds is None else (ravel_pytree(b)[0] for b in bounds)
    problem = Problem(fixed=flat_fixed, fixed_values=flat_values, lower=lower, upper=upper,
                      **objective)  # fmt: skip
    return problem, flat_x0, unravel


def _cast_floating(out, dtype):
    if hasattr(out, "dtype") and jnp.issubdtype(out.dtype, jnp.floating):
        return out.astype(dtype)
    return out


def differentiable_objective(fun, least_squares: bool, unravel):
    """``(x, fixed, values, args) -> f``: one row's objective with fixed entries read
    from ``values``, not stopped, for implicit differentiation. It closes over no
    traced value (``unravel`` holds only shapes), as ``custom_jvp`` requires."""

    def objective(x, fixed, values, args):
        out = fun(unravel(jnp.where(fixed, values, x)), *args)
        if not least_squares:
            return out
        loss = _loss(least_squares)
        return 0.5 * jnp.sum(jnp.ravel(out) ** 2) if loss is None else loss.cost(out)

    return objective


def _loss(least_squares) -> Loss | None:
    return least_squares if isinstance(least_squares, Loss) else None


def _scalar_objective(call, flat_x0) -> dict:
    out = jax.eval_shape(call, flat_x0)
    if not (hasattr(out, "shape") and out.shape == () and jnp.issubdtype(out.dtype, jnp.floating)):
        raise ValueError(
            "`fun` must return a floating-point scalar for one problem, got "
            f"{getattr(out, 'dtype', type(out).__name__)} of shape {getattr(out, 'shape', '?')}"
        )
    return {"value_and_grad": jax.value_and_grad(call)}


def _residual_objective(call, flat_x0, loss: Loss | None) -> dict:
    out = jax.eval_shape(call, flat_x0)
    if not (hasattr(out, "dtype") and jnp.issubdtype(out.dtype, jnp.floating)):
        raise ValueError(
            "`residual_fun` must return a floating-point array of residuals, got "
            f"{getattr(out, 'dtype', type(out).__name__)}"
        )
    # Forward mode when there are at least as many residuals as unknowns.
    jacobian_of = jax.jacfwd if out.size >= flat_x0.size else jax.jacrev

    def residual(flat_x):
        return jnp.ravel(call(flat_x))

    def value_and_grad(flat_x):
        r, pullback = jax.vjp(residual, flat_x)
        if loss is not None:
            values, slopes, _ = loss.terms(r)
            return 0.5 * jnp.sum(values), pullback(slopes * r)[0]
        return 0.5 * jnp.dot(r, r), pullback(r)[0]

    def residual_and_jacobian(flat_x):
        def with_aux(x):
            r = residual(x)
            return r, r

        jacobian, r = jacobian_of(with_aux, has_aux=True)(flat_x)
        if loss is not None:
            return loss.rescale(r, jacobian)[1:]
        return r, jacobian

    return {
        "value_and_grad": value_and_grad,
        "residual_and_jacobian": residual_and_jacobian,
        "robust": loss is not None,
    }
