"""Levenberg–Marquardt and Gauss–Newton on the free block of the Jacobian.

Fixed entries give the Jacobian exact zero columns. Both solvers solve the normal
equations on the free block only: rows and columns of fixed (and bound-active) entries
are replaced by those of the identity, with a zero right-hand side, so the step is
exactly zero there and the system stays non-singular — no NaN, no "singular" failure.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, NamedTuple, Protocol, TypeVar

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

from fixedopt._contract.solver import Problem, Solver, Step, StepContext
from fixedopt._contract.status import Outcome, failure
from fixedopt._inputs.checks import positive_float, positive_int, set_option
from fixedopt._numerics import reduce
from fixedopt._solvers import small_linalg
from fixedopt._solvers.linesearch import SearchStart, projected_backtracking, step_from_search


def _residuals(problem: Problem, x: jax.Array) -> tuple[jax.Array, jax.Array]:
    """``(residual, jacobian)`` at ``x``, of shapes ``(m,)`` and ``(m, n)``."""
    residual_and_jacobian = problem.residual_and_jacobian
    if residual_and_jacobian is None:  # the driver passes it to these solvers
        raise TypeError("a least-squares solver needs `problem.residual_and_jacobian`")
    return residual_and_jacobian(x)


def _residual_evaluation(
    problem: Problem, x: jax.Array
) -> tuple[jax.Array, jax.Array, tuple[jax.Array, jax.Array]]:
    """``(value, grad, (residual, jacobian))`` at ``x``: a line search's evaluation."""
    residual, jacobian = _residuals(problem, x)
    value = problem.residual_value(x, residual)  # robust losses: not 0.5 |residual|^2
    return value, small_linalg.rmatvec(jacobian, residual), (residual, jacobian)


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


class _ResidualState(Protocol):
    """A least-squares solver's state holds the residual and Jacobian at its point."""

    @property
    def residual(self) -> jax.Array: ...  # (m,)

    @property
    def jacobian(self) -> jax.Array: ...  # (m, n)


ResidualState = TypeVar("ResidualState", bound=_ResidualState)


class _LeastSquaresSolver(Solver[ResidualState]):
    """What the least-squares solvers share: they need residuals, and their gradient
    measure is MINPACK's residual–Jacobian cosine, exact (no secant curvature)."""

    needs_residuals = True

    def gradient_measure(
        self,
        problem: Problem,
        x: jax.Array,
        value: jax.Array,
        grad: jax.Array,
        state: ResidualState,
        curvature: jax.Array | None,
    ) -> jax.Array:
        """MINPACK's residual–Jacobian cosine (see :func:`residual_cosine`)."""
        return residual_cosine(problem, x, grad, state.jacobian, state.residual)


class LevenbergMarquardtState(NamedTuple):
    normal: jax.Array  # J^T J at the point, (n, n): all a step reads of J
    residual_norm: jax.Array  # |r| at the point (MINPACK's gtol measure)
    damping: jax.Array
    growth: jax.Array  # Nielsen's factor for the next rejection
    scale: jax.Array  # D^2: running max of diag(J^T J) (Moré's scaling)
    walls: jax.Array  # () int32: non-finite trials since the last accepted step
    short: jax.Array  # (n,) bool: entries that stop short of a bound (short_of_bounds)


@dataclasses.dataclass(frozen=True)
class LevenbergMarquardt(Solver[LevenbergMarquardtState]):
    """Levenberg–Marquardt with Moré's scaling and Nielsen's damping update.

    Each iteration evaluates the residual and its Jacobian once, at the trial point,
    and solves ``(J^T J + damping D^2) s = -g`` on the free block, where ``D^2`` is
    the running maximum of ``diag(J^T J)`` (Moré 1978): the damping is unit-free
    and the step stays bounded where a column of ``J`` vanishes (a minimum with a
    non-zero residual). The gain ratio decides: accepted steps shrink the damping by
    ``max(1/3, 1 - (2 rho - 1)^3)``, rejected ones grow it by a doubling factor
    (Nielsen 1999; Madsen, Nielsen, Tingleff 2004). Bounds: entries at a bound whose
    gradient points out are held for the iteration, trial points are projected (an
    entry whose column of ``J`` vanishes on the bound it reached steps back from it
    instead, as scipy's trf does: :func:`short_of_bounds`).
    Convergence follows MINPACK's tests (see :class:`fixedopt.Reason`), with the
    predicted reduction that ``ftol`` reads taken as the larger of the damped step's
    and the model's at its Cauchy point with the initial damping
    (:func:`cauchy_reduction`): the same while the damping is small, and not small
    where the damping grew far from a minimum. A row whose
    damping exceeds ``max_damping`` stops with ``Status.LINESEARCH_FAILED`` (no
    acceptable step), or as converged if it is stationary to working precision. A row
    whose trials ran into non-finite values (a NaN wall) since its last accepted step
    stops with ``Status.NONFINITE`` when it gives up: the damping grew because of the
    wall, and the damped step's small predicted reduction says nothing of the distance
    to a minimum beyond it.

    Args:
      initial_damping: the damping relative to ``D^2`` at the start.
      max_damping: give up beyond this damping.

    Example:
      >>> import jax.numpy as jnp
      >>> import fixedopt
      >>> t = jnp.linspace(0.0, 1.0, 20)
      >>> residuals = lambda p: p[0] * jnp.exp(-p[1] * t) + p[2] - 2.0 * jnp.exp(-3.0 * t)
      >>> sol = fixedopt.least_squares(residuals, jnp.array([1.0, 1.0, 0.0]),
      ...                              jnp.array([False, False, True]))
      >>> print(sol.x.round(6))
      [2. 3. 0.]
    """

    initial_damping: float = 1e-3
    max_damping: float = 1e16

    def __post_init__(self) -> None:
        set_option(self, "initial_damping", positive_float("initial_damping", self.initial_damping))
        set_option(self, "max_damping", positive_float("max_damping", self.max_damping))
        if not self.initial_damping < self.max_damping:
            raise ValueError(
                "`initial_damping` must be positive and below `max_damping`, got "
                f"{self.initial_damping!r} and {self.max_damping!r}"
            )

    needs_residuals = True

    def gradient_measure(
        self,
        problem: Problem,
        x: jax.Array,
        value: jax.Array,
        grad: jax.Array,
        state: LevenbergMarquardtState,
        curvature: jax.Array | None,
    ) -> jax.Array:
        """MINPACK's residual–Jacobian cosine (see :func:`residual_cosine`)."""
        columns = problem.free_part(jnp.diagonal(state.normal).astype(x.dtype))
        return cosine(problem, x, grad, columns, state.residual_norm)

    def init(
        self, problem: Problem, x: jax.Array, value: jax.Array, grad: jax.Array
    ) -> LevenbergMarquardtState:
        """The state needs ``J^T J`` at ``x``: one evaluation (the driver calls
        ``start`` instead, which returns the value and gradient from it too)."""
        return self.start(problem, x)[2]

    def start(
        self, problem: Problem, x: jax.Array
    ) -> tuple[jax.Array, jax.Array, LevenbergMarquardtState]:
        """One evaluation of the residual and its Jacobian, as a step makes at its trial."""
        residual, jacobian = _residuals(problem, x)
        normal, grad, squared = small_linalg.normal_sums(jacobian, residual)
        value = problem.residual_value(x, residual) if problem.robust else 0.5 * squared
        damping = jnp.asarray(self.initial_damping, x.dtype)
        scale = problem.free_part(jnp.diagonal(normal).astype(x.dtype))
        walls, short = jnp.zeros((), jnp.int32), jnp.zeros(x.shape, bool)
        state = LevenbergMarquardtState(
            normal, jnp.sqrt(squared), damping, jnp.asarray(2.0, x.dtype), scale, walls, short
        )
        return value, grad, state

    def step(
        self, problem: Problem, x: jax.Array, value: jax.Array, grad: jax.Array,
        state: LevenbergMarquardtState, context: StepContext,
    ) -> Step[LevenbergMarquardtState]:  # fmt: skip
        free = ~problem.fixed & ~problem.at_bound(x, grad, 0.0)
        # The damped step, and the undamped (Gauss–Newton) step the xtol test measures
        # (a step that is short only because the damping grew, at a NaN wall say, says
        # nothing of the distance to the solution). Both systems are factored in ONE
        # batched call: two independent LAPACK calls can deadlock jaxlib's CPU thread
        # pool (each waits for pool threads the other holds; seen on 2 cores).
        dampings = jnp.stack([state.damping, jnp.asarray(_UNDAMPED, state.damping.dtype)])

        def solve(damping: jax.Array) -> jax.Array:
            return normal_equations_step(state.normal, grad, free, damping, state.scale)

        step, gauss_newton = jax.vmap(solve)(dampings)
        x_trial = short_of_bounds(problem, x, x + step, state.short)
        step = problem.free_part(x_trial - x)
        residual, jacobian = _residuals(problem, x_trial)
        # The next step's system, the gradient and |r|^2, formed once (on the CPU in
        # one pass over J and r: small_linalg.normal_sums).
        normal, trial_grad, squared = small_linalg.normal_sums(jacobian, residual)
        robust = problem.robust  # a robust loss's value is not 0.5 |r|^2
        trial_value = problem.residual_value(x_trial, residual) if robust else 0.5 * squared
        wide_step = step.astype(state.normal.dtype)
        curvature = reduce.dot(wide_step, small_linalg.matvec(state.normal, wide_step))  # |J s|^2
        curvature = curvature.astype(x.dtype)
        predicted, _ = gauss_newton_model(problem, x, grad, curvature, step, state.scale)
        relative_step = relative_step_size(problem, x, gauss_newton, state.scale)
        gain = (value - trial_value) / jnp.where(predicted > 0, predicted, 1.0)
        # J is finite where J^T J is (bar overflow, which would break the next step).
        finite = jnp.isfinite(trial_value) & jnp.all(jnp.isfinite(normal))
        trapped = _trapped(problem, x, x_trial, state.normal, normal)
        accepted = finite & (predicted > 0) & (gain > 1e-4) & ~reduce.any_true(trapped)
        damping, growth = _next_damping(state, accepted, gain, reduce.any_true(trapped))

        def keep(new: jax.Array, old: jax.Array) -> jax.Array:
            return jnp.where(accepted, new, old)

        scale = jnp.maximum(state.scale, problem.free_part(jnp.diagonal(normal).astype(x.dtype)))
        new_state = LevenbergMarquardtState(
            keep(normal, state.normal),
            keep(jnp.sqrt(squared), state.residual_norm),
            damping,
            growth,
            keep(scale, state.scale),
            jnp.where(accepted, 0, state.walls + (~finite).astype(jnp.int32)),
            state.short | trapped,
        )
        rounding = _EPS_FACTOR * _eps(value) * value
        no_progress = ~reduce.any_true(step != 0) | ((predicted >= 0) & (predicted <= rounding))
        spent, walled = damping > self.max_damping, new_state.walls > 0
        outcome = _outcome(accepted, finite, no_progress, spent, walled)
        # ftol and precision read the larger prediction (see cauchy_reduction):
        cauchy = cauchy_reduction(state.normal, grad, free, state.scale, self.initial_damping)
        return Step(
            x=x_trial,
            value=trial_value,
            grad=trial_grad,
            state=new_state,
            outcome=outcome,
            predicted=jnp.maximum(jnp.maximum(predicted, cauchy), 0.0),
            relative_step=relative_step,
        )


def _next_damping(
    state: LevenbergMarquardtState, accepted: jax.Array, gain: jax.Array, trapped: jax.Array
) -> tuple[jax.Array, jax.Array]:
    """The damping and its growth factor after a trial (Nielsen's rule: shrink by up to
    3 on a good gain, grow by a doubling factor on a rejection); a ``trapped`` trial
    is taken again, short of the bound, at the same damping."""
    shrink = jnp.maximum(1.0 / 3.0, 1.0 - (2.0 * gain - 1.0) ** 3)
    damping = jnp.where(accepted, state.damping * shrink, state.damping * state.growth)
    growth = jnp.where(accepted, 2.0, 2.0 * state.growth)
    return jnp.where(trapped, state.damping, damping), jnp.where(trapped, state.growth, growth)


def short_of_bounds(
    problem: Problem, x: jax.Array, trial: jax.Array, short: jax.Array
) -> jax.Array:
    """The trial point ``trial`` (``(n,)``, from ``x``) projected onto the bounds, except
    that the ``short`` entries (boolean, ``(n,)``) whose step crosses a bound stop at
    ``STEP_BACK`` of their distance to it, as scipy's trf keeps every iterate strictly
    inside the bounds."""
    if problem.lower is None or problem.upper is None:
        return problem.project(trial)
    below, above = trial < problem.lower, trial > problem.upper
    bound = jnp.where(below, problem.lower, problem.upper)
    crossing = short & (below | above)
    return problem.project(jnp.where(crossing, x + STEP_BACK * (bound - x), trial))


def _trapped(
    problem: Problem, x: jax.Array, trial: jax.Array, normal: jax.Array, trial_normal: jax.Array
) -> jax.Array:
    """The free entries (``(n,)``, boolean) that the trial put on a bound where their
    column of ``J`` is exactly zero, though it was not at ``x`` (``normal`` and
    ``trial_normal`` are ``J^T J`` at ``x`` and at the trial).

    There the entry's gradient is zero whatever the other parameters become, and no
    first-order step can take it off the bound: ``c**2`` clipped to ``c = 0`` by a long
    first step held scipy's ``test_dtypes2`` (batched) CONVERGED at a saddle of the
    bounded problem, at 5x to 1600x scipy's cost, though the cost fell as ``c`` moved
    inward once the others had settled. Such an entry is marked to stop short of its
    bounds from then on (:func:`short_of_bounds`), and the trial is taken again: one
    more evaluation, where such a bound is met. Elsewhere entries land on their
    bounds exactly (the active set)."""
    if problem.lower is None or problem.upper is None:
        return jnp.zeros(x.shape, bool)
    on_bound = (trial == problem.lower) | (trial == problem.upper)
    landed = on_bound & (trial != x) & ~problem.fixed
    column, trial_column = jnp.diagonal(normal), jnp.diagonal(trial_normal)
    vanished: jax.Array = landed & (column != 0) & (trial_column == 0)
    return vanished


STEP_BACK = 0.995  # scipy's trf: theta = max(0.995, 1 - |g|) of the way to a bound


def _outcome(
    accepted: jax.Array,
    finite: jax.Array,
    no_progress: jax.Array,
    damping_spent: jax.Array,
    walled: jax.Array,
) -> jax.Array:
    """ACCEPT, or REJECT (the damping grows, the row goes on), unless the damping is
    spent or no step can make progress any more: then the failure, ``FAIL_NONFINITE``
    where a trial since the last accepted step was not finite (``walled``). At a NaN
    wall the last, tiny trial can be finite: it passed as stationary (PRECISION) short
    of a minimum beyond the wall."""
    gives_up = damping_spent | (finite & no_progress)
    failed = failure(~finite | walled, no_progress)
    rejected = jnp.where(gives_up, failed, Outcome.REJECT)
    return jnp.where(accepted, Outcome.ACCEPT, rejected).astype(jnp.int32)


_EPS_FACTOR = 10  # a predicted reduction below this many eps of f is rounding noise
_UNDAMPED = 1e-10  # relative ridge of the Gauss–Newton step the xtol test measures


def _eps(value: jax.Array) -> np.floating[Any]:
    return jnp.finfo(value.dtype).eps


class GaussNewtonState(NamedTuple):
    jacobian: jax.Array
    residual: jax.Array


@dataclasses.dataclass(frozen=True)
class GaussNewton(_LeastSquaresSolver[GaussNewtonState]):
    """Gauss–Newton with a projected backtracking line search.

    The step solves the normal equations on the free block with a tiny relative
    regularization (``regularization * diag(J^T J)``), so a rank-deficient free
    block still gives a descent direction (in float64: the default ridge is below
    float32's rounding, and there such a block, fewer residuals than free parameters
    say, stops NONFINITE at its first step); the line search makes it globally
    convergent on problems with small residuals. Convergence follows MINPACK's tests
    (see :class:`fixedopt.Reason`).

    A row whose accepted step changed ``f`` by rounding only, to a point where the
    step's secant predicts no more than rounding still to gain (``10 eps |f|``),
    stops CONVERGED (``PRECISION``). Where the residuals' own curvature dominates
    ``J^T J`` at a minimum with a non-zero residual (one residual, or a Jacobian that
    turns singular there), the Gauss–Newton step is far too long and no MINPACK test
    holds (each step predicts the whole residual away): such a row ran to
    ``max_steps`` at its minimum before this stop. Gauss–Newton converges linearly
    at best on such problems; Levenberg–Marquardt is the solver for them.

    Args:
      regularization: relative ridge added to ``diag(J^T J)``.
      max_linesearch_steps: trials per line search before the row stops with
        ``Status.LINESEARCH_FAILED``.

    Example:
      >>> import jax.numpy as jnp
      >>> import fixedopt
      >>> residuals = lambda x: jnp.array([x[0] ** 2 + 1.0])  # minimum 1 at x = 0
      >>> sol = fixedopt.least_squares(residuals, jnp.array([0.7]), jnp.array([False]),
      ...                              solver=fixedopt.GaussNewton())
      >>> fixedopt.Status(int(sol.status)).name, fixedopt.Reason(int(sol.reason)).name
      ('CONVERGED', 'PRECISION')
    """

    regularization: float = 1e-10
    max_linesearch_steps: int = 30

    def __post_init__(self) -> None:
        regularization = positive_float("regularization", self.regularization)
        set_option(self, "regularization", regularization)
        steps = positive_int("max_linesearch_steps", self.max_linesearch_steps)
        set_option(self, "max_linesearch_steps", steps)

    def init(
        self, problem: Problem, x: jax.Array, value: jax.Array, grad: jax.Array
    ) -> GaussNewtonState:
        """The state holds the residual and Jacobian at ``x``: one evaluation (the driver
        calls ``start``, which returns the value and gradient from it too)."""
        residual, jacobian = _residuals(problem, x)
        return GaussNewtonState(jacobian, residual)

    def start(
        self, problem: Problem, x: jax.Array
    ) -> tuple[jax.Array, jax.Array, GaussNewtonState]:
        """One evaluation of the residual and its Jacobian, as the line search makes."""
        value, grad, (residual, jacobian) = _residual_evaluation(problem, x)
        return value, grad, GaussNewtonState(jacobian, residual)

    def step(
        self, problem: Problem, x: jax.Array, value: jax.Array, grad: jax.Array,
        state: GaussNewtonState, context: StepContext,
    ) -> Step[GaussNewtonState]:  # fmt: skip
        free = ~problem.fixed & ~problem.at_bound(x, grad, 0.0)
        direction = free_block_step(state.jacobian, grad, free, self.regularization)
        evaluate = functools.partial(_residual_evaluation, problem)
        start = SearchStart(problem, evaluate, x, value, grad, direction, 1.0, context.active)
        search = projected_backtracking(start, max_steps=self.max_linesearch_steps)
        residual, jacobian = search.aux
        new_state = GaussNewtonState(
            jnp.where(search.accepted, jacobian, state.jacobian),
            jnp.where(search.accepted, residual, state.residual),
        )
        curvature = jnp.sum(small_linalg.matvec(state.jacobian, direction) ** 2)
        predicted, relative_step = gauss_newton_model(
            problem, x, grad, curvature, direction, column_norms_squared(problem, state.jacobian)
        )
        step = step_from_search(search, new_state, jnp.maximum(predicted, 0.0), relative_step)
        # An accepted step within rounding of f, to a point where the step's secant
        # predicts no more than rounding to gain: stop (the driver's PRECISION test
        # reads the gain); else go on, as the slope may still show progress.
        gain = _secant_gain(problem, x, grad, search.x, search.grad)
        stationary = gain <= _EPS_FACTOR * _eps(value) * jnp.abs(search.value)
        stop = search.accepted & search.flat & stationary
        outcome = jnp.where(stop, Outcome.ACCEPT_AND_STOP, step.outcome).astype(jnp.int32)
        return step._replace(outcome=outcome, predicted=jnp.where(stop, gain, step.predicted))


def _secant_gain(
    problem: Problem, x: jax.Array, grad: jax.Array, end: jax.Array, end_grad: jax.Array
) -> jax.Array:
    """The reduction still to gain at ``end``, reached from ``x`` by a step ``s``, as the
    secant of the step predicts it: ``|g|^2 s.y / (2 y.y)`` with ``g`` the gradient at
    ``end`` and ``y`` the change of the gradient (the true curvature along the step,
    not the Gauss–Newton model's); infinite where ``s.y <= 0`` (no positive curvature).
    The model's own prediction is of no use to a row that stopped progressing: where
    the residuals' curvature dominates ``J^T J`` (one residual at a non-zero minimum,
    where ``J`` vanishes), every full step predicts the whole residual away."""
    s = problem.free_part(end - x)
    y = problem.free_part(end_grad - grad)
    sy, yy = reduce.dot(s, y), reduce.dot(y, y)
    squared = reduce.dot(problem.free_part(end_grad), problem.free_part(end_grad))
    positive = (sy > 0) & (yy > 0)
    gain = 0.5 * squared * sy / jnp.where(positive, yy, 1.0)
    return jnp.where(positive & jnp.isfinite(gain), gain, jnp.inf)
