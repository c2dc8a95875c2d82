"""Levenberg–Marquardt with the batch last, by construction: a whole batch of small
least-squares rows stepped together on an accelerator (issue 61).

A TPU holds an array in tiles of 8 x 128 over its last two axes: rows stored
``(B, n)`` put Gpufit's 5 parameters on the 128-wide axis, most of each tile padding.
Here every array of the loop has the batch last: parameters ``(n, B)``, residuals
``(m, B)``, the Jacobian as ``n`` columns ``(m, B)``, ``J^T J`` as ``(n, n, B)``, and a
row's scalars ``(B,)``. The normal sums, the unrolled Cholesky solve and the tests are
elementwise arithmetic on ``(B,)`` vectors, with the formulas of
:class:`~fixedopt._solvers.levenberg_marquardt.LevenbergMarquardt` and of the driver
(:func:`fixedopt._driver.loop.start`, :func:`~fixedopt._driver.loop.advance`): the
elementwise helpers are theirs, called on ``(B,)`` and ``(n, B)`` arrays; only their
reductions over a row's entries are written here, along axis 0. Only the user's row
function is mapped over the batch (``vmap(in_axes=-1, out_axes=-1)``), its Jacobian's
columns the forward-mode products of that map (``jax.linearize``): on a TPU v5e 6.1M
Gpufit fits/s, against 5.2M for ``jacfwd`` of each row batch-first and transposed once a
step (docs/decisions.md, "Levenberg-Marquardt batch-last by construction").

The whole batch is one ``while`` loop that ends when no row runs; a stopped row keeps
its state (the step computed for it is dropped). A row's result depends on its own
data only. Chosen by the machine profile (:meth:`~fixedopt._driver.machine.Schedule.
batch_last`), never by the user: Levenberg–Marquardt on small rows on a TPU.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from fixedopt._contract.solver import Problem, Step
from fixedopt._contract.status import CLAIMED, RUNNING, Status, accepted, busy, stop_status, stops
from fixedopt._driver import batch_last_measures as measures
from fixedopt._driver.lanes import LastState
from fixedopt._driver.loop import (
    Resume,
    Stopping,
    Tests,
    _relative_reduction,
    _rounding_only,
    _verdict,
    objective_scale,
    to_certify,
)
from fixedopt._numerics import reduce
from fixedopt._objective.losses import flat_counts, split_data
from fixedopt._objective.problem import Objective, RowData, _cast_floating
from fixedopt._solvers.levenberg_marquardt import (
    _UNDAMPED,
    LevenbergMarquardt,
    LevenbergMarquardtState,
    _next_damping,
    _outcome,
    short_of_bounds,
)
from fixedopt._solvers.normal_equations import EPS_FACTOR, residual_unit

# The most rows one loop holds: a larger batch runs in chunks of equal size, one
# after the other (a row's loop state, data and Jacobian: about 1 kB for the spot).
CHUNK = 1 << 21
# The batch's last two axes: ``(B // TILE, TILE)``, so that a row's scalar is a TPU's
# (8, 128) tiles and a row's entry ``x[i]`` a slice of the leading axis (0: the batch
# one axis, ``(B,)``): on a TPU v5e 11.3M Gpufit fits/s against 6.1M. The rows are
# padded to whole tiles (TILE_ROWS of them): at 1e6 rows (7,813 rows of 128, the last
# tile part padding) the Poisson fits of 400,256 rows ended NONFINITE and the LSE fits
# with J^T J summed together took other steps, where 2^20 and 1e7 rows (chunks of 2^21)
# matched the CPU (docs/decisions.md, "Levenberg-Marquardt batch-last by construction").
TILE = 128
TILE_ROWS = 8
# J^T J, J^T r and |r|^2 as one reduction (:func:`_normal_sums`).
SUMMED_TOGETHER = True
# The start evaluated by the loop's first trip, so that the program holds the rows'
# evaluation once (its compile is the layout's cost on a TPU).
START_IN_LOOP = True


class Carry(NamedTuple):
    """The loop's state of every row, batch last (``LoopState`` and the solver's)."""

    x: jax.Array  # (n, B)
    value: jax.Array  # (B,)
    grad: jax.Array  # (n, B)
    grad_norm: jax.Array
    steps: jax.Array
    status: jax.Array
    reason: jax.Array
    initial_value: jax.Array
    doubted: jax.Array
    solver: LevenbergMarquardtState  # normal (n, n, B), scale and short (n, B), ...
    flat_steps: jax.Array  # loop._rounding_only's count


def iterate_batch_last(
    solver: LevenbergMarquardt,
    objective: Objective,
    rows: RowData,
    x: jax.Array,
    stopping: Stopping,
    count: jax.Array | None = None,
    resume: Resume | None = None,
) -> LastState:
    """Run every row (``rows`` and ``x``, ``(B, n)``: rows first, as the lanes take them)
    until each stops; the :class:`LastState` of every row, rows first. ``count``: the
    rows to solve (the others, a padding, stop at their start); ``resume``: where each
    row goes on from, its claims leaving the loop CLAIMED (``fixedopt._driver.after_loop``)."""
    total = x.shape[0]
    solving = jnp.asarray(total if count is None else count)
    if resume is None:
        nothing = jnp.zeros((total,), x.dtype)
        resume = Resume(nothing.astype(jnp.int32), nothing + jnp.inf, nothing + jnp.nan)
        claims = False
    else:
        claims = True
    chunks = -(-total // CHUNK)
    size = -(-total // max(chunks, 1))
    if TILE:
        size = -(-size // (TILE * TILE_ROWS)) * TILE * TILE_ROWS
    data = (rows, x, resume)

    def part_solved(first: jax.Array, part: Any) -> LastState:
        rows, x, resume = jax.tree.map(_batch_last, part)
        index = first + jnp.arange(size, dtype=jnp.int32).reshape(x.shape[1:])
        final = _iterate(solver, objective, rows, x, stopping, resume, index >= solving, claims)
        return LastState(*(_rows_first(a) for a in final[:7]))

    if chunks <= 1 and size == total:
        return part_solved(jnp.zeros((), jnp.int32), data)
    grown = jax.tree.map(lambda a: _chunked(a, chunks, size), data)
    if chunks <= 1:
        found = part_solved(jnp.zeros((), jnp.int32), jax.tree.map(lambda a: a[0], grown))
        one: LastState = jax.tree.map(lambda a: a[:total], found)
        return one
    starts = jnp.arange(chunks, dtype=jnp.int32) * size
    found = jax.lax.map(lambda c: part_solved(*c), (starts, grown))
    every: LastState = jax.tree.map(lambda a: a.reshape(-1, *a.shape[2:])[:total], found)
    return every


def _batch_last(a: jax.Array) -> jax.Array:
    """``a`` (``(B, ...)``) with the batch last: ``(..., B // TILE, TILE)`` (or
    ``(..., B)`` where :data:`TILE` is 0)."""
    moved = jnp.moveaxis(a, 0, -1)
    if not TILE:
        return moved
    return moved.reshape(*moved.shape[:-1], moved.shape[-1] // TILE, TILE)


def _rows_first(a: jax.Array) -> jax.Array:
    """:func:`_batch_last` undone: ``(B, ...)``."""
    if TILE:
        a = a.reshape(*a.shape[:-2], -1)
    return jnp.moveaxis(a, -1, 0)


def _chunked(a: jax.Array, chunks: int, size: int) -> jax.Array:
    """``a`` (``(B, ...)``) padded with copies of row 0 to ``chunks * size`` rows, as
    ``(chunks, size, ...)``."""
    extra = chunks * size - a.shape[0]
    grown = jnp.concatenate([a, jnp.broadcast_to(a[:1], (extra, *a.shape[1:]))])
    return grown.reshape(chunks, size, *a.shape[1:])


def _iterate(
    solver: LevenbergMarquardt, objective: Objective, rows: RowData, x: jax.Array,
    stopping: Stopping, resume: Resume, padded: jax.Array, claims: bool,
) -> Carry:  # fmt: skip
    """The loop on batch-last ``rows`` and ``x`` (``(n, B)``)."""
    evaluate = _evaluation(objective, rows, x.shape[0])
    problem = Problem(None, rows.fixed, rows.fixed_values, rows.lower, rows.upper)  # type: ignore[arg-type]
    robust = objective.loss is not None

    def started(evaluation: Evaluate) -> Carry:
        first = _start(solver, problem, evaluation, x, stopping, resume)
        if claims:
            first = _claim(solver, first)
        return first._replace(status=jnp.where(padded, Status.CONVERGED, first.status))

    def advanced(carry: Carry, evaluation: Evaluate) -> Carry:
        running = carry.status == RUNNING
        new = _advance(solver, problem, evaluation, robust, carry, stopping)
        if claims:
            new = _claim(solver, new)
        kept: Carry = jax.tree.map(lambda a, b: _where(running, a, b), new, carry)
        return kept

    if not START_IN_LOOP:
        final: Carry = jax.lax.while_loop(
            lambda c: jnp.any(busy(c.status)), lambda c: advanced(c, evaluate), started(evaluate)
        )
        return final
    # The start's evaluation is the first trip's: one evaluation in the program.
    start_x = problem.project(x)
    shapes = jax.eval_shape(lambda: started(evaluate))
    blank = jax.tree.map(lambda a: jnp.zeros(a.shape, a.dtype), shapes)

    def trip(state: tuple[Carry, jax.Array]) -> tuple[Carry, jax.Array]:
        carry, begun = state
        evaluated: list[Any] = []

        def shared(x_trial: jax.Array) -> Any:
            evaluated.append(evaluate(jnp.where(begun, x_trial, start_x)))
            return evaluated[0]

        new = advanced(carry, shared)
        first = started(lambda _: evaluated[0])
        merged: Carry = jax.tree.map(lambda a, b: jnp.where(begun, a, b), new, first)
        return merged, jnp.ones((), bool)

    def going(state: tuple[Carry, jax.Array]) -> jax.Array:
        return ~state[1] | jnp.any(busy(state[0].status))

    ended: tuple[Carry, jax.Array] = jax.lax.while_loop(going, trip, (blank, jnp.zeros((), bool)))
    return ended[0]


def _claim(solver: LevenbergMarquardt, carry: Carry) -> Carry:
    """``loop.claim``: CLAIMED where the verdict is one the driver checks after the loop."""
    claimed = to_certify(solver, carry)  # type: ignore[arg-type]  # its verdict's fields
    return carry._replace(status=jnp.where(claimed, CLAIMED, carry.status))


Evaluate = Any  # x (n, B) -> (value (B,), residual norm (B,), grad (n, B), J^T J (n, n, B))


def _evaluation(objective: Objective, rows: RowData, n: int) -> Evaluate:
    """The rows' evaluation at ``x`` (``(n, B)``): the cost, ``|r|``, ``J^T r`` and
    ``J^T J`` of (rescaled, for the Poisson likelihood) residuals and Jacobian."""
    rows = objective.differentiate.stop(rows)
    loss = objective.loss

    def residual(row: RowData, x: jax.Array) -> tuple[jax.Array, Any]:
        args, counts = split_data(loss, objective.args_of(row.row_args))
        out = objective.fun(objective.unravel(jnp.where(row.fixed, row.fixed_values, x)), *args)
        return jnp.ravel(_cast_floating(out, x.dtype)), flat_counts(counts, objective.output_shape)

    def jacobian(x: jax.Array) -> tuple[jax.Array, list[jax.Array], Any]:
        mapped = _over_batch(residual, x.ndim - 1)
        (r, counts), linear = jax.linearize(lambda x: mapped(rows, x), x)
        units = jnp.eye(n, dtype=x.dtype).reshape(n, n, *(1,) * (x.ndim - 1))
        columns = [linear(jnp.broadcast_to(units[j], x.shape))[0] for j in range(n)]
        return r, columns, counts

    def evaluate(x: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
        r, columns, counts = jacobian(x)
        if loss is not None:  # the Poisson likelihood: Fisher scoring's r and J
            mu = r
            root = jnp.sqrt(jnp.where(mu > 0, mu, 1.0))
            r, columns = (mu - counts) / root, [c / root for c in columns]
            value = _over_batch(loss.cost, mu.ndim - 1)(mu, counts)
        lower, grad, squared = _normal_sums(columns, r)
        normal = [[lower[max(i, j)][min(i, j)] for j in range(n)] for i in range(n)]
        if loss is None:
            value = 0.5 * squared
        return (
            value,
            measures.residual_norm(r, squared),
            grad,
            jnp.stack([jnp.stack(a) for a in normal]),
        )

    return evaluate


def _normal_sums(
    columns: list[jax.Array], r: jax.Array
) -> tuple[list[list[jax.Array]], jax.Array, jax.Array]:
    """The lower triangle of ``J^T J`` (in float32 at least), ``J^T r`` and ``|r|^2`` of
    ``J``'s ``columns`` and ``r`` (each ``(m, B)``); where :data:`SUMMED_TOGETHER`, one
    variadic reduce (``reduce.together``), so that the Jacobian's columns are computed
    once, not again in each sum's fusion."""
    n = len(columns)
    wide = jnp.promote_types(r.dtype, jnp.float32)
    columns = [c.astype(wide) for c in columns]
    pairs = [(i, j) for i in range(n) for j in range(i + 1)]
    terms = [columns[i] * columns[j] for i, j in pairs] + [c * r for c in columns] + [r * r]
    if SUMMED_TOGETHER:
        sums = list(reduce.together(tuple(terms)))
    else:
        sums = [jnp.sum(t, axis=0) for t in terms]
    lower: list[list[jax.Array]] = [[] for _ in range(n)]
    for (i, _), total in zip(pairs, sums):
        lower[i].append(total)
    grad = jnp.stack(sums[len(pairs) : len(pairs) + n]).astype(r.dtype)
    return lower, grad, sums[-1].astype(r.dtype)


def _start(solver: LevenbergMarquardt, problem: Problem, evaluate: Evaluate, given: jax.Array,
           stopping: Stopping, resume: Resume) -> Carry:  # fmt: skip
    """``loop.start`` and ``loop.begin`` of every row, with the solver's ``start``."""
    x = problem.project(given)
    value, norm, grad, normal = evaluate(x)
    dtype = x.dtype
    state = LevenbergMarquardtState(
        normal, norm, jnp.full(value.shape, solver.initial_damping, dtype),
        jnp.full(value.shape, 2.0, dtype),
        problem.free_part(measures.diagonal(normal).astype(dtype)),
        jnp.zeros(value.shape, jnp.int32), jnp.zeros(x.shape, bool),
    )  # fmt: skip
    outside = jnp.zeros(value.shape, bool)
    if problem.lower is not None and problem.upper is not None:
        outside = jnp.any(((given < problem.lower) | (given > problem.upper)) & ~problem.fixed, 0)
    grad_norm = measures.grad_norm(problem, x, grad)
    finite = jnp.isfinite(value) & jnp.all(jnp.isfinite(grad), axis=0)
    outcome = jnp.where(finite, RUNNING, Status.NONFINITE)
    infinite = jnp.full(value.shape, jnp.inf, dtype)
    gradient = measures.cosine(problem, x, grad, state)
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
    zero = jnp.zeros(value.shape, jnp.int32)
    return Carry(x, value, grad, grad_norm, steps, status, reason, initial_value, doubted, state,
                 zero)  # fmt: skip


def _advance(solver: LevenbergMarquardt, problem: Problem, evaluate: Evaluate, robust: bool,
             carry: Carry, stopping: Stopping) -> Carry:  # fmt: skip
    """``loop.advance`` of every row with the solver's step (:func:`_step`)."""
    step = _step(solver, problem, evaluate, robust, carry)
    moved = accepted(step.outcome)
    pairs = ((step.x, carry.x), (step.value, carry.value), (step.grad, carry.grad))
    x, value, grad = (_where(moved, new, old) for new, old in pairs)
    scale = objective_scale(carry.value, carry.initial_value, stopping.precision)
    tests = Tests(
        grad_norm=measures.grad_norm(problem, x, grad),
        gradient=measures.cosine(problem, x, grad, step.state),
        reduction=_relative_reduction(carry.value, value, step, scale),
        relative_step=jnp.where(moved | stops(step.outcome), step.relative_step, jnp.inf),
        value_drop=jnp.abs(value) / jnp.abs(carry.initial_value),
    )
    steps = carry.steps + 1
    outcome, flat_steps = _rounding_only(solver, step.outcome, moved, carry,  # type: ignore[arg-type]
                                         value, tests.grad_norm)  # fmt: skip
    status, reason = _verdict(stop_status(outcome), tests, steps, stopping)
    return Carry(x, value, grad, tests.grad_norm, steps, status, reason, carry.initial_value,
                 carry.doubted, step.state, flat_steps)  # fmt: skip


def _step(solver: LevenbergMarquardt, problem: Problem, evaluate: Evaluate, robust: bool,
          carry: Carry) -> Step[LevenbergMarquardtState]:  # fmt: skip
    """``LevenbergMarquardt.step`` of every row (least squares or Fisher scoring)."""
    x, value, grad, state = carry.x, carry.value, carry.grad, carry.solver
    free = ~problem.fixed & ~problem.at_bound(x, grad, 0.0)
    step = measures.solve(state.normal, grad, free, state.damping, state.scale)
    gauss_newton = measures.solve(state.normal, grad, free, _UNDAMPED, state.scale)
    x_trial = short_of_bounds(problem, x, x + step, state.short)
    step = problem.free_part(x_trial - x)
    trial_value, trial_norm, trial_grad, normal = evaluate(x_trial)
    unit = jnp.ones_like(value) if robust else residual_unit(value, state.residual_norm)
    wide = (step / unit[None]).astype(state.normal.dtype)
    curvature = measures.quadratic(state.normal, wide).astype(x.dtype)  # |J s|^2
    predicted = -(jnp.sum(grad / unit[None] * (step / unit[None]), axis=0) + 0.5 * curvature)
    relative_step = measures.relative_step(problem, x, gauss_newton, state.scale)
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
        state.short | trapped,
    )  # fmt: skip
    rounding = EPS_FACTOR * jnp.finfo(value.dtype).eps * old_value
    no_progress = ~jnp.any(step != 0, axis=0) | ((predicted >= 0) & (predicted <= rounding))
    spent, walled = new_state.damping > solver.max_damping, new_state.walls > 0
    outcome = _outcome(accepted_, finite, no_progress, spent, walled)
    cauchy = measures.cauchy(state.normal, grad, free, state.scale, solver.initial_damping)
    predicted = jnp.maximum(jnp.maximum(predicted * unit**2, cauchy), 0.0)
    return Step(x_trial, trial_value, trial_grad, new_state, outcome, predicted, relative_step)


def _where(rows: jax.Array, new: Any, old: jax.Array) -> jax.Array:
    """``new`` in the ``rows`` (a mask of the batch's shape), ``old`` elsewhere;
    batch-last arrays."""
    return jnp.where(rows.reshape((1,) * (jnp.ndim(old) - rows.ndim) + rows.shape), new, old)


def _over_batch(fun: Any, axes: int) -> Any:
    """``fun`` of one row mapped over the last ``axes`` axes of its arguments."""
    for _ in range(axes):
        fun = jax.vmap(fun, in_axes=-1, out_axes=-1)
    return fun
