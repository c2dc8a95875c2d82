"""The scale suite: the straggler tax of ``vmap`` against compaction, and peak memory.

1. Stragglers: the ``quad`` batch (B=4096, n=32) timed with and without its last row
   replaced by an ill-conditioned one (the ``straggler`` problem), for
   ``compact=False`` (plain ``vmap``: every row pays the slowest row's steps) and the
   default ``compact=None`` (compaction from 4096 rows): one interleaved case, with the
   rows whose step count differs under compaction.
2. Peak memory: XLA's memory analysis of the compiled batched solve for B = 1e5, 3e5,
   1e6 small problems (n=8) with and without ``chunk_size``, and the time of the B=1e5
   solves.
"""

from __future__ import annotations

import time

import jax
import numpy as np

from benchmarks import timing
from benchmarks.cases import SEED
from benchmarks.methods import Settings, fixedopt_call
from benchmarks.problems import quad
from benchmarks.suites import Plan, grid, run_plan

STRAGGLER = ("fixedopt-mask-nocompact", "fixedopt-mask")  # plain vmap, then the default


def peak_memory(sizes, chunk_size: int, n: int = 8, timed_batch: int = 100_000) -> list[dict]:
    """Memory of the compiled solve per batch size, whole and in chunks; time up to
    ``timed_batch`` rows."""
    records = []
    for batch in sizes:
        problem = quad(batch, n, SEED)
        for chunk in (None, chunk_size):
            call, inputs = fixedopt_call(problem, Settings(), chunk_size=chunk)
            program, stats = timing.compiled(jax.jit(call), *inputs)
            record = {"kind": "memory", "B": batch, "n": n, "chunk_size": chunk, **stats}
            if batch <= timed_batch:
                start = time.perf_counter()
                solution = jax.block_until_ready(program(*inputs))
                record["time_s"] = time.perf_counter() - start
                record["converged"] = float(np.mean(solution.converged))
            records.append(record)
    return records


def run(quick: bool, args) -> list[dict]:
    """Stragglers (B=4096; quick: 256) and, unless ``--stragglers-only``, peak memory."""
    batch, sizes, chunk = (
        (64, (2_000,), 512) if quick else (4096, (10**5, 3 * 10**5, 10**6), 16_384)
    )
    records = run_plan(Plan(grid(("quad", "straggler"), ((batch, 32),), STRAGGLER)), args)
    return records + ([] if args.stragglers_only else peak_memory(sizes, chunk))
