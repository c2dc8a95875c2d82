"""The lanes' static layout (:class:`LaneLayout`: how the rows' data, their loop states
and their reports are packed, :mod:`fixedopt._driver.packing`) and what the loop reports
of each row (:data:`LastState`, :func:`reported`)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, NamedTuple, TypeAlias

import jax

from fixedopt._driver.loop import LoopState, RowState
from fixedopt._driver.packing import Packing

# What the loop reports of each row: its last iterate and how it stopped (the fields of
# its LoopState, the loop's own None); and, where asked, the solver's J^T J at that
# iterate in place of the solver's state (Solver.normal_matrix; else None).
LastState: TypeAlias = RowState[None]


class LaneLayout(NamedTuple):
    """The static layout of a solve through lanes."""

    data: Packing  # of the lanes' rows' data
    state: Packing  # of their loop states
    results: Packing  # of the rows' LastStates
    always_new: tuple[Any, ...]  # state's columns a stopped lane takes anyway (solver state)
    normal_of: Callable[[Any], Any] | None  # a solver state's J^T J, reported; None: not


def layout(
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
        Packing.of(_reported_shapes(started, normal_of), vectors=True, words=True),
        state.columns(flags),
        normal_of,
    )


def reported(state: LoopState, normal_of: Callable[[Any], Any] | None = None) -> LastState:
    """What the loop reports of a row in ``state`` (``normal_of``: its normal matrix):
    its fields, the loop's own None. Every field named (not ``state._replace``, whose
    fields keep the state's types): a field added to :class:`RowState` is decided here,
    mypy's missing argument until it is."""
    normal = None if normal_of is None else normal_of(state.solver_state)
    return RowState(x=state.x, value=state.value, grad=state.grad, grad_norm=state.grad_norm,
                    steps=state.steps, status=state.status, reason=state.reason,
                    gamma=None, initial_value=None, doubted=None,
                    solver_state=normal, flat_steps=None)  # fmt: skip


def _rows_of_one(a: jax.ShapeDtypeStruct) -> jax.ShapeDtypeStruct:
    return jax.ShapeDtypeStruct((1, *a.shape), a.dtype)


def _reported_shapes(state: LoopState, normal_of: Callable[[Any], Any] | None) -> LastState:
    """:func:`reported` of a state's shapes (``normal_of`` may compute)."""
    return jax.eval_shape(functools.partial(reported, normal_of=normal_of), state)  # type: ignore[no-any-return]
