"""A batch as contiguous chunks, each solved whole: for a machine whose row gathers are dear.

The lanes (:mod:`fixedopt._driver.lanes`) refill as rows stop: a refill gathers the next
rows' data and scatters the stopped rows' results. A TPU keeps the rows on an array's
minor axis, where a gather or scatter of rows costs about 4 ns an entry: 227 of the
282 ms of Gpufit's 1e6 fits went to the refills, 40 to the steps (``docs/decisions.md``,
"Gpufit's refill on a TPU"). So there (``Backend.chunk_rows``, least squares) a batch
runs as ``B / C`` chunks of ``C`` rows, one after another (``lax.map``), every row of a
chunk in a lane from the start: read and written contiguously, never gathered.

A chunk runs to its slowest row, so a straggler would cost its chunk's every trip: a
chunk stops once at most ``Backend.tail_lanes`` of its rows have run alone for
``tail_patience`` trips, and those rows (at most ``tail_lanes`` a chunk) are solved
again from their starts after the chunks, every one in a lane, gathered and written back
once. A row solved in its chunk or again agrees with the lanes' solve of it to rounding
(another program: :mod:`fixedopt._driver.lanes` on a row's bits). A chunk wholly beyond
the rows to solve (``count``: a batch padded to its compiled size) is skipped; a batch
that chunks do not divide (traced in a caller's ``jit``) fills its last chunk with copies
of row 0.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

from fixedopt._contract.status import busy
from fixedopt._driver.lane_layout import LastState
from fixedopt._driver.loop import Resume
from fixedopt._numerics import reduce

# (rows, x, resume[, tail]) -> every row's LastState, all rows in lanes (lanes._whole_batch)
Whole = Callable[..., LastState]


def solve(
    whole: Whole,
    chunk: int,
    tail: tuple[int, int],
    rows: Any,
    x: jax.Array,
    resume: Resume | None,
    count: jax.Array | None,
) -> LastState:
    """Every row of ``rows`` (starts ``x``, ``(B, n)``) solved by ``whole`` in chunks of
    ``chunk`` rows (the last filled up with copies of row 0), each stopped at its
    ``tail`` (``(lanes, patience)``), its tail's rows solved again together; rows from
    ``count`` on (None: none) may be left unsolved, for the caller to drop."""
    rows_given = x.shape[0]
    limit = rows_given if count is None else count
    filled = -(-rows_given // chunk) * chunk
    rows, x, resume = jax.tree.map(lambda a: _filled(a, filled), (rows, x, resume))
    states = _chunks(whole, chunk, tail, (rows, x, resume), limit, count is not None)
    return jax.tree.map(lambda a: a[:rows_given], states)  # type: ignore[no-any-return]


def _filled(a: jax.Array, rows: int) -> jax.Array:
    """``a`` (rows first) with copies of its row 0 after its rows, to ``rows`` rows."""
    more = rows - a.shape[0]
    return jnp.concatenate([a, jnp.repeat(a[:1], more, axis=0)]) if more else a


def _chunks(whole: Whole, chunk: int, tail: tuple[int, int], given: Any,
            limit: jax.Array | int, skips: bool) -> LastState:  # fmt: skip
    """:func:`solve` of a batch ``given`` (rows, starts, resumes) of whole chunks; rows
    from ``limit`` on may be left unsolved (``skips``: chunks wholly beyond it are)."""
    total = given[1].shape[0]
    pieces = jax.tree.map(lambda a: a.reshape(total // chunk, chunk, *a.shape[1:]),
                          given)  # fmt: skip
    blank = jax.eval_shape(lambda p: whole(*p, tail=tail), jax.tree.map(lambda a: a[0], pieces))

    def one(first: jax.Array, piece: Any) -> LastState:
        def solved() -> LastState:
            return whole(*piece, tail=tail)

        def skipped() -> LastState:
            return jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), blank)  # type: ignore[no-any-return]

        return jax.lax.cond(first < limit, solved, skipped) if skips else solved()

    firsts = jnp.arange(0, total, chunk)
    states = jax.lax.map(lambda a: one(*a), (firsts, pieces))
    states = jax.tree.map(lambda a: a.reshape(total, *a.shape[2:]), states)
    left = busy(states.status) & (jnp.arange(total) < limit)
    size = total // chunk * tail[0]
    again = lambda s: _again(whole, size, left, s, given)
    return jax.lax.cond(reduce.any_true(left), again, lambda s: s, states)  # type: ignore[no-any-return]


def _again(whole: Whole, size: int, left: jax.Array, states: LastState, given: Any) -> LastState:
    """``states`` with the rows ``left`` (at most ``size``) solved again from ``given``
    (their rows, starts and resumes), all in lanes, written back."""
    (index,) = jnp.nonzero(left, size=size, fill_value=left.shape[0])
    taken = jnp.minimum(index, left.shape[0] - 1)  # a filler takes the last row, dropped
    solved = whole(*jax.tree.map(lambda a: a[taken], given))
    return jax.tree.map(lambda a, b: a.at[index].set(b, mode="drop"), states, solved)  # type: ignore[no-any-return]
