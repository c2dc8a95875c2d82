"""The one loop driver every solver runs in, and the solver interface.

A solver is a small immutable object with two methods:

* ``init(problem, x, value, grad) -> state`` — its own state (history, damping...);
* ``step(problem, x, value, grad, state) -> Step`` — one iteration.

The driver owns everything else: the initial evaluation, the stopping rules, the
status codes and the step count, in one ``lax.while_loop`` over one row. Batching is
``jax.vmap`` of the driver: each row stops on its own (a finished row's state is
frozen by the loop's select), and one row's NaN cannot reach another row.
"""

from __future__ import annotations

import abc
from typing import Any, ClassVar, NamedTuple

import jax
import jax.numpy as jnp

from fixedopt._problem import Problem
from fixedopt._solution import RUNNING, Status


class Step(NamedTuple):
    """One iteration's outcome, as a solver reports it to the driver.

    On failure (``outcome`` not ``RUNNING``) the solver returns the previous ``x``,
    ``value`` and ``grad``, so the row keeps its last finite iterate.
    """

    x: jax.Array
    value: jax.Array
    grad: jax.Array
    state: Any
    outcome: jax.Array  # RUNNING, Status.NONFINITE or Status.LINESEARCH_FAILED
    moved: jax.Array  # False for a rejected trust-region step: no stall test then


class Solver(abc.ABC):
    """Base of every solver: immutable configuration, ``init`` and ``step``."""

    needs_residuals: ClassVar[bool] = False

    @abc.abstractmethod
    def init(self, problem: Problem, x, value, grad) -> Any:
        """The solver's own state at the starting point."""

    @abc.abstractmethod
    def step(self, problem: Problem, x, value, grad, state) -> Step:
        """One iteration from ``x``."""


def failed_or_running(accepted, nonfinite) -> jax.Array:
    """The outcome code of a step from its line search's verdict."""
    failure = jnp.where(nonfinite, Status.NONFINITE, Status.LINESEARCH_FAILED)
    return jnp.where(accepted, RUNNING, failure).astype(jnp.int32)


class LoopState(NamedTuple):
    x: jax.Array
    value: jax.Array
    grad: jax.Array
    grad_norm: jax.Array
    steps: jax.Array
    status: jax.Array
    solver_state: Any


def _status(outcome, grad_norm, stalled, steps, gtol, max_steps):
    status = jnp.where(steps >= max_steps, Status.MAX_STEPS, RUNNING)
    status = jnp.where(stalled, Status.STALLED, status)
    status = jnp.where(grad_norm <= gtol, Status.CONVERGED, status)
    return jnp.where(outcome != RUNNING, outcome, status).astype(jnp.int32)


def iterate(solver: Solver, problem: Problem, x, *, gtol, ftol, max_steps) -> LoopState:
    """Run ``solver`` on one row from ``x`` until its status is no longer RUNNING."""
    x = problem.project(x)
    value, grad = problem.value_and_grad(x)
    grad_norm = problem.grad_norm(x, grad)
    finite = jnp.isfinite(value) & jnp.all(jnp.isfinite(grad))
    outcome = jnp.where(finite, RUNNING, Status.NONFINITE)
    zero = jnp.zeros((), jnp.int32)
    status = _status(outcome, grad_norm, False, zero, gtol, max_steps)
    state = LoopState(x, value, grad, grad_norm, zero, status, solver.init(problem, x, value, grad))

    def body(state: LoopState) -> LoopState:
        step = solver.step(problem, state.x, state.value, state.grad, state.solver_state)
        grad_norm = problem.grad_norm(step.x, step.grad)
        scale = jnp.maximum(jnp.maximum(jnp.abs(state.value), jnp.abs(step.value)), 1.0)
        stalled = (ftol > 0) & step.moved & (state.value - step.value <= ftol * scale)
        steps = state.steps + 1
        status = _status(step.outcome, grad_norm, stalled, steps, gtol, max_steps)
        return LoopState(step.x, step.value, step.grad, grad_norm, steps, status, step.state)

    return jax.lax.while_loop(lambda state: state.status == RUNNING, body, state)
