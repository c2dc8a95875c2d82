"""The lanes' queue: the loop's carry (:class:`Lanes`), when a trip refills the lanes
(:func:`refill_due`), how it writes their stopped rows out and gives the idle lanes the
next queued rows (:func:`refill`), and when the loop's last trip comes
(:func:`last_trip`) (:mod:`fixedopt._driver.lanes`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from fixedopt._contract.status import busy
from fixedopt._driver.lane_layout import LaneLayout, reported
from fixedopt._driver.lane_starts import StartRows
from fixedopt._driver.loop import LoopState, Resume
from fixedopt._driver.packing import Packed
from fixedopt._numerics import reduce


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


def empty_lanes(layout: LaneLayout, x: jax.Array, width: int) -> Lanes:
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


def idle(state: LoopState) -> tuple[jax.Array, jax.Array]:
    """The lanes not running and the sum of their rows' steps (one reduction)."""
    not_busy = ~busy(state.status)
    counts = jnp.stack([not_busy.astype(jnp.int32), jnp.where(not_busy, state.steps, 0)])
    count, steps = reduce.total(counts, dtype=jnp.int32)
    return count, steps


def last_trip(lanes: Lanes, limit: jax.Array | int, width: int, patience: int | None) -> jax.Array:
    """Whether this trip writes every lane's row out, the loop's last: the queue has
    ended and no lane runs, or (a tail's ``patience`` given) the tail's lanes have run
    alone for ``patience`` trips (their rows are reported as they stand)."""
    ended = lanes.queued >= limit
    last = ended & (lanes.idle == width)
    return last if patience is None else last | (lanes.lone >= patience)


def count_lone(lanes: Lanes, limit: jax.Array | int, width: int, tail_lanes: int) -> Lanes:
    """``lanes`` with ``lone`` counting the trips since the queue ended and at most
    ``tail_lanes`` lanes ran (0 while more run or rows are queued)."""
    alone = (lanes.queued >= limit) & (width - lanes.idle <= tail_lanes)
    return lanes._replace(lone=jnp.where(alone, lanes.lone + 1, 0))


def refill_due(count: jax.Array, steps_sum: jax.Array, width: int, cost: float) -> jax.Array:
    """Whether enough lanes are idle for a refill to pay: ``count`` lanes, whose rows
    took ``steps_sum`` steps in all; a refill costs ``cost`` trips (``Starts.refill_cost``).

    Rows that take ``k`` steps each leave about ``W / k`` lanes idle per trip. Waiting
    for a share ``s`` of idle lanes wastes ``s / 2`` of each trip on average and
    refills every ``s k`` trips, each refill costing ``cost`` trips: the sum is
    least at ``s = sqrt(2 cost / k)``, with ``k`` the mean steps of the rows
    stopped in the lanes now. (All lanes idle: always.)"""
    steps = steps_sum / jnp.maximum(count, 1)
    share = jnp.minimum(1.0, jnp.sqrt(2.0 * cost / jnp.maximum(steps, 1.0)))
    return count >= jnp.maximum(share * width, 1.0)


def refill_if(
    wanted: jax.Array,
    refill: Callable[[Lanes, jax.Array], tuple[Lanes, jax.Array]],
    lanes: Lanes,
    last: jax.Array,
    in_trip: bool,
) -> tuple[Lanes, jax.Array | None]:
    """``refill(lanes, last)`` where ``wanted`` (one ``lax.cond``), and the lanes it left
    to their next trip to start (``in_trip``, static: ``Starts.in_trip``; else None,
    and the program is the one without it)."""
    if not in_trip:
        kept: Lanes = jax.lax.cond(wanted, lambda *a: refill(*a)[0], lambda lanes, _: lanes,
                                   lanes, last)  # fmt: skip
        return kept, None
    unrefilled = (lanes, jnp.zeros(lanes.row.shape, bool))
    refilled: tuple[Lanes, jax.Array] = jax.lax.cond(wanted, refill, lambda *_: unrefilled,
                                                     lanes, last)  # fmt: skip
    return refilled


def refill(
    lanes: Lanes,
    rows: Any,
    given: tuple[jax.Array, Resume | None],
    start_rows: StartRows,
    layout: LaneLayout,
    limit: jax.Array | int,
    last: jax.Array,
) -> tuple[Lanes, jax.Array]:
    """Write the stopped lanes' rows out (every lane's, on the ``last`` trip) and give
    the idle lanes the next queued rows: their data from ``rows``, their starts and
    :class:`~fixedopt._driver.loop.Resume` from ``given``, started by ``start_rows``
    (``Starts.rows``).

    The ``k``-th idle lane (in lane order: stopped, or holding no row) takes row
    ``queued + k`` while that is below ``limit`` (the queue's end); an idle lane left
    without a row holds row ``B`` (none), as does every lane after the last trip. Also
    returns the lanes that took a row (``(W,)``)."""
    x = given[0]
    total = x.shape[0]
    free = ~busy(layout.state.unpack(lanes.state).status) | last
    results = _write(lanes.results, lanes.row, lanes.state, free & (lanes.row < total), layout)
    new_row = lanes.queued + jnp.cumsum(free, dtype=jnp.int32) - 1
    takes = free & (new_row < limit)
    source = jnp.where(takes, new_row, 0)
    gathered = layout.data.pack(jax.tree.map(lambda a: a[source], rows))
    data = layout.data.select(takes, gathered, lanes.data)
    x_taken, resume = jax.tree.map(lambda a: a[source], given)
    started = layout.state.pack(start_rows(layout.data.unpack(data), x_taken, resume))
    state = layout.state.select(takes, started, lanes.state)
    row = jnp.where(takes, new_row, jnp.where(free, total, lanes.row))
    queued = jnp.minimum(lanes.queued + jnp.sum(free, dtype=jnp.int32), limit).astype(jnp.int32)
    refilled = lanes._replace(queued=queued, row=row.astype(jnp.int32), data=data, state=state,
                              results=results)  # fmt: skip
    return refilled, takes


def _write(
    results: Packed, row: jax.Array, state: Packed, done: jax.Array, layout: LaneLayout
) -> Packed:
    """``results`` with the lanes that are ``done`` written at their rows."""
    total = results[0].shape[0]
    index = jnp.where(done, row, total)  # out of range: dropped
    written = layout.results.pack(reported(layout.state.unpack(state), layout.normal_of))
    return layout.results.put(results, index, written)
