"""How far a row that is about to stop is from a minimizer, from the true Hessian.

A quasi-Newton model predicts the reduction left, ``g.H g / 2``; where its curvature
pairs never explored a direction, it takes a guessed scale there and can predict
almost nothing where much is left. The Newton decrement ``g.H^-1 g`` of the true
Hessian is the reduction a Newton step would make (twice), in the objective's own
units. Both functions here return it with the step to go on with, for one row:
``hessian_times(v)`` is ``H v`` restricted to the ``free`` entries, ``g`` the gradient
with other entries zero; shapes ``(n,)``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

from fixedopt._contract.solver import Problem
from fixedopt._numerics import reduce

HessianTimes = Callable[[jax.Array], jax.Array]


def hessian_times(problem: Problem, x: jax.Array) -> HessianTimes:
    """``v -> H v`` at ``x``, forward over reverse (one gradient's cost per product)."""
    return lambda v: jax.jvp(lambda z: problem.value_and_grad(z)[1], (x,), (v,))[1]


def wider_check(problem: Problem, x: jax.Array) -> Any:
    """float64 where the check of a narrower row (float32, bfloat16, ...) can compute in
    it: JAX's x64 is on and the objective evaluates at a float64 ``x`` (a function
    written for its own dtype alone may not); else None, the row's own dtype (static).

    A float32 check resolves curvatures down to float32's epsilon of the largest: a
    valley below that (Osborne 1 in float32, eigenvalue 6e-10 of the scaled Hessian; a
    decay fit in units 1e6, 2e-10) shows almost no decrement, and rows far from its
    bottom passed. The float64 check sees it, from the same float32 point and data.
    """
    wide = jnp.dtype(jax.dtypes.canonicalize_dtype(jnp.float64))  # float32 without x64
    if jnp.finfo(x.dtype).bits >= jnp.finfo(wide).bits:
        return None
    try:
        shapes = jax.eval_shape(problem.value_and_grad, jax.ShapeDtypeStruct(x.shape, wide))
    except Exception:  # any failure: the objective takes its own dtype only
        return None
    if any(jnp.dtype(s.dtype) != wide for s in jax.tree.leaves(shapes)):
        return None
    return wide


def checked_point(
    problem: Problem, x: jax.Array, value: jax.Array, grad: jax.Array
) -> tuple[jax.Array, jax.Array, HessianTimes]:
    """``(value, grad, hessian_times)`` of the Newton check at ``x``: the row's own
    where :func:`wider_check` says None; else all three in float64, from one
    linearization (one evaluation of the value and gradient, then the products)."""
    wide = wider_check(problem, x)
    if wide is None:
        return value, grad, hessian_times(problem, x)
    (wide_value, wide_grad), linear = jax.linearize(problem.value_and_grad, x.astype(wide))
    return wide_value, wide_grad, lambda v: linear(v.astype(wide))[1]


Carry = tuple[jax.Array, ...]  # the conjugate-gradient iteration's state
# Conjugate-gradient iterations (Hessian-vector products) of the check above
# CERTIFY_FULL_N entries.
CG_ITERATIONS = 3
# Checks certify from the whole Hessian up to this many entries, above from
# conjugate-gradient iterations (LBFGS.certify, GradientDescent.certify, curvature_check).
CERTIFY_FULL_N = 16


def newton_check(
    hessian_times: HessianTimes, g: jax.Array, value: jax.Array, free: jax.Array
) -> tuple[jax.Array, jax.Array]:
    """``(g.H^-1 g, step)`` from the whole Hessian (``n`` Hessian-vector products):
    :func:`newton_parts` without its flag."""
    decrement, step, _ = newton_parts(hessian_times, g, value, free)
    return decrement, step


def newton_parts(
    hessian_times: HessianTimes, g: jax.Array, value: jax.Array, free: jax.Array
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """``(g.H^-1 g, step, negative)`` from the whole Hessian (``n`` Hessian-vector
    products); ``negative`` says the Hessian has clearly negative curvature.

    The Hessian is scaled to a unit diagonal (Jacobi) first, so that parameters of
    very different magnitudes are resolved alike, shifted by ``eps`` of its largest
    curvature (the precision its entries carry: a gradient along a direction of less
    curvature then shows a large decrement), and inverted by :func:`_sweep`
    (Gauss–Jordan elimination: elementwise arithmetic in one small loop, no LAPACK
    call; inside the lanes' loop, jaxlib 0.10's CPU ``syevd`` and ``potrf`` crashed
    here). The elimination tests the whole space, not only the directions the
    gradient reaches: a pivot clearly below zero (below ``-sqrt(eps)`` of the largest
    curvature: a saddle point or a maximum) gives ``inf`` and a step along the
    direction of negative curvature it exhibits, downhill, of the length at which the
    quadratic model would have lost ``|f|`` (:func:`_length`); else the Newton step.
    """
    n, dtype = g.shape[0], g.dtype
    wide = jnp.promote_types(dtype, jnp.float32)  # half precision is solved in float32
    g, value = g.astype(wide), value.astype(wide)
    eps = jnp.finfo(wide).eps
    hessian = jax.vmap(hessian_times)(jnp.eye(n, dtype=dtype)).astype(wide)  # rows = columns
    hessian = 0.5 * (hessian + hessian.T)
    diagonal = jnp.abs(jnp.diagonal(hessian))
    usable = free & (diagonal > 0) & jnp.isfinite(diagonal)
    s = jnp.where(usable, 1.0 / jnp.sqrt(jnp.where(usable, diagonal, 1.0)), 1.0)
    both = free[:, None] & free[None, :]
    scaled = jnp.where(both, s[:, None] * hessian * s[None, :], jnp.eye(n, dtype=wide))
    # A non-finite entry (a row at a NaN wall) is no curvature: never certified.
    finite = jnp.all(jnp.isfinite(scaled))
    scaled = jnp.where(finite, scaled, jnp.eye(n, dtype=wide))
    largest = jnp.max(jnp.sum(jnp.abs(scaled), axis=1))  # >= every |eigenvalue|
    matrix = scaled + eps * largest * jnp.eye(n, dtype=wide)
    swept, down, negative = _sweep(matrix, -jnp.sqrt(eps) * largest, eps * largest)
    b = s * g
    z = -jnp.sum(swept * b[None, :], axis=1)  # the Newton solve: swept is -matrix^-1
    decrement = jnp.sum(b * z)
    # Where a pivot was negative, the direction it exhibits (down.matrix.down < 0).
    size = jnp.where(negative, jnp.sum(down * down), 1.0)  # down is 0 where not
    curvature = jnp.sum(down * jnp.sum(matrix * down[None, :], axis=1)) / size
    curvature = jnp.minimum(curvature, -jnp.sqrt(eps) * largest)
    down = s * down / jnp.sqrt(size)
    down = jnp.where(jnp.sum(g * down) > 0, -down, down)
    length = _length(value, curvature)
    decrement = jnp.where(negative | ~finite | ~jnp.isfinite(decrement), jnp.inf, decrement)
    step = jnp.where(negative, length * down, -s * z)
    step = jnp.where(free & jnp.isfinite(step), step, 0.0)
    return decrement.astype(dtype), step.astype(dtype), negative & finite


def _length(value: jax.Array, curvature: jax.Array) -> jax.Array:
    """How far a step along a direction of ``curvature < 0`` (per unit length) goes:
    where the quadratic model would have lost ``|value|``; 1 where ``value`` is 0 (a
    saddle at level 0 leaves the model no scale of its own)."""
    length = jnp.sqrt(2.0 * jnp.abs(value) / -curvature)
    return jnp.where(value == 0, 1.0, length)


def _sweep(
    matrix: jax.Array, negative_below: jax.Array, floor: jax.Array
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """``(-matrix^-1, down, negative)`` of a symmetric ``matrix``, by the sweep
    operator (Gauss–Jordan elimination without pivoting, symmetric), one pivot a trip
    in a loop of ``n`` trips: each trip updates the whole ``(n, n)`` array, so that
    one loop does what a factorization and two triangular solves would in three.

    After the pivots ``0..k-1``, entry ``(k, k)`` is the pivot ``L D L^T`` would
    have there (the Schur complement's). A pivot below ``negative_below`` stops the
    elimination (``negative``), and ``down`` is the direction it exhibits:
    ``v = (-A_11^-1 a_k, 1, 0, ...)``, read from column ``k``, whose curvature
    ``v.matrix.v`` is that pivot, below zero. A pivot between that and ``floor``
    (rounding, at a singular minimum) is raised to ``floor``: the result is then the
    inverse of ``matrix`` with those diagonal entries raised, as ``L D L^T`` with
    raised pivots would have factored.

    Goodnight, "A tutorial on the SWEEP operator", The American Statistician 33
    (1979); Golub & Van Loan, *Matrix Computations*, 4th ed., 4.2 (``L D L^T``).
    """
    n = matrix.shape[0]
    index = jnp.arange(n)

    def pivot_on(k: jax.Array, carry: tuple[jax.Array, ...]) -> tuple[jax.Array, ...]:
        swept, down, negative = carry
        column = swept[k]  # symmetric: the row is the column
        pivot = column[k]
        breaks = ~negative & (pivot < negative_below)
        goes = ~negative & ~breaks
        pivot = jnp.maximum(pivot, floor)
        at_k = index == k
        other = jnp.where(at_k, 0.0, column)
        eliminated = swept - jnp.outer(other, other) / pivot
        on_cross = at_k[:, None] | at_k[None, :]
        cross = (other[:, None] + other[None, :] - (at_k[:, None] & at_k[None, :])) / pivot
        swept = jnp.where(goes, jnp.where(on_cross, cross, eliminated), swept)
        exhibited = jnp.where(index < k, -column, at_k.astype(column.dtype))
        return swept, jnp.where(breaks, exhibited, down), negative | breaks

    start = (matrix, jnp.zeros(n, matrix.dtype), jnp.zeros((), bool))
    swept, down, negative = jax.lax.fori_loop(0, n, pivot_on, start)
    return swept, down, negative


def _conjugate_gradients(
    matvec: HessianTimes,
    precondition: HessianTimes,
    b: jax.Array,
    negative_below: jax.Array | float,
    iterations: int,
) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array, jax.Array]:
    """``iterations`` preconditioned conjugate-gradient steps on ``matvec(z) = b`` from
    0: ``(b.z, z, negative, down, curvature)``; ``down`` the first search direction of
    negative curvature (unit length; 0 if none), ``curvature`` its curvature.
    ``negative`` says a search direction of unit length had curvature below
    ``negative_below``; a direction without positive curvature stops the iteration.

    Each iteration preconditions its residual first, then takes its step: the
    preconditioner (a two-loop recursion) appears once in the program and runs
    ``iterations`` times, not once more for a residual that no step would use."""

    def iteration(carry: Carry, first: jax.Array) -> tuple[Carry, None]:
        z, r, p, rh, negative, stopped, down, curvature = carry
        h = precondition(r)
        rh_new = reduce.dot(r, h)
        goes_on = ~first & ~stopped  # the last iteration stepped: a conjugate direction
        beta = jnp.where(goes_on, rh_new / jnp.where(goes_on, rh, 1.0), 0.0)
        p = jnp.where(first, h, jnp.where(goes_on, h + beta * p, p))
        rh = jnp.where(first | goes_on, rh_new, rh)
        ap = matvec(p)
        size, pap = reduce.dot(p, p), reduce.dot(p, ap)
        active = ~stopped & (rh > 0) & (size > 0)
        found = active & (pap / jnp.where(size > 0, size, 1.0) < negative_below)
        go = active & (pap > 0)
        alpha = jnp.where(go, rh / jnp.where(go, pap, 1.0), 0.0)
        new = found & ~negative  # the first direction of negative curvature, kept
        down = jnp.where(new, p / jnp.sqrt(jnp.where(new, size, 1.0)), down)
        curvature = jnp.where(new, pap / jnp.where(new, size, 1.0), curvature)
        carry = (z + alpha * p, r - alpha * ap, p, rh, negative | found, stopped | ~go, down,
                 curvature)  # fmt: skip
        return carry, None

    false, zero = jnp.zeros((), bool), jnp.zeros((), b.dtype)
    start: Carry = (jnp.zeros_like(b), b, jnp.zeros_like(b), zero, false, false,
                    jnp.zeros_like(b), zero)  # fmt: skip
    firsts = jnp.arange(iterations) == 0
    (z, _, _, _, negative, _, down, curvature), _ = jax.lax.scan(iteration, start, firsts)
    return reduce.dot(b, z), z, negative, down, curvature


def conjugate_gradient_check(
    hessian_times: HessianTimes,
    precondition: HessianTimes,
    g: jax.Array,
    value: jax.Array | None = None,
) -> tuple[jax.Array, jax.Array]:
    """``(g.z_k, -z_k)`` after ``CG_ITERATIONS`` preconditioned conjugate-gradient
    iterations on ``H z = g`` from ``z = 0``.

    ``g.z_k`` is ``-2`` times the minimum of the quadratic model over the Krylov space,
    so it grows with ``k`` toward ``g.H^-1 g``: a lower bound, which can show a verdict
    wrong but not prove it right. Conjugate gradients resolve the extreme
    eigenvalues of the preconditioned Hessian first, so a direction the
    preconditioner (the quasi-Newton model) got badly wrong shows early. Curvature
    that is not positive gives ``inf``; ``-z_k`` is the truncated-Newton step.
    """
    decrement, step, _ = conjugate_gradient_parts(hessian_times, precondition, g, value)
    return decrement, step


def conjugate_gradient_parts(
    hessian_times: HessianTimes,
    precondition: HessianTimes,
    g: jax.Array,
    value: jax.Array | None = None,
    probe: jax.Array | None = None,
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """``(decrement, step, negative)`` of :func:`conjugate_gradient_check`, where
    ``negative`` says a direction of negative curvature was found.

    At a stationary point (``g`` exactly 0) the iteration starts from ``probe``
    instead (where given): its Krylov space shows negative curvature there, and the
    step is then that direction, downhill at the length at which the quadratic model
    would have lost ``|value|`` (:func:`_length`; ``value`` None: the
    truncated-Newton step)."""
    iterations = min(CG_ITERATIONS, g.shape[0])
    stationary = ~reduce.any_true(g != 0) if probe is not None else jnp.zeros((), bool)
    b = jnp.where(stationary, probe, g) if probe is not None else g
    decrement, z, negative, down, curvature = _conjugate_gradients(
        hessian_times, precondition, b, float(jnp.finfo(g.dtype).tiny), iterations
    )
    decrement = jnp.where(stationary, 0.0, jnp.maximum(decrement, 0.0))
    step = -z
    if value is not None:
        length = _length(value, jnp.where(curvature < 0, curvature, -1.0))
        step = jnp.where(stationary & negative, length * down, step)
    return jnp.where(negative, jnp.inf, decrement), step, negative


Preconditioner = Callable[[jax.Array], HessianTimes]  # free -> (r -> an approximation of H^-1 r)


def free_hessian_check(
    problem: Problem,
    x: jax.Array,
    value: jax.Array,
    grad: jax.Array,
    preconditioner: Preconditioner,
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """``(decrement, step, negative)`` of the true Hessian on the free entries at ``x``
    (those neither fixed nor on a bound that the gradient pushes against), the one
    check every verdict's certification runs (``LBFGS.certify``,
    ``GradientDescent.certify``, :func:`curvature_check`).

    Up to ``CERTIFY_FULL_N`` entries from the whole Hessian (:func:`newton_parts`, in
    float64 where :func:`wider_check` allows); above, a few conjugate-gradient
    iterations (:func:`conjugate_gradient_parts`) preconditioned by
    ``preconditioner(free)`` (called only there: the solver's model of ``H^-1``), from
    the gradient, or from a probe of ones at a stationary point. ``step`` is 0 on the
    fixed entries and where it is not finite (a float64 step beyond the row's range).
    """
    # On its bound only (margin 0), not within a solver's margin: L-BFGS's old one,
    # ``min(|g|, 1e-3)`` in the parameters' units, held an entry in units below 1e-3
    # across its whole box, and the check certified rows far from the minimum
    # (docs/decisions.md, "Bounded L-BFGS verdicts in units 1e-6..1e6").
    free = problem.movable(x, grad)
    full = x.shape[0] <= CERTIFY_FULL_N
    if full:  # the whole Hessian: in float64 for a narrower row where it can be
        value_at, grad_at, product = checked_point(problem, x, value, grad)
    else:
        value_at, grad_at, product = value, grad, hessian_times(problem, x)

    def free_product(v: jax.Array) -> jax.Array:
        return jnp.where(free, product(v), 0.0)

    g = jnp.where(free, grad_at, 0.0)
    if full:
        decrement, step, negative = newton_parts(free_product, g, value_at, free)
    else:
        precondition = preconditioner(free)
        decrement, step, negative = conjugate_gradient_parts(
            free_product,
            lambda r: jnp.where(free, precondition(r), 0.0),
            g,
            value_at,
            free.astype(x.dtype),  # the probe at a stationary point
        )
    step = jnp.where(problem.fixed | ~jnp.isfinite(step), 0.0, step.astype(x.dtype))
    return decrement.astype(value.dtype), step, negative


def identity(free: jax.Array) -> HessianTimes:
    """The preconditioner of a check without a model of ``H^-1``: none."""
    return lambda r: r


def curvature_check(
    problem: Problem, x: jax.Array, value: jax.Array, grad: jax.Array
) -> tuple[jax.Array, jax.Array]:
    """``(decrement, step)`` of a row whose own solver certifies nothing, at a start
    that already met a convergence test or a claim with an entry :func:`held_weakly`:
    ``inf`` and a step downhill along a direction of clearly negative curvature where
    the Hessian on the free entries has one (a maximum, a saddle point), else 0 (the
    verdict stands: the solver's own test decided). :func:`free_hessian_check`,
    unpreconditioned, with the entries held weakly counted free (their gradient taken
    as 0: the first-order test could not tell it from 0) and the step turned to move
    them into the box (:func:`inward`). None of this runs where the objective has no
    Hessian-vector products: the decrement is then 0.
    """
    if not problem.hessian_products:
        return jnp.zeros((), value.dtype), jnp.zeros_like(x)
    bounded = problem.lower is not None and problem.upper is not None
    weak = held_weakly(problem, x, value, grad) if bounded else None
    if weak is not None:
        grad = jnp.where(weak, 0.0, grad)
    _, step, negative = free_hessian_check(problem, x, value, grad, identity)
    decrement = jnp.where(negative, jnp.inf, 0.0).astype(value.dtype)
    return decrement, step if weak is None else inward(problem, x, step, weak)


def weak_hold(dtype: Any) -> float:
    """The largest ``|g_j| s_j / |f|`` of an entry on its bound that
    :func:`held_weakly` counts as held weakly (static): ``eps ** (1/4)`` of the dtype.
    Not ``sqrt(eps)``, the gradient test's own scale: the Poisson peak audit's saddles
    held their centre on a bound at 2e-12 to 2.6e-8 (row 252, float64), which a
    curvature of -407 outweighs 8e-10 inward (docs/decisions.md, "Saddles on a bound
    of least squares")."""
    return math.sqrt(math.sqrt(float(jnp.finfo(dtype).eps)))


def held_weakly(problem: Problem, x: jax.Array, value: jax.Array, grad: jax.Array) -> jax.Array:
    """Free entries on a bound that the gradient pushes against, if at all, by less
    than :func:`weak_hold` of ``|f|`` for a move of the entry's size (``|g_j| s_j``,
    ``s_j`` the larger of ``|x_j|`` and the box's width where finite): where a
    first-order test cannot tell a minimum of the bounded problem from a saddle (a
    peak's centre held on the end of its range by a crest's symmetry, its gradient
    1e-84 to 1.6e-7, its curvature -48 to -8.4e7). An entry at 0 in a box open on one
    side has no size: held weakly only by a gradient of 0 (an amplitude held at 0 by a
    gradient however small is a minimum that a model without the peak shows, along
    the peak's centre, as a saddle). False everywhere without bounds."""
    if problem.lower is None or problem.upper is None:
        return jnp.zeros(x.shape, bool)
    on_bound = (x <= problem.lower) | (x >= problem.upper)
    width = problem.upper - problem.lower
    size = jnp.maximum(jnp.abs(x), jnp.where(jnp.isfinite(width), width, 0.0))
    small = jnp.abs(grad) * size <= weak_hold(x.dtype) * jnp.abs(value)
    return ~problem.fixed & on_bound & small & ((size > 0) | (grad == 0))


def inward(problem: Problem, x: jax.Array, step: jax.Array, weak: jax.Array) -> jax.Array:
    """``step`` or ``-step``, the one that moves the entries held ``weak`` (on their
    bounds) into the box the more: a direction of negative curvature goes down both
    ways (the gradient along it rounds to 0 there), and the bound would cut the other
    way off."""
    if problem.lower is None or problem.upper is None:
        return step
    into = jnp.where(x <= problem.lower, step, -step)  # a positive part points inward
    turn = reduce.total(jnp.where(weak, into, 0.0)) < 0
    return jnp.where(turn, -step, step)
