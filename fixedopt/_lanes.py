"""Lanes: a batch solved through a fixed number of lanes that refill as rows stop.

Under ``vmap`` a ``while_loop`` costs every row as many iterations as the slowest one,
and a batch of a million rows streams every per-row array through memory on every
step. Here the loop advances ``W`` lanes at a time (``W`` much smaller than the batch,
``W`` = ``width``): each lane holds one row. When enough lanes hold a row that has
stopped (or none is running), one real ``lax.cond`` on the whole lane batch writes
those rows' results out and loads the next unsolved rows into their lanes, starting
them. So

- one loop body is compiled whatever the batch size;
- the loop's working memory is that of ``W`` rows (the results, ``B`` rows, are
  written once per row);
- a slow row costs its own steps: the other lanes go on with other rows meanwhile.

What a row's result depends on: only its own data. Its iterates are computed by the
same elementwise program whatever lane it runs in and whoever its neighbours are, so
it gets the same bits as when solved alone in any other batch through lanes of the
same width (tested bit for bit on the CPU, ``tests/test_lanes.py``); a different
width is other machine code and agrees to rounding. Runs are deterministic. The one
exception is a solver that reads ``StepContext.iteration`` (L-BFGS does, to pick
the ring slot of its memory): the slot a pair lands in changes with the lane's
start, its order in the recursion does not, so the arithmetic is the same.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple, TypeVar

import jax
import jax.numpy as jnp

from fixedopt._loop import LoopState, Stopping, advance, start
from fixedopt._progress import Progress
from fixedopt._solver import Problem, Solver, StepContext
from fixedopt._status import RUNNING

Rows = TypeVar("Rows")  # a batch's per-row data (a pytree with a leading batch axis)

# A refill costs about one trip of the loop (it starts the new rows, one evaluation
# each): this many trips.
REFILL_COST = 1.0


class Lanes(NamedTuple):
    """The loop's carry: ``W`` lanes, the queue position and the results so far."""

    iteration: jax.Array  # () int32: steps taken by the loop (StepContext.iteration)
    queued: jax.Array  # () int32: the first row no lane has taken yet
    row: jax.Array  # (W,) int32: the row each lane holds; B for none
    data: Any  # the lanes' rows' data, (W, ...) leaves
    state: LoopState  # the lanes' loop states, (W, ...) leaves
    results: LoopState  # (B, ...) leaves, solver_state None: each row written once


# The default number of lanes. On a CPU: as many rows as fit half of a core's L2 cache
# (1 MiB on the EPYC cores these defaults were measured on: benchmarks/results, suite
# ``scale``), so a step's working set stays in cache; on an accelerator, enough rows to
# fill it. Never more than an eighth of the batch, so that slow rows overlap with
# others, and never fewer than 8.
CPU_CACHE_BYTES = 1 << 19
CPU_MOST_LANES = 4096
ACCELERATOR_LANES = 1 << 16


def default_width(batch: int, row_bytes: int, backend: str) -> int:
    """The default number of lanes for ``batch`` rows whose loop state takes
    ``row_bytes`` bytes each, on ``backend`` ("cpu", "gpu", "tpu", ...)."""
    if backend == "cpu":
        width = min(CPU_MOST_LANES, CPU_CACHE_BYTES // max(row_bytes, 1))
    else:
        width = ACCELERATOR_LANES
    return min(batch, max(min(width, -(-batch // 8)), 8))


def iterate_lanes(
    solver: Solver[Any],
    problem_of: Callable[[Rows], Problem],
    rows: Rows,
    x: jax.Array,
    stopping: Stopping,
    width: int | None,
    backend: str,
    progress: Progress | None = None,
) -> LoopState:
    """Run every row of a batch through ``width`` lanes until each row stops.

    Args:
      solver: the solver.
      problem_of: ``row -> Problem``, for one row's slice of ``rows``.
      rows: the per-row data (a pytree whose leaves have the batch axis ``B``).
      x: the starting points, ``(B, n)``.
      stopping: the stopping rules, shared by all rows.
      width: the number of lanes ``W`` (static; more than ``B`` means ``B``); None:
        :func:`default_width`.
      backend: the platform the program is for, which sets the default width.
      progress: report progress on the host; None adds nothing to the program.

    Returns:
      The final :class:`~fixedopt._loop.LoopState` of every row, ``(B, ...)`` leaves,
      with ``solver_state=None``.
    """
    total = x.shape[0]
    start_rows = jax.vmap(lambda row, x: start(solver, problem_of(row), x, stopping))
    if width is None:
        row = jax.tree.map(lambda a: a[:1], (rows, x))
        shapes = jax.eval_shape(start_rows, *row)
        row_bytes = sum(a.size * a.dtype.itemsize for a in jax.tree.leaves((row, shapes)))
        width = default_width(total, row_bytes, backend)
    width = min(width, total)
    lanes = _empty_lanes(start_rows, rows, x, width)

    def advance_lane(row: Rows, state: LoopState, iteration: jax.Array) -> LoopState:
        running = state.status == RUNNING
        new = advance(solver, problem_of(row), state, stopping, StepContext(running, iteration))
        # A stopped lane keeps what it reports. Its solver state is never read again,
        # so it is not copied back (that copy would stream the whole L-BFGS history).
        reported: LoopState = jax.tree.map(
            lambda a, b: jnp.where(running, a, b),
            new._replace(solver_state=None),
            state._replace(solver_state=None),
        )
        return reported._replace(solver_state=new.solver_state)

    def refill(lanes: Lanes) -> Lanes:
        return _refill(lanes, rows, x, start_rows, total)

    def body(lanes: Lanes) -> Lanes:
        # Refill first: the first trip fills the empty lanes, so the rows are started
        # by one piece of code (traced and compiled once).
        wanted = _refill_due(lanes.state, width)
        lanes = jax.lax.cond(wanted & (lanes.queued < total), refill, lambda lanes: lanes, lanes)
        advance_lanes = jax.vmap(advance_lane, in_axes=(0, 0, None))
        state = advance_lanes(lanes.data, lanes.state, lanes.iteration)
        lanes = lanes._replace(iteration=lanes.iteration + 1, state=state)
        if progress is not None:
            _report(lanes, total, progress)
        return lanes

    def going(lanes: Lanes) -> jax.Array:
        return jnp.any(lanes.state.status == RUNNING) | (lanes.queued < total)

    final = jax.lax.while_loop(going, body, lanes)
    return _write(final.results, final.row, final.state, final.row < total)


def _empty_lanes(
    start_rows: Callable[[Any, jax.Array], LoopState], rows: Any, x: jax.Array, width: int
) -> Lanes:
    """``width`` lanes that hold no row (row ``B``, not running), and empty results."""
    total = x.shape[0]
    data = jax.tree.map(lambda a: jnp.zeros((width, *a.shape[1:]), a.dtype), rows)
    shapes = jax.eval_shape(start_rows, data, x[:width])
    state = jax.tree.map(lambda a: jnp.zeros(a.shape, a.dtype), shapes)
    state = state._replace(status=jnp.zeros((width,), jnp.int32))  # 0: not RUNNING
    # The results are made from x, so that a batch sharded across devices gets results
    # sharded the same way (XLA propagates the sharding of x to them).
    like_x = jnp.sum(x[:, :1] * 0, axis=1)  # (B,); also for n = 0

    def empty(a: jax.Array) -> jax.Array:
        column = like_x.astype(a.dtype).reshape(total, *(1,) * (a.ndim - 1))
        return jnp.broadcast_to(column, (total, *a.shape[1:]))

    results = jax.tree.map(empty, state._replace(solver_state=None))
    zero = jnp.zeros((), jnp.int32)
    return Lanes(zero, zero, jnp.full((width,), total, jnp.int32), data, state, results)


def _refill_due(state: LoopState, width: int) -> jax.Array:
    """Whether enough lanes are idle for a refill to pay.

    Rows that take ``k`` steps each leave about ``W / k`` lanes idle per trip. Waiting
    for a share ``s`` of idle lanes wastes ``s / 2`` of each trip on average and
    refills every ``s k`` trips, each refill costing ``REFILL_COST`` trips: the sum is
    least at ``s = sqrt(2 REFILL_COST / k)``, with ``k`` the mean steps of the rows
    stopped in the lanes now. (All lanes idle: always.)"""
    idle = state.status != RUNNING
    count = jnp.sum(idle)
    steps = jnp.sum(jnp.where(idle, state.steps, 0)) / jnp.maximum(count, 1)
    share = jnp.minimum(1.0, jnp.sqrt(2.0 * REFILL_COST / jnp.maximum(steps, 1.0)))
    return count >= jnp.maximum(share * width, 1.0)


def _write(results: LoopState, row: jax.Array, state: LoopState, done: jax.Array) -> LoopState:
    """``results`` with the lanes that are ``done`` written at their rows."""
    total = results.steps.shape[0]
    index = jnp.where(done, row, total)  # out of range: dropped
    reported = state._replace(solver_state=None)
    written: LoopState = jax.tree.map(
        lambda out, new: out.at[index].set(new, mode="drop"), results, reported
    )
    return written


def _refill(
    lanes: Lanes,
    rows: Any,
    x: jax.Array,
    start_rows: Callable[[Any, jax.Array], LoopState],
    total: int,
) -> Lanes:
    """Write the stopped lanes' rows out and give the idle lanes the next queued rows.

    The ``k``-th idle lane (in lane order: stopped, or holding no row) takes row
    ``queued + k``; an idle lane left without a row holds row ``B`` (none)."""
    idle = lanes.state.status != RUNNING
    results = _write(lanes.results, lanes.row, lanes.state, idle & (lanes.row < total))
    new_row = lanes.queued + jnp.cumsum(idle) - 1
    takes = idle & (new_row < total)
    source = jnp.where(takes, new_row, 0)
    data = _select(takes, jax.tree.map(lambda a: a[source], rows), lanes.data)
    state = _select(takes, start_rows(data, x[source]), lanes.state)
    row = jnp.where(takes, new_row, jnp.where(idle, total, lanes.row))
    queued = jnp.minimum(lanes.queued + jnp.sum(idle), total).astype(jnp.int32)
    return lanes._replace(queued=queued, row=row.astype(jnp.int32), data=data, state=state,
                          results=results)  # fmt: skip


def _select(lanes: jax.Array, new: Any, old: Any) -> Any:
    """``new`` in the given lanes, ``old`` in the others, leaf by leaf."""

    def pick(a: jax.Array, b: jax.Array) -> jax.Array:
        return jnp.where(lanes.reshape(lanes.shape + (1,) * (a.ndim - 1)), a, b)

    return jax.tree.map(pick, new, old)


def _report(lanes: Lanes, total: int, progress: Progress) -> None:
    """Every ``progress.every`` steps, a host callback reports rows stopped and the worst
    gradient among the running lanes (:mod:`fixedopt._progress`)."""
    running = lanes.state.status == RUNNING
    left = total - lanes.queued + jnp.sum(running)
    worst = jnp.max(jnp.where(running, lanes.state.grad_norm, 0.0), initial=0.0)
    step = lanes.iteration

    def report() -> None:
        jax.debug.callback(progress.report, step, left, total, worst)

    jax.lax.cond((step % progress.every == 0) | (left == 0), report, lambda: None)
