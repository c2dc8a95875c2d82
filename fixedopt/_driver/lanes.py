"""Lanes: a batch solved through a fixed number of lanes that refill as rows stop.

Under ``vmap`` a ``while_loop`` costs every row as many iterations as the slowest one,
and a batch of a million rows streams every per-row array through memory on every
step. Here the loop advances ``W`` lanes at a time (``W`` much smaller than the batch,
``W`` = ``width``): each lane holds one row. When enough lanes hold a row that has
stopped (or none is running), one real ``lax.cond`` on the whole lane batch writes
those rows' results out and loads the next unsolved rows into their lanes, starting
them (or leaving them to their lanes' next trip to start, on its evaluation of the
objective: :mod:`fixedopt._driver.lane_starts`). So

- one loop body is compiled whatever the batch size;
- the loop's working memory is that of ``W`` rows (the results, ``B`` rows, are
  written once per row);
- a slow row costs its own steps: the other lanes go on with other rows meanwhile.

With ``W >= B`` (``lanes=`` the batch or more, and batches of at most 8 rows) every
row has a lane from the start: the rows are started before the loop (or by its
first trip) and nothing is refilled or written, the whole batch as one ``vmap``.

The lanes' data and states are carried packed (:mod:`fixedopt._driver.lane_layout`,
:mod:`fixedopt._driver.packing`): one array per dtype for their scalars and vectors, so
that a trip, a refill or a write handles a few arrays, not one per leaf (each array
written is a kernel that XLA compiles). The queue, the refill and the loop's carry are
:mod:`fixedopt._driver.lane_queue`'s; here the loop and its trips.

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
from typing import Any, TypeVar

import jax
import jax.numpy as jnp

from fixedopt._contract.solver import Problem, Solver, StepContext
from fixedopt._contract.status import RUNNING, busy
from fixedopt._driver import lane_layout, lane_queue, lane_starts
from fixedopt._driver.lane_checks import certify_some, waiting
from fixedopt._driver.lane_layout import LaneLayout, LastState
from fixedopt._driver.lane_queue import Lanes
from fixedopt._driver.lane_starts import Starts
from fixedopt._driver.loop import LoopState, Resume, Stopping, advance, checks, claim, start
from fixedopt._driver.machine import Schedule
from fixedopt._driver.packing import Packed
from fixedopt._driver.progress import Progress, report_lanes
from fixedopt._driver.shared_start import step_or_start
from fixedopt._inputs import arrays
from fixedopt._numerics import reduce

Rows = TypeVar("Rows")  # a batch's per-row data (a pytree with a leading batch axis)
# (data, states, iteration, starting) -> the lanes' states after one trip (_advance)
AdvanceLanes = Callable[[Any, Packed, jax.Array, jax.Array | None], Packed]
Report = Callable[..., None]  # (states, iteration, queued[, written]): _report


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
        reported in the :data:`LastState`'s ``solver_state``; None: not reported.
      start_in_step: a lane's new row is started by the lane's next trip, on the
        trip's evaluation of the objective (:mod:`fixedopt._driver.lane_starts`; static):
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
    layout = lane_layout.layout(one_row[0], started, schedule.defaults.minor_rows, normal_of)
    if folds and not schedule.folds(width, x.shape[1]):
        folds, start_row = False, start_row_jitted()  # wide lanes: traced again, plain
    starts = lane_starts.starts(solver, start_row, after, layout.state, schedule, start_in_step)

    def advance_lanes(data: Any, state: Packed, iteration: jax.Array,
                      starting: jax.Array | None) -> Packed:  # fmt: skip
        return _advance(solver, problem_of, stopping, layout, data, state, iteration, after,
                        starting)  # fmt: skip

    report = functools.partial(_report, layout, limit, progress)
    with reduce.folding(folds):
        if width == total:
            # Rows padded beyond count (at most 8 rows in all) take their steps, dropped.
            return _whole_batch(starts, advance_lanes, report, layout, rows, x, resume)
        return _through_the_queue(starts, advance_lanes, report, layout, schedule, width,
                                  limit, rows, (x, resume))  # fmt: skip


def _through_the_queue(
    starts: Starts,
    advance_lanes: AdvanceLanes,
    report: Report,
    layout: LaneLayout,
    schedule: Schedule,
    width: int,
    limit: jax.Array | int,
    rows: Any,
    given: tuple[jax.Array, Resume | None],
) -> LastState:
    """The rows through ``width`` lanes that refill from the queue (rows ``0`` to
    ``limit``, their starts and :class:`~fixedopt._driver.loop.Resume` ``given``) as
    their rows stop, until the queue has ended and no lane runs (or a tail is left)."""
    x = given[0]
    total = x.shape[0]
    tail = schedule.tail and width > schedule.defaults.tail_lanes
    patience = schedule.defaults.tail_patience if tail else None

    def refill(lanes: Lanes, last: jax.Array) -> tuple[Lanes, jax.Array]:
        return lane_queue.refill(lanes, rows, given, starts.rows, layout, limit, last)

    def body(lanes: Lanes) -> Lanes:
        # Refill first: the first trip fills the empty lanes, so the rows are started
        # by one piece of code (traced and compiled once); the last only writes the
        # rows out (its step runs for nothing), so they are written by one piece too.
        due = lane_queue.refill_due(lanes.idle, lanes.idle_steps, width, starts.refill_cost)
        last = lane_queue.last_trip(lanes, limit, width, patience)
        wanted = (due & (lanes.queued < limit)) | last
        lanes, starting = lane_queue.refill_if(wanted, refill, lanes, last, starts.in_trip)
        state = advance_lanes(layout.data.unpack(lanes.data), lanes.state, lanes.iteration,
                              starting)  # fmt: skip
        idle, idle_steps = lane_queue.idle(layout.state.unpack(state))
        lanes = lanes._replace(iteration=lanes.iteration + 1, state=state, idle=idle,
                               idle_steps=idle_steps)  # fmt: skip
        if tail:
            lanes = lane_queue.count_lone(lanes, limit, width, schedule.defaults.tail_lanes)
        report(state, lanes.iteration, lanes.queued, last)
        return lanes

    def going(lanes: Lanes) -> jax.Array:
        return reduce.any_true(lanes.row < total) | (lanes.queued < limit)

    final = jax.lax.while_loop(going, body, lane_queue.empty_lanes(layout, x, width))
    unpacked: LastState = layout.results.unpack(final.results)
    return unpacked


def _whole_batch(
    starts: Starts,
    advance_lanes: AdvanceLanes,
    report: Report,
    layout: LaneLayout,
    rows: Any,
    x: jax.Array,
    resume: Resume | None,
) -> LastState:
    """Every row in its own lane from the start: no refill, no writes. The rows' data go
    round the loop as they are, or packed where their arrays hold rows last (``minor``).
    ``starts.in_trip``: ``starts.rows`` leaves the rows to the loop's first trip to start."""
    total = x.shape[0]
    carried = layout.data

    def body(carry: tuple[jax.Array, Packed, Any]) -> tuple[jax.Array, Packed, Any]:
        iteration, state, data = carry
        starting = jnp.full((total,), iteration == 0) if starts.in_trip else None
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

    started = layout.state.pack(starts.rows(rows, x, resume))
    data = carried.pack(rows) if carried.minor else rows
    initial = (jnp.zeros((), jnp.int32), started, data)
    final: LoopState = layout.state.unpack(jax.lax.while_loop(going, body, initial)[1])
    return lane_layout.reported(final, layout.normal_of)


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
        return claim(solver, new) if after else waiting(solver, new)

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
