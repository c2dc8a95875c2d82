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
again from their starts by one more turn of the same loop, gathered into a chunk of
their own (copies of one of them fill it) and written back: the program holds one
solve (a second loop for them compiled for 43 s on a TPU, "Chunks solved whole on a
TPU"). A row solved in its chunk or again agrees with the lanes' solve of it to rounding
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
    ``tail`` (``(lanes, patience)``), then the rows left solved again together; rows
    from ``count`` on (None: none) may be left unsolved, for the caller to drop."""
    given = x.shape[0]
    limit = given if count is None else count
    filled = -(-given // chunk) * chunk
    batch = jax.tree.map(lambda a: _filled(a, filled), (rows, x, resume))
    turns = filled // chunk + 1  # the chunks, then their stragglers
    blank = jax.eval_shape(lambda b: whole(*b, tail=tail), _slice(batch, 0, chunk))
    states = jax.tree.map(lambda s: jnp.zeros((filled, *s.shape[1:]), s.dtype), blank)

    def turn(states: LastState, turn: jax.Array) -> tuple[LastState, None]:
        first = turn * chunk
        left = busy(states.status) & (jnp.arange(filled) < limit)
        index = _index(turn == turns - 1, first, left, chunk)
        last = turn == turns - 1
        piece = _piece(batch, index, last, first, chunk)
        # A chunk beyond the rows to solve stops at once (patience 0), as does the
        # stragglers' turn where no row is left; else that turn runs to its end.
        chunk_patience = jnp.where(first < limit, tail[1], 0)
        patience = jnp.where(last, jnp.where(reduce.any_true(left), _FOREVER, 0), chunk_patience)
        solved = whole(*piece, tail=(tail[0], patience))
        return _written(states, solved, index, last, first), None

    states = jax.lax.scan(turn, states, jnp.arange(turns))[0]
    return jax.tree.map(lambda a: a[:given], states)  # type: ignore[no-any-return]


_FOREVER = jnp.iinfo(jnp.int32).max  # the stragglers' turn: no patience


def _filled(a: jax.Array, rows: int) -> jax.Array:
    """``a`` (rows first) with copies of its row 0 after its rows, to ``rows`` rows."""
    more = rows - a.shape[0]
    return jnp.concatenate([a, jnp.repeat(a[:1], more, axis=0)]) if more else a


def _slice(tree: Any, first: int, rows: int) -> Any:
    return jax.tree.map(lambda a: a[first : first + rows], tree)


def _index(last: jax.Array, first: jax.Array, left: jax.Array, chunk: int) -> jax.Array:
    """The rows of a turn: the chunk's from ``first``, or in the last turn those
    ``left`` (their positions, then the batch's size: a filler, dropped when written)."""

    def stragglers() -> jax.Array:
        return jnp.nonzero(left, size=chunk, fill_value=left.shape[0])[0].astype(jnp.int32)

    def chunk_rows() -> jax.Array:
        return (first + jnp.arange(chunk)).astype(jnp.int32)

    return jax.lax.cond(last, stragglers, chunk_rows)  # type: ignore[no-any-return]


def _piece(batch: Any, index: jax.Array, last: jax.Array, first: jax.Array, chunk: int) -> Any:
    """A turn's rows of ``batch``: a chunk's, sliced (contiguous: a gather of rows costs a
    TPU about 4 ns an entry), or the stragglers', gathered at ``index``."""

    def chunk_rows() -> Any:
        return jax.tree.map(lambda a: jax.lax.dynamic_slice_in_dim(a, first, chunk, 0), batch)

    def stragglers() -> Any:
        return jax.tree.map(lambda a: a[jnp.minimum(index, a.shape[0] - 1)], batch)

    return jax.lax.cond(last, stragglers, chunk_rows)


def _written(states: LastState, solved: LastState, index: jax.Array, last: jax.Array,
             first: jax.Array) -> LastState:  # fmt: skip
    """``states`` with a turn's rows ``solved`` written: a chunk's in place, contiguous;
    the stragglers' at their ``index`` (a filler's dropped)."""

    def chunk() -> LastState:
        return jax.tree.map(  # type: ignore[no-any-return]
            lambda a, b: jax.lax.dynamic_update_slice_in_dim(a, b, first, 0), states, solved
        )

    def stragglers() -> LastState:
        return jax.tree.map(lambda a, b: a.at[index].set(b, mode="drop"), states, solved)  # type: ignore[no-any-return]

    return jax.lax.cond(last, stragglers, chunk)  # type: ignore[no-any-return]
