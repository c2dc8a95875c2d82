"""Projected gradient descent with Barzilai–Borwein trial steps and a line search."""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import jax
import jax.numpy as jnp

from fixedopt._contract.solver import Certificate, Problem, Solver, Step, StepContext
from fixedopt._inputs.checks import positive_int, set_option
from fixedopt._numerics import reduce
from fixedopt._solvers import normal_equations
from fixedopt._solvers.certify import HessianTimes, free_hessian_check
from fixedopt._solvers.linesearch import (
    SearchStart,
    first_step,
    projected_backtracking,
    step_from_search,
)


class GradientDescentState(NamedTuple):
    trial_step: jax.Array  # the first step the next line search tries


@dataclasses.dataclass(frozen=True)
class GradientDescent(Solver[GradientDescentState]):
    """Projected steepest descent in the free subspace.

    The first trial step of each line search is the Barzilai–Borwein step
    ``s.s / s.y`` from the last move (Barzilai, Borwein 1988), falling back to the
    last accepted step; a projected backtracking line search enforces decrease, or,
    where ``f`` is flat to rounding, takes a trial that lowers the gradient's max-norm
    (``normal_equations.LEVEL_DROP``): float32 rows in a valley below ``f``'s rounding
    gave up CONVERGED (PRECISION) at gradients beyond 8 times their floor.
    A row about to stop CONVERGED is certified from the true Hessian as L-BFGS's are
    (:meth:`GradientDescent.certify`): the secant test reads one scalar curvature,
    which a stiff problem fools (float32 ``1e8 x0^2 + (x1 - 3)^2 / 2`` from ``(1, 0)``
    stopped CONVERGED at ``x1 = 2e-8`` after 2 steps without the check).

    Args:
      max_linesearch_steps: trials per line search before the row stops with
        ``Status.LINESEARCH_FAILED``.

    Example:
      >>> import jax.numpy as jnp
      >>> import fixedopt
      >>> fun = lambda x: jnp.sum((x - 3.0) ** 2)
      >>> sol = fixedopt.minimize(fun, jnp.zeros(3), jnp.array([True, False, False]),
      ...                         solver=fixedopt.GradientDescent())
      >>> print(sol.x.round(6))
      [0. 3. 3.]
    """

    max_linesearch_steps: int = 30
    descends = True

    def __post_init__(self) -> None:
        steps = positive_int("max_linesearch_steps", self.max_linesearch_steps)
        set_option(self, "max_linesearch_steps", steps)

    def init(
        self, problem: Problem, x: jax.Array, value: jax.Array, grad: jax.Array
    ) -> GradientDescentState:
        trial_step = first_step(problem, x, value, grad).astype(x.dtype)
        return GradientDescentState(trial_step)

    def step(
        self, problem: Problem, x: jax.Array, value: jax.Array, grad: jax.Array,
        state: GradientDescentState, context: StepContext,
    ) -> Step[GradientDescentState]:  # fmt: skip
        direction = jnp.where(problem.fixed, 0.0, -grad)

        def evaluate(x_trial: jax.Array) -> tuple[jax.Array, jax.Array, None]:
            return (*problem.value_and_grad(x_trial), None)

        start = SearchStart(
            problem, evaluate, x, value, grad, direction, state.trial_step, context.active
        )
        search = projected_backtracking(
            start, max_steps=self.max_linesearch_steps, gradient_drop=normal_equations.LEVEL_DROP
        )
        s, y = problem.free_part(search.x - x), search.grad - grad
        sy = reduce.dot(s, y)
        barzilai_borwein = reduce.dot(s, s) / jnp.where(sy > 0, sy, 1.0)
        trial_step = jnp.where(sy > 0, barzilai_borwein, 2.0 * state.trial_step)
        trial_step = jnp.where(search.accepted, trial_step, state.trial_step).astype(x.dtype)
        # A scalar curvature (the Barzilai–Borwein step) predicts steps far too short
        # on ill-conditioned problems: no ftol/xtol test rests on it. The driver's
        # gradient test (with the secant curvature) and abs_gtol decide.
        no_model = jnp.asarray(jnp.inf, value.dtype)
        new_state = GradientDescentState(trial_step)
        return step_from_search(search, new_state, no_model, no_model)

    def certify(
        self, problem: Problem, x: jax.Array, value: jax.Array, grad: jax.Array,
        state: GradientDescentState,
    ) -> Certificate[GradientDescentState] | None:  # fmt: skip
        """The Newton decrement ``g.H^-1 g`` of the true Hessian at ``x`` (``inf``
        where it has clearly negative curvature), as :meth:`fixedopt.LBFGS.certify`
        computes it (``free_hessian_check`` of ``fixedopt/_solvers/certify.py``),
        above ``CERTIFY_FULL_N`` entries preconditioned by the trial step. A row shown
        wrong goes on with its own steps (a saddle point: along the check's step,
        ``fixedopt._driver.loop.certify``). None where the problem has no
        Hessian-vector products."""
        if not problem.hessian_products:
            return None

        def preconditioner(free: jax.Array) -> HessianTimes:
            return lambda r: state.trial_step * r

        decrement, step, _ = free_hessian_check(problem, x, value, grad, preconditioner)
        return Certificate(decrement, step, state)
