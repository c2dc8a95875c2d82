"""Projected backtracking line search: one objective evaluation per trial.

Shapes, for one row of ``n`` flat parameters: ``x``, ``grad`` and ``direction`` are
``(n,)``; ``value``, steps, slopes and flags are ``()`` arrays.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, NamedTuple, Protocol, TypeVar

import jax
import jax.numpy as jnp

from fixedopt._contract.solver import Problem, State, Step
from fixedopt._contract.status import Outcome, failure
from fixedopt._numerics import reduce

Aux = TypeVar("Aux")  # what ``evaluate`` returns besides value and gradient (a pytree)

# ``x -> (value, grad, aux)``: one evaluation of the objective at a trial point.
Evaluate = Callable[[jax.Array], tuple[jax.Array, jax.Array, Aux]]


class SearchStart(NamedTuple, Generic[Aux]):
    """What a line search starts from, and along what: every input but its options.

    Trial points are ``problem.project(x + step * direction)``; a row that is not
    ``active`` (it has already stopped, in a batch) makes no trial.
    """

    problem: Problem
    evaluate: Evaluate[Aux]  # one evaluation per trial: x -> (value, grad, aux)
    x: jax.Array  # (n,)
    value: jax.Array  # (): the objective at x
    grad: jax.Array  # (n,): its gradient
    direction: jax.Array  # (n,)
    initial_step: jax.Array | float  # (): the first trial step
    active: jax.Array | bool = True  # (): False for a row that has stopped


class LineSearchResult(NamedTuple, Generic[Aux]):
    """The accepted point (or the last trial when nothing was accepted)."""

    x: jax.Array  # (n,)
    value: jax.Array  # ()
    grad: jax.Array  # (n,)
    aux: Aux  # evaluate's third output at x
    accepted: jax.Array  # () bool
    nonfinite: jax.Array  # () bool: a trial was NaN/Inf
    flat: jax.Array  # () bool: no progress at working precision: x or f no longer changed


class LineSearch(Protocol):
    """A line search as a solver calls it (:func:`projected_backtracking`,
    :func:`fixedopt._solvers.wolfe.hager_zhang`), its other options at their defaults."""

    def __call__(self, start: SearchStart[Aux], /, *, max_steps: int) -> LineSearchResult[Aux]:
        """The accepted point from ``start``, after at most ``max_steps`` trials."""
        ...


def _all_finite(value: jax.Array, grad: jax.Array) -> jax.Array:
    return jnp.isfinite(value) & reduce.all_true(jnp.isfinite(grad))


def within_rounding(value: jax.Array, trial_value: jax.Array) -> jax.Array:
    """``|f(trial) - f| <= 10 eps |f|``: the two values differ only by rounding."""
    return jnp.abs(trial_value - value) <= 10 * jnp.finfo(value.dtype).eps * jnp.abs(value)


def _approximately_wolfe(
    value: jax.Array, trial_value: jax.Array, slope: jax.Array, trial_slope: jax.Array
) -> jax.Array:
    """Hager and Zhang's (2005) approximate Wolfe test, for when ``f`` is flat to
    rounding: near a minimizer the decrease the Armijo test asks for falls below the
    rounding error of ``f``, while the directional derivative still shows progress.
    Accept if ``f`` did not rise beyond rounding and the slope along the move went
    from ``slope < 0`` to within ``[0.9 slope, -0.8 slope]``."""
    flat = trial_value <= value + 10 * jnp.finfo(value.dtype).eps * jnp.abs(value)
    return flat & (slope < 0) & (trial_slope >= 0.9 * slope) & (trial_slope <= -0.8 * slope)


def first_step(problem: Problem, x: jax.Array, value: jax.Array, grad: jax.Array) -> jax.Array:
    """The first trial step along ``-grad``, before any curvature is known:
    ``|f| / |g|^2``, the step on which the linear model predicts a reduction of
    ``|f|`` (unchanged when ``f`` or ``x`` is rescaled); ``1 / |g|`` where ``f = 0``.

    ``g`` is the gradient of the entries that can move: a fixed entry, or one on a bound
    that the gradient pushes against (the projection holds it there), counts nothing.
    Counted, such an entry's gradient (6.8e5 on a float32 row of the bounded units
    audit, restarted after a rejected claim) made every trial too short to change ``f``
    (docs/decisions.md, "Bounded L-BFGS verdicts in units 1e-6..1e6")."""
    movable = problem.free_part(grad)
    if problem.has_bounds:
        movable = jnp.where(problem.movable(x, grad), movable, 0.0)
    squared = reduce.total(movable**2)
    safe = jnp.where(squared > 0, squared, 1.0)
    return jnp.where(value != 0, jnp.abs(value) / safe, 1.0 / jnp.sqrt(safe))


def path_slope(problem: Problem, x: jax.Array, grad: jax.Array, direction: jax.Array) -> jax.Array:
    """The slope of ``f(project(x + t direction))`` as ``t -> 0+``: ``grad . direction``
    over the entries that move, not those on a bound that ``direction`` points past (the
    projection holds them). Counted, a held entry's gradient (1.3e7 on a float32 row of
    the bounded units audit) made the quadratic interpolation of the backtracking halve
    the step 30 times from a step 1e8 too long, and the search failed
    (docs/decisions.md, "Bounded L-BFGS verdicts in units 1e-6..1e6")."""
    moving = problem.free_part(direction)
    if problem.has_bounds:  # a bound ``direction`` points past: ``-direction`` pushes on it
        moving = jnp.where(problem.movable(x, -direction), moving, 0.0)
    return reduce.dot(grad, moving)


def _next_step(
    step: jax.Array, slope: jax.Array, value: jax.Array, trial_value: jax.Array
) -> jax.Array:
    """Safeguarded minimizer of the quadratic through phi(0), phi'(0), phi(step).

    The division is by a curvature made safe where it is not used: with a zero
    direction (a converged row, whose unrolled trials are discarded) the curvature is
    0, and ``where`` alone would still send ``0 * inf`` into a derivative."""
    curvature = trial_value - value - slope * step
    positive = curvature > 0
    candidate = -slope * step**2 / (2.0 * jnp.where(positive, curvature, 1.0))
    candidate = jnp.where(jnp.isfinite(candidate) & positive, candidate, 0.1 * step)
    return jnp.clip(candidate, 0.1 * step, 0.5 * step)


# The backtracking loop's carry: step, x, value, grad, aux of the last trial, trial
# count, accepted, any trial non-finite, flat.
_Carry = tuple[
    jax.Array, jax.Array, jax.Array, jax.Array, Aux, jax.Array, jax.Array, jax.Array, jax.Array
]


def projected_backtracking(
    start: SearchStart[Aux], *, max_steps: int, armijo: float = 1e-4,
    gradient_drop: float | None = None,
) -> LineSearchResult[Aux]:  # fmt: skip
    """Backtrack along ``project(x + step * direction)`` until sufficient decrease.

    The Armijo test for the projected path (Bertsekas 1976; Byrd et al. 1995):
    ``f(x(step)) <= f(x) + armijo * grad . (x(step) - x)`` for a move with
    ``grad . (x(step) - x) < 0`` (downhill), or, where ``f`` is flat to rounding,
    Hager and Zhang's approximate Wolfe test. Trial steps shrink by a
    safeguarded quadratic interpolation; a trial that leaves ``x`` unchanged (the
    step fell below rounding) ends the search unaccepted, so a row that cannot make
    progress stops with ``LINESEARCH_FAILED`` instead of running to ``max_steps``.
    A search that ends unaccepted because ``x`` or ``f`` stopped changing reports
    ``flat``: no progress is possible at working precision. Each trial costs one call
    of ``evaluate``,
    ``x -> (value, grad, aux)``: the accepted point's gradient comes for free. A
    non-finite trial is rejected and the step shrinks, so a row that wanders into a
    NaN region backs out of it. With ``gradient_drop``, a trial whose value is within
    rounding of ``f`` is also taken where its projected gradient's max-norm is
    ``gradient_drop`` times below the one at ``x``: ``f`` cannot show progress across a
    valley below its rounding, the gradient can (gradient descent's: docs/decisions.md,
    "The last false PRECISION verdicts"). Fixed entries are pinned by the projection, so they
    are bit-identical in every trial. A row that is not ``active`` (it has already
    stopped, in a batch) makes no trial, so it cannot lengthen the batch's loop.
    """
    problem, evaluate, x, value, grad, direction, initial_step, active = start
    slope = path_slope(problem, x, grad, direction)
    grad_norm = jnp.inf if gradient_drop is None else problem.grad_norm(x, grad)
    trial_value0, trial_grad0, aux0 = jax.eval_shape(evaluate, x)
    init: _Carry[Aux] = (
        jnp.asarray(initial_step, x.dtype),
        x,
        jnp.zeros(trial_value0.shape, trial_value0.dtype),
        jnp.zeros(trial_grad0.shape, trial_grad0.dtype),
        jax.tree.map(lambda a: jnp.zeros(a.shape, a.dtype), aux0),
        jnp.zeros((), jnp.int32),
        jnp.zeros((), bool),
        jnp.zeros((), bool),
        jnp.zeros((), bool),
    )

    def keep_going(carry: _Carry[Aux]) -> jax.Array:
        *_, count, accepted, _, _ = carry
        return active & ~accepted & (count < max_steps)

    def trial(carry: _Carry[Aux]) -> _Carry[Aux]:
        step, _, _, _, _, count, _, any_nonfinite, _ = carry
        x_trial = problem.project(x + step * direction)
        trial_value, trial_grad, aux = evaluate(x_trial)
        finite = _all_finite(trial_value, trial_grad)
        move = problem.free_part(x_trial - x)  # fixed entries never enter a product
        moved = reduce.any_true(move != 0)
        decrease = reduce.dot(grad, move)
        # Only a descent move can pass: a projected path may bend uphill (decrease > 0).
        armijo_holds = (decrease < 0) & (trial_value <= value + armijo * decrease)
        wolfe_holds = _approximately_wolfe(
            value, trial_value, decrease, reduce.dot(trial_grad, move)
        )
        holds = armijo_holds | wolfe_holds
        if gradient_drop is not None:
            trial_norm = problem.grad_norm(x_trial, trial_grad)
            lowers = gradient_drop * trial_norm < grad_norm
            holds = holds | (within_rounding(value, trial_value) & lowers)
        accepted = finite & moved & holds
        # A step so short that x did not move ends the search: shorter ones cannot move.
        count = jnp.where(finite & ~moved, max_steps, count + 1)
        next_step = _next_step(step, slope, value, jnp.where(finite, trial_value, jnp.inf))
        flat = finite & (~moved | within_rounding(value, trial_value))
        any_nonfinite = any_nonfinite | ~finite
        return (
            next_step,
            x_trial,
            trial_value,
            trial_grad,
            aux,
            count,
            accepted,
            any_nonfinite,
            flat,
        )

    _, x_new, value_new, grad_new, aux, _, accepted, nonfinite, flat = problem.differentiate.loop(
        keep_going, trial, init, max_steps
    )
    return LineSearchResult(x_new, value_new, grad_new, aux, accepted, nonfinite, flat)


def step_from_search(
    search: LineSearchResult[Aux], state: State, predicted: jax.Array, relative_step: jax.Array
) -> Step[State]:
    """The :class:`~fixedopt._contract.solver.Step` of a line-search solver: the search's
    point, accepted if the search accepted it; an unaccepted search fails the step
    (:func:`~fixedopt._contract.status.failure`: non-finite, flat, or neither)."""
    outcome = jnp.where(search.accepted, Outcome.ACCEPT, failure(search.nonfinite, search.flat))
    return Step(
        x=search.x,
        value=search.value,
        grad=search.grad,
        state=state,
        outcome=outcome.astype(jnp.int32),
        predicted=predicted,
        relative_step=relative_step,
    )
