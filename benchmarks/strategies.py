"""``strategy="mask"`` vs ``strategy="split"`` on shared and per-row masks, and compiles.

Index splitting packs each row's free entries into a vector padded to a power of two,
so it can only save work when that width is well below ``n``: when few entries are
free, or when every row shares one mask (then the width is that mask's free count,
rounded up). With ~30% fixed per row the widest row almost always needs ``n``. The
solves here compare both strategies on the ``quad`` problem under four mask patterns.

Compilations: a new mask must never recompile the mask strategy; under ``split`` a new
free count compiles only when it changes the packed (power-of-two) width.
"""

from __future__ import annotations

import dataclasses

import jax
import numpy as np

import fixedopt
from benchmarks.base import Settings, as_row_results, device_inputs
from benchmarks.cases import PROBLEMS, SEED
from benchmarks.jax_methods import compiles_during, fixedopt_compiles_on_new_mask
from benchmarks.micro import interleaved_medians
from benchmarks.quality import quality, reference_values
from fixedopt._reparam import packed_width

PATTERNS = {  # name: (fixed fraction, one mask shared by every row)
    "per-row 30% fixed": (0.3, False),
    "shared 30% fixed": (0.3, True),
    "per-row 90% fixed": (0.9, False),
    "shared 90% fixed": (0.9, True),
}


def with_pattern(problem, fraction: float, shared: bool):
    rng = np.random.default_rng(SEED + 7)
    rows = 1 if shared else problem.batch
    fixed = np.broadcast_to(rng.random((rows, problem.size)) < fraction, problem.x0.shape)
    return dataclasses.replace(problem, fixed=np.array(fixed))


def _solve(problem, strategy: str, settings: Settings):
    x0, fixed, args = device_inputs(problem)

    def call():
        return jax.block_until_ready(
            fixedopt.minimize(
                problem.jax_fun,
                x0,
                fixed,
                args=args,
                batched=True,
                strategy=strategy,
                **settings.fixedopt_tolerances,
                max_steps=settings.max_steps,
            )
        )

    return call


def split_vs_mask(batch: int, n: int, rounds: int) -> list[dict]:
    """Whole solves of ``quad`` with both strategies, per mask pattern (public calls)."""
    settings, records = Settings(), []
    for pattern, (fraction, shared) in PATTERNS.items():
        problem = with_pattern(PROBLEMS["quad"](batch, n, SEED), fraction, shared)
        calls = {s: _solve(problem, s, settings) for s in ("mask", "split")}
        seconds = interleaved_medians(calls, rounds, inner=1)
        mask_rows, split_rows = (_rows(calls[s]()) for s in ("mask", "split"))
        reference = reference_values(problem, mask_rows)
        agree = quality(problem, split_rows, reference, settings.gtol)
        record = {
            "micro": "strategy",
            "problem": "quad",
            "B": batch,
            "n": n,
            "pattern": pattern,
            "split_width": packed_width(np.sum(~problem.fixed, axis=1), n),
            "mask_s": seconds["mask"],
            "split_s": seconds["split"],
            "split_vs_mask": seconds["split"] / seconds["mask"],
            "split_max_rel_obj_diff_vs_mask": agree["max_rel_obj_diff"],
            "steps_mean": float(np.mean(mask_rows.steps)),
        }
        records.append(record)
        print(
            f"strategy quad B={batch} n={n} {pattern:<18} width {record['split_width']:<4} "
            f"mask {record['mask_s']:.3f}s split {record['split_s']:.3f}s "
            f"({record['split_vs_mask']:.2f}x)",
            flush=True,
        )
    return records


def _rows(solution):
    return as_row_results(solution.x, solution.value, solution.steps, solution.converged)


def new_mask_compiles(batch: int, n: int) -> list[dict]:
    """Compilations of the public calls when only the mask changes (must be 0)."""
    records = []
    for name, size in (("quad", n), ("spectra", 10)):
        problem = PROBLEMS[name](batch, size, SEED)
        settings = Settings()
        kind = "least_squares" if problem.least_squares else "minimize"
        counts = fixedopt_compiles_on_new_mask(
            problem, settings, seed=SEED + 1, residuals=problem.least_squares is not None
        )
        records.append(
            {
                "micro": "new_mask",
                "call": kind,
                "problem": name,
                "B": batch,
                "n": size,
                **counts,
                "ok": counts["cache_growth"] in (0, None) and counts["backend_compiles"] == 0,
            }
        )
        print(f"new mask, {kind} {name}: {counts}", flush=True)
    return records


def split_compiles(batch: int, n: int, free_counts) -> list[dict]:
    """Under ``split``, one solve per largest free count: which ones compile.

    The objective is a fresh function, so that no width is in fixedopt's cache from
    an earlier solve of the same problem (the cache is keyed on the function).
    """
    settings, seen, records = Settings(), set(), []
    base = PROBLEMS["quad"](batch, n, SEED)
    fresh = base.jax_fun
    base = dataclasses.replace(base, jax_fun=lambda x, *args: fresh(x, *args))
    rng = np.random.default_rng(SEED + 3)
    for count in free_counts:
        order = np.argsort(rng.random((batch, n)), axis=1)
        fixed = np.ones((batch, n), bool)
        np.put_along_axis(fixed, order[:, :count], False, axis=1)
        problem = dataclasses.replace(base, fixed=fixed)
        width = packed_width(np.sum(~fixed, axis=1), n)
        counts = compiles_during(_solve(problem, "split", settings))
        expected = int(width not in seen)
        seen.add(width)
        records.append(
            {
                "micro": "split_compiles",
                "B": batch,
                "n": n,
                "free_count": count,
                "width": width,
                **counts,
                "expected_new": expected,
                "ok": counts["cache_growth"] in (expected, None),
            }
        )
        print(
            f"split, {count} free of {n}: width {width}, {counts} (expected {expected} new)",
            flush=True,
        )
    return records
