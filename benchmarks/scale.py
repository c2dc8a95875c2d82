"""The scale suite: stragglers (one ill-conditioned row) under plain ``vmap`` vs
compaction, and XLA's peak memory of batched solves up to 1e6 rows, whole and chunked."""

from __future__ import annotations

import time

import jax
import numpy as np

from benchmarks import timing
from benchmarks.cases import SEED
from benchmarks.methods import Settings, fixedopt_call
from benchmarks.problems import quad
from benchmarks.suites import Plan, grid, run_plan


def peak_memory(sizes, chunk_size: int, n: int = 8, timed_batch: int = 100_000) -> list[dict]:
    """XLA memory of the solve per batch size, whole and in chunks; time up to 1e5 rows."""
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
    """Stragglers (B=4096, n=32) and, unless ``--stragglers-only``, peak memory."""
    sizes, chunk = ((2_000,), 512) if quick else ((10**5, 3 * 10**5, 10**6), 16_384)
    methods = ("fixedopt-mask-nocompact", "fixedopt-mask")  # plain vmap, then the default
    stragglers = grid(("quad", "straggler"), ((16, 8) if quick else (4096, 32),), methods)
    records = run_plan(Plan(stragglers), args)
    return records + ([] if args.stragglers_only else peak_memory(sizes, chunk))
