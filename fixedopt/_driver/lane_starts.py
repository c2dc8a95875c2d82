"""How the lanes start the rows they take: one static :class:`Starts` per solve
(:func:`starts`).

By default a refill starts its rows itself: each row's start evaluated
(:func:`fixedopt._driver.loop.start`) and PENDING where it meets a test. A long
least-squares model's rows are instead left at their given starts for their lane's
next trip to start, on that trip's own evaluation of the objective
(:mod:`fixedopt._driver.shared_start`): the program then holds the model once, each row
takes one more trip, and a refill costs its gathers and writes alone."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, NamedTuple

import jax

from fixedopt._contract.solver import Solver
from fixedopt._driver.lane_checks import waiting
from fixedopt._driver.loop import LoopState, Resume
from fixedopt._driver.machine import Schedule
from fixedopt._driver.packing import Packing
from fixedopt._driver.shared_start import unstarted

# (rows, x, resume) -> the loop states of rows taken by lanes, (k, ...) leaves.
StartRows = Callable[[Any, jax.Array, Resume | None], LoopState]


class Starts(NamedTuple):
    """How the lanes start the rows they take (static)."""

    rows: StartRows  # the taken rows' loop states
    refill_cost: float  # a refill's cost in trips (fixedopt._driver.lane_queue.refill_due)
    in_trip: bool  # rows left at their starts: their lane's next trip starts them


def starts(
    solver: Solver[Any],
    start_row: Callable[[Any, jax.Array, Resume | None], LoopState],
    after: bool,
    states: Packing,
    schedule: Schedule,
    in_trip: bool,
) -> Starts:
    """The refill's start, ``start_row`` (one row's) for each row, PENDING (CLAIMED:
    ``after``) where a test holds, at ``Schedule.refill_cost``; or (``in_trip``) the
    rows left to their lanes' next trip to start (their states packed by ``states``),
    a refill then costing its gathers and writes alone (``Backend.bare_refill_cost``)."""
    if in_trip:
        return Starts(functools.partial(_unstarted_rows, states),
                      schedule.defaults.bare_refill_cost, True)  # fmt: skip
    return Starts(_checked(solver, start_row, after), schedule.refill_cost, False)


def _checked(
    solver: Solver[Any],
    start_row: Callable[[Any, jax.Array, Resume | None], LoopState],
    after: bool,
) -> StartRows:
    """``(rows, x, resume) -> states`` of rows started by ``start_row``, each PENDING
    where its start met a convergence test (``to_certify``: a maximum or saddle point
    passes the gradient tests too): the lanes' check looks at its curvature. With
    ``after`` (static) ``start_row`` has made them CLAIMED already."""
    if after:
        return jax.vmap(start_row)
    return lambda rows, x, resume: waiting(solver, jax.vmap(start_row)(rows, x, resume))


def _unstarted_rows(states: Packing, rows: Any, x: jax.Array, resume: Resume | None
                    ) -> LoopState:  # fmt: skip
    """The loop states of rows left to their lanes' next trip to start
    (:func:`~fixedopt._driver.shared_start.unstarted`)."""
    del rows  # the trip reads them from its lanes
    blank: LoopState = states.unpack(states.zeros(x.shape[0]))
    return unstarted(blank, x, resume)
