"""L-BFGS's initial inverse Hessian ``H0``, and the test that validates its model.

``H0`` is what the two-loop recursion assumes in the directions its curvature pairs
have not explored. The classical choice, ``gamma I`` with ``gamma = s.y / y.y`` of the
last pair (Oren and Luenberger), has one scale for every coordinate: on a fit whose
parameters differ by 1e5 in magnitude (an amplitude of 240 next to a rate of 5e-4) it
takes the stiff parameter's curvature for all, the soft one barely moves, and the
model predicts a tiny reduction where a large one is left. A diagonal ``H0`` learned
from the same pairs (M1QN3's diagonal BFGS update, Gilbert and Lemaréchal 1989) gives
each coordinate its own scale.

Shapes, for one row of ``n`` flat parameters: ``s``, ``y``, ``diagonal`` are ``(n,)``;
scalars are ``()`` arrays.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from fixedopt._contract.solver import Problem
from fixedopt._numerics import reduce
from fixedopt._solvers.certify import hessian_times

SCALINGS = ("auto", "scalar", "diagonal", "hessian")
# "auto" uses the diagonal where the free entries' learned inverse curvatures span
# more than this factor, else the scalar: on problems whose coordinates share a scale
# (a Laplacian, Rosenbrock's valley) the scalar adapts faster (measured: Rosenbrock
# n = 64 took 2x the steps with the diagonal always on) and the switch never fires;
# parameters in physical units differ by orders of magnitude.
SPREAD = 100.0
# "auto" does not start from the Hessian's diagonal ("hessian" does). The diagonal
# learned from pairs alone cannot find a soft parameter that the first steps do not
# move: its entry keeps the stiff one's scale, the model predicts almost no reduction
# along it, and the row can end CONVERGED far from the minimizer (the status-truth
# suite's saturation, Meyer and Powell badly scaled fits); only curvature measured
# along every coordinate knows. Started from the Hessian's diagonal on rows of at most
# 8 entries (with two other trial rules, also reverted), "auto" told the truth on all
# 114 float64 rows of that suite (216 of 228 in all, against 197 for this default),
# at 0.95x-1.11x the time of "scalar" on quad n = 4 and 8; but
# a Huber-loss fit then ended CONVERGED short of its minimum (the Hessian at x0 is a
# poor guide where the loss changes regime), and its n Hessian-vector products made a
# batched quad n = 16 solve 2.1x slower (docs/decisions.md, "L-BFGS's initial inverse Hessian").


def update_diagonal(diagonal: jax.Array, s: jax.Array, y: jax.Array, first: jax.Array) -> jax.Array:
    """The diagonal inverse Hessian after the pair ``(s, y)`` (``s.y > 0``).

    Scaled first so that it matches the pair's curvature along ``y`` (``y.D y =
    s.y``), then the diagonal of the BFGS update of ``B = D^-1``:
    ``b + y^2 / s.y - (b s)^2 / s.B s``, positive as ``b_i s_i^2 <= s.B s``. Before
    any pair (``first``) the start is Oren and Luenberger's ``s.y / y.y``. Entries
    the pair does not touch (fixed ones: ``s_i = y_i = 0``) keep their scaled value.
    """
    sy = reduce.dot(s, y)
    diagonal = jnp.where(first, sy / reduce.dot(y, y), diagonal)
    diagonal = diagonal * sy / reduce.dot(y, diagonal * y)
    b = 1.0 / diagonal
    updated = b + y * y / sy - (b * s) ** 2 / reduce.dot(s, b * s)
    return jnp.where(updated > 0, 1.0 / jnp.where(updated > 0, updated, 1.0), diagonal)


def hessian_diagonal(problem: Problem, x: jax.Array) -> jax.Array:
    """``1 / |H_ii|`` at ``x`` from ``n`` Hessian-vector products (forward over
    reverse); entries whose curvature is 0 or not finite take the largest finite
    curvature of the row's free entries (1 if none)."""

    product = hessian_times(problem, x)

    def curvature(e: jax.Array) -> jax.Array:
        return jnp.dot(e, product(e))

    h = jnp.abs(jax.vmap(curvature)(jnp.eye(x.shape[0], dtype=x.dtype)))
    usable = (h > 0) & jnp.isfinite(h) & ~problem.fixed
    largest = jnp.max(jnp.where(usable, h, 0.0))
    h = jnp.where(usable, h, jnp.where(largest > 0, largest, 1.0))
    return 1.0 / h


def uses_diagonal(scaling: str, diagonal: jax.Array, fixed: jax.Array) -> jax.Array:
    """``()`` bool: whether ``H0`` is the diagonal (else ``gamma I``)."""
    if scaling in ("scalar", "diagonal", "hessian"):
        return jnp.asarray(scaling != "scalar")
    largest = reduce.largest(jnp.where(fixed, 0.0, diagonal), initial=0.0)
    smallest = reduce.smallest(jnp.where(fixed, jnp.inf, diagonal), initial=jnp.inf)
    return largest > SPREAD * smallest


def initial_scale(
    scaling: str, gamma: jax.Array, diagonal: jax.Array, fixed: jax.Array
) -> jax.Array:
    """``H0`` as a scale: ``gamma`` (``()``) or the diagonal (``(n,)``)."""
    if scaling == "scalar":
        return gamma
    return jnp.where(uses_diagonal(scaling, diagonal, fixed), diagonal, gamma)


def model_validated(
    problem: Problem,
    x: jax.Array,
    value: jax.Array,
    grad: jax.Array,
    direction: jax.Array,
    x_new: jax.Array,
    value_new: jax.Array,
) -> jax.Array:
    """Whether the quasi-Newton model passed the test of the step just taken.

    The step ``x_new - x`` went along the model's step ``direction`` (``-H g``) by
    ``alpha``; the model predicts the reduction ``-g.s (1 - alpha / 2)``. It passes if
    the line search took the model's full step (``alpha = 1``: the model did not
    overshoot) and the actual reduction is within a factor 2 of the prediction (a
    model ``c`` times too stiff along the step gives ``2 - 1/c``: 1.5 at ``c = 2``).
    Where the predicted reduction is at the rounding level of ``f``, neither the ratio
    nor the step length says anything (a line search there accepts a step within
    rounding of ``f``, or halves one because ``f`` rose by an ulp), and ``f`` cannot
    contradict the model: it passes, and the true Hessian decides
    (:meth:`~fixedopt.LBFGS.certify`). A row that lost the verdict just above that
    level and kept the lost verdict there ran to ``max_steps`` (measured: 4 of 1e5
    rows of the quad suite at n = 8, gradients 1e-16).
    """
    move = problem.free_part(x_new - x)
    taken = reduce.dot(grad, move)
    model_slope = reduce.dot(grad, problem.free_part(direction))
    alpha = taken / jnp.where(model_slope < 0, model_slope, -1.0)
    predicted = -taken * (1.0 - 0.5 * alpha)
    ratio = (value - value_new) / jnp.where(predicted > 0, predicted, 1.0)
    full = (model_slope < 0) & (jnp.abs(alpha - 1.0) <= 0.01)
    agrees = (ratio >= 0.5) & (ratio <= 1.5)
    return jnp.where(measurable(predicted, value), full & agrees, True)


def measurable(predicted: jax.Array, value: jax.Array) -> jax.Array:
    """Whether a reduction of ``predicted`` from ``value`` is above ``f``'s rounding
    (100 ulps of ``|f|``), where :func:`model_validated` can test a step's ratio."""
    return predicted > 100 * jnp.finfo(value.dtype).eps * jnp.abs(value)
