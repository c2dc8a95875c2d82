"""One row's covariance in three parts: its :class:`Pieces` (the weighted residuals and
the unit-column Jacobian of the free block), an :class:`Inverse` of ``J_F^T J_F`` (by
the normal equations or the elementwise QR with certificates, :func:`quick_inverse`,
or by LAPACK's SVD and QR, :func:`exact_inverse`), and the
:class:`~fixedopt._results.covariance.Covariance` :func:`finished` from them.
:mod:`fixedopt._results.covariance` chooses the inverse per row: the first that
certifies its row, in that order.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from jax.flatten_util import ravel_pytree

from fixedopt._fixing.mask import unravel_mask
from fixedopt._inputs.validate import Mask, PyTree
from fixedopt._results import normal_inverse, small_inverse
from fixedopt._results.covariance_fields import Covariance
from fixedopt._results.free_block import (
    Constraints,
    ResidualFun,
    held_entries,
    inverse_normal_matrix,
    no_fit,
    npoints,
    numerical_rank,
    residual_variance,
)


class Rule(NamedTuple):
    """The static choices of a covariance: ``absolute_sigma``; ``hold`` bound-active
    entries (``at_bound="fixed"``); ``pseudo_inverse`` for a rank-deficient row."""

    absolute_sigma: bool
    hold: bool
    pseudo_inverse: bool


class Pieces(NamedTuple):
    """One row's covariance before its inverse: the weighted ``residual``, ``jacobian``
    with unit columns (held ones 0) and its ``column_scale``, the bound-active and the
    ``frozen`` (held) entries, the ``zero`` free columns, ``n_free`` and ``dof``."""

    residual: jax.Array
    jacobian: jax.Array
    column_scale: jax.Array
    at_bound: jax.Array
    frozen: jax.Array
    zero: jax.Array
    n_free: jax.Array
    dof: jax.Array


class Inverse(NamedTuple):
    """One row's ``(J_F^T J_F)^{-1}`` of the unit columns (``unscaled``), the ``rank``
    of its free block and the parameters the data cannot determine."""

    unscaled: jax.Array
    rank: jax.Array
    undetermined: jax.Array


def pieces(
    residual_fun: ResidualFun,
    rule: Rule,
    x: PyTree,
    constraints: Constraints,
    sigma: jax.Array | None,
    args: PyTree,
) -> Pieces:
    """The :class:`Pieces` of one row at ``x``."""
    flat_x, unravel = ravel_pytree(x)
    jacobian, residual = weighted_jacobian(residual_fun, x, constraints.fixed, sigma, args)
    at_bound, frozen = held_entries(flat_x, constraints, rule.hold, lambda: residual @ jacobian)
    jacobian = jnp.where(frozen[None, :], 0.0, jacobian)  # held: zero columns too
    points = residual.size if sigma is None else npoints(sigma, residual_fun, flat_x, unravel, args)
    n_free = jnp.sum(~frozen)
    # Unit columns: the rank test and the inverse then do not depend on the units of
    # the parameters (in float32, columns 1e6 apart passed for rank-deficient).
    squared = jnp.sum(jacobian**2, axis=0)  # 0 at frozen columns: kept off the sqrt,
    column_scale = jnp.sqrt(jnp.where(squared > 0, squared, 1.0))  # whose slope is inf
    jacobian = jacobian / column_scale[None, :]
    zero = (squared == 0) & ~frozen  # a free parameter the residuals do not depend on
    return Pieces(residual, jacobian, column_scale, at_bound, frozen, zero, n_free,
                  points - n_free)  # fmt: skip


def weighted_jacobian(
    residual_fun: ResidualFun, x: PyTree, fixed: Mask, sigma: jax.Array | None, args: PyTree
) -> tuple[jax.Array, jax.Array]:
    """``(J, r)`` of one row's weighted residuals ``r`` (flat, ``(m,)``) at ``x``, ``J``
    of shape ``(m, n)`` over ``ravel_pytree(x)``."""
    flat_x, unravel = ravel_pytree(x)
    flat_fixed = ravel_pytree(fixed)[0]

    # Fixed entries read a constant: exact zero Jacobian columns. An infinite sigma
    # (curve_fit's nan_policy="omit" in a batch) weighs its residual 0. Twice: jacfwd
    # (has_aux=True) gives the residuals with their Jacobian, from one trace.
    def weighted(flat: jax.Array) -> tuple[jax.Array, jax.Array]:
        r = residual_fun(unravel(jnp.where(flat_fixed, flat_x, flat)), *args)
        r = jnp.ravel(r if sigma is None else jnp.where(jnp.isinf(sigma), 0.0, r / sigma))
        return r, r

    found: tuple[jax.Array, jax.Array] = jax.jacfwd(weighted, has_aux=True)(flat_x)
    return found


def quick_inverse(found: Pieces, normal: bool = False) -> tuple[Inverse, jax.Array]:
    """One row's :class:`Inverse` by the elementwise QR (``normal``: from the normal
    equations, :mod:`fixedopt._results.normal_inverse`), and whether it is
    ``certified``: the free columns but the zero ones have full rank by scipy's count
    (so the zero ones are the parameters the data cannot determine), its inverse
    finite (and, from the normal equations, accurate). Where it is not, the row needs
    the next path (the QR, then :func:`exact_inverse`)."""
    held = found.frozen | found.zero
    inverse = normal_inverse.certified_inverse if normal else small_inverse.certified_inverse
    unscaled, certified = inverse(found.jacobian, held)
    unscaled = jnp.where(held[:, None] | held[None, :], 0.0, unscaled)
    return Inverse(unscaled, found.n_free - jnp.sum(found.zero), found.zero), certified


def exact_inverse(pseudo_inverse: bool, found: Pieces) -> Inverse:
    """One row's :class:`Inverse` by LAPACK: the rank by an SVD, ``(J_F^T J_F)^{-1}``
    from a QR, and with ``pseudo_inverse`` the SVD's pseudo-inverse where collinear."""
    frozen, zero = found.frozen, found.zero
    rank, largest, pseudo, undetermined = numerical_rank(jax.lax.stop_gradient(found.jacobian))
    undetermined = (undetermined | zero) & ~frozen & (rank < found.n_free)
    # The QR reads the SVD's largest singular value, so it runs after the SVD: jaxlib
    # 0.10's CPU LAPACK kernels deadlock when two run side by side on a 2-core pool (seen:
    # gesdd and geqrf, both in ParallelBatchMap; an optimization_barrier did not order
    # them). tests/test_hlo.py checks the dependency. Zero columns are held out of the
    # QR (the pseudo-inverse of a zero column is 0; leastsq's R is singular there).
    unscaled = inverse_normal_matrix(found.jacobian, frozen | zero, largest)
    unscaled = jnp.where(zero[:, None] | zero[None, :], 0.0, unscaled)
    if pseudo_inverse:  # collinear columns beyond the zero ones: the SVD's
        collinear = rank < found.n_free - jnp.sum(zero)
        unscaled = jnp.where(collinear, pseudo, unscaled)
    return Inverse(unscaled, rank, undetermined)


def finished(
    rule: Rule, x: PyTree, constraints: Constraints, found: Pieces, inverse: Inverse
) -> Covariance:
    """One row's covariance (``index`` left None) from its pieces and inverse."""
    variance = residual_variance(rule.absolute_sigma, found.residual, found.dof)
    finite = jnp.all(jnp.isfinite(found.residual))
    return scaled(rule, x, constraints, found, inverse, variance, finite)


def scaled(
    rule: Rule,
    x: PyTree,
    constraints: Constraints,
    found: Pieces,
    inverse: Inverse,
    variance: jax.Array,
    finite: jax.Array,
) -> Covariance:
    """:func:`finished` given the residual ``variance`` (``s^2``) and whether the
    residuals are ``finite`` at ``x`` (``found.residual`` is not read)."""
    unravel = ravel_pytree(x)[1]
    frozen, dof = found.frozen, found.dof
    unscaled, rank, undetermined = inverse
    rank_deficient = rank < found.n_free
    singular = jnp.zeros((), bool) if rule.pseudo_inverse else rank_deficient
    unscaled = unscaled / (found.column_scale[:, None] * found.column_scale[None, :])
    both_free = ~frozen[:, None] & ~frozen[None, :]
    block = jnp.where(jnp.isinf(variance) | singular, jnp.inf, variance * unscaled)
    cov = jnp.where(both_free, _unknowable(block, undetermined, finite, constraints), 0.0)
    stderr = jnp.sqrt(jnp.diagonal(cov))
    return Covariance(
        covariance=cov,
        stderr=unravel(stderr),
        rank_deficient=rank_deficient,
        dof=dof.astype(jnp.int32),
        residual_variance=variance,
        fixed=constraints.fixed,
        at_bound=unravel_mask(found.at_bound, constraints.fixed),
        index=None,
    )


def _unknowable(
    block: jax.Array, undetermined: jax.Array, finite: jax.Array, constraints: Constraints
) -> jax.Array:
    """``block`` with what the row cannot know: a parameter the data cannot determine
    has no finite error, whatever s^2 (0 for data fitted exactly: an all-zero signal),
    and its covariances with the others neither (inf); a row whose residuals are not
    finite at x (NaN data, a model that turned non-finite) has no covariance, even where
    the variance is taken as 1 (absolute_sigma: the Poisson Fisher information reads the
    model alone), nor has a row whose solve failed, at the finite point it stopped at
    (NaN)."""
    block = jnp.where(undetermined[:, None] | undetermined[None, :], jnp.inf, block)
    return jnp.where(~finite | no_fit(constraints), jnp.nan, block)


def select(certified: jax.Array, quick: Any, exact: Any) -> Any:
    """Per row, ``quick``'s leaves where ``certified``, else ``exact``'s (leaves with
    the rows' leading axes of ``certified``)."""

    def pick(a: jax.Array, b: jax.Array) -> jax.Array:
        flag = jnp.reshape(certified, certified.shape + (1,) * (a.ndim - certified.ndim))
        return jnp.where(flag, a, b)

    return jax.tree.map(pick, quick, exact)
