"""Uncertainties of a ``minimize`` solution: the inverse Hessian on the free block.

At a minimum ``x`` of ``fun`` (a negative log-likelihood, say), the covariance of the
free parameters ``F`` is

    cov_FF = scale * (H_FF)^{-1},      H = the Hessian of fun at x,

``scale = 1`` for a negative log-likelihood (the inverse observed Fisher information)
or a half chi-square ``0.5 * sum((r / sigma)**2)``; ``scale = 2`` for a chi-square.
Fixed parameters get exactly 0 variance and covariance, as in
:func:`fixedopt.covariance`, and so do bound-active ones with ``at_bound="fixed"``
(the solve's own, or those on a bound that the gradient pushes against).
The inverse comes from a Cholesky factorization of ``H_FF`` with unit diagonal
(differentiable); its eigenvalues decide whether it exists: when ``H_FF`` is not
positive definite to working precision (eigenvalues of the unit-diagonal matrix at most
``eps * n`` times the largest: a saddle, a maximum, a flat direction), the row is
flagged ``rank_deficient`` and its free block is NaN. So is the free block of a row
whose value at ``x`` is not finite (NaN data), and, from a :class:`fixedopt.Solution`,
of a row whose solve failed (``NONFINITE``, ``INFEASIBLE``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
from jax.flatten_util import ravel_pytree

from fixedopt._fixing.mask import unravel_mask
from fixedopt._inputs.checks import one_of
from fixedopt._inputs.validate import Bounds, Mask, PyTree, batch_size
from fixedopt._objective.arguments import args_tuple
from fixedopt._results.covariance import AT_BOUND, AT_BOUND_DEFAULT, Covariance
from fixedopt._results.free_block import (
    Constraints,
    args_in_axes,
    flat_index,
    held_entries,
    no_fit,
    solved_problem,
)
from fixedopt._results.solution_fields import SolutionFields

Objective = Callable[..., jax.Array]  # fun(x, *args) -> scalar


def hessian_covariance(
    sol: SolutionFields | PyTree,
    fun: Objective,
    fixed: Mask | None = None,
    *,
    args: tuple[Any, ...] = (),
    batched: bool | None = None,
    bounds: Bounds | None = None,
    scale: float = 1.0,
    at_bound: str = AT_BOUND_DEFAULT,
    args_axes: Any = None,
) -> Covariance:
    """Covariance and standard errors of the free parameters at a minimum of ``fun``.

    Per row: ``scale * (H_FF)^{-1}``, ``H`` the Hessian of ``fun(x, *args)`` at
    ``sol.x`` and ``F`` the free parameters (not fixed; with ``at_bound="fixed"``,
    not bound-active either). The counterpart of :func:`fixedopt.covariance` for
    :func:`fixedopt.minimize`, with the same fields and flags; a
    :class:`fixedopt.Solution` brings its fit's mask, bounds and bound-active entries,
    and whether it is batched.

    Args:
      sol: a :class:`fixedopt.Solution` of :func:`fixedopt.minimize` (or its ``x``
        alone, with ``fixed``).
      fun: the objective of the fit, ``fun(x, *args) -> scalar``, for one row.
      fixed: the fixed mask (any form ``minimize`` accepts); by default ``sol.fixed``.
        Given, it is used even where it differs from the solve's, as in
        :func:`fixedopt.covariance`; required for an ``x`` alone.
      args: the fit's ``args`` (with ``batched=True``, arrays have the batch axis).
      batched: ``sol`` holds one fit per row; each row gets its own free set. By
        default, whether the ``Solution`` is batched.
      bounds: the bounds whose active entries are flagged; by default the solve's,
        with its own active set (``sol.at_bound``). Given (or with an ``x`` alone),
        the active set is taken from ``fun``'s gradient at ``x``, as in
        :func:`fixedopt.covariance`.
      scale: the factor of the inverse Hessian: 1 for a negative log-likelihood or a
        half chi-square, 2 for a chi-square ``sum((r / sigma)**2)``, ``2 f / dof`` for
        an unweighted sum of squares ``f`` (``curve_fit``'s ``s^2``). A positive number.
      at_bound: ``"free"`` or ``"fixed"``, as in :func:`fixedopt.covariance`.
      args_axes: with ``batched=True``, which ``args`` are per row.

    Returns:
      A :class:`fixedopt.Covariance`; its ``rank_deficient`` flags a free block that
      is not positive definite (NaN; a row whose value at ``x`` is not finite, or a
      :class:`fixedopt.Solution`'s row whose solve failed, status ``NONFINITE`` or
      ``INFEASIBLE``, has a NaN free block too, unflagged), ``dof`` is -1 (no
      residuals) and ``residual_variance`` is ``scale``.

    Example:
      >>> import jax.numpy as jnp
      >>> import fixedopt
      >>> y = jnp.array([2.0, 3.0, 7.0, 4.0])           # Poisson counts, one mean
      >>> nll = lambda p: jnp.sum(jnp.exp(p[0]) - y * p[0]) + 0.0 * p[1]
      >>> sol = fixedopt.minimize(nll, jnp.zeros(2), jnp.array([False, True]))
      >>> cov = fixedopt.hessian_covariance(sol, nll)
      >>> print(cov.stderr.round(4))  # sqrt(1 / (n mean)) for log(mean)
      [0.25 0.  ]
    """
    x, constraints, batched = solved_problem(sol, fixed, bounds, batched)
    one_of("at_bound", at_bound, AT_BOUND)
    if isinstance(scale, bool) or not (isinstance(scale, (int, float)) and scale > 0):
        raise ValueError(f"`scale` must be a positive number, got {scale!r}")
    if not callable(fun):
        raise TypeError(f"`fun` must be callable, got {type(fun).__name__}")
    batch = batch_size(x, "sol.x") if batched else None
    args = args_tuple(args)
    axes = args_in_axes(args, args_axes, batch) if batch is not None else None
    hold = at_bound == "fixed"
    result: Covariance = _compiled(fun, batched, hold, axes, x, constraints, float(scale), args)
    row = jax.tree.map(lambda leaf: leaf[0], x) if batched else x
    return result._replace(index=flat_index(row))


@functools.partial(jax.jit, static_argnums=(0, 1, 2, 3))
def _compiled(
    fun: Objective,
    batched: bool,
    hold: bool,
    axes: PyTree,
    x: PyTree,
    constraints: Constraints,
    scale: float,
    args: tuple[Any, ...],
) -> Covariance:
    def one(x: PyTree, constraints: Constraints, args: PyTree) -> Covariance:
        return _row(fun, hold, x, constraints, scale, args)

    if not batched:
        return one(x, constraints, args)
    return jax.vmap(one, in_axes=(0, 0, axes))(x, constraints, args)


def _row(
    fun: Objective,
    hold: bool,
    x: PyTree,
    constraints: Constraints,
    scale: float,
    args: PyTree,
) -> Covariance:
    flat_x, unravel = ravel_pytree(x)
    fixed = ravel_pytree(constraints.fixed)[0]

    def objective(flat: jax.Array) -> jax.Array:  # fixed entries read a constant
        value: jax.Array = fun(unravel(jnp.where(fixed, flat_x, flat)), *args)
        return value

    gradient = lambda: jax.grad(objective)(flat_x)
    at_bound, frozen = held_entries(flat_x, constraints, hold, gradient)
    hessian = jax.hessian(objective)(flat_x)
    both_free = ~frozen[:, None] & ~frozen[None, :]
    hessian = jnp.where(both_free, hessian, 0.0)
    # Unit diagonal: the test and the factorization do not depend on the units.
    diagonal = jnp.abs(jnp.diagonal(hessian))
    unit = jnp.sqrt(jnp.where(diagonal > 0, diagonal, 1.0))
    scaled = hessian / (unit[:, None] * unit[None, :])
    definite, largest = _definite(jax.lax.stop_gradient(scaled), frozen)
    # The Cholesky reads the eigenvalues' largest, so it runs after them (two LAPACK
    # calls side by side can hang jaxlib's CPU pool; see fixedopt._results.covariance).
    system = scaled + jnp.diag(jnp.where(frozen, largest, 0.0).astype(scaled.dtype))
    factor = jax.scipy.linalg.cho_factor(system)
    inverse = jax.scipy.linalg.cho_solve(factor, jnp.eye(flat_x.size, dtype=scaled.dtype))
    inverse = inverse / (unit[:, None] * unit[None, :])
    # A row whose value is not finite at x (NaN data) has no covariance, even where
    # its Hessian does not read the data (a quadratic in x); nor has a failed solve.
    finite = jnp.isfinite(objective(flat_x))
    block = jnp.where(definite & finite & ~no_fit(constraints), scale * inverse, jnp.nan)
    cov = jnp.where(both_free, block, 0.0)
    return Covariance(
        covariance=cov,
        stderr=unravel(jnp.sqrt(jnp.diagonal(cov))),
        rank_deficient=~definite,
        dof=jnp.asarray(-1, jnp.int32),
        residual_variance=jnp.asarray(scale, cov.dtype),
        fixed=constraints.fixed,
        at_bound=unravel_mask(at_bound, constraints.fixed),
        index=None,
    )


def _definite(scaled: jax.Array, frozen: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Whether the free block of ``scaled`` (zero off it) is positive definite to
    working precision, and its largest eigenvalue (1 if none is positive)."""
    system = scaled + jnp.diag(jnp.where(frozen, 1.0, 0.0).astype(scaled.dtype))
    eigenvalues = jnp.linalg.eigvalsh(system)
    largest = jnp.maximum(eigenvalues[-1], 1.0)
    cutoff = jnp.finfo(scaled.dtype).eps * scaled.shape[0] * largest
    return jnp.all(eigenvalues > cutoff), largest
