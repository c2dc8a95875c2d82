"""Rows padded to a size that the batch does not set: one compiled program serves many
batch sizes.

A compiled program is specialised to its arrays' shapes, so a new batch size ``B`` would
compile it again. Here a batch's rows are padded with copies of row 0 to a size ``P``
(:func:`bucket`, the next power of two; the solve's own sizes are chosen in
:mod:`fixedopt._driver.batching`), and the true count travels as data. The lanes never
take a padded row (their queue ends at ``B``) and leave its report empty; the results
are cut back to ``B`` rows (:func:`first_rows`) before anything else reads them (the
derivative rule, the covariance: programs of their own). The padding costs memory for
the inputs and results only, no steps. A program that maps each row on its own (the
covariance) runs in chunks of a fixed number of rows instead (:func:`in_chunks`).
"""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from fixedopt._numerics import backends
from fixedopt._numerics.trace_state import at_top_level

SMALLEST = 8


def bucket(batch: int) -> int:
    """The batch size a solve of ``batch`` rows is compiled for: the next power of two,
    at least :data:`SMALLEST`."""
    return max(SMALLEST, 1 << max(batch - 1, 0).bit_length())


def on_one_device(leaves: list[Any]) -> bool:
    """Whether no leaf is spread over several devices (a sharded batch keeps its size)."""
    for leaf in leaves:
        sharding = getattr(leaf, "sharding", None)
        if sharding is not None and len(sharding.device_set) > 1:
            return False
    return True


def pad_rows(
    leaves: tuple[jax.Array, ...], size: int, padded: tuple[bool, ...], on_host: bool
) -> tuple[Any, ...]:
    """Each leaf flagged in ``padded`` grown to ``size`` rows with copies of its row 0;
    the others as they are. ``on_host`` (the machine profile's
    ``Backend.rows_on_host``: a CPU, whose memory is the host's; on an accelerator,
    rows mostly on the host until their program is compiled:
    ``fixedopt._driver.batching``), in NumPy: no program to compile for each new batch
    size, which costs more than the copy; else, or for a weakly typed leaf (NumPy
    would make it strong), one small compiled program per set of shapes."""
    if on_host and not any(getattr(leaf, "weak_type", False) for leaf in leaves):
        return tuple(_pad_on_host(leaf, size) if flag else leaf
                     for leaf, flag in zip(leaves, padded))  # fmt: skip
    grown: tuple[Any, ...] = _pad_compiled(leaves, size, padded)
    return grown


def lowered_pad(leaves: tuple[Any, ...], size: int, padded: tuple[bool, ...]) -> Any:
    """:func:`pad_rows`' program for these arguments, traced and lowered (to compile
    ahead: ``fixedopt._driver.ahead.soon``)."""
    return _pad_compiled.lower(leaves, size, padded)


def mostly_on_host(leaves: list[Any]) -> bool:
    """Whether the leaves on the device (``jax.Array``) hold at most as many bytes as
    those on the host (NumPy's): copied to the host and back, they cost no more than
    the transfer of the others that a call makes anyway (Gpufit's spot: its mask,
    100,000 x 5 booleans, beside 14 MB of NumPy data). None on the host: False."""
    on_device = sum(leaf.nbytes for leaf in leaves if isinstance(leaf, jax.Array))
    host = sum(np.asarray(leaf).nbytes for leaf in leaves if not isinstance(leaf, jax.Array))
    return host > 0 and on_device <= host


def _pad_on_host(leaf: Any, size: int) -> Any:
    host = np.asarray(leaf)
    extra = np.broadcast_to(host[:1], (size - host.shape[0], *host.shape[1:]))
    return np.concatenate([host, extra])


@functools.partial(jax.jit, static_argnums=(1, 2))
def _pad_compiled(leaves: tuple[jax.Array, ...], size: int, padded: tuple[bool, ...]) -> Any:
    def pad(leaf: jax.Array) -> jax.Array:
        extra = jnp.broadcast_to(leaf[:1], (size - leaf.shape[0], *leaf.shape[1:]))
        return jnp.concatenate([leaf, extra])

    return tuple(pad(leaf) if flag else leaf for leaf, flag in zip(leaves, padded))


def first_rows(tree: Any, count: int, on_host: bool) -> Any:
    """Every leaf of ``tree`` cut to its first ``count`` rows: ``on_host`` (as in
    :func:`pad_rows`) a copy from host memory (nothing to compile); else one small
    compiled program."""
    if on_host:
        return jax.tree.map(lambda leaf: jax.device_put(np.asarray(leaf)[:count]), tree)
    return _first_rows_compiled(tree, count)


@functools.partial(jax.jit, static_argnums=1)
def _first_rows_compiled(tree: Any, count: int) -> Any:
    return jax.tree.map(lambda leaf: leaf[:count], tree)


# Rows per call of a program mapped over a batch in chunks (:func:`in_chunks`).
CHUNK_ROWS = 256


def chunks_here(leaves: Any) -> bool:
    """Whether a batch with these leaves can run in chunks (:func:`in_chunks`): where the
    profile of the default device's platform says so (``Backend.chunked``: the CPU),
    called at the top level, no weakly typed leaf (NumPy would make it strong)."""
    weak = any(getattr(leaf, "weak_type", False) for leaf in jax.tree.leaves(leaves))
    return not weak and backends.defaults().chunked and at_top_level()


def map_in_chunks(compute: Any, inputs: tuple[Any, ...], batched: tuple[bool, ...],
                  batch: int) -> Any:  # fmt: skip
    """``compute(*inputs)``, run by :func:`in_chunks` where :func:`chunks_here` (else in
    one call): ``batched`` flags the leaves of ``inputs`` (in ``jax.tree.leaves`` order)
    that have the batch axis of ``batch`` rows."""
    leaves, treedef = jax.tree.flatten(inputs)
    if not chunks_here(leaves):
        return compute(*inputs)
    return in_chunks(lambda chunk, _: compute(*jax.tree.unflatten(treedef, chunk)),
                     tuple(leaves), batched, batch)  # fmt: skip


def in_chunks(
    compute: Any, leaves: tuple[Any, ...], batched: tuple[bool, ...], batch: int,
    size: int | None = None,
) -> Any:  # fmt: skip
    """``compute(chunk, rows)`` for a batch of ``batch`` rows, called on chunks of
    ``size`` rows (default: :data:`CHUNK_ROWS`, or :data:`SMALLEST` for at most that
    many rows, as the solve's own whole-batch program for them), the last one padded
    with copies of its first row (``rows``: the chunk's real rows), and the outputs'
    rows put together on the host: one compiled program for every batch size of more
    than :data:`SMALLEST` rows, at most a chunk's rows computed for nothing. ``batched``
    flags the leaves with the batch axis; ``compute`` maps each row on its own (its
    rows do not interact). For the CPU, where the host's memory is the device's
    (:func:`chunks_here`)."""
    if size is None:
        size = chunk_size(batch)
    outputs = []
    for start in range(0, batch, size):
        chunk = tuple(rows_on_host(leaf, start, size) if flag else leaf
                      for leaf, flag in zip(leaves, batched))  # fmt: skip
        outputs.append(compute(chunk, min(size, batch - start)))

    def joined(*parts: Any) -> Any:  # only the last chunk is padded
        return jax.device_put(np.concatenate([np.asarray(part) for part in parts])[:batch])

    return jax.tree.map(joined, *outputs)


def chunk_size(batch: int) -> int:
    """:func:`in_chunks`' own rows per chunk for a batch of ``batch`` rows."""
    return SMALLEST if batch <= SMALLEST else CHUNK_ROWS


def rows_on_host(leaf: Any, start: int, size: int) -> Any:
    """Rows ``start`` to ``start + size`` of ``leaf`` in host memory, padded with
    copies of the first of them where the batch ends sooner."""
    rows = np.asarray(leaf)[start : start + size]
    return _pad_on_host(rows, size) if rows.shape[0] < size else rows
