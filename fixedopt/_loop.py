"""The one loop driver every solver runs in, and the solver interface.

A solver is a small immutable object with two methods:

* ``init(problem, x, value, grad) -> state`` — its own state (history, damping...);
* ``step(problem, x, value, grad, state, context) -> Step`` — one iteration.
  ``context.active`` is False for a row of a batch that has already stopped: its
  results are discarded, and the solver should do no inner iterations for it (a line
  search makes no trials), so that it cannot lengthen the batch's loop.
  ``context.iteration`` is the number of steps every running row has taken; in a
  batch it is one unbatched scalar, which solvers may use to index their memory
  without a per-row gather.

The driver owns everything else: the initial evaluation, the stopping rules, the
status codes and the step count. One row runs in one ``lax.while_loop``
(:func:`iterate`); a batch runs in one ``lax.while_loop`` over the ``vmap`` of one
row's iteration (:func:`iterate_batch`): each row stops on its own (a stopped row
keeps what it reports), and one row's NaN cannot reach another row.
"""

from __future__ import annotations

import abc
from typing import Any, ClassVar, NamedTuple

import jax
import jax.numpy as jnp

from fixedopt._control import loop
from fixedopt._problem import Problem
from fixedopt._progress import Progress
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


class StepContext(NamedTuple):
    """What the driver tells a solver's ``step`` besides the row's own data."""

    active: jax.Array | bool  # False for a stopped row of a batch
    iteration: jax.Array  # steps taken by every running row (unbatched in a batch)


class Solver(abc.ABC):
    """Base of every solver: immutable configuration, ``init`` and ``step``."""

    needs_residuals: ClassVar[bool] = False

    @abc.abstractmethod
    def init(self, problem: Problem, x, value, grad) -> Any:
        """The solver's own state at the starting point."""

    @abc.abstractmethod
    def step(self, problem: Problem, x, value, grad, state, context: StepContext) -> Step:
        """One iteration from ``x`` (see :class:`StepContext`)."""


def failed_or_running(accepted, nonfinite) -> jax.Array:
    """The outcome code of a step from its line search's verdict."""
    failure = jnp.where(nonfinite, Status.NONFINITE, Status.LINESEARCH_FAILED)
    return jnp.where(accepted, RUNNING, failure).astype(jnp.int32)


class Stopping(NamedTuple):
    """The stopping rules, as traced data: changing them does not recompile."""

    gtol: jax.Array
    ftol: jax.Array
    max_steps: jax.Array


def step_after_search(search, x, value, grad, state) -> Step:
    """The :class:`Step` after a line search: its point if accepted, else the old one."""
    keep = lambda new, old: jnp.where(search.accepted, new, old)
    return Step(
        x=keep(search.x, x),
        value=keep(search.value, value),
        grad=keep(search.grad, grad),
        state=state,
        outcome=failed_or_running(search.accepted, search.nonfinite),
        moved=search.accepted,
    )


class LoopState(NamedTuple):
    x: jax.Array
    value: jax.Array
    grad: jax.Array
    grad_norm: jax.Array
    steps: jax.Array
    status: jax.Array
    solver_state: Any


def _status(outcome, grad_norm, stalled, steps, stopping: Stopping):
    status = jnp.where(steps >= stopping.max_steps, Status.MAX_STEPS, RUNNING)
    status = jnp.where(stalled, Status.STALLED, status)
    status = jnp.where(grad_norm <= stopping.gtol, Status.CONVERGED, status)
    return jnp.where(outcome != RUNNING, outcome, status).astype(jnp.int32)


def start(solver: Solver, problem: Problem, x, stopping: Stopping) -> LoopState:
    """Project the starting point, evaluate it, and give the row its first status."""
    x = problem.project(x)
    value, grad = problem.value_and_grad(x)
    grad_norm = problem.grad_norm(x, grad)
    finite = jnp.isfinite(value) & jnp.all(jnp.isfinite(grad))
    outcome = jnp.where(finite, RUNNING, Status.NONFINITE)
    zero = jnp.zeros((), jnp.int32)
    status = _status(outcome, grad_norm, False, zero, stopping)
    return LoopState(x, value, grad, grad_norm, zero, status, solver.init(problem, x, value, grad))


def advance(
    solver: Solver,
    problem: Problem,
    state: LoopState,
    stopping: Stopping,
    context: StepContext | None = None,
) -> LoopState:
    """One iteration of one row, with its new status."""
    context = StepContext(True, state.steps) if context is None else context
    step = solver.step(problem, state.x, state.value, state.grad, state.solver_state, context)
    grad_norm = problem.grad_norm(step.x, step.grad)
    scale = jnp.maximum(jnp.maximum(jnp.abs(state.value), jnp.abs(step.value)), 1.0)
    decrease = state.value - step.value
    stalled = (stopping.ftol > 0) & step.moved & (decrease <= stopping.ftol * scale)
    steps = state.steps + 1
    status = _status(step.outcome, grad_norm, stalled, steps, stopping)
    return LoopState(step.x, step.value, step.grad, grad_norm, steps, status, step.state)


def _running(state: LoopState) -> jax.Array:
    return state.status == RUNNING


def iterate(
    solver: Solver, problem: Problem, x, stopping: Stopping, unroll_length: int | None = None
) -> LoopState:
    """Run ``solver`` on one row from ``x`` until its status is no longer RUNNING.

    With ``unroll_length`` (``max_steps``, static) the loop is a differentiable
    fixed-length scan (see :mod:`fixedopt._control`).
    """
    return loop(
        _running,
        lambda state: advance(solver, problem, state, stopping),
        start(solver, problem, x, stopping),
        unroll_length,
    )


def compaction_sizes(batch: int, factor: int = 8, smallest: int = 8) -> tuple[int, ...]:
    """The shrinking batch sizes the still-running rows are gathered into."""
    sizes = []
    size = batch // factor
    while size >= smallest:
        sizes.append(size)
        size //= factor
    return tuple(sizes)


def _progress(state: LoopState, total: int, progress: Progress) -> None:
    """Every ``progress.every`` steps, a host callback reports rows stopped and the worst
    gradient (:mod:`fixedopt._progress`)."""
    running = _running(state)
    step = jnp.max(jnp.where(running, state.steps, 0))
    worst = jnp.max(jnp.where(running, state.grad_norm, 0.0))

    def report():
        jax.debug.callback(progress.report, step, jnp.sum(running), total, worst)

    jax.lax.cond(step % progress.every == 0, report, lambda: None)


def iterate_batch(
    solver: Solver,
    problem_of,
    rows,
    x,
    stopping: Stopping,
    compact: bool = False,
    progress: Progress | None = None,
) -> LoopState:
    """Run every row of a batch until each stops; rows stop on their own.

    Under ``vmap`` a while loop costs every row as many iterations as the slowest
    one. With ``compact``, the batch runs until at most ``B / 8`` rows are still
    running; those rows (padded with finished ones, which do not change) are
    gathered into a batch of that static size and run on, and so on down to 8 rows.
    Each row runs the same algorithm as uncompacted, but the smaller batches are
    different machine code: its iterates agree to rounding, and over hundreds of
    steps or right at the tolerance its step count can differ by a few. All sizes
    are static: one program, inside ``jit``.

    Args:
      solver: the solver.
      problem_of: ``row -> Problem``, for one row's slice of ``rows``.
      rows: the per-row data (a pytree whose leaves have the batch axis).
      x: the starting points, ``(B, n)``.
      stopping: the stopping rules, shared by all rows.
      compact: gather the running rows into smaller batches as others finish.
      progress: report progress on the host (text or a bar, see
        :mod:`fixedopt._progress`); None adds nothing to the program.
    """
    total = x.shape[0]

    def start_row(row, x):
        return start(solver, problem_of(row), x, stopping)

    def advance_row(row, state, iteration):
        running = _running(state)
        new = advance(solver, problem_of(row), state, stopping, StepContext(running, iteration))
        # A stopped row keeps what it reports. Its solver state is never read again,
        # so it is not copied back (that copy would stream the whole L-BFGS history).
        reported = [jnp.where(running, a, b) for a, b in zip(new[:-1], state[:-1])]
        return LoopState(*reported, solver_state=new.solver_state)

    def body(rows, carry):
        iteration, state = carry
        state = jax.vmap(advance_row, in_axes=(0, 0, None))(rows, state, iteration)
        if progress is not None:
            _progress(state, total, progress)
        return iteration + 1, state

    def run(rows, state, until, iteration):
        return jax.lax.while_loop(
            lambda carry: jnp.sum(_running(carry[1])) > until,
            lambda carry: body(rows, carry),
            (iteration, state),
        )

    state = jax.vmap(start_row)(rows, x)
    sizes = compaction_sizes(x.shape[0]) if compact else ()
    iteration, state = run(rows, state, sizes[0] if sizes else 0, jnp.zeros((), jnp.int32))
    for size, until in zip(sizes, (*sizes[1:], 0)):
        _, index = jax.lax.top_k(_running(state).astype(jnp.int32), size)
        take = lambda tree, index=index: jax.tree.map(lambda a: a[index], tree)
        iteration, subset = run(take(rows), take(state), until, iteration)
        state = jax.tree.map(lambda a, b, index=index: a.at[index].set(b), state, subset)
    return state
