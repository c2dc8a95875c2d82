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
            solve = jax.jit(call)
            with timing.compile_monitor() as compiles:
                compiled = solve.lower(*inputs).compile()
            memory = compiled.memory_analysis()
            record = {"kind": "memory", "B": batch, "n": n, "chunk_size": chunk,
                      "temp_bytes": int(memory.temp_size_in_bytes),
                      "argument_bytes": int(memory.argument_size_in_bytes),
                      "output_bytes": int(memory.output_size_in_bytes),
                      "compile_s": compiles.seconds}  # fmt: skip
            if batch <= timed_batch:
                call = lambda: jax.block_until_ready(compiled(*inputs))  # noqa: B023
                seconds, solution = timing.timed(call)
                record |= {"time_s": seconds, "converged": float(np.mean(solution.converged))}
            records.append(record)
    return records


def run(quick: bool, args) -> list[dict]:
    """Stragglers (B=4096; quick: 256) and, unless ``--stragglers-only``, peak memory."""
    batch, sizes, chunk = (
        (64, (2_000,), 512) if quick else (4096, (10**5, 3 * 10**5, 10**6), 16_384)
    )
    records = run_plan(Plan(grid(("quad", "straggler"), ((batch, 32),), STRAGGLER)), args)
    return records + ([] if args.stragglers_only else peak_memory(sizes, chunk))
