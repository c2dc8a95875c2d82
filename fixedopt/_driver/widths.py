"""How many lanes a batch runs through by default, and the CPU's block of rows.

The widths follow the cost of a trip of the lanes (:mod:`fixedopt._driver.lanes`): a
part that does not grow with the lanes (the loop's test, a refill, the solver's scalars)
and a part per lane (its arithmetic and bytes), which on a CPU must stay in cache.
"""

from __future__ import annotations

from typing import Any

import jax

# The default number of lanes. On a CPU: as many rows as fit half of a core's L2 cache
# (1 MiB on the EPYC cores these defaults were measured on: benchmarks/results, suite
# ``scale``), so a step's working set stays in cache (a row's data, its loop state and
# a least-squares Jacobian the step holds in memory), but at least 64: a trip also has
# a part that does not grow with its lanes (the loop's test, the refill, the solver's
# per-trip scalars), and rows of a few kB (L-BFGS at n = 64, n = 512) fit 5-34 to the
# cache but ran 6-24% slower than at 64-256 lanes (docs/decisions.md, "Lane widths on the CPU"). On
# an accelerator, enough rows to fill it. Never more than an eighth of the rows compiled
# for (on the CPU a block of them: _driver.batching), so that slow rows overlap with
# others, and never fewer than 8.
CPU_CACHE_BYTES = 1 << 19
CPU_FEWEST_LANES = 64
CPU_MOST_LANES = 4096
ACCELERATOR_LANES = 1 << 16
# The tail (CPU blocks, _driver.batching): a lanes loop whose queue has ended and whose
# last TAIL_LANES or fewer running rows have run TAIL_PATIENCE trips alone stops, and
# those rows are solved again from their starts, TAIL_LANES wide (a program of its own,
# compiled when a model first has such a tail; their steps in the block are lost). A
# lone trip of 64 lanes cost 0.40 ms where the row's own step costs 24-37 us
# (docs/decisions.md, "One degenerate spectrum in 2,000"); TAIL_PATIENCE lone trips (a
# few ms) are what a batch without a straggler can pay, whose last rows stop within a
# few trips of the queue's end.
TAIL_LANES = 2
TAIL_PATIENCE = 16


def lanes_for(width: int | None, total: int, one_row: Any, step_bytes: int, backend: str) -> int:
    """The lanes for ``total`` rows: ``width`` (None: :func:`default_width`, for rows
    whose data and loop state are ``one_row``'s and whose step holds ``step_bytes``
    more), at most ``total``."""
    if width is None:
        state_bytes = sum(a.size * a.dtype.itemsize for a in jax.tree.leaves(one_row))
        width = default_width(total, state_bytes + step_bytes, backend)
    return min(width, total)


def default_width(batch: int, row_bytes: int, backend: str) -> int:
    """The default number of lanes for ``batch`` rows whose loop state takes
    ``row_bytes`` bytes each, on ``backend`` ("cpu", "gpu", "tpu", ...)."""
    width = _cpu_lanes(row_bytes) if backend == "cpu" else ACCELERATOR_LANES
    return min(batch, max(min(width, -(-batch // 8)), 8))


def _cpu_lanes(row_bytes: int) -> int:
    """The CPU's lanes for rows of ``row_bytes`` bytes, before the batch bounds them:
    those that fit the cache, within ``CPU_FEWEST_LANES`` and ``CPU_MOST_LANES``."""
    in_cache = CPU_CACHE_BYTES // max(row_bytes, 1)
    return min(CPU_MOST_LANES, max(CPU_FEWEST_LANES, in_cache))


def block_rows(data_bytes: int) -> int:
    """On a CPU, the rows of the one size in which a batch whose rows' data take
    ``data_bytes`` bytes each is compiled (:mod:`fixedopt._driver.batching`): at least 8
    rows for each of the :func:`default_width` lanes (a row's loop state holds its data,
    so the width from a row's bytes is at most ``CPU_CACHE_BYTES // data_bytes``), a
    power of two."""
    lanes = _cpu_lanes(data_bytes)
    return 8 * (1 << (lanes - 1).bit_length())
