"""The batch on the minor axis: a whole batch stepped together, every per-row array
held with the batch last (issue 61).

A TPU holds an array in tiles of 8 x 128 over its last two axes. Rows stored
``(B, n)`` put a row's few entries (Gpufit's spot: ``n = 5``) on the 128-wide minor
axis, and most of every tile is padding; a least-squares step's residuals, Jacobian
and normal equations of ``(B, m, n)`` and ``(B, n, n)`` worse. Here the rows'
data and loop states are moved once to the batch-last layout, ``(..., B)``, and the
row's step runs under ``jax.vmap(..., in_axes=-1, out_axes=-1)``: the solver's own
elementwise arithmetic (the unrolled products and Cholesky of
:mod:`fixedopt._solvers.small_linalg`) then works on ``(B,)`` vectors, and the loop's
carry is ``(..., B)`` arrays, full tiles.

Every row takes the steps of :func:`fixedopt._driver.loop.advance` (the solver's step,
the failure policy, the convergence tests and statuses), as in the lanes
(:mod:`fixedopt._driver.lanes`); a row that has stopped keeps its state (the step
computed for it is dropped), and the loop ends when no row runs. A trip costs every
row of the batch, stopped or not; so once at most ``1 / SHRINK`` of the rows run,
they are gathered into a batch of that size (static), which goes on (shrinking in
turn, ``SHRINKS`` times at most, to no fewer than the profile's fewest lanes), and
its rows are put back in their places: the batch costs about as many trips of its
whole size as its rows' typical steps, not its slowest row's. A row's result
depends on its own data only, whatever its neighbours and whichever batch it runs
in (the same elementwise program for every row).

Chosen by the machine profile (:attr:`fixedopt._driver.machine.Schedule.layout`,
``ROWS_MINOR``), never by the user.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import jax
import jax.numpy as jnp

from fixedopt._contract.solver import Problem, Solver, StepContext
from fixedopt._contract.status import PENDING, RUNNING, Status, busy
from fixedopt._driver.lane_checks import first_true
from fixedopt._driver.lanes import LastState
from fixedopt._driver.loop import LoopState, Stopping, advance, certify, checks, start, to_certify
from fixedopt._numerics import reduce

Rows = TypeVar("Rows")  # a batch's per-row data (a pytree with a leading batch axis)


def iterate_minor(
    solver: Solver[Any],
    problem_of: Callable[[Rows], Problem],
    rows: Rows,
    x: jax.Array,
    stopping: Stopping,
    count: jax.Array | None = None,
    fewest: int = 1,
) -> LastState:
    """Run every row of a batch (``rows``' leaves and ``x``, ``(B, n)``, rows first)
    until each stops, the batch held on the minor axis, in chunks of at most ``CHUNK``
    rows one after the other; the :class:`LastState` of every row, rows first.
    ``count``: the rows to solve, where the batch is padded beyond them
    (``fixedopt._driver.batching``): the others stop at their start, their reports for
    the caller to drop. ``fewest``: the batch shrinks to no fewer rows (:func:`sizes`)."""
    total = x.shape[0]
    if total <= CHUNK:
        minor_rows, minor_x = jax.tree.map(_to_minor, (rows, x))
        final = _iterate(solver, problem_of, minor_rows, minor_x, stopping, count, fewest)
        reported: LastState = jax.tree.map(_to_major, final)
        return reported
    chunks = -(-total // CHUNK)
    padded = jax.tree.map(lambda a: _chunked(a, chunks), (rows, x))
    solving = total if count is None else count

    def chunk(index_and_rows: tuple[jax.Array, tuple[Rows, jax.Array]]) -> LastState:
        index, (rows, x) = index_and_rows
        left = solving - index * CHUNK  # this chunk's rows to solve (none where <= 0)
        return _iterate(solver, problem_of, rows, x, stopping, left, fewest)

    final = jax.lax.map(chunk, (jnp.arange(chunks), padded))
    every: LastState = jax.tree.map(lambda a: _unchunked(a, total), final)
    return every


# The most rows one loop holds: a larger batch runs in chunks of this many, one after
# the other (its loop's working set, a few hundred bytes a row, stays ~1 GiB).
CHUNK = 1 << 22


def _chunked(a: jax.Array, chunks: int) -> jax.Array:
    """The rows of ``a`` (``(B, ...)``) padded with copies of row 0 to ``chunks`` chunks,
    as ``(chunks, ..., CHUNK)``: each chunk batch-last."""
    extra = chunks * CHUNK - a.shape[0]
    grown = jnp.concatenate([a, jnp.broadcast_to(a[:1], (extra, *a.shape[1:]))])
    return jnp.moveaxis(grown.reshape(chunks, CHUNK, *a.shape[1:]), 1, -1)


def _unchunked(a: jax.Array, total: int) -> jax.Array:
    """The first ``total`` rows of chunked ``a`` (``(chunks, ..., CHUNK)``), rows first."""
    rows = jnp.moveaxis(a, -1, 1)
    return rows.reshape(-1, *rows.shape[2:])[:total]


def _to_minor(a: jax.Array) -> jax.Array:
    return jnp.moveaxis(a, 0, -1)


def _to_major(a: jax.Array) -> jax.Array:
    return jnp.moveaxis(a, -1, 0)


def _by_row(function: Callable[..., Any]) -> Callable[..., Any]:
    """``function`` of one row, mapped over the last axis of its arguments and results."""
    return jax.vmap(function, in_axes=-1, out_axes=-1)


# The batch shrinks as its rows stop: once at most 1/SHRINK of its rows run, they are
# gathered into a batch of that size (static) and go on there; at most SHRINKS times,
# as each batch size is a loop of its own in the program (the step compiled again:
# five on the CPU took 2m49s to compile, one 20 s, under load).
SHRINK = 8
SHRINKS = 1


def sizes(total: int, fewest: int) -> tuple[int, ...]:
    """The sizes a batch of ``total`` rows shrinks to, in turn, none below ``fewest``
    (static; the machine profile's ``Backend.fewest_lanes``: a trip of fewer rows
    costs about as much on an accelerator)."""
    found: list[int] = []
    size = total // SHRINK
    while size >= max(fewest, 1) and len(found) < SHRINKS:
        found.append(size)
        size //= SHRINK
    return tuple(found)


_STOPPED = int(Status.CONVERGED)  # a row that is not solved (a pad, an empty slot)
Carry = tuple[jax.Array, LoopState]  # (the loop's trips so far, the rows' states)


def _iterate(
    solver: Solver[Any],
    problem_of: Callable[[Rows], Problem],
    rows: Rows,
    x: jax.Array,
    stopping: Stopping,
    count: jax.Array | None,
    fewest: int,
) -> LastState:
    """:func:`iterate_minor` on batch-last ``rows`` and ``x`` (``(n, B)``)."""

    def start_row(row: Any, x: jax.Array) -> LoopState:
        return _waiting(solver, start(solver, problem_of(row), x, stopping))

    def step_row(row: Any, state: LoopState, running: jax.Array, iteration: jax.Array) -> LoopState:
        context = StepContext(running, iteration)
        new = advance(solver, problem_of(row), state, stopping, context, check=False)
        return _waiting(solver, new)

    step_rows = jax.vmap(step_row, in_axes=(-1, -1, -1, None), out_axes=-1)

    def trip(rows: Rows, carry: Carry) -> Carry:
        iteration, state = carry
        running = state.status == RUNNING
        stepped = step_rows(rows, state, running, iteration)
        # A stopped row keeps its state; its solver state is never read again.
        kept = jax.tree.map(lambda new, old: _where(running, new, old),
                            stepped._replace(solver_state=None),
                            state._replace(solver_state=None))  # fmt: skip
        state = kept._replace(solver_state=stepped.solver_state)
        if checks(solver):
            state = _certify_waiting(solver, problem_of, stopping, rows, state)
        return iteration + 1, state

    first = _by_row(start_row)(rows, x)
    if checks(solver):  # starts that met a test are checked before any step
        first = _certify_waiting(solver, problem_of, stopping, rows, first)
    if count is not None:  # padded rows: stopped from the start
        padded = jnp.arange(x.shape[-1]) >= count
        first = first._replace(status=jnp.where(padded, _STOPPED, first.status))
    carry = (jnp.zeros((), jnp.int32), first)
    _, final = _shrinking(trip, rows, carry, sizes(x.shape[-1], fewest))
    return LastState(*final[: len(LastState._fields)])


def _shrinking(
    trip: Callable[[Rows, Carry], Carry], rows: Rows, carry: Carry, smaller: tuple[int, ...]
) -> Carry:
    """Trips of the batch until no row runs, or until at most ``smaller[0]`` do: those
    are then gathered into a batch of ``smaller[0]`` rows that goes on (shrinking to
    the sizes after it), and put back in their places."""
    limit = smaller[0] if smaller else 0

    def going(carry: Carry) -> jax.Array:
        return reduce.total(busy(carry[1].status), dtype=jnp.int32) > limit

    carry = jax.lax.while_loop(going, lambda carry: trip(rows, carry), carry)
    if not smaller:
        return carry
    iteration, state = carry
    total = state.status.shape[-1]
    index = first_true(busy(state.status), limit)  # padded with total
    inside = jnp.minimum(index, total - 1)
    part_rows, part = jax.tree.map(lambda a: jnp.take(a, inside, axis=-1), (rows, state))
    # A slot left empty holds a copy of the last row, stopped: its results are dropped.
    part = part._replace(status=jnp.where(index < total, part.status, _STOPPED))
    iteration, part = _shrinking(trip, part_rows, (iteration, part), smaller[1:])
    put = jax.tree.map(lambda a, b: a.at[..., index].set(b, mode="drop"), state, part)
    return iteration, put


def _where(rows: jax.Array, new: jax.Array, old: jax.Array) -> jax.Array:
    """``new`` in the ``rows`` (a ``(B,)`` mask), ``old`` elsewhere; batch-last arrays."""
    return jnp.where(rows.reshape((1,) * (new.ndim - 1) + rows.shape), new, old)


def _waiting(solver: Solver[Any], state: LoopState) -> LoopState:
    """``state``, PENDING where its verdict is to be checked (``to_certify``)."""
    if not checks(solver):
        return state
    return state._replace(status=jnp.where(to_certify(solver, state), PENDING, state.status))


def _certify_waiting(
    solver: Solver[Any],
    problem_of: Callable[[Rows], Problem],
    stopping: Stopping,
    rows: Rows,
    state: LoopState,
) -> LoopState:
    """The PENDING rows' verdicts checked (``fixedopt._driver.loop.certify``), in a
    ``lax.cond`` that runs where any row waits: the whole batch checked, the others'
    results dropped."""
    waiting = state.status == PENDING

    def one(row: Any, state: LoopState) -> LoopState:
        state = state._replace(status=jnp.full_like(state.status, Status.CONVERGED))
        return certify(solver, problem_of(row), state, stopping)

    def check(state: LoopState) -> LoopState:
        checked = _by_row(one)(rows, state)
        chosen: LoopState = jax.tree.map(lambda a, b: _where(waiting, a, b), checked, state)
        return chosen

    certified: LoopState = jax.lax.cond(reduce.any_true(waiting), check, lambda s: s, state)
    return certified
