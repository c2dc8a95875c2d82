"""The scale suite: stragglers (one ill-conditioned row) under plain ``vmap`` vs
lanes, and XLA's peak memory of batched solves up to 1e6 rows, both ways."""

import time

import jax
import numpy as np

from benchmarks import timing
from benchmarks.cases import SEED
from benchmarks.methods import WHOLE_BATCH, Settings, fixedopt_call
from benchmarks.suites import Plan, grid, run_plan
from fixedopt.testing_problems import quad


def peak_memory(sizes, n: int = 8, timed_batch: int = 100_000) -> list[dict]:
    """XLA memory of the solve per batch size, through the default lanes and as one
    whole-batch vmap; time up to 1e5 rows."""
    records = []
    for batch in sizes:
        problem = quad(batch, n, SEED)
        for lanes in (None, WHOLE_BATCH):
            call, inputs = fixedopt_call(problem, Settings(), lanes=lanes)
            program, stats = timing.compiled(jax.jit(call), *inputs)
            shown = "whole batch" if lanes else "default"
            record = {"kind": "memory", "B": batch, "n": n, "lanes": shown, **stats}
            if batch <= timed_batch:
                start = time.perf_counter()
                solution = jax.block_until_ready(program(*inputs))
                record["time_s"] = time.perf_counter() - start
                record["converged"] = float(np.mean(solution.converged))
            records.append(record)
    return records


def run(quick: bool, args) -> list[dict]:
    """Stragglers (n=32, B from 1024 to 16384: a clean batch and the same with one
    ill-conditioned row) and peak memory (lane widths: the study 2026-12-04-lane_widths)."""
    sizes = (2_000,) if quick else (10**5, 3 * 10**5, 10**6)
    methods = ("fixedopt-mask-vmap", "fixedopt-mask")  # plain vmap, then the default
    straggling = ((16, 8),) if quick else ((1024, 32), (4096, 32), (16384, 32))
    cases = grid(("quad", "straggler"), straggling, methods)
    return run_plan(Plan(cases), args) + peak_memory(sizes)
