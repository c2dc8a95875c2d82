"""A lane's new row started by its lane's next trip, on the trip's own evaluation of the
objective: the solve's program then holds the model's code once, not twice (the step's
trial and the refill's start), which is most of a new model's compile where the model
is large (``docs/decisions.md``, "One evaluation of the model in the lanes' program").

The solver knows nothing of it. In the trip that starts a row, the driver gives the
solver's step a problem whose first evaluation at the step's top level (not inside an
inner loop of the step, such as a line search's) evaluates at the row's start instead,
for the starting rows; the step itself counts for nothing there (``StepContext.active``
False, its state dropped). ``Solver.start`` then receives a problem whose evaluation at
that start returns what the step's evaluation computed: the row's first loop state, as
:func:`fixedopt._driver.loop.start` makes it, bit for bit (the same elementwise code on
the same point), each row one trip later than a refill's start would have. Where the
step evaluates nothing at its top level, or ``Solver.start`` evaluates elsewhere than
at the start it is given, the start evaluates on its own (correct, only not shared).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

from fixedopt._contract.solver import Problem, Solver, StepContext
from fixedopt._contract.status import RUNNING
from fixedopt._driver.loop import LoopState, Resume, Stopping, advance, begin
from fixedopt._numerics import trace_state

# The Problem's evaluations a step and a start may share (least squares: the residuals
# and Jacobian; a robust loss's value too).
EVALUATIONS = ("residual_and_jacobian", "value_and_grad")


def step_or_start(
    solver: Solver[Any],
    problem: Problem,
    state: LoopState,
    stopping: Stopping,
    context: StepContext,
    starting: jax.Array,
    resumed: bool,
) -> LoopState:
    """One trip of one lane (``advance`` without its check), or where ``starting`` the
    row's first loop state from its start ``state.x`` (:func:`unstarted`), on one
    evaluation of the objective; ``resumed`` (static): the row's :class:`Resume` is in
    ``state`` (its ``steps``, ``doubted`` and ``initial_value``)."""
    at = problem.project(state.x)
    level = trace_state.current()
    found: dict[str, Any] = {}

    def shared(name: str, evaluate: Callable[[jax.Array], Any]) -> Callable[[jax.Array], Any]:
        def evaluate_step(x: jax.Array) -> Any:
            top = trace_state.current() == level
            if not top or name in found:
                return evaluate(x)
            found[name] = evaluate(jnp.where(starting, at, x))
            return found[name]

        return evaluate_step

    def reused(name: str, evaluate: Callable[[jax.Array], Any]) -> Callable[[jax.Array], Any]:
        def evaluate_start(x: jax.Array) -> Any:
            return found.pop(name) if x is at and name in found else evaluate(x)

        return evaluate_start

    def wrapped(wrap: Callable[[str, Callable[[jax.Array], Any]], Any]) -> Problem:
        functions = {name: getattr(problem, name) for name in EVALUATIONS}
        return problem._replace(**{name: wrap(name, f) for name, f in functions.items()
                                   if f is not None})  # fmt: skip

    context = context._replace(active=context.active & ~starting)
    stepped = advance(solver, wrapped(shared), state, stopping, context, check=False)
    value, grad, solver_state = solver.start(wrapped(reused), at)
    resume = Resume(state.steps, state.doubted, state.initial_value) if resumed else None
    begun = begin(solver, problem, state.x, value, grad, solver_state, stopping, resume)
    chosen: LoopState = jax.tree.map(lambda a, b: jnp.where(starting, a, b), begun, stepped)
    return chosen


def unstarted(blank: LoopState, x: jax.Array, resume: Resume | None) -> LoopState:
    """Rows to be started by :func:`step_or_start`: ``blank`` (zeros, ``(k, ...)``
    leaves) at their given starts ``x`` (``(k, n)``), RUNNING, their :class:`Resume`
    held in ``steps``, ``doubted`` and ``initial_value`` (a fresh row's: 0, inf, NaN)."""
    count, dtype = x.shape[0], blank.value.dtype
    if resume is None:
        resume = Resume(jnp.zeros((count,), jnp.int32), jnp.full((count,), jnp.inf, dtype),
                        jnp.full((count,), jnp.nan, dtype))  # fmt: skip
    return blank._replace(
        x=x.astype(blank.x.dtype),
        status=jnp.full((count,), RUNNING, jnp.int32),
        steps=resume.steps.astype(jnp.int32),
        doubted=resume.doubted.astype(dtype),
        initial_value=resume.initial_value.astype(dtype),
    )
