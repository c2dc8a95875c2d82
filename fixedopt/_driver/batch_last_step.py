"""A row's start and step of :mod:`fixedopt._driver.batch_last`, every row at once with
the batch last: :func:`fixedopt._driver.loop.begin`, :func:`~fixedopt._driver.loop.advance`
and :meth:`LevenbergMarquardt.step <fixedopt._solvers.levenberg_marquardt.LevenbergMarquardt.step>`
written on ``(n, *B)`` arrays, their elementwise helpers called as they are, their sums
over a row's entries taken along axis 0 (:mod:`fixedopt._driver.batch_last_measures`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from fixedopt._contract.solver import Problem, Step
from fixedopt._contract.status import RUNNING, Status, accepted, stop_status, stops
from fixedopt._driver import batch_last_measures as measures
from fixedopt._driver.loop import (
    Resume,
    Stopping,
    Tests,
    _relative_reduction,
    _rounding_only,
    _verdict,
    objective_scale,
)
from fixedopt._numerics import scaled
from fixedopt._solvers.levenberg_marquardt import (
    _UNDAMPED,
    LevenbergMarquardt,
    LevenbergMarquardtState,
    _next_damping,
    _outcome,
    _walks,
    short_of_bounds,
)
from fixedopt._solvers.normal_equations import (
    EPS_FACTOR,
    cauchy_of,
    relative_step_of,
    residual_unit,
)

# The damped and the undamped systems solved as one (traced once), not one by one.
SOLVES_STACKED = True
# x (n, *B) -> (value (*B), |r| (*B), grad (n, *B), J^T J (n, n, *B))
Evaluate = Callable[[jax.Array], tuple[jax.Array, jax.Array, jax.Array, jax.Array]]


class Carry(NamedTuple):
    """The loop's state of every row, batch last (``LoopState`` and the solver's; the
    state's ``normal`` is the whole ``(n, n, *B)`` matrix)."""

    x: jax.Array  # (n, *B)
    value: jax.Array  # (*B)
    grad: jax.Array  # (n, *B)
    grad_norm: jax.Array
    steps: jax.Array
    status: jax.Array
    reason: jax.Array
    initial_value: jax.Array
    doubted: jax.Array
    solver: LevenbergMarquardtState
    flat_steps: jax.Array  # loop._rounding_only's count


def _where(rows: jax.Array, new: Any, old: jax.Array) -> jax.Array:
    """``new`` in the ``rows`` (a mask of the batch's shape), ``old`` elsewhere."""
    return jnp.where(rows.reshape((1,) * (jnp.ndim(old) - rows.ndim) + rows.shape), new, old)


def start(solver: LevenbergMarquardt, problem: Problem, evaluation: tuple[jax.Array, ...],
          given: jax.Array, stopping: Stopping, resume: Resume) -> Carry:  # fmt: skip
    """``loop.begin`` of every row with the solver's ``start``, from the ``evaluation``
    at the projection of ``given``."""
    x = problem.project(given)
    value, norm, grad, normal = evaluation
    dtype, shape = x.dtype, value.shape
    state = LevenbergMarquardtState(
        normal, norm, jnp.full(shape, solver.initial_damping, dtype), jnp.full(shape, 2.0, dtype),
        problem.free_part(measures.diagonal(normal).astype(dtype)), jnp.zeros(shape, jnp.int32),
        jnp.zeros(x.shape, bool), jnp.zeros_like(x), jnp.zeros(shape, bool),
    )  # fmt: skip
    outside = jnp.zeros(shape, bool)
    if problem.lower is not None and problem.upper is not None:
        outside = jnp.any(((given < problem.lower) | (given > problem.upper)) & ~problem.fixed, 0)
    grad_norm = measures.grad_norm(problem, x, grad)
    finite = jnp.isfinite(value) & jnp.all(jnp.isfinite(grad), axis=0)
    outcome = jnp.where(finite, RUNNING, Status.NONFINITE)
    infinite = jnp.full(shape, jnp.inf, dtype)
    gradient = measures.cosine(problem, x, grad, normal, norm, state.walking)
    tests = Tests(grad_norm, gradient, infinite, infinite, infinite)
    steps, doubted = resume.steps.astype(jnp.int32), resume.doubted.astype(dtype)
    initial = resume.initial_value.astype(dtype)
    initial_value = jnp.where(jnp.isnan(initial), value, initial)
    status, reason = _verdict(outcome, tests, steps, stopping)
    infeasible = measures.infeasible(problem) | outside
    status = jnp.where(infeasible, Status.INFEASIBLE, status).astype(jnp.int32)
    reason = jnp.where(infeasible, 0, reason).astype(jnp.int32)
    x = _where(outside, given, x)
    value, grad, grad_norm = (_where(outside, jnp.nan, a) for a in (value, grad, grad_norm))
    zero = jnp.zeros(shape, jnp.int32)
    return Carry(x, value, grad, grad_norm, steps, status, reason, initial_value, doubted, state,
                 zero)  # fmt: skip


def advance(solver: LevenbergMarquardt, problem: Problem, evaluate: Evaluate, robust: bool,
            carry: Carry, stopping: Stopping) -> Carry:  # fmt: skip
    """``loop.advance`` of every row with the solver's step (:func:`_step`)."""
    step = _step(solver, problem, evaluate, robust, carry)
    moved = accepted(step.outcome)
    pairs = ((step.x, carry.x), (step.value, carry.value), (step.grad, carry.grad))
    x, value, grad = (_where(moved, new, old) for new, old in pairs)
    scale = objective_scale(carry.value, carry.initial_value, stopping.precision)
    state = step.state
    tests = Tests(
        grad_norm=measures.grad_norm(problem, x, grad),
        gradient=measures.cosine(
            problem, x, grad, state.normal, state.residual_norm, state.walking
        ),
        reduction=_relative_reduction(carry.value, value, step, scale),
        relative_step=jnp.where(moved | stops(step.outcome), step.relative_step, jnp.inf),
        value_drop=jnp.abs(value) / jnp.abs(carry.initial_value),
    )
    steps = carry.steps + 1
    outcome, flat_steps = _rounding_only(solver, step.outcome, moved, carry,  # type: ignore[arg-type]
                                         value, tests.grad_norm)  # fmt: skip
    status, reason = _verdict(stop_status(outcome), tests, steps, stopping)
    return Carry(x, value, grad, tests.grad_norm, steps, status, reason, carry.initial_value,
                 carry.doubted, state, flat_steps)  # fmt: skip


class _Sums(NamedTuple):
    """A step's sums over its entries (``levenberg_marquardt._step_sums``)."""

    slope: jax.Array
    curvature: jax.Array
    relative_step: jax.Array
    walks: jax.Array
    cauchy_slope: jax.Array
    cauchy_curvature: jax.Array


def _step_sums(problem: Problem, x: jax.Array, grad: jax.Array, free: jax.Array,
               step: jax.Array, gauss_newton: jax.Array, unit: jax.Array,
               state: LevenbergMarquardtState) -> _Sums:  # fmt: skip
    """``levenberg_marquardt._step_sums`` of every row: the xtol measure, the walk and
    the Cauchy point's dots in one reduction (``scaled.grouped``, along axis 0), the
    model's slope and curvature in the residuals' ``unit``."""
    normal = state.normal
    wide_step = (step / unit[None]).astype(normal.dtype)
    slope = jnp.sum(grad / unit[None] * (step / unit[None]), axis=0)
    curvature = jnp.sum(wide_step * measures.matvec(normal, wide_step), axis=0)
    scale = state.scale
    v = jnp.where(free & (scale > 0), grad / jnp.where(scale > 0, scale, 1.0), 0.0)
    wide = v.astype(normal.dtype)
    cauchy = ((grad, v), (wide, measures.matvec(normal, wide)))
    d = jnp.sqrt(scale)
    ds, dx = jax.lax.stop_gradient((d * gauss_newton, problem.free_part(d * x)))
    last = jax.lax.stop_gradient(state.last_step)
    walk = ((step, step), (last, last), (step, last))
    ((relative, _), (walk_sums, _)), (gv, vv) = scaled.grouped((((ds, ds), (dx, dx)), walk), cauchy)
    return _Sums(slope, curvature.astype(x.dtype), relative_step_of(relative), _walks(walk_sums),
                 gv, vv)  # fmt: skip


def _step(solver: LevenbergMarquardt, problem: Problem, evaluate: Evaluate, robust: bool,
          carry: Carry) -> Step[LevenbergMarquardtState]:  # fmt: skip
    """``LevenbergMarquardt.step`` of every row (least squares or Fisher scoring)."""
    x, value, grad, state = carry.x, carry.value, carry.grad, carry.solver
    free = ~problem.fixed & ~problem.at_bound(x, grad, 0.0)
    if SOLVES_STACKED:
        dampings = jnp.stack([state.damping, jnp.full_like(state.damping, _UNDAMPED)])
        both = measures.solve(state.normal, grad, free, dampings, state.scale)
        step, gauss_newton = both[:, 0], both[:, 1]
    else:
        step, gauss_newton = (
            measures.solve(state.normal, grad, free, d[None], state.scale)[:, 0]
            for d in (state.damping, jnp.full_like(state.damping, _UNDAMPED))
        )
    x_trial = short_of_bounds(problem, x, x + step, state.short)
    step = problem.free_part(x_trial - x)
    trial_value, trial_norm, trial_grad, normal = evaluate(x_trial)
    unit = jnp.ones_like(value) if robust else residual_unit(value, state.residual_norm)
    sums = _step_sums(problem, x, grad, free, step, gauss_newton, unit, state)
    predicted = -(sums.slope + 0.5 * sums.curvature)
    old_value, new_value = value, trial_value
    if not robust:  # the costs in that unit (the same where it is 1)
        old_value = jnp.where(unit == 1, value, 0.5 * (state.residual_norm / unit) ** 2)
        new_value = jnp.where(unit == 1, trial_value, 0.5 * (trial_norm / unit) ** 2)
    gain = (old_value - new_value) / jnp.where(predicted > 0, predicted, 1.0)
    finite = jnp.isfinite(trial_value) & jnp.all(jnp.isfinite(normal), axis=(0, 1))
    trapped = measures.trapped(problem, x, x_trial, state.normal, normal)
    any_trapped = jnp.any(trapped, axis=0)
    accepted_ = finite & (predicted > 0) & (gain > 1e-4) & ~any_trapped
    damping, growth = _next_damping(state, accepted_, gain, any_trapped)
    scale = jnp.maximum(state.scale, problem.free_part(measures.diagonal(normal).astype(x.dtype)))

    def keep(new: Any, old: jax.Array) -> jax.Array:
        return _where(accepted_, new, old)

    new_state = LevenbergMarquardtState(
        keep(normal, state.normal), keep(trial_norm, state.residual_norm), damping, growth,
        keep(scale, state.scale), keep(0, state.walls + (~finite).astype(jnp.int32)),
        state.short | trapped, keep(step, state.last_step), keep(sums.walks, state.walking),
    )  # fmt: skip
    rounding = EPS_FACTOR * jnp.finfo(value.dtype).eps * old_value
    no_progress = ~jnp.any(step != 0, axis=0) | ((predicted >= 0) & (predicted <= rounding))
    spent, walled = new_state.damping > solver.max_damping, new_state.walls > 0
    outcome = _outcome(accepted_, finite, no_progress, spent, walled)
    cauchy = cauchy_of(sums.cauchy_slope, sums.cauchy_curvature, solver.initial_damping)
    predicted = jnp.maximum(jnp.maximum(predicted * unit**2, cauchy), 0.0)
    return Step(x_trial, trial_value, trial_grad, new_state, outcome, predicted, sums.relative_step)
