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
computed for it is dropped), and the loop ends when no row runs. There is no refill:
a trip costs every row of the batch, so the batch costs as many trips as its slowest
row. A row's result depends on its own data only, whatever its neighbours (the same
elementwise program for every row).

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
) -> LastState:
    """Run every row of a batch (``rows``' leaves and ``x``, ``(B, n)``, rows first)
    until each stops, the batch held on the minor axis; the :class:`LastState` of every
    row, rows first."""
    minor_rows, minor_x = jax.tree.map(_to_minor, (rows, x))
    final = _iterate(solver, problem_of, minor_rows, minor_x, stopping)
    reported: LastState = jax.tree.map(_to_major, final)
    return reported


def _to_minor(a: jax.Array) -> jax.Array:
    return jnp.moveaxis(a, 0, -1)


def _to_major(a: jax.Array) -> jax.Array:
    return jnp.moveaxis(a, -1, 0)


def _by_row(function: Callable[..., Any]) -> Callable[..., Any]:
    """``function`` of one row, mapped over the last axis of its arguments and results."""
    return jax.vmap(function, in_axes=-1, out_axes=-1)


def _iterate(
    solver: Solver[Any],
    problem_of: Callable[[Rows], Problem],
    rows: Rows,
    x: jax.Array,
    stopping: Stopping,
) -> LastState:
    """:func:`iterate_minor` on batch-last ``rows`` and ``x`` (``(n, B)``)."""

    def start_row(row: Any, x: jax.Array) -> LoopState:
        return _waiting(solver, start(solver, problem_of(row), x, stopping))

    def step_row(row: Any, state: LoopState, running: jax.Array, iteration: jax.Array) -> LoopState:
        context = StepContext(running, iteration)
        new = advance(solver, problem_of(row), state, stopping, context, check=False)
        return _waiting(solver, new)

    step_rows = jax.vmap(step_row, in_axes=(-1, -1, -1, None), out_axes=-1)

    def body(carry: tuple[jax.Array, LoopState]) -> tuple[jax.Array, LoopState]:
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

    def going(carry: tuple[jax.Array, LoopState]) -> jax.Array:
        return reduce.any_true(busy(carry[1].status))

    first = _by_row(start_row)(rows, x)
    if checks(solver):  # starts that met a test are checked before any step
        first = _certify_waiting(solver, problem_of, stopping, rows, first)
    _, final = jax.lax.while_loop(going, body, (jnp.zeros((), jnp.int32), first))
    return LastState(*final[: len(LastState._fields)])


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
