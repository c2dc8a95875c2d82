"""One row's problem in flat form: what every solver sees.

The public functions ravel each row's pytree into one vector, mask the objective with
the fixed entries (in-function ``stop_gradient``) and hand the solvers a
:class:`Problem`. Solvers never see pytrees, batch axes or unmasked gradients.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.flatten_util import ravel_pytree

from fixedopt._losses import Loss
from fixedopt._solver import Problem


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
