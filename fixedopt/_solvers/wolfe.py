"""Hager–Zhang line search: (approximate) Wolfe conditions, one evaluation per trial.

Branch-free: every trial is one call of the objective, and the choice of the next
trial step (expansion, secant, bisection) is a handful of scalar ``jnp.where`` on the
loop's fixed carry, so under ``vmap`` each row follows its own search while the batch
runs one ``while_loop``. Shapes as in ``fixedopt._solvers.linesearch``: ``(n,)`` vectors,
``()`` scalars.
"""

from __future__ import annotations

from typing import Generic, NamedTuple

import jax
import jax.numpy as jnp

from fixedopt._numerics import reduce
from fixedopt._solvers.linesearch import Aux, LineSearchResult, SearchStart, projected_backtracking

EXPAND, SECANT, SECANT_AGAIN, BISECT = 0, 1, 2, 3  # what the pending trial step is


class _Point(NamedTuple):  # all ()
    step: jax.Array
    value: jax.Array
    slope: jax.Array  # derivative along the direction


class _Search(NamedTuple, Generic[Aux]):
    step: jax.Array  # the next trial step
    stage: jax.Array  # EXPAND, SECANT, SECANT_AGAIN or BISECT: how ``step`` was chosen
    low: _Point  # slope < 0, value not above the start (beyond rounding)
    high: _Point  # slope >= 0, or value above the start: the far end of the bracket
    bracketed: jax.Array
    width: jax.Array  # the bracket's width when the current secant round began
    last: LineSearchResult[Aux]  # the last trial (or the accepted one)
    fallback: LineSearchResult[Aux]  # the lowest trial with sufficient decrease
    trials: jax.Array  # how many were made (``count`` would shadow ``tuple.count``)
    stopped: jax.Array  # accepted, or the bracket collapsed to rounding


def _secant(a: _Point, b: _Point, low: jax.Array, high: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Where the secant of the slope through ``a`` and ``b`` vanishes, or the
    bisection of ``[low, high]`` when that is not strictly inside it. (Equal slopes
    divide by a 1 instead of 0, then fail the test: ``where`` alone would send
    ``0 * inf`` into the derivative of an unrolled search.)"""
    step, difference = _slope_zero(a, b)
    inside = (difference != 0) & jnp.isfinite(step) & (step > low) & (step < high)
    return jnp.where(inside, step, 0.5 * (low + high)), inside


def _slope_zero(a: _Point, b: _Point) -> tuple[jax.Array, jax.Array]:
    """Where the secant of the slope through ``a`` and ``b`` vanishes, and the slope's
    rise ``b.slope - a.slope`` (no zero division: a zero rise divides by 1)."""
    rise = b.slope - a.slope
    return (a.step * b.slope - b.step * a.slope) / jnp.where(rise != 0, rise, 1.0), rise


def _extrapolated(low: _Point, trial: _Point, expand: float) -> jax.Array:
    """The next trial beyond ``trial`` (slope still negative, ``f`` still low): where
    the secant of the slope through the last low point and ``trial`` vanishes, if the
    slope rose (convex along the line; on a quadratic, its minimizer), kept within
    ``[1.1, expand]`` times ``trial.step``, or ``[1.1, expand**2]`` where ``f`` between
    the two points curved as the quadratic through their slopes says (its change
    beyond the linear part within 1% of ``rise * length / 2``: then the secant's zero
    is that quadratic's minimizer, not a guess); else ``expand`` times it. (Tested on
    the whole change instead, a nearly straight stretch of a valley passed, and a
    step 40x too long wrecked the memory of extended Rosenbrock rows.)"""
    secant, rise = _slope_zero(low, trial)
    convex = rise > 0
    # f's change beyond the linear part, against the quadratic's: 0.5 rise (t - t_low).
    length = trial.step - low.step
    curved = trial.value - low.value - low.slope * length
    quadratic = jnp.abs(curved - 0.5 * rise * length) <= 0.01 * 0.5 * rise * length
    reach = jnp.where(quadratic, expand**2, expand)
    bounded = jnp.clip(secant, 1.1 * trial.step, reach * trial.step)
    return jnp.where(convex & jnp.isfinite(secant), bounded, expand * trial.step)


def _choose(
    search: _Search[Aux], trial: _Point, good: jax.Array, is_high: jax.Array, expand: float
) -> tuple[jax.Array, jax.Array, _Point, _Point, jax.Array, jax.Array]:
    """The bracket after ``trial`` and the next trial step (Hager and Zhang 2005, 2006:
    bracket by expansion, then double secant steps with a bisection whenever a round
    does not shrink the bracket to ``2/3``, and bisection after a rise)."""
    old_low, old_high = search.low, search.high
    becomes_low = good & ~is_high
    low = jax.tree.map(lambda t, o: jnp.where(becomes_low, t, o), trial, old_low)
    high = jax.tree.map(lambda t, o: jnp.where(becomes_low, o, t), trial, old_high)
    bracketed = search.bracketed | ~becomes_low
    width = high.step - low.step
    first_secant, _ = _secant(low, high, low.step, high.step)
    # Second secant of a round: through the trial and the end it replaced.
    replaced = jax.tree.map(lambda o, p: jnp.where(becomes_low, o, p), old_low, old_high)
    again, again_inside = _secant(replaced, trial, low.step, high.step)
    shrunk = width <= 0.66 * search.width
    rise = ~good | (is_high & (trial.slope < 0))  # f rose on a falling slope: bisect
    take_again = (search.stage == SECANT) & again_inside & ~rise
    round_ended = (search.stage == SECANT) & ~take_again | (search.stage == SECANT_AGAIN)
    bisect = ~take_again & (round_ended & ~shrunk | rise)
    stage = jnp.where(take_again, SECANT_AGAIN, jnp.where(bisect, BISECT, SECANT))
    middle = 0.5 * (low.step + high.step)
    step = jnp.where(take_again, again, jnp.where(bisect, middle, first_secant))
    # Before a bracket exists: expand while the slope is still negative and f low.
    step = jnp.where(bracketed, step, _extrapolated(old_low, trial, expand))
    stage = jnp.where(bracketed, stage, EXPAND)
    round_width = jnp.where(stage == SECANT, width, search.width)
    return step, stage.astype(jnp.int32), low, high, bracketed, round_width


def hager_zhang(
    start: SearchStart[Aux],
    *,
    max_steps: int,
    decrease: float = 0.1,
    curvature: float = 0.1,
    expand: float = 5.0,
    strong: bool = True,
    patience: int = 5,
) -> LineSearchResult[Aux]:
    """A step that satisfies the strong (by default) Wolfe or approximate Wolfe conditions.

    With ``phi(t) = f(x + t d)``, accepts ``t`` when ``|phi'(t)| <= curvature *
    |phi'(0)|`` (``strong``; else only ``phi'(t) >= curvature * phi'(0)``) and either
    sufficient decrease, ``phi(t) <= phi(0) + decrease * t * phi'(0)``, or Hager and
    Zhang's approximate version for when ``f`` is flat to rounding, ``phi'(t) <=
    (2 decrease - 1) phi'(0)`` with ``phi(t)`` not above ``phi(0)`` beyond rounding.
    The bracket grows until the slope turns non-negative (or ``f`` rises), each trial
    at the zero of the slope's secant where the slope rose (on a quadratic, the
    minimizer: accepted at the second trial), at most ``expand`` times the last
    (``expand**2`` where ``f`` curved as the quadratic through the two slopes); then
    it shrinks by double secant steps and bisection (Hager and Zhang, SIAM J. Optim.
    16, 2005; ACM TOMS 32, 2006). The default ``curvature = 0.1`` asks for a
    near-exact minimizer along ``d``, on a quadratic the first secant step, so that
    L-BFGS behaves like conjugate gradients there; Hager and Zhang's own ``0.9``
    (weak) accepts the unit step as often as backtracking does. If no trial meets the
    conditions within ``patience`` trials (``max_steps`` if none had yet) but some had
    sufficient (or approximate) decrease, the lowest of those is accepted. Each trial
    costs one call of ``evaluate``, ``x -> (value, grad, aux)``. An inactive row makes
    no trial.

    With bounds the path ``project(x + t d)`` has kinks where the curvature
    condition means little: the search is then :func:`projected_backtracking`.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> from fixedopt._contract.solver import Problem
      >>> fun = lambda x: jnp.sum(jnp.array([1.0, 100.0]) * x**2)
      >>> problem = Problem(jax.value_and_grad(fun), jnp.zeros(2, bool), jnp.zeros(2))
      >>> x = jnp.array([1.0, 1.0]); value, grad = problem.value_and_grad(x)
      >>> evaluate = lambda z: (*problem.value_and_grad(z), None)
      >>> start = SearchStart(problem, evaluate, x, value, grad, -grad, 1.0)
      >>> result = hager_zhang(start, max_steps=20)
      >>> bool(result.accepted), bool(result.value < value)
      (True, True)
    """
    problem, evaluate, x, value, grad, direction, initial_step, active = start
    if problem.has_bounds:
        return projected_backtracking(start, max_steps=max_steps)
    slope = reduce.dot(grad, problem.free_part(direction))
    rounding = 10 * jnp.finfo(value.dtype).eps * jnp.abs(value)
    origin = _Point(jnp.zeros((), x.dtype), value, slope)
    shapes = jax.eval_shape(evaluate, x)
    zero_value, zero_grad, zero_aux = jax.tree.map(lambda a: jnp.zeros(a.shape, a.dtype), shapes)
    false = jnp.zeros((), bool)
    nothing = LineSearchResult(x, zero_value, zero_grad, zero_aux, false, false, false)
    init = _Search(
        step=jnp.asarray(initial_step, x.dtype), stage=jnp.asarray(EXPAND, jnp.int32),
        low=origin, high=origin, bracketed=jnp.zeros((), bool), width=jnp.asarray(jnp.inf, x.dtype),
        last=nothing, fallback=nothing, trials=jnp.zeros((), jnp.int32),
        stopped=jnp.zeros((), bool),
    )  # fmt: skip

    def keep_going(search: _Search[Aux]) -> jax.Array:
        return active & ~search.stopped & (search.trials < max_steps)

    def trial(search: _Search[Aux]) -> _Search[Aux]:
        x_trial = problem.project(x + search.step * direction)
        trial_value, trial_grad, aux = evaluate(x_trial)
        point = _Point(search.step, trial_value, reduce.dot(trial_grad, direction))
        finite = jnp.isfinite(trial_value) & reduce.all_true(jnp.isfinite(trial_grad))
        moved = reduce.any_true(problem.free_part(x_trial - x) != 0)  # fixed entries: never read
        sufficient = trial_value <= value + decrease * point.step * slope
        curved = point.slope >= curvature * slope
        if strong:
            curved = curved & (point.slope <= -curvature * slope)
        flat = trial_value <= value + rounding
        approximate = flat & (point.slope <= (2 * decrease - 1) * slope)
        accepted = finite & moved & curved & (sufficient | approximate) & (slope < 0)
        is_high = (trial_value > value + rounding) | (point.slope >= 0)
        step, stage, low, high, bracketed, width = _choose(search, point, finite, is_high, expand)
        no_progress = finite & (~moved | (jnp.abs(trial_value - value) <= rounding))
        last = LineSearchResult(x_trial, trial_value, trial_grad, aux, accepted, ~finite,
                                no_progress)  # fmt: skip
        better = finite & moved & (sufficient | approximate) & (slope < 0)
        better = better & (~search.fallback.accepted | (trial_value < search.fallback.value))
        fallback = jax.tree.map(lambda t, o: jnp.where(better, t, o), last, search.fallback)
        fallback = fallback._replace(accepted=search.fallback.accepted | better)
        collapsed = bracketed & (high.step - low.step <= jnp.finfo(x.dtype).eps * high.step)
        # After ``patience`` trials, settle for the best point with enough decrease:
        # where rounding hides the slope (float32 near a minimizer) the curvature test
        # cannot be met, and more trials would only cost evaluations.
        settle = (search.trials + 1 >= patience) & fallback.accepted
        stopped = accepted | settle | (finite & ~moved) | collapsed
        return _Search(step, stage, low, high, bracketed, width, last, fallback,
                       search.trials + 1, stopped)  # fmt: skip

    final = problem.differentiate.loop(keep_going, trial, init, max_steps)
    use_fallback = ~final.last.accepted & final.fallback.accepted
    result: LineSearchResult[Aux] = jax.tree.map(
        lambda f, t: jnp.where(use_fallback, f, t), final.fallback, final.last
    )
    return result._replace(nonfinite=result.nonfinite & ~result.accepted)
