"""Levenberg–Marquardt on the free block of the Jacobian: Moré's scaling, Nielsen's
damping update, and the bounds (an entry whose landing on a bound made a Jacobian
column vanish stops short of that bound from then on).

Each step solves the damped normal equations
(:mod:`fixedopt._solvers.normal_equations`) from ``J^T J`` at the point, which the state
holds (all a step reads of ``J``), and evaluates the residual and its Jacobian once, at
the trial point.
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike

from fixedopt._contract.solver import Problem, Solver, Step, StepContext
from fixedopt._contract.status import Outcome, failure
from fixedopt._inputs.checks import positive_float, set_option
from fixedopt._numerics import reduce, scaled
from fixedopt._solvers import small_linalg
from fixedopt._solvers.normal_equations import (
    EPS_FACTOR,
    LEVEL_DROP,
    cauchy_of,
    cauchy_pairs,
    cosine,
    cosine_norm,
    eps_of,
    lowers_gradient,
    normal_equations_step,
    relative_step_of,
    relative_step_pairs,
    residual_sums,
    residual_unit,
    residuals_and_jacobian,
)


class LevenbergMarquardtState(NamedTuple):
    # J^T J at the point, its lower triangle ((n (n + 1) / 2,), small_linalg.symmetric):
    # all a step reads of J, in fewer bytes (more lanes in the cache)
    normal: jax.Array
    residual_norm: jax.Array  # |r| at the point (MINPACK's gtol measure)
    damping: jax.Array
    growth: jax.Array  # Nielsen's factor for the next rejection
    scale: jax.Array  # D^2: running max of diag(J^T J) (Moré's scaling)
    walls: jax.Array  # () int32: non-finite trials since the last accepted step
    short: jax.Array  # (n,) bool: entries that stop short of a bound (short_of_bounds)
    last_step: jax.Array  # (n,): the last accepted step (zero on fixed entries)
    walking: jax.Array  # () bool: the last step went on along it (_walks): no GTOL claim


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
    entry whose landing on a bound made a column of ``J`` vanish steps back from it
    instead, as scipy's trf does: :func:`short_of_bounds`).
    Convergence follows MINPACK's tests (see :class:`fixedopt.Reason`), with the
    predicted reduction that ``ftol`` reads taken as the larger of the damped step's
    and the model's at its Cauchy point with the initial damping
    (``normal_equations.cauchy_reduction``): the same while the damping is small, and not small
    where the damping grew far from a minimum. No ``gtol`` claim is made while the row
    walks along a valley (its last accepted step goes on along the one before:
    :func:`_walks`), where the cosine can dip at one iterate far from the end. A step
    whose predicted and actual changes of the cost are rounding is taken where it lowers
    the gradient's norm (``LEVEL_DROP``): a gap below the cost's rounding is no
    precision limit while the gradient can still fall. A row whose
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
    descends = True

    def gradient_measure(
        self,
        problem: Problem,
        x: jax.Array,
        value: jax.Array,
        grad: jax.Array,
        state: LevenbergMarquardtState,
        curvature: jax.Array | None,
    ) -> jax.Array:
        """MINPACK's residual–Jacobian cosine (see
        :func:`fixedopt._solvers.normal_equations.residual_cosine`); ``inf`` while the row
        walks: its last accepted step went on along the one before (:func:`_walks`)."""
        columns = problem.free_part(small_linalg.diagonal_of(state.normal).astype(x.dtype))
        norm = cosine_norm(problem, value, state.residual_norm)
        measure = cosine(problem, x, grad, columns, norm)
        return jnp.where(state.walking, jnp.inf, measure)

    def normal_matrix(self, state: LevenbergMarquardtState) -> jax.Array:
        """``J^T J`` at the row's point: the state's ``normal``, made whole."""
        return small_linalg.symmetric(state.normal)

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
        residual, jacobian = residuals_and_jacobian(problem, x)
        normal, grad, squared, norm = residual_sums(jacobian, residual)
        value = problem.residual_value(x, residual) if problem.robust else 0.5 * squared
        return value, grad, self._fresh(problem, x, normal, norm)

    def _fresh(
        self, problem: Problem, x: jax.Array, normal: jax.Array, norm: jax.Array
    ) -> LevenbergMarquardtState:
        """The state at a start whose ``J^T J`` is ``normal`` and ``|r|`` ``norm``."""
        damping = jnp.asarray(self.initial_damping, x.dtype)
        scale = problem.free_part(jnp.diagonal(normal).astype(x.dtype))
        walls, short = jnp.zeros((), jnp.int32), jnp.zeros(x.shape, bool)
        growth, walking = jnp.asarray(2.0, x.dtype), jnp.zeros((), bool)
        return LevenbergMarquardtState(
            small_linalg.lower_triangle(normal),
            norm,
            damping,
            growth,
            scale,
            walls,
            short,
            jnp.zeros_like(x),
            walking,
        )

    def step(
        self, problem: Problem, x: jax.Array, value: jax.Array, grad: jax.Array,
        state: LevenbergMarquardtState, context: StepContext,
    ) -> Step[LevenbergMarquardtState]:  # fmt: skip
        free = problem.movable(x, grad)
        # The damped step, and the undamped (Gauss–Newton) step the xtol test measures
        # (a step that is short only because the damping grew, at a NaN wall say, says
        # nothing of the distance to the solution). Both systems are factored in ONE
        # batched call: two independent LAPACK calls can deadlock jaxlib's CPU thread
        # pool (each waits for pool threads the other holds; seen on 2 cores).
        dampings = jnp.stack([state.damping, jnp.asarray(_UNDAMPED, state.damping.dtype)])
        current = small_linalg.symmetric(state.normal)  # J^T J at x

        def solve(damping: jax.Array) -> jax.Array:
            return normal_equations_step(current, grad, free, damping, state.scale)

        step, gauss_newton = jax.vmap(solve)(dampings)
        x_trial = short_of_bounds(problem, x, x + step, state.short)
        step = problem.free_part(x_trial - x)
        residual, jacobian = residuals_and_jacobian(problem, x_trial)
        # The next step's system, the gradient, |r|^2 and |r|, formed once (on the CPU
        # in one pass over J and r: normal_equations.residual_sums).
        normal, trial_grad, squared, trial_norm = residual_sums(jacobian, residual)
        robust = problem.robust  # a robust loss's value is not 0.5 |r|^2
        trial_value = problem.residual_value(x_trial, residual) if robust else 0.5 * squared
        # The reductions, in a unit of the residuals where the cost underflows (1 else):
        unit = 1.0 if robust else residual_unit(value, state.residual_norm)
        sums = _step_sums(problem, x, grad, free, step, gauss_newton, unit, state, current)
        predicted = -(sums.slope + 0.5 * sums.curvature)  # the Gauss–Newton model's
        old_value, new_value = value, trial_value
        if not robust:  # the costs in that unit (the same where it is 1)
            old_value = jnp.where(unit == 1, value, 0.5 * (state.residual_norm / unit) ** 2)
            new_value = jnp.where(unit == 1, trial_value, 0.5 * (trial_norm / unit) ** 2)
        gain = (old_value - new_value) / jnp.where(predicted > 0, predicted, 1.0)
        # J is finite where J^T J is (bar overflow, which would break the next step).
        finite = jnp.isfinite(trial_value) & jnp.all(jnp.isfinite(normal))
        trapped = _trapped(problem, x, x_trial, current, normal)
        accepted = finite & (predicted > 0) & (gain > 1e-4) & ~reduce.any_true(trapped)
        rounding = EPS_FACTOR * eps_of(value) * old_value
        lowers = lowers_gradient(problem, x, grad, x_trial, trial_grad, LEVEL_DROP)
        level = (predicted <= rounding) & (jnp.abs(old_value - new_value) <= rounding)
        accepted = accepted | (finite & level & lowers & ~reduce.any_true(trapped))
        # A stopped row's step (not active) keeps J^T J at its x (Solver.normal_matrix).
        kept = accepted & context.active
        trial = _Trial(kept, finite, trapped, gain, normal, trial_norm, step, sums.walks)
        new_state = _next_state(problem, state, trial)
        no_progress = ~reduce.any_true(step != 0) | ((predicted >= 0) & (predicted <= rounding))
        spent, walled = new_state.damping > self.max_damping, new_state.walls > 0
        outcome = _outcome(accepted, finite, no_progress, spent, walled)
        # ftol and precision read the larger prediction (see cauchy_reduction):
        cauchy = cauchy_of(sums.cauchy_slope, sums.cauchy_curvature, self.initial_damping)
        return Step(
            x=x_trial,
            value=trial_value,
            grad=trial_grad,
            state=new_state,
            outcome=outcome,
            predicted=jnp.maximum(jnp.maximum(predicted * unit**2, cauchy), 0.0),
            relative_step=sums.relative_step,
        )


class _Trial(NamedTuple):
    """What a trial step leaves for the next state (:func:`_next_state`)."""

    accepted: jax.Array  # () bool: the step is taken (and the row active)
    finite: jax.Array  # () bool: the trial's cost and J^T J are finite
    trapped: jax.Array  # (n,) bool: entries trapped on a bound (_trapped)
    gain: jax.Array  # the gain ratio
    normal: jax.Array  # J^T J at the trial point
    norm: jax.Array  # |r| at the trial point
    step: jax.Array  # (n,): the step (zero on fixed entries)
    walks: jax.Array  # () bool: the step goes on along the last accepted one (_walks)


def _next_state(
    problem: Problem, state: LevenbergMarquardtState, trial: _Trial
) -> LevenbergMarquardtState:
    """The state after ``trial``: its ``J^T J``, ``|r|``, step and walk where it is
    accepted, the damping of :func:`_next_damping`; the walk is set by each accepted
    step and kept through rejected trials (the point stays)."""
    accepted = trial.accepted
    damping, growth = _next_damping(state, accepted, trial.gain, reduce.any_true(trial.trapped))

    def keep(new: jax.Array, old: jax.Array) -> jax.Array:
        return jnp.where(accepted, new, old)

    dtype = state.scale.dtype
    scale = jnp.maximum(state.scale, problem.free_part(jnp.diagonal(trial.normal).astype(dtype)))
    return LevenbergMarquardtState(
        keep(small_linalg.lower_triangle(trial.normal), state.normal),
        keep(trial.norm, state.residual_norm),
        damping,
        growth,
        keep(scale, state.scale),
        jnp.where(accepted, 0, state.walls + (~trial.finite).astype(jnp.int32)),
        state.short | trial.trapped,
        keep(trial.step, state.last_step),
        keep(trial.walks, state.walking),
    )


class _StepSums(NamedTuple):
    """A step's sums over its ``n`` entries (:func:`_step_sums`)."""

    slope: jax.Array  # g.s (in the residuals' unit)
    curvature: jax.Array  # |J s|^2 (in the residuals' unit)
    relative_step: jax.Array  # the xtol measure of the undamped step
    walks: jax.Array  # () bool: the step goes on along the last accepted one
    cauchy_slope: jax.Array  # g.v of cauchy_pairs
    cauchy_curvature: jax.Array  # v.(J^T J v) of cauchy_pairs


def _step_sums(
    problem: Problem, x: jax.Array, grad: jax.Array, free: jax.Array, step: jax.Array,
    gauss_newton: jax.Array, unit: ArrayLike, state: LevenbergMarquardtState,
    normal: jax.Array,
) -> _StepSums:  # fmt: skip
    """The sums over ``n`` a step reads: the xtol measure (:func:`relative_step_size`),
    the walk (:func:`_walks`) and the Cauchy point's dots (:func:`cauchy_reduction`) in
    ONE reduction (:func:`fixedopt._numerics.scaled.grouped`), each sum as its own
    function would take it; the model's slope and curvature in the residuals' ``unit``
    as two dots (in the one reduction they round otherwise: 35 of Gpufit's 1e5 fits
    ended in other bits)."""
    wide_step = (step / unit).astype(normal.dtype)
    slope = reduce.dot(grad / unit, step / unit)
    curvature = reduce.dot(wide_step, small_linalg.matvec(normal, wide_step))
    cauchy = cauchy_pairs(normal, grad, free, state.scale)
    relative = relative_step_pairs(problem, x, gauss_newton, state.scale)
    walk = _walk_pairs(step, state.last_step)
    ((relative_sums, _), (walk_sums, _)), cauchy_sums = scaled.grouped((relative, walk), cauchy)
    cauchy_slope, cauchy_curvature = cauchy_sums
    return _StepSums(
        slope, curvature.astype(x.dtype), relative_step_of(relative_sums),
        _walks(walk_sums), cauchy_slope, cauchy_curvature,
    )  # fmt: skip


# A step at least WALK_LENGTH of the last accepted one's length and within WALK_COSINE
# of its direction: the row is walking along a valley, and MINPACK's cosine says nothing
# of the distance left. docs/decisions.md, "First-order gates on Levenberg-Marquardt's
# cosine in a curved valley": two float32 bi-exponential voxels (status_truth, rows 16
# and 106) walked a long curved valley with a small damping, each step lowering f by a
# few 1e-6 of it, and the cosine, dipping below gtol at one iterate, claimed CONVERGED
# 4.4e-4 of the cost above the minimum; the walk itself is the evidence of the gap.
WALK_LENGTH, WALK_COSINE = 0.3, 0.99


def _walk_pairs(step: jax.Array, last: jax.Array) -> tuple[scaled.Pair, ...]:
    """The pairs whose scaled sums :func:`_walks` reads: ``|s|^2``, ``|l|^2`` and ``s.l``
    of ``step`` and the last accepted step ``last`` (``(n,)``, zero on fixed entries),
    their gradients stopped (a test)."""
    step, last = jax.lax.stop_gradient((step, last))
    return (step, step), (last, last), (step, last)


def _walks(sums: tuple[jax.Array, ...]) -> jax.Array:
    """Whether a step goes on along the last accepted step, from the sums of
    :func:`_walk_pairs` at one scale (the comparisons are the same at any scale:
    :func:`fixedopt._numerics.scaled.sums`): at least ``WALK_LENGTH`` of its length, at a
    cosine above ``WALK_COSINE``."""
    squared, last_squared, product = sums
    # Both roots in one array: one kernel (as two, each root took a kernel of its own).
    length, last_length = jnp.sqrt(jnp.stack([squared, last_squared]))
    along = product > WALK_COSINE * length * last_length
    walks: jax.Array = (length > WALK_LENGTH * last_length) & along
    return walks


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
    """The free entries (``(n,)``, boolean) that the trial put on a bound where a
    column of ``J`` (theirs or another free entry's) is exactly zero, though it was not
    at ``x`` (``normal`` and ``trial_normal`` are ``J^T J`` at ``x`` and at the trial).

    There that column's entry has a zero gradient whatever the others become, and no
    first-order step sees the way off the bound: ``c**2`` clipped to ``c = 0`` by a long
    first step held scipy's ``test_dtypes2`` (batched) CONVERGED at a saddle of the
    bounded problem, at 5x to 1600x scipy's cost, though the cost fell as ``c`` moved
    inward once the others had settled. Another entry's column alike: a float32
    bi-exponential voxel's fast fraction clipped to 0 left its fast T2 without a
    column, CONVERGED (GTOL) at a saddle 0.66% above the minimum (a fraction and its
    T2 must move together). Such an entry is marked to stop short of its bounds from
    then on (:func:`short_of_bounds`), and the trial is taken again: one more
    evaluation, where such a bound is met. Elsewhere entries land on their bounds
    exactly (the active set)."""
    if problem.lower is None or problem.upper is None:
        return jnp.zeros(x.shape, bool)
    on_bound = (trial == problem.lower) | (trial == problem.upper)
    landed = on_bound & (trial != x) & ~problem.fixed
    column, trial_column = jnp.diagonal(normal), jnp.diagonal(trial_normal)
    vanished = (column != 0) & (trial_column == 0) & ~problem.fixed
    trapped: jax.Array = landed & reduce.any_true(vanished)
    return trapped


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


_UNDAMPED = 1e-10  # relative ridge of the Gauss–Newton step the xtol test measures
