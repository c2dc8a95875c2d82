"""The normal equations on the free block of the Jacobian, and the measures of the
Gauss–Newton model that MINPACK's tests read: what Levenberg–Marquardt and Gauss–Newton
share.

Fixed entries give the Jacobian exact zero columns. Both solvers solve the normal
equations on the free block only: rows and columns of fixed (and bound-active) entries
are replaced by those of the identity, with a zero right-hand side, so the step is
exactly zero there and the system stays non-singular — no NaN, no "singular" failure.

Shapes, for one row of ``n`` flat parameters and ``m`` residuals: ``x``, ``grad``,
``step`` and ``scale`` are ``(n,)``, the Jacobian ``(m, n)``, ``J^T J`` ``(n, n)``;
scalars are ``()`` arrays.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

from fixedopt._contract.solver import Problem
from fixedopt._numerics import reduce
from fixedopt._solvers import small_linalg


def residuals_and_jacobian(problem: Problem, x: jax.Array) -> tuple[jax.Array, jax.Array]:
    """``(residual, jacobian)`` at ``x``, of shapes ``(m,)`` and ``(m, n)``."""
    residual_and_jacobian = problem.residual_and_jacobian
    if residual_and_jacobian is None:  # the driver passes it to these solvers
        raise TypeError("a least-squares solver needs `problem.residual_and_jacobian`")
    return residual_and_jacobian(x)


def free_block_step(
    jacobian: jax.Array,
    grad: jax.Array,
    free: jax.Array,
    damping: ArrayLike,
    scale: jax.Array | None = None,
) -> jax.Array:
    """Solve ``(J^T J + damping * D^2) step = -grad`` on the free entries.

    ``jacobian``: ``(m, n)``; ``grad``, ``free`` (boolean) and ``scale``: ``(n,)``;
    ``damping``: ``()``. Returns the ``(n,)`` step, in the dtype of ``grad``.

    ``D^2 = scale`` defaults to ``diag(J^T J)`` (Marquardt); Levenberg–Marquardt passes
    the running maximum of it (Moré 1978), which keeps the damping unit-free and the
    step bounded where a Jacobian column vanishes. Entries that are not free get an
    identity row/column and a zero right-hand side: their step is 0. Half-precision
    inputs are solved in float32 (XLA has no half-precision Cholesky). Up to
    ``fixedopt._solvers.small_linalg.SMALL_N`` entries, the solve is elementwise
    arithmetic (no LAPACK call; see :mod:`fixedopt._solvers.small_linalg`).
    """
    return normal_equations_step(normal_matrix(jacobian), grad, free, damping, scale)


def normal_matrix(jacobian: jax.Array) -> jax.Array:
    """``J^T J``, formed in float32 at least (no half-precision Cholesky; no overflow
    of half-precision squares)."""
    return small_linalg.gram(jacobian.astype(jnp.promote_types(jacobian.dtype, jnp.float32)))


def normal_equations_step(
    normal: jax.Array,
    grad: jax.Array,
    free: jax.Array,
    damping: ArrayLike,
    scale: jax.Array | None = None,
) -> jax.Array:
    """:func:`free_block_step` from the normal matrix ``J^T J`` (``(n, n)``).

    Each column keeps its own damping weight ``D^2``, whatever its units: a parameter
    in seconds (``tau`` = 2e-9) beside one in counts (1e4) has squared column norms 1e25
    apart, and a weight floored at ``eps`` times the largest (as it was) held the counts
    still in float32, where the fit stopped CONVERGED at its start. The Cholesky factor
    keeps its accuracy under any such diagonal scaling. The damping term is at least
    ``tiny``, so that a column that never held a number (its gradient is 0 too) takes
    no step rather than dividing 0 by 0.
    """
    dtype = grad.dtype
    if jnp.finfo(dtype).bits < 32:  # no low-precision Cholesky: solve in float32
        normal, grad = normal.astype(jnp.float32), grad.astype(jnp.float32)
    diagonal = jnp.diagonal(normal) if scale is None else scale.astype(normal.dtype)
    weight = jnp.maximum(damping * diagonal, jnp.finfo(normal.dtype).tiny)
    both_free = free[:, None] & free[None, :]
    matrix = jnp.where(both_free, normal + jnp.diag(weight), 0.0)
    matrix = matrix + jnp.diag(jnp.where(free, 0.0, 1.0))
    rhs = jnp.where(free, -grad, 0.0)
    if small_linalg.is_small(grad.shape[-1]):  # unrolled: fuses with what surrounds it
        solution = small_linalg.spd_solve(matrix, rhs)
    else:
        solution = jax.scipy.linalg.cho_solve(jax.scipy.linalg.cho_factor(matrix), rhs)
    return jnp.where(free, solution, 0.0).astype(dtype)


def column_norms_squared(problem: Problem, jacobian: jax.Array) -> jax.Array:
    """``diag(J^T J)``, zero at fixed entries (their columns are exactly zero)."""
    return problem.free_part(small_linalg.column_norms_squared(jacobian))


def residual_cosine(
    problem: Problem, x: jax.Array, grad: jax.Array, jacobian: jax.Array, residual: jax.Array
) -> jax.Array:
    """MINPACK's ``gtol`` measure: the largest ``|J_j . r| / (|J_j| |r|)`` over free,
    not bound-active columns (the projected gradient in the numerator); 0 for a zero
    residual or a zero column."""
    return cosine(problem, x, grad, column_norms_squared(problem, jacobian),
                  jnp.linalg.norm(residual))  # fmt: skip


def cosine(
    problem: Problem, x: jax.Array, grad: jax.Array, columns: jax.Array, residual_norm: jax.Array
) -> jax.Array:
    """:func:`residual_cosine` from the squared column norms (zero at fixed entries)
    and ``|r|``."""
    projected = jnp.abs(problem.projected_gradient(x, grad))
    denominator = jnp.sqrt(columns) * residual_norm
    cosine = jnp.where(projected == 0, 0.0, projected / jnp.where(projected == 0, 1.0, denominator))
    return reduce.largest(cosine, initial=0.0)


def gauss_newton_model(
    problem: Problem,
    x: jax.Array,
    grad: jax.Array,
    curvature: jax.Array,
    step: jax.Array,
    scale: jax.Array,
) -> tuple[jax.Array, jax.Array]:
    """``(predicted, relative_step)`` of a step of the Gauss–Newton model: the
    predicted reduction ``-(g.s + |J s|^2 / 2)`` (negative for a projected step that
    the model says goes uphill), ``curvature = |J s|^2``, and ``|D s| / |D x|``,
    ``D^2 = scale``."""
    predicted = -(reduce.dot(grad, step) + 0.5 * curvature)
    return predicted, relative_step_size(problem, x, step, scale)


def cauchy_reduction(
    normal: jax.Array, grad: jax.Array, free: jax.Array, scale: jax.Array, damping: ArrayLike
) -> jax.Array:
    """The reduction the damped Gauss–Newton model ``g.s + s.(J^T J + damping D^2).s / 2``
    predicts at its minimum along the scaled gradient ``-D^-2 g`` (its Cauchy point,
    ``D^2 = scale``): ``(g.v)^2 / (2 v.(J^T J + damping D^2).v)``, ``v = D^-2 g`` on the
    ``free`` entries. At a fixed ``damping`` it is small only where the gradient is,
    whatever damping a row's steps have grown to; one product with ``J^T J``.

    Levenberg–Marquardt's ftol and precision tests read the larger of this (at the
    initial damping) and the damped step's predicted reduction, which is small
    wherever the damping grew, near a minimum or not (at a NaN wall in float32, an
    accepted step in rounding passed ftol with a gradient of 18). While the damping
    is at most the initial one, the damped step predicts at least as much (without
    bounds the larger is the step's own prediction)."""
    v = jnp.where(free & (scale > 0), grad / jnp.where(scale > 0, scale, 1.0), 0.0)
    gv = reduce.dot(grad, v)
    wide = v.astype(normal.dtype)
    curvature = reduce.dot(wide, small_linalg.matvec(normal, wide)).astype(gv.dtype) + damping * gv
    ratio = gv / jnp.where(curvature > 0, curvature, 1.0)  # before the product: no overflow
    return jnp.where(curvature > 0, 0.5 * gv * ratio, 0.0)


def relative_step_size(
    problem: Problem, x: jax.Array, step: jax.Array, scale: jax.Array
) -> jax.Array:
    """``|D s| / |D x|`` over free entries, ``D^2 = scale`` (MINPACK's xtol measure)."""
    d = jnp.sqrt(scale)
    step_norm = reduce.norm(d * step)
    return jnp.where(step_norm == 0, 0.0, step_norm / reduce.norm(problem.free_part(d * x)))


EPS_FACTOR = 10  # a predicted reduction below this many eps of f is rounding noise


def eps_of(value: jax.Array) -> np.floating[Any]:
    return jnp.finfo(value.dtype).eps
