"""The pieces that :mod:`fixedopt._results.covariance` assembles a row's covariance from
(and :mod:`fixedopt._results.hessian_covariance` shares): what holds a fit's entries,
normalized from a :class:`fixedopt.Solution` or an ``x`` alone (``Constraints``,
``solved_problem``), the entries a row holds (``held_entries``) and its flat index;
and the linear algebra of the free block of ``J``: the residual variance ``s^2``, the
numerical rank and pseudo-inverse, and ``(J_F^T J_F)^{-1}`` from a QR factorization.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree

from fixedopt._contract.status import Status
from fixedopt._fixing.mask import active_set
from fixedopt._inputs import arrays
from fixedopt._inputs import validate as _validate
from fixedopt._inputs.checks import optional_boolean
from fixedopt._inputs.validate import Bounds, Mask, PyTree, fixed_arrays
from fixedopt._objective.arguments import batched_args
from fixedopt._results.solution_fields import SolutionFields

ResidualFun = Callable[..., jax.Array]  # residual_fun(x, *args) -> (m,) residuals


class Constraints(NamedTuple):
    """What holds a fit's entries, normalized (trees like ``x``): its fixed mask, its
    bounds, and its bound-active entries where known (the solve's, with its bounds;
    None: to be found from the gradient); and whether the row's solve failed, where
    known (a :class:`fixedopt.Solution`'s status; None for an ``x`` alone)."""

    fixed: Mask
    bounds: Bounds | None
    at_bound: PyTree | None
    failed: jax.Array | None


def solved_types(
    rows: Callable[[tuple[int, ...], Any], Any], n: int, dtype: Any, bounded: bool
) -> tuple[Any, Constraints]:
    """The ``x`` and :class:`Constraints` that :func:`solved_problem` makes of a batched
    solve's :class:`fixedopt.Solution` of ``n`` parameters (``bounded``: whether it has
    bounds), before the solve has run: each leaf ``rows(shape, dtype)`` (one row's
    shape: ``rows`` adds the batch), its failed rows a NumPy vector, as there (a
    covariance program traced and lowered ahead: ``covariance.early_on_device``,
    ``solver_covariance.early``)."""
    start, flags = rows((n,), dtype), rows((n,), np.bool_)
    failed: Any = np.broadcast_to(np.zeros((), bool), np.shape(start)[:1])  # as _failed's
    return start, Constraints(flags, (start, start) if bounded else None, flags, failed)


def no_fit(constraints: Constraints) -> jax.Array | bool:
    """Whether the row's solve failed (its covariance is NaN): its status is
    ``NONFINITE`` (the last finite iterate before a NaN wall) or ``INFEASIBLE``."""
    return False if constraints.failed is None else constraints.failed


def solved_problem(
    sol: SolutionFields | PyTree, fixed: Mask | None, bounds: Bounds | None, batched: bool | None
) -> tuple[PyTree, Constraints, bool]:
    """``(x, constraints, batched)`` of a covariance of ``sol``: the mask and bounds
    given or else the solution's (with its active set), and ``batched`` given or else
    the solution's."""
    solution = isinstance(sol, SolutionFields)
    x = sol.x if solution else sol
    _validate.check_params(x, "sol.x")
    if fixed is None and not solution:
        raise TypeError(
            "`fixed` is required when `sol` is not a fixedopt.Solution (an x alone): "
            "pass the fit's fixed mask"
        )
    batched = optional_boolean("batched", batched)
    mask = sol.fixed if fixed is None else fixed_arrays(fixed, x)  # a solve's: normalized
    stored = sol.at_bound if solution and bounds is None else None
    # The solve's bounds are normalized already; a row where they are empty is
    # INFEASIBLE (its covariance NaN), not an error for the whole batch.
    bounds = _validate.normalize_bounds(bounds, x) if stored is None else sol.bounds
    if batched is None:
        batched = solution and jnp.ndim(sol.value) == 1
    failed = None
    if solution:
        failed = _failed(sol.status)
    return x, Constraints(mask, bounds, stored, failed), batched


def _failed(status: jax.Array) -> jax.Array:
    """Whether each row's solve failed (NONFINITE or INFEASIBLE) or was left out
    (SKIPPED); in NumPy where the
    status is concrete (no small program compiled for each new batch size)."""
    codes = (Status.NONFINITE, Status.INFEASIBLE, Status.SKIPPED)
    known = _validate.concrete_or_none(status)
    if known is None:
        return (status == codes[0]) | (status == codes[1]) | (status == codes[2])
    return np.isin(known, codes)  # type: ignore[return-value]  # an array all the same


def args_in_axes(args: tuple[Any, ...], args_axes: Any, batch: int) -> PyTree:
    """``vmap`` axes for ``args``: 0 for per-row arrays (checked), None for the rest
    (``args_axes`` as in ``least_squares``)."""
    flags = iter(batched_args(args, args_axes, batch))
    return jax.tree.map(lambda _: 0 if next(flags) else None, args)


def flat_index(row: PyTree) -> PyTree:
    """A tree like ``row`` of each entry's position in ``ravel_pytree(row)``."""
    leaves, treedef = jax.tree.flatten(row)
    offsets = [0]
    for leaf in leaves:
        offsets.append(offsets[-1] + leaf.size)
    index = [
        arrays.asarray(np.arange(start, start + leaf.size, dtype=np.int32).reshape(leaf.shape))
        for start, leaf in zip(offsets, leaves)
    ]
    return jax.tree.unflatten(treedef, index)


def held_entries(
    flat_x: jax.Array, constraints: Constraints, hold: bool, gradient: Callable[[], jax.Array]
) -> tuple[jax.Array, jax.Array]:
    """``(at_bound, frozen)`` of one row, flat: the bound-active entries (the solve's
    own, or :func:`~fixedopt._fixing.mask.active_set` with ``gradient()``, the objective's
    gradient at ``x``), and the entries the covariance holds (fixed ones, and
    bound-active ones if ``hold``)."""
    fixed = ravel_pytree(constraints.fixed)[0]
    at_bound = jnp.zeros_like(fixed)
    if constraints.at_bound is not None:
        at_bound = ravel_pytree(constraints.at_bound)[0] & ~fixed
    elif constraints.bounds is not None:
        lower, upper = (ravel_pytree(b)[0] for b in constraints.bounds)
        at_bound = active_set(flat_x, gradient(), fixed, lower, upper)
    return at_bound, fixed | at_bound if hold else fixed


def npoints(
    sigma: jax.Array, residual_fun: ResidualFun, flat_x: jax.Array, unravel: Any, args: PyTree
) -> jax.Array:
    """The residuals that count as data: those of finite ``sigma``."""
    shape = jax.eval_shape(lambda: residual_fun(unravel(flat_x), *args)).shape
    return jnp.sum(jnp.broadcast_to(jnp.isfinite(sigma), shape))


def residual_variance(absolute_sigma: bool, residual: jax.Array, dof: jax.Array) -> jax.Array:
    """``s^2 = sum(r^2) / dof`` (``inf`` for ``dof <= 0``), or 1 for ``absolute_sigma``."""
    return summed_variance(absolute_sigma, jnp.dot(residual, residual), dof)


def summed_variance(absolute_sigma: bool, rss: jax.Array, dof: jax.Array) -> jax.Array:
    """:func:`residual_variance` from the residuals' sum of squares ``rss``."""
    if absolute_sigma:
        return jnp.ones((), rss.dtype)
    return jnp.where(dof > 0, rss / jnp.maximum(dof, 1), jnp.inf)


def numerical_rank(jacobian: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
    """Numerical rank with scipy's (``curve_fit``'s) cut-off ``eps * max(m, n) * s_max``,
    ``s_max``, the pseudo-inverse of ``J^T J`` with that cut-off (scipy's
    ``VT.T / s**2 @ VT``), and which parameters the data cannot determine: those whose
    unit vector leaves the row space of ``J`` (of unit columns: more than ``sqrt(eps)``
    of its square outside it), a zero column or one of collinear ones."""
    _, singular, vt = jnp.linalg.svd(jacobian, full_matrices=False)
    eps = jnp.finfo(jacobian.dtype).eps
    cutoff = eps * max(jacobian.shape) * singular[0]
    kept = singular > cutoff
    inverse_square = jnp.where(kept, 1.0 / jnp.where(kept, singular, 1.0) ** 2, 0.0)
    pseudo = (vt.T * inverse_square[None, :]) @ vt
    in_row_space = jnp.sum(jnp.where(kept[:, None], vt**2, 0.0), axis=0)
    undetermined = 1.0 - in_row_space > jnp.sqrt(eps)
    return jnp.sum(kept), singular[0], pseudo, undetermined


def inverse_normal_matrix(jacobian: jax.Array, frozen: jax.Array, scale: jax.Array) -> jax.Array:
    """``(J_F^T J_F)^{-1}`` on the free block, from the QR factorization of ``J`` with
    rows ``scale * e_j`` appended for the frozen columns ``j`` (zero in ``J``; ``scale``
    is ``J``'s largest singular value, 1 if it is 0, so ``R`` stays scaled like ``J``;
    the frozen block, ``1 / scale**2``, is discarded): accurate to ``eps * cond(J)``, not
    ``cond(J)**2`` as from ``J^T J``, and differentiable (an SVD's derivative is not, at
    the repeated zero singular values of the frozen columns)."""
    scale = jnp.where(scale > 0, scale, 1.0)
    rows = jnp.diag(jnp.where(frozen, scale, 0.0).astype(jacobian.dtype))
    augmented = jnp.concatenate([jacobian, rows])
    r = jnp.linalg.qr(augmented, mode="r")
    identity = jnp.eye(r.shape[0], dtype=r.dtype)
    r_inverse = jax.scipy.linalg.solve_triangular(r, identity, lower=False)
    return r_inverse @ r_inverse.T
