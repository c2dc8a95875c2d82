"""Levenberg–Marquardt and Gauss–Newton on the free block of the Jacobian.

Fixed entries give the Jacobian exact zero columns. Both solvers solve the normal
equations on the free block only: rows and columns of fixed (and bound-active) entries
are replaced by those of the identity, with a zero right-hand side, so the step is
exactly zero there and the system stays non-singular — no NaN, no "singular" failure.
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import jax
import jax.numpy as jnp

from fixedopt._linesearch import projected_backtracking
from fixedopt._loop import Solver, Step, StepContext, step_after_search
from fixedopt._problem import Problem
from fixedopt._solution import RUNNING, Status


def _residual_evaluation(problem: Problem, x):
    residual, jacobian = problem.residual_and_jacobian(x)
    value = problem.residual_value(x, residual)  # robust losses: not 0.5 |residual|^2
    return value, jacobian.T @ residual, (residual, jacobian)


def free_block_step(jacobian, grad, free, damping):
    """Solve ``(J^T J + damping * diag(J^T J)) step = -grad`` on the free entries.

    Marquardt's scaling by ``diag(J^T J)`` makes ``damping`` unit-free. Entries that are
    not free get an identity row/column and a zero right-hand side: their step is 0.
    Half-precision inputs are solved in float32 (XLA has no half-precision Cholesky).
    """
    dtype = grad.dtype
    if jnp.finfo(dtype).bits < 32:  # no low-precision Cholesky: solve in float32
        jacobian, grad = jacobian.astype(jnp.float32), grad.astype(jnp.float32)
    normal = jacobian.T @ jacobian
    diagonal = jnp.diagonal(normal)
    scale = jnp.maximum(diagonal, jnp.finfo(normal.dtype).eps * jnp.max(diagonal, initial=1.0))
    both_free = free[:, None] & free[None, :]
    matrix = jnp.where(both_free, normal + jnp.diag(damping * scale), 0.0)
    matrix = matrix + jnp.diag(jnp.where(free, 0.0, 1.0))
    factor = jax.scipy.linalg.cho_factor(matrix)
    return jax.scipy.linalg.cho_solve(factor, jnp.where(free, -grad, 0.0)).astype(dtype)


class LevenbergMarquardtState(NamedTuple):
    residual: jax.Array
    jacobian: jax.Array
    damping: jax.Array
    growth: jax.Array  # Nielsen's factor for the next rejection


@dataclasses.dataclass(frozen=True)
class LevenbergMarquardt(Solver):
    """Levenberg–Marquardt with Marquardt scaling and Nielsen's damping update.

    Each iteration evaluates the residual and its Jacobian once, at the trial point.
    The gain ratio decides: accepted steps shrink the damping by
    ``max(1/3, 1 - (2 rho - 1)^3)``, rejected ones grow it by a doubling factor
    (Nielsen 1999; Madsen, Nielsen, Tingleff 2004). Bounds: entries at a bound whose
    gradient points out are held for the iteration, trial points are projected.
    A row whose damping exceeds ``max_damping`` stops with
    ``Status.LINESEARCH_FAILED`` (no acceptable step).

    Args:
      initial_damping: the damping relative to ``diag(J^T J)`` at the start.
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
    needs_residuals = True

    def __post_init__(self):
        if not (0 < self.initial_damping < self.max_damping):
            raise ValueError(
                "`initial_damping` must be positive and below `max_damping`, got "
                f"{self.initial_damping!r} and {self.max_damping!r}"
            )

    def init(self, problem: Problem, x, value, grad) -> LevenbergMarquardtState:
        residual, jacobian = problem.residual_and_jacobian(x)
        damping = jnp.asarray(self.initial_damping, x.dtype)
        return LevenbergMarquardtState(residual, jacobian, damping, jnp.asarray(2.0, x.dtype))

    def step(
        self, problem: Problem, x, value, grad, state: LevenbergMarquardtState, context: StepContext
    ) -> Step:
        free = ~problem.fixed & ~problem.at_bound(x, grad, 0.0)
        step = free_block_step(state.jacobian, grad, free, state.damping)
        x_trial = problem.project(x + step)
        step = x_trial - x
        trial_value, trial_grad, (residual, jacobian) = _residual_evaluation(problem, x_trial)
        predicted = -(jnp.dot(grad, step) + 0.5 * jnp.sum((state.jacobian @ step) ** 2))
        gain = (value - trial_value) / jnp.where(predicted > 0, predicted, 1.0)
        finite = jnp.isfinite(trial_value) & jnp.all(jnp.isfinite(jacobian))
        accepted = finite & (predicted > 0) & (gain > 1e-4)
        shrink = jnp.maximum(1.0 / 3.0, 1.0 - (2.0 * gain - 1.0) ** 3)
        damping = jnp.where(accepted, state.damping * shrink, state.damping * state.growth)
        growth = jnp.where(accepted, 2.0, 2.0 * state.growth)
        keep = lambda new, old: jnp.where(accepted, new, old)
        new_state = LevenbergMarquardtState(
            keep(residual, state.residual), keep(jacobian, state.jacobian), damping, growth
        )
        gave_up = ~accepted & (damping > self.max_damping)
        failure = jnp.where(finite, Status.LINESEARCH_FAILED, Status.NONFINITE)
        return Step(
            x=keep(x_trial, x),
            value=keep(trial_value, value),
            grad=keep(trial_grad, grad),
            state=new_state,
            outcome=jnp.where(gave_up, failure, RUNNING).astype(jnp.int32),
            moved=accepted,
        )


class GaussNewtonState(NamedTuple):
    jacobian: jax.Array


@dataclasses.dataclass(frozen=True)
class GaussNewton(Solver):
    """Gauss–Newton with a projected backtracking line search.

    The step solves the normal equations on the free block with a tiny relative
    regularization (``regularization * diag(J^T J)``), so a rank-deficient free
    block still gives a descent direction; the line search makes it globally
    convergent on problems with small residuals.

    Args:
      regularization: relative ridge added to ``diag(J^T J)``.
      max_linesearch_steps: trials per line search before the row stops with
        ``Status.LINESEARCH_FAILED``.
    """

    regularization: float = 1e-10
    max_linesearch_steps: int = 30
    needs_residuals = True

    def __post_init__(self):
        if not self.regularization > 0:
            raise ValueError(f"`regularization` must be positive, got {self.regularization!r}")

    def init(self, problem: Problem, x, value, grad) -> GaussNewtonState:
        return GaussNewtonState(problem.residual_and_jacobian(x)[1])

    def step(
        self, problem: Problem, x, value, grad, state: GaussNewtonState, context: StepContext
    ) -> Step:
        free = ~problem.fixed & ~problem.at_bound(x, grad, 0.0)
        direction = free_block_step(state.jacobian, grad, free, self.regularization)
        search = projected_backtracking(
            problem, lambda x_trial: _residual_evaluation(problem, x_trial), x, value, grad,
            direction, 1.0, context.active, max_steps=self.max_linesearch_steps,
        )  # fmt: skip
        jacobian = jnp.where(search.accepted, search.aux[1], state.jacobian)
        return step_after_search(search, x, value, grad, GaussNewtonState(jacobian))
