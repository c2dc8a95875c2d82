"""Lanes: a batch solved through a fixed number of lanes that refill as rows stop.

Under ``vmap`` a ``while_loop`` costs every row as many iterations as the slowest one,
and a batch of a million rows streams every per-row array through memory on every
step. Here the loop advances ``W`` lanes at a time (``W`` much smaller than the batch,
``W`` = ``width``): each lane holds one row. When enough lanes hold a row that has
stopped (or none is running), one real ``lax.cond`` on the whole lane batch writes
those rows' results out and loads the next unsolved rows into their lanes, starting
them (or leaving them to their lanes' next trip to start, on its evaluation of the
objective: :mod:`fixedopt._driver.shared_start`, ``start_in_step``). So

- one loop body is compiled whatever the batch size;
- the loop's working memory is that of ``W`` rows (the results, ``B`` rows, are
  written once per row);
- a slow row costs its own steps: the other lanes go on with other rows meanwhile.

With ``W >= B`` (``lanes=`` the batch or more, and batches of at most 8 rows) every
row has a lane from the start: the rows are started before the loop (or by its
first trip) and nothing is refilled or written, the whole batch as one ``vmap``.

The lanes' data and states are carried packed (:mod:`fixedopt._driver.packing`): one array
per dtype for their scalars and vectors, so that a trip, a refill or a write handles
a few arrays, not one per leaf (each array written is a kernel that XLA compiles).

What a row's result depends on: only its own data, to rounding. fixedopt's arithmetic
treats every lane alike (the same elementwise program whatever lane a row runs in and
whoever its neighbours are), so a row gets the same bits as when solved alone in any
other batch through lanes of the same width, wherever XLA's code for the objective
treats every row alike too (tested bit for bit on the CPU, ``tests/driver/test_lanes.py``),
but for the rows of a CPU block's tail (:mod:`fixedopt._driver.batching`): solved again
``tail_lanes`` wide (:class:`fixedopt._numerics.backends.Backend`), they agree to rounding.
XLA does not promise that: on the CPU it compiles a tridiagonal quadratic form
``x @ (A @ x)`` over rows of 8, 16 rows at a time, into code whose last two rows round
differently (plain ``vmap``), and the rows of such an objective then agree to rounding
whatever lane they run in (tested too). A different width is other machine code and
agrees to rounding. Runs are deterministic. A solver that reads
``StepContext.iteration`` (L-BFGS does, to pick the ring slot of its memory) is no
exception: the slot a pair lands in changes with the lane's start, its order in the
recursion does not, so the arithmetic is the same.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, NamedTuple, TypeVar

import jax
import jax.numpy as jnp

from fixedopt._contract.solver import Problem, Solver, StepContext
from fixedopt._contract.status import PENDING, RUNNING, busy
from fixedopt._driver.lane_checks import certify_some
from fixedopt._driver.loop import (
    LoopState,
    Resume,
    Stopping,
    advance,
    checks,
    claim,
    start,
    to_certify,
)  # fmt: skip
from fixedopt._driver.machine import Schedule
from fixedopt._driver.packing import Packed, Packing
from fixedopt._driver.progress import Progress, report_lanes
from fixedopt._driver.shared_start import step_or_start, unstarted
from fixedopt._inputs import arrays
from fixedopt._numerics import reduce

Rows = TypeVar("Rows")  # a batch's per-row data (a pytree with a leading batch axis)


class LastState(NamedTuple):
    """What the loop reports of each row: its last iterate and how it stopped; and,
    where asked, the solver's ``J^T J`` at that iterate (``normal``,
    :meth:`~fixedopt.Solver.normal_matrix`; else None)."""

    x: jax.Array
    value: jax.Array
    grad: jax.Array
    grad_norm: jax.Array
    steps: jax.Array
    status: jax.Array
    reason: jax.Array
    normal: jax.Array | None = None


class Lanes(NamedTuple):
    """The loop's carry: ``W`` lanes, the queue position and the results so far."""

    iteration: jax.Array  # () int32: steps taken by the loop (StepContext.iteration)
    queued: jax.Array  # () int32: the first row no lane has taken yet
    idle: jax.Array  # () int32: the lanes not running
    idle_steps: jax.Array  # () int32: the sum of their rows' steps
    lone: jax.Array  # () int32: trips in a row with the queue empty, <= tail_lanes busy
    row: jax.Array  # (W,) int32: the row each lane holds; B for none
    data: Packed  # the lanes' rows' data, packed
    state: Packed  # the lanes' loop states, packed
    results: Packed  # the B rows' LastStates, packed: each row written once


class LaneLayout(NamedTuple):
    """The static layout of a solve through lanes."""

    data: Packing  # of the lanes' rows' data
    state: Packing  # of their loop states
    results: Packing  # of the rows' LastStates
    always_new: tuple[Any, ...]  # state's columns a stopped lane takes anyway (solver state)
    normal_of: Callable[[Any], Any] | None  # a solver state's J^T J, reported; None: not


def iterate_lanes(
    solver: Solver[Any],
    problem_of: Callable[[Rows], Problem],
    rows: Rows,
    x: jax.Array,
    stopping: Stopping,
    schedule: Schedule,
    progress: Progress | None = None,
    count: jax.Array | None = None,
    step_bytes: int = 0,
    resume: Resume | None = None,
    normal_of: Callable[[Any], Any] | None = None,
    start_in_step: bool = False,
) -> LastState:
    """Run every row of a batch through the schedule's lanes until each row stops (or,
    with ``schedule.tail``, until a tail is left).

    Args:
      solver: the solver.
      problem_of: ``row -> Problem``, for one row's slice of ``rows``.
      rows: the per-row data (a pytree whose leaves have the batch axis ``B``).
      x: the starting points, ``(B, n)``.
      stopping: the stopping rules, shared by all rows.
      schedule: how the batch runs on this machine (static): the number of lanes ``W``
        (:meth:`~fixedopt._driver.machine.Schedule.width`; more than ``B`` means ``B``),
        folding, when to refill, and ``tail``: stop early when the queue has ended and
        at most ``tail_lanes`` rows have run alone for ``tail_patience`` trips: those
        rows are reported as the loop left them, ``RUNNING`` or ``PENDING``, for the
        caller to solve again, narrow (:mod:`fixedopt._driver.batching`).
      progress: report progress on the host; None adds nothing to the program.
      count: the rows to solve, traced, when ``rows`` are padded beyond them
        (:mod:`fixedopt._driver.batching`): the queue ends there, and the padded rows'
        reports are left empty (with every row in a lane, ``W >= B``, they run as the
        copies of row 0 that they are), for the caller to drop. None: every row.
      step_bytes: the bytes a row's step holds in memory beyond its data and loop
        state (a least-squares row's Jacobian): its working set sets the default width.
      resume: where each row goes on from (:class:`~fixedopt._driver.loop.Resume`,
        ``(B,)`` leaves), its claims of CONVERGED then leaving the loop CLAIMED for
        their check after it (``fixedopt._driver.after_loop``); None: checked in the
        lanes (:mod:`fixedopt._driver.lane_checks`).
      normal_of: ``solver_state -> J^T J`` (:meth:`~fixedopt.Solver.normal_matrix`),
        reported in :attr:`LastState.normal`; None: not reported.
      start_in_step: a lane's new row is started by the lane's next trip, on the
        trip's evaluation of the objective (:mod:`fixedopt._driver.shared_start`; static):
        the program holds one evaluation, each row takes one more trip.

    Returns:
      The :class:`LastState` of every row, ``(B, ...)`` leaves (rows padded beyond
      ``count`` are never taken: their reports stay empty, and the caller drops them,
      :mod:`fixedopt._driver.batching`).
    """
    total = x.shape[0]
    limit = total if count is None else count  # the queue's end
    # Row reductions fold where XLA:CPU would split them, at narrow enough lanes.
    folds = schedule.folds(1, x.shape[1])
    after = resume is not None  # static: claims are checked after the loop

    def start_row_jitted() -> Callable[[Any, jax.Array, Resume | None], LoopState]:
        return jax.jit(lambda row, x, go_on: start(solver, problem_of(row), x, stopping, go_on))

    start_row = start_row_jitted()  # traced once: for its shapes and the refill's start
    one_row = jax.tree.map(arrays.one_row, (rows, x, resume))
    with reduce.folding(folds):
        started = jax.eval_shape(start_row, *one_row)  # one row's loop state (shapes)
    width = schedule.width(total, _bytes((one_row[:2], started)) + step_bytes)
    layout = _layout(one_row[0], started, schedule.defaults.minor_rows, normal_of)
    if folds and not schedule.folds(width, x.shape[1]):
        folds, start_row = False, start_row_jitted()  # wide lanes: traced again, plain
    start_rows, refill_cost = _starts(solver, start_row, after, layout, schedule, start_in_step)

    def advance_lanes(data: Any, state: Packed, iteration: jax.Array,
                      starting: jax.Array | None) -> Packed:  # fmt: skip
        return _advance(solver, problem_of, stopping, layout, data, state, iteration, after,
                        starting)  # fmt: skip

    report = functools.partial(_report, layout, limit, progress)
    if width == total:
        # Rows padded beyond count (at most 8 rows in all) take their steps, dropped.
        with reduce.folding(folds):
            return _whole_batch(start_rows, advance_lanes, report, layout, rows, x, resume,
                                start_in_step)  # fmt: skip
    tail = schedule.tail and width > schedule.defaults.tail_lanes

    def refill(lanes: Lanes, last: jax.Array) -> tuple[Lanes, jax.Array]:
        return _refill(lanes, rows, (x, resume), start_rows, layout, limit, last)

    def body(lanes: Lanes) -> Lanes:
        # Refill first: the first trip fills the empty lanes, so the rows are started
        # by one piece of code (traced and compiled once); the last only writes the
        # rows out (its step runs for nothing), so they are written by one piece too.
        due = _refill_due(lanes.idle, lanes.idle_steps, width, refill_cost)
        last = _last_trip(lanes, limit, width, schedule.defaults.tail_patience if tail else None)
        wanted = (due & (lanes.queued < limit)) | last
        lanes, starting = _refill_if(wanted, refill, lanes, last, start_in_step)
        state = advance_lanes(layout.data.unpack(lanes.data), lanes.state, lanes.iteration,
                              starting)  # fmt: skip
        idle, idle_steps = _idle(layout.state.unpack(state))
        lanes = lanes._replace(iteration=lanes.iteration + 1, state=state, idle=idle,
                               idle_steps=idle_steps)  # fmt: skip
        if tail:
            lanes = _count_lone(lanes, limit, width, schedule.defaults.tail_lanes)
        report(state, lanes.iteration, lanes.queued, last)
        return lanes

    def going(lanes: Lanes) -> jax.Array:
        return reduce.any_true(lanes.row < total) | (lanes.queued < limit)

    with reduce.folding(folds):
        final = jax.lax.while_loop(going, body, _empty_lanes(layout, x, width))
    unpacked: LastState = layout.results.unpack(final.results)
    return unpacked


def _starts(
    solver: Solver[Any],
    start_row: Callable[[Any, jax.Array, Resume | None], LoopState],
    after: bool,
    layout: LaneLayout,
    schedule: Schedule,
    start_in_step: bool,
) -> tuple[Callable[[Any, jax.Array, Resume | None], LoopState], float]:
    """How the refill starts its rows, and what a refill costs in trips: the refill's
    start, PENDING (CLAIMED: ``after``) where a test holds, at ``Schedule.refill_cost``;
    or (``start_in_step``) the rows left to their lanes' next trip to start, a refill
    then costing its gathers and writes alone (``Backend.bare_refill_cost``)."""
    if start_in_step:
        return functools.partial(_unstarted_rows, layout), schedule.defaults.bare_refill_cost
    return _checked(solver, start_row, after), schedule.refill_cost


def _bytes(tree: Any) -> int:
    """The bytes of ``tree``'s arrays (shapes)."""
    return sum(a.size * a.dtype.itemsize for a in jax.tree.leaves(tree))


def _report(layout: LaneLayout, limit: jax.Array | int, progress: Progress | None, state: Packed,
            iteration: jax.Array, queued: jax.Array | int,
            written: jax.Array | bool = False) -> None:  # fmt: skip
    """The lanes' progress report (:func:`~fixedopt._driver.progress.report_lanes`),
    where ``progress`` is given."""
    if progress is not None:
        report_lanes(layout.state.unpack(state), iteration, queued, limit, progress, written)


def _last_trip(lanes: Lanes, limit: jax.Array | int, width: int, patience: int | None) -> jax.Array:
    """Whether this trip writes every lane's row out, the loop's last: the queue has
    ended and no lane runs, or (a tail's ``patience`` given) the tail's lanes have run
    alone for ``patience`` trips (their rows are reported as they stand)."""
    ended = lanes.queued >= limit
    last = ended & (lanes.idle == width)
    return last if patience is None else last | (lanes.lone >= patience)


def _count_lone(lanes: Lanes, limit: jax.Array | int, width: int, tail_lanes: int) -> Lanes:
    """``lanes`` with ``lone`` counting the trips since the queue ended and at most
    ``tail_lanes`` lanes ran (0 while more run or rows are queued)."""
    alone = (lanes.queued >= limit) & (width - lanes.idle <= tail_lanes)
    return lanes._replace(lone=jnp.where(alone, lanes.lone + 1, 0))


def _rows_of_one(a: jax.ShapeDtypeStruct) -> jax.ShapeDtypeStruct:
    return jax.ShapeDtypeStruct((1, *a.shape), a.dtype)


def _layout(
    one_row: Any,
    one_state: LoopState,
    minor: bool = False,
    normal_of: Callable[[Any], Any] | None = None,
) -> LaneLayout:
    """The packings of a solve, from one row's data and loop state (shapes); ``minor``:
    the data's and states' arrays hold their rows last (``Backend.minor_rows``);
    ``normal_of``: the solver's normal matrix of a state, written with each row."""
    one_row, started = jax.tree.map(_rows_of_one, (one_row, one_state))
    state = Packing.of(started, minor=minor)
    # advance keeps a stopped lane's x, value and grad itself (StepContext.active): so
    # the carried grad is the one its tests read, computed once (XLA fuses a value
    # into each of its readers unless one of them needs it in memory).
    flags = jax.tree.map(lambda _: False, started._replace(solver_state=None))
    flags = flags._replace(solver_state=jax.tree.map(lambda _: True, started.solver_state),
                           x=True, value=True, grad=True)  # fmt: skip
    return LaneLayout(
        Packing.of(one_row, minor=minor),
        state,
        Packing.of(_reported_shapes(started, normal_of), vectors=True),
        state.columns(flags),
        normal_of,
    )


def _reported_shapes(state: LoopState, normal_of: Callable[[Any], Any] | None) -> LastState:
    """:func:`_reported` of a state's shapes (``normal_of`` may compute)."""
    return jax.eval_shape(functools.partial(_reported, normal_of=normal_of), state)  # type: ignore[no-any-return]


def _reported(state: LoopState, normal_of: Callable[[Any], Any] | None = None) -> LastState:
    normal = None if normal_of is None else normal_of(state.solver_state)
    return LastState(state.x, state.value, state.grad, state.grad_norm, state.steps,
                     state.status, state.reason, normal)  # fmt: skip


def _advance(
    solver: Solver[Any],
    problem_of: Callable[[Rows], Problem],
    stopping: Stopping,
    layout: LaneLayout,
    data: Any,
    packed: Packed,
    iteration: jax.Array,
    after: bool = False,
    starting: jax.Array | None = None,
) -> Packed:
    """One step of every running lane (or, where ``starting``, its new row's start:
    :func:`~fixedopt._driver.shared_start.step_or_start`). A stopped lane keeps what it reports; its
    solver state is never read again, so it takes the new one (keeping the old would
    stream the whole L-BFGS history through a select). A row that the step leaves
    CONVERGED waits, PENDING, for its certification
    (:func:`~fixedopt._driver.lane_checks.certify_some`); with ``after`` (static) it
    leaves its lane, CLAIMED, for its check after the loop."""
    state: LoopState = layout.state.unpack(packed)
    running = state.status == RUNNING

    def one(row: Any, state: LoopState, running: jax.Array, starting: jax.Array | None
            ) -> LoopState:  # fmt: skip
        context = StepContext(running, iteration)
        if starting is None:
            new = advance(solver, problem_of(row), state, stopping, context, check=False)
        else:
            new = step_or_start(solver, problem_of(row), state, stopping, context, starting,
                                after)  # fmt: skip
        return claim(solver, new) if after else _waiting(solver, new)

    new = layout.state.pack(jax.vmap(one)(data, state, running, starting))
    # A waiting lane keeps what it reports; its solver state is the inactive step's,
    # which leaves what the check reads unchanged (Solver.certify).
    new = layout.state.select(running, new, packed, layout.always_new)
    # The lanes' check (loop.checks): a solver that certifies nothing, the starts that
    # met a test (to_certify), PENDING here or when refilled.
    return (
        certify_some(solver, problem_of, stopping, layout.state, data, new)
        if checks(solver) and not after
        else new
    )


def _waiting(solver: Solver[Any], state: LoopState) -> LoopState:
    """``state``, PENDING where its verdict is to be checked (``to_certify``)."""
    if not checks(solver):
        return state
    return state._replace(status=jnp.where(to_certify(solver, state), PENDING, state.status))


def _checked(
    solver: Solver[Any],
    start_row: Callable[[Any, jax.Array, Resume | None], LoopState],
    after: bool,
) -> Callable[[Any, jax.Array, Resume | None], LoopState]:
    """``(rows, x, resume) -> states`` of rows started by ``start_row``, each PENDING
    where its start met a convergence test (``to_certify``: a maximum or saddle point
    passes the gradient tests too): the lanes' check looks at its curvature. With
    ``after`` (static) ``start_row`` has made them CLAIMED already."""
    if after:
        return jax.vmap(start_row)
    return lambda rows, x, resume: _waiting(solver, jax.vmap(start_row)(rows, x, resume))


def _whole_batch(
    start_rows: Callable[[Any, jax.Array, Resume | None], LoopState],
    advance_lanes: Callable[[Any, Packed, jax.Array, jax.Array | None], Packed],
    report: Callable[[Packed, jax.Array, int], None],
    layout: LaneLayout,
    rows: Any,
    x: jax.Array,
    resume: Resume | None,
    start_in_step: bool = False,
) -> LastState:
    """Every row in its own lane from the start: no refill, no writes. The rows' data go
    round the loop as they are, or packed where their arrays hold rows last (``minor``).
    ``start_in_step``: ``start_rows`` leaves the rows to the loop's first trip to start."""
    total = x.shape[0]
    carried = layout.data

    def body(carry: tuple[jax.Array, Packed, Any]) -> tuple[jax.Array, Packed, Any]:
        iteration, state, data = carry
        starting = jnp.full((total,), iteration == 0) if start_in_step else None
        unpacked = carried.unpack(data) if carried.minor else data
        state = advance_lanes(unpacked, state, iteration, starting)
        report(state, iteration + 1, total)
        # The rows' data go round the loop through a barrier: as loop invariants, XLA
        # hoists what depends on them alone out of the loop and carries it instead,
        # larger (masked Jacobian columns of the linear parameters, (B, n, m) arrays:
        # 1.06x slower on the tiny suite's decay fit at B = 1e4, measured).
        data, state = jax.lax.optimization_barrier((data, state))
        return iteration + 1, state, data

    def going(carry: tuple[jax.Array, Packed, Any]) -> jax.Array:
        return reduce.any_true(busy(layout.state.unpack(carry[1]).status))

    started = layout.state.pack(start_rows(rows, x, resume))
    data = carried.pack(rows) if carried.minor else rows
    initial = (jnp.zeros((), jnp.int32), started, data)
    final: LoopState = layout.state.unpack(jax.lax.while_loop(going, body, initial)[1])
    return _reported(final, layout.normal_of)


def _empty_lanes(layout: LaneLayout, x: jax.Array, width: int) -> Lanes:
    """``width`` lanes that hold no row (row ``B``, not running), and empty results."""
    total = x.shape[0]
    state = layout.state.zeros(width)  # status 0: not RUNNING
    # The results are made from x, so that a batch sharded across devices gets results
    # sharded the same way (XLA propagates the sharding of x to them).
    like_x = jnp.sum(x[:, :1] * 0, axis=1)  # (B,); also for n = 0

    def empty(a: jax.Array) -> jax.Array:
        column = like_x.astype(a.dtype).reshape(total, *(1,) * (a.ndim - 1))
        return jnp.broadcast_to(column, (total, *a.shape[1:]))

    results = tuple(empty(a) for a in layout.results.zeros(0))
    zero = jnp.zeros((), jnp.int32)
    idle = jnp.full((), width, jnp.int32)
    return Lanes(zero, zero, idle, zero, zero, jnp.full((width,), total, jnp.int32),
                 layout.data.zeros(width), state, results)  # fmt: skip


def _unstarted_rows(layout: LaneLayout, rows: Any, x: jax.Array, resume: Resume | None
                    ) -> LoopState:  # fmt: skip
    """The loop states of rows left to their lanes' next trip to start
    (:func:`~fixedopt._driver.shared_start.unstarted`)."""
    del rows  # the trip reads them from its lanes
    blank: LoopState = layout.state.unpack(layout.state.zeros(x.shape[0]))
    return unstarted(blank, x, resume)


def _idle(state: LoopState) -> tuple[jax.Array, jax.Array]:
    """The lanes not running and the sum of their rows' steps (one reduction)."""
    idle = ~busy(state.status)
    counts = jnp.stack([idle.astype(jnp.int32), jnp.where(idle, state.steps, 0)])
    count, steps = reduce.total(counts, dtype=jnp.int32)
    return count, steps


def _refill_if(
    wanted: jax.Array,
    refill: Callable[[Lanes, jax.Array], tuple[Lanes, jax.Array]],
    lanes: Lanes,
    last: jax.Array,
    start_in_step: bool,
) -> tuple[Lanes, jax.Array | None]:
    """``refill(lanes, last)`` where ``wanted`` (one ``lax.cond``), and the lanes it left
    to their next trip to start (``start_in_step``, static; else None, and the program
    is the one without it)."""
    if not start_in_step:
        kept: Lanes = jax.lax.cond(wanted, lambda *a: refill(*a)[0], lambda lanes, _: lanes,
                                   lanes, last)  # fmt: skip
        return kept, None
    unrefilled = (lanes, jnp.zeros(lanes.row.shape, bool))
    refilled: tuple[Lanes, jax.Array] = jax.lax.cond(wanted, refill, lambda *_: unrefilled,
                                                     lanes, last)  # fmt: skip
    return refilled


def _refill_due(count: jax.Array, steps_sum: jax.Array, width: int, cost: float) -> jax.Array:
    """Whether enough lanes are idle for a refill to pay: ``count`` lanes, whose rows
    took ``steps_sum`` steps in all; a refill costs ``cost`` trips (``Schedule.refill_cost``).

    Rows that take ``k`` steps each leave about ``W / k`` lanes idle per trip. Waiting
    for a share ``s`` of idle lanes wastes ``s / 2`` of each trip on average and
    refills every ``s k`` trips, each refill costing ``cost`` trips: the sum is
    least at ``s = sqrt(2 cost / k)``, with ``k`` the mean steps of the rows
    stopped in the lanes now. (All lanes idle: always.)"""
    steps = steps_sum / jnp.maximum(count, 1)
    share = jnp.minimum(1.0, jnp.sqrt(2.0 * cost / jnp.maximum(steps, 1.0)))
    return count >= jnp.maximum(share * width, 1.0)


def _write(
    results: Packed, row: jax.Array, state: Packed, done: jax.Array, layout: LaneLayout
) -> Packed:
    """``results`` with the lanes that are ``done`` written at their rows."""
    total = results[0].shape[0]
    index = jnp.where(done, row, total)  # out of range: dropped
    written = layout.results.pack(_reported(layout.state.unpack(state), layout.normal_of))
    return layout.results.put(results, index, written)


def _refill(
    lanes: Lanes,
    rows: Any,
    starts: tuple[jax.Array, Resume | None],
    start_rows: Callable[[Any, jax.Array, Resume | None], LoopState],
    layout: LaneLayout,
    limit: jax.Array | int,
    last: jax.Array,
) -> tuple[Lanes, jax.Array]:
    """Write the stopped lanes' rows out (every lane's, on the ``last`` trip) and give
    the idle lanes the next queued rows.

    The ``k``-th idle lane (in lane order: stopped, or holding no row) takes row
    ``queued + k`` while that is below ``limit`` (the queue's end); an idle lane left
    without a row holds row ``B`` (none), as does every lane after the last trip. Also
    returns the lanes that took a row (``(W,)``)."""
    x = starts[0]
    total = x.shape[0]
    idle = ~busy(layout.state.unpack(lanes.state).status) | last
    results = _write(lanes.results, lanes.row, lanes.state, idle & (lanes.row < total), layout)
    new_row = lanes.queued + jnp.cumsum(idle) - 1
    takes = idle & (new_row < limit)
    source = jnp.where(takes, new_row, 0)
    gathered = layout.data.pack(jax.tree.map(lambda a: a[source], rows))
    data = layout.data.select(takes, gathered, lanes.data)
    x_taken, resume = jax.tree.map(lambda a: a[source], starts)
    started = layout.state.pack(start_rows(layout.data.unpack(data), x_taken, resume))
    state = layout.state.select(takes, started, lanes.state)
    row = jnp.where(takes, new_row, jnp.where(idle, total, lanes.row))
    queued = jnp.minimum(lanes.queued + jnp.sum(idle), limit).astype(jnp.int32)
    refilled = lanes._replace(queued=queued, row=row.astype(jnp.int32), data=data, state=state,
                              results=results)  # fmt: skip
    return refilled, takes
