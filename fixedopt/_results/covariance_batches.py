"""How a batch's covariance runs outside a solve: in chunks of rows on the host (a CPU),
or on a device by the quick paths with LAPACK's rows on the host's CPU.

The program is :data:`fixedopt._results.covariance_program.compiled`; a runner here calls
it by path (``run(path)(leaves, rows)``). On the CPU at the top level, a batch runs in
chunks of a fixed number of rows (:func:`fixedopt._numerics.buckets.in_chunks`), so that
a new batch size compiles nothing new, every row by the first path and those it does not
certify again by the next (:func:`on_host`). On a device whose machine profile says so
(``fixedopt._driver.machine.covariance_on_device``: a TPU, whose SVD and QR compile for
seconds), every row by the quick paths in one call on the device, the rows they do not
certify by LAPACK's on the host's CPU (:func:`on_device`, :func:`one_on_device`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import numpy as np

from fixedopt._inputs.validate import PyTree
from fixedopt._numerics import buckets
from fixedopt._numerics.trace_state import at_top_level
from fixedopt._results.covariance_fields import Covariance
from fixedopt._results.covariance_program import EXACT, ON_DEVICE

# ``run(path)``: the compiled covariance of a chunk's flat leaves by ``path``, called as
# ``(leaves, rows)`` (rows: the chunk's real rows), giving (covariance, certified, derived).
Runner = Callable[[str], Callable[[tuple[Any, ...], int], Any]]

# A large batch runs in chunks of up to this many bytes of its rows' inputs, of at most
# LARGE_ROWS rows, where it has four of them or more: a call's overhead costs more than
# small rows do (Gpufit's spot, 100,000 fits: 391 calls of 256 rows took 1.5x the time of
# 49 of 2048, measured under load by an earlier try). A row's result is the same in any
# chunk: the programs' sums do not depend on the batch's size (ROW_WISE_OPTIONS).
LARGE_BYTES = 1 << 22
LARGE_ROWS = 4096


def chunk_rows(leaves: tuple[Any, ...], flags: tuple[bool, ...], batch: int) -> int | None:
    """Rows per chunk of a large batch (None: :func:`buckets.in_chunks`' own)."""
    row_bytes = sum(np.dtype(leaf.dtype).itemsize * int(np.prod(np.shape(leaf)[1:]))
                    for leaf, flag in zip(leaves, flags) if flag)  # fmt: skip
    rows = min(LARGE_ROWS, 1 << max(LARGE_BYTES // max(row_bytes, 1), 1).bit_length() - 1)
    return rows if rows > buckets.CHUNK_ROWS and batch >= 4 * rows else None


def device_here(on_device: bool, leaves: list[Any]) -> bool:
    """Whether a call with these leaves takes :func:`on_device` (or
    :func:`one_on_device`): the machine profile's choice ``on_device``, called at the
    top level, no weakly typed leaf."""
    weak = any(getattr(leaf, "weak_type", False) for leaf in leaves)
    return on_device and at_top_level() and not weak


def on_device(
    run: Runner, leaves: tuple[Any, ...], flags: tuple[bool, ...]
) -> tuple[Covariance, PyTree]:
    """Every row by the quick paths (:data:`ON_DEVICE`) in one call on the device, and
    the rows they do not certify again by LAPACK's on the host's CPU, in chunks, as a
    CPU computes them (its program compiles only for a batch that has such a row)."""
    found, certified, extra = run(ON_DEVICE)(leaves, 0)
    redo = np.flatnonzero(~np.asarray(certified))
    if redo.size == 0:
        return found, extra
    rows = tuple(np.asarray(leaf)[redo] if flag else np.asarray(leaf)
                 for leaf, flag in zip(leaves, flags))  # fmt: skip
    with jax.default_device(jax.devices("cpu")[0]):
        again, _ = on_host(run, rows, flags, redo.size, (EXACT,), None)
    return put_back(found, again, redo), extra


def one_on_device(run: Runner, leaves: tuple[Any, ...]) -> tuple[Covariance, PyTree]:
    """One fit's covariance as :func:`on_device` computes a row: by the quick paths on
    the device, and if they do not certify it, by LAPACK's on the host's CPU."""
    found, certified, extra = run(ON_DEVICE)(leaves, 0)
    if bool(np.asarray(certified)):
        return found, extra
    host = tuple(np.asarray(leaf) for leaf in leaves)
    with jax.default_device(jax.devices("cpu")[0]):
        again, _, _ = run(EXACT)(host, 0)
    placed: Covariance = jax.tree.map(lambda a: jax.device_put(np.asarray(a)), again)
    return placed, extra


def on_host(
    run: Runner,
    leaves: tuple[Any, ...],
    flags: tuple[bool, ...],
    batch: int,
    paths: tuple[str, ...],
    size: int | None,
) -> tuple[Covariance, PyTree]:
    """Every row by the first of ``paths``, and the rows it did not certify again by
    the next ones, gathered on the host: each row's covariance is its own, whatever the
    rows around it (a choice for a whole chunk changed a row's last bits with its
    neighbours: docs/decisions.md, "Why the covariance was slow"), and a later path's
    program compiles only for a batch that needs it."""
    found, certified, extra = buckets.in_chunks(run(paths[0]), leaves, flags, batch, size)
    redo = np.flatnonzero(~np.asarray(certified)) if len(paths) > 1 else np.zeros(0, int)
    if redo.size == 0:
        return found, extra
    rows = tuple(np.asarray(leaf)[redo] if flag else leaf for leaf, flag in zip(leaves, flags))
    again, _ = on_host(run, rows, flags, redo.size, paths[1:], None)
    return put_back(found, again, redo), extra


def put_back(found: Covariance, again: Covariance, redo: np.ndarray) -> Covariance:
    """``found`` with its rows ``redo`` those of ``again``, on the default device."""

    def put(every: jax.Array, some: jax.Array) -> jax.Array:
        host = np.array(every)
        host[redo] = np.asarray(some)
        put_back: jax.Array = jax.device_put(host)
        return put_back

    joined: Covariance = jax.tree.map(put, found, again)
    return joined
