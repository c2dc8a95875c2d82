"""Gauss–Newton on the free block of the Jacobian, with a projected backtracking line
search.

The step solves the normal equations on the free block
(:mod:`fixedopt._solvers.normal_equations`) with a tiny relative ridge; the state holds
the residual and Jacobian at the point, which the line search evaluates at each trial.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import NamedTuple, Protocol, TypeVar

import jax
import jax.numpy as jnp

from fixedopt._contract.solver import Problem, Solver, Step, StepContext
from fixedopt._contract.status import Outcome
from fixedopt._inputs.checks import positive_float, positive_int, set_option
from fixedopt._numerics import reduce
from fixedopt._solvers import small_linalg
from fixedopt._solvers.linesearch import SearchStart, projected_backtracking, step_from_search
from fixedopt._solvers.normal_equations import (
    EPS_FACTOR,
    column_norms_squared,
    eps_of,
    free_block_step,
    gauss_newton_model,
    lowers_gradient,
    residual_cosine,
    residuals_and_jacobian,
)


def _residual_evaluation(
    problem: Problem, x: jax.Array
) -> tuple[jax.Array, jax.Array, tuple[jax.Array, jax.Array]]:
    """``(value, grad, (residual, jacobian))`` at ``x``: a line search's evaluation."""
    residual, jacobian = residuals_and_jacobian(problem, x)
    value = problem.residual_value(x, residual)  # robust losses: not 0.5 |residual|^2
    return value, small_linalg.rmatvec(jacobian, residual), (residual, jacobian)


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
    descends = True

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
        return residual_cosine(problem, x, value, grad, state.jacobian, state.residual)


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
    stops CONVERGED (``PRECISION``), unless the step lowered the gradient's max-norm
    ``GRADIENT_DROP`` times (a gap below the cost's rounding that the gradient still
    shows). Where the residuals' own curvature dominates
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
        residual, jacobian = residuals_and_jacobian(problem, x)
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
        free = problem.movable(x, grad)
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
        # reads the gain); else go on, as the slope may still show progress. A step that
        # lowered the gradient GRADIENT_DROP times goes on too: the cost cannot show the
        # progress there (a gap below its rounding), the gradient can.
        gain = _secant_gain(problem, x, grad, search.x, search.grad)
        stationary = gain <= EPS_FACTOR * eps_of(value) * jnp.abs(search.value)
        lowers = lowers_gradient(problem, x, grad, search.x, search.grad)
        stop = search.accepted & search.flat & stationary & ~lowers
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
