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
from fixedopt._numerics import bounds, reduce, scaled
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
    ``Kernels.small_n`` entries (the trace's), the solve is elementwise
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
    problem: Problem, x: jax.Array, value: jax.Array, grad: jax.Array, jacobian: jax.Array,
    residual: jax.Array,
) -> jax.Array:  # fmt: skip
    """MINPACK's ``gtol`` measure, in the box: see :func:`cosine`."""
    norm = cosine_norm(problem, value, residual_norm(residual))
    return cosine(problem, x, grad, column_norms_squared(problem, jacobian), norm)


def cosine_norm(problem: Problem, value: jax.Array, norm: jax.Array) -> jax.Array:
    """The ``|r|`` of :func:`cosine` at a point of cost ``value`` whose residuals' norm is
    ``norm``: ``norm`` itself, but ``sqrt(2 value)`` for the Poisson likelihood
    (``problem.likelihood``, static) where ``value > 0`` (``norm`` where the deviance
    rounds to 0 or below). Its Pearson residuals' ``|r|^2`` is not twice the cost it
    minimizes: a bin where the model is ~0 (1e-30) and the count is not makes it
    ``y^2 / mu`` against the deviance's ``y log(y / mu)``, every cosine fell below
    ``sqrt(eps)`` and a peak fit stopped CONVERGED (GTOL) at its start, centre 700
    where the minimum is 615 (docs/decisions.md, "Verdicts in users' conditions")."""
    if not problem.likelihood:
        return norm
    positive = value > 0
    return jnp.where(positive, jnp.sqrt(2 * jnp.where(positive, value, 0.0)), norm)


def cosine(
    problem: Problem, x: jax.Array, grad: jax.Array, columns: jax.Array, residual_norm: jax.Array
) -> jax.Array:
    """MINPACK's ``gtol`` measure from the squared column norms ``|J_j|^2`` (zero at fixed
    entries) and ``|r|``: the largest over free entries of ``c_j sqrt(q_j (2 - q_j))``.

    ``c_j = |g_j| / (|J_j| |r|)`` is the cosine between the residual and column ``j``
    (0 for a zero gradient): ``c_j^2`` is the share of ``|r|^2`` that a Gauss–Newton
    step in entry ``j`` alone, ``-g_j / |J_j|^2``, removes. ``q_j`` is the share of
    that step the bounds allow (:func:`fixedopt._numerics.bounds.box_share`), and
    ``c_j^2 q_j (2 - q_j)`` the share the step cut at the bound removes. Every factor
    is unit-free, so the measure is the same in any units of the residuals and the
    parameters: ``c_j`` inside the box, 0 for an entry a bound holds (its gradient
    points out), ``c_j`` for one on a bound whose gradient points inward. (The
    projected gradient ``x - clip(x - g)`` in the numerator, as it was, is capped by
    the room to a bound in the parameters' units while ``|J_j| |r|`` grows with the
    square of the residuals': a bounded fit of counts stopped CONVERGED at its start.)
    """
    magnitude = jnp.abs(problem.free_part(grad))
    denominator = jnp.sqrt(columns) * residual_norm
    ratio = magnitude / jnp.where(magnitude == 0, 1.0, denominator)
    measure = jnp.where(magnitude == 0, 0.0, ratio)
    if problem.lower is not None:
        upper = jnp.inf if problem.upper is None else problem.upper
        step = -problem.free_part(grad) / jnp.where(columns > 0, columns, 1.0)
        share = bounds.box_share(x, step, problem.lower, upper)
        measure = jnp.where(share == 0, 0.0, measure * bounds.reduction_share(share))
    return reduce.largest(measure, initial=0.0)


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
    (gv_pair, curvature_pair) = cauchy_pairs(normal, grad, free, scale)
    return cauchy_of(reduce.dot(*gv_pair), reduce.dot(*curvature_pair), damping)


def cauchy_pairs(
    normal: jax.Array, grad: jax.Array, free: jax.Array, scale: jax.Array
) -> tuple[tuple[jax.Array, jax.Array], tuple[jax.Array, jax.Array]]:
    """The pairs whose dots :func:`cauchy_of` reads: ``(g, v)`` and ``(v, J^T J v)``
    (the latter at ``normal``'s dtype)."""
    v = jnp.where(free & (scale > 0), grad / jnp.where(scale > 0, scale, 1.0), 0.0)
    wide = v.astype(normal.dtype)
    return (grad, v), (wide, small_linalg.matvec(normal, wide))


def cauchy_of(gv: jax.Array, curvature: jax.Array, damping: ArrayLike) -> jax.Array:
    """:func:`cauchy_reduction` from the dots ``g.v`` and ``v.(J^T J v)`` of
    :func:`cauchy_pairs`."""
    curvature = curvature.astype(gv.dtype) + damping * gv
    ratio = gv / jnp.where(curvature > 0, curvature, 1.0)  # before the product: no overflow
    return jnp.where(curvature > 0, 0.5 * gv * ratio, 0.0)


def relative_step_size(
    problem: Problem, x: jax.Array, step: jax.Array, scale: jax.Array
) -> jax.Array:
    """``|D s| / |D x|`` over free entries, ``D^2 = scale`` (MINPACK's xtol measure).

    Both sums of squares are taken in one power of two where the larger's would be out
    of range (:func:`fixedopt._numerics.scaled.sums`, one reduction for both): the
    same bits where it is in range, and no zero step where ``|D s|^2`` would underflow
    (a fit in units of 1e-20 in float32 passed this test at its start)."""
    sums, _ = scaled.sums(relative_step_pairs(problem, x, step, scale))
    return relative_step_of(sums)


def relative_step_pairs(
    problem: Problem, x: jax.Array, step: jax.Array, scale: jax.Array
) -> tuple[scaled.Pair, scaled.Pair]:
    """The pairs whose scaled sums :func:`relative_step_of` reads: ``(D s, D s)`` and
    ``(D x, D x)`` over free entries, their gradients stopped (a test)."""
    d = jnp.sqrt(scale)
    ds, dx = jax.lax.stop_gradient((d * step, problem.free_part(d * x)))
    return (ds, ds), (dx, dx)


def relative_step_of(sums: tuple[jax.Array, ...]) -> jax.Array:
    """:func:`relative_step_size` from the sums of :func:`relative_step_pairs` at one
    scale."""
    step_squared, x_squared = sums
    step_norm, x_norm = jnp.sqrt(step_squared), jnp.sqrt(x_squared)
    return jnp.where(step_norm == 0, 0.0, step_norm / x_norm)


def residual_norm(residual: jax.Array) -> jax.Array:
    """``|r|``: the root of ``|r|^2`` where that is well within the dtype's range, else
    from the sum of ``r``'s squares in a power of two (:func:`norm_of_sums`), both
    sums in one reduction, as :func:`residual_sums` takes them beside the normal sums:
    a residual of 1e-20 in float32 has a norm, though its square underflows."""
    wide = residual.astype(jnp.promote_types(residual.dtype, jnp.float32))
    (magnified,) = scaled.magnified(((wide, wide),))
    wide_squared, magnified = reduce.together((wide * wide, magnified))
    return norm_of_sums(wide_squared.astype(residual.dtype), wide_squared, magnified)


def residual_sums(
    jacobian: jax.Array, residual: jax.Array
) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
    """``(J^T J, J^T r, |r|^2, |r|)`` (:func:`fixedopt._solvers.small_linalg.normal_sums`
    and :func:`residual_norm`'s sums) in one pass over ``r`` and ``J``: the sum of squares that
    ``|r|`` needs where ``|r|^2`` underflows is summed with the others (one reduction
    on the CPU), so that no kernel reads the residual again."""
    wide = residual.astype(jnp.promote_types(residual.dtype, jnp.float32))
    normal, grad, wide_squared, (magnified,) = small_linalg.normal_sums_with(
        jacobian, residual, scaled.magnified(((wide, wide),))
    )
    squared = wide_squared.astype(residual.dtype)
    return normal, grad, squared, norm_of_sums(squared, wide_squared, magnified)


def norm_of_sums(squared: jax.Array, wide_squared: jax.Array, magnified: jax.Array) -> jax.Array:
    """``|r|`` from ``squared = |r|^2`` where that does not underflow (its root; where it
    overflows, so does the cost: a trial not finite), else from ``wide_squared``, the
    same sum in float32 at least (a half-precision residual's), else from
    ``magnified``, the sum of the squares of ``r 2^k``
    (:func:`fixedopt._numerics.scaled.magnified`), rounded to the residual's dtype; 0
    only for a zero residual."""

    def root(total: jax.Array) -> jax.Array:
        # sqrt's slope at 0 is inf: 0 * inf would make an unrolled derivative NaN where
        # the residuals vanish (a row at an exact fit), through a branch jnp.where
        # leaves out.
        positive = total > 0
        return jnp.where(positive, jnp.sqrt(jnp.where(positive, total, 1.0)), 0.0)

    def underflows(total: jax.Array) -> jax.Array:
        info = jnp.finfo(total.dtype)
        return total < info.tiny / info.eps

    up = scaled.factor(magnified.dtype)
    norm = jnp.where(scaled.in_range(magnified), root(magnified) / up, root(wide_squared))
    norm = jnp.where(underflows(wide_squared), norm, root(wide_squared)).astype(squared.dtype)
    return jnp.where(underflows(squared), norm, root(squared))


def residual_unit(value: jax.Array, norm: jax.Array) -> jax.Array:
    """1 where the cost ``value = |r|^2 / 2`` is in range, else the power of two of
    ``|r|`` (``norm``): the unit in which a step's reductions are compared, so that
    they do not underflow where the cost does (MINPACK compares its reductions
    relative to ``|r|`` always; here only where it matters, so that every other row
    takes the same steps to the bit)."""
    finfo = jnp.finfo(value.dtype)
    return jnp.where(value < finfo.tiny / finfo.eps**2, reduce.power_of_two(norm), 1.0)


EPS_FACTOR = 10  # a predicted reduction below this many eps of f is rounding noise


def eps_of(value: jax.Array) -> np.floating[Any]:
    return jnp.finfo(value.dtype).eps


# How many times lower than the row's the gradient's norm at a trial point must be for a
# step whose change of the cost, and the model's predicted one, are rounding to be taken:
# the cost cannot show the progress (float32, a valley below |f|'s rounding) but the
# gradient can. Giving up there ended float32 rows CONVERGED (PRECISION) with gradients
# far above their rounding: Levenberg-Marquardt's (docs/decisions.md, "A gradient test of
# PRECISION verdicts") and Gauss-Newton's ("Gauss-Newton's give-up by the gradient").
# Gauss-Newton's give-up reads GRADIENT_DROP; a trial that Levenberg-Marquardt or gradient
# descent would otherwise reject is taken where it lowers the gradient at all
# (LEVEL_DROP): 8 left float32 rows 4-8 times above their floor giving up ("The last
# false PRECISION verdicts"). Each such step lowers the gradient's norm, so a row at its
# floor stops at the first trial that does not.
GRADIENT_DROP = 8.0
LEVEL_DROP = 1.0


def lowers_gradient(problem: Problem, x: jax.Array, grad: jax.Array, trial: jax.Array,
                    trial_grad: jax.Array, drop: float = GRADIENT_DROP) -> jax.Array:  # fmt: skip
    """Whether the projected gradient's max-norm at ``trial`` is ``drop`` times below
    the one at ``x``."""
    return drop * problem.grad_norm(trial, trial_grad) < problem.grad_norm(x, grad)
