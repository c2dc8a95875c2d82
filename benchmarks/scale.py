"""Stragglers and peak memory: the scale measurements.

Usage::

    python -m benchmarks.scale [--repeats 5] [--quick]

1. Stragglers: B=4096 per-row tridiagonal quadratics (n=32, ~30% fixed) with and
   without ONE row that needs about ten times the median number of L-BFGS steps;
   wall time of the batched solve with the straggler divided by the time without it,
   for ``compact=False`` (plain vmap: every row pays the slowest row's steps) and the
   default ``compact=None`` (compaction from 4096 rows). Interleaved, median of
   repeats, compile time apart.
2. Peak memory: XLA's temporary memory for B = 1e5, 3e5, 1e6 small problems (n=8)
   with and without ``chunk_size`` (from the compiled program's memory analysis),
   and the measured time of the B=1e5 solves.
Writes ``benchmarks/results/<backend>-scale-<date>.{json,md}``.
"""

from __future__ import annotations

import argparse
import datetime
import time

import jax
import jax.numpy as jnp
import numpy as np

import fixedopt
from benchmarks.timing import save_results


def tridiagonal_quadratic(x, diagonal, off_diagonal, linear):
    """0.5 x^T A x - linear.x with A tridiagonal (per-row diagonals)."""
    coupling = jnp.sum(off_diagonal * x[:-1] * x[1:])
    return 0.5 * jnp.sum(diagonal * x**2) + coupling - linear @ x


def quadratic_batch(batch: int, n: int, seed: int = 0, straggler_condition: float | None = None):
    rng = np.random.default_rng(seed)
    diagonal = rng.uniform(2.0, 20.0, (batch, n))
    off_diagonal = rng.uniform(-0.9, 0.9, (batch, n - 1))
    if straggler_condition is not None:  # row 0: a chain with a wide spectrum
        diagonal[0] = np.geomspace(1.0, straggler_condition, n)
        off_diagonal[0] = 0.45 * np.sqrt(diagonal[0][:-1] * diagonal[0][1:])
    fixed = rng.random((batch, n)) < 0.3
    x0 = np.where(fixed, rng.normal(size=(batch, n)), 0.0)
    args = tuple(jnp.asarray(a) for a in (diagonal, off_diagonal, rng.normal(size=(batch, n))))
    return jnp.asarray(x0), jnp.asarray(fixed), args


def timed_solver(x0, fixed, args, **options):
    def solve(x0, fixed, args):
        return fixedopt.minimize(tridiagonal_quadratic, x0, fixed, args=args, batched=True,
                                 max_steps=5000, **options)  # fmt: skip

    start = time.perf_counter()
    compiled = jax.jit(solve).lower(x0, fixed, args).compile()
    compile_seconds = time.perf_counter() - start
    return compiled, compile_seconds


def stragglers(repeats: int, batch: int = 1024, n: int = 32) -> dict:
    cases = {}
    for label, condition in (("without", None), ("with", 2000.0)):
        data = quadratic_batch(batch, n, straggler_condition=condition)
        for compact in (False, None):  # plain vmap; the default (compacts from 4096 rows)
            compiled, compile_seconds = timed_solver(*data, compact=compact)
            solution = jax.block_until_ready(compiled(*data))
            cases[(label, compact)] = {
                "compiled": compiled, "data": data, "compile_s": compile_seconds,
                "steps": np.asarray(solution.steps), "times": [],
                "converged": float(np.mean(solution.converged)),
            }  # fmt: skip
    for _ in range(repeats):
        for case in cases.values():
            start = time.perf_counter()
            jax.block_until_ready(case["compiled"](*case["data"]))
            case["times"].append(time.perf_counter() - start)
    steps = cases[("with", False)]["steps"]
    result = {
        "batch": batch,
        "n": n,
        "straggler_steps": int(steps[0]),
        "median_steps": float(np.median(steps[1:])),
        "max_other_steps": int(np.max(steps[1:])),
    }
    for compact in (False, None):
        with_, without = cases[("with", compact)], cases[("without", compact)]
        name = "default" if compact is None else "plain"
        result[name] = {
            "time_with_s": float(np.median(with_["times"])),
            "time_without_s": float(np.median(without["times"])),
            "ratio": float(np.median(with_["times"]) / np.median(without["times"])),
            "compile_s": with_["compile_s"],
            "converged": with_["converged"],
        }
    difference = np.abs(cases[("with", None)]["steps"] - cases[("with", False)]["steps"])
    result["rows_with_other_step_counts_when_compacted"] = int(np.sum(difference > 0))
    result["max_step_count_difference"] = int(np.max(difference))
    return result


def peak_memory(sizes, chunk_size: int, n: int = 8, timed_batch: int = 100_000) -> list[dict]:
    records = []
    for batch in sizes:
        data = quadratic_batch(batch, n)
        for chunk in (None, chunk_size):
            compiled, compile_seconds = timed_solver(*data, chunk_size=chunk)
            memory = compiled.memory_analysis()
            record = {
                "batch": batch,
                "n": n,
                "chunk_size": chunk,
                "temp_bytes": int(memory.temp_size_in_bytes),
                "argument_bytes": int(memory.argument_size_in_bytes),
                "output_bytes": int(memory.output_size_in_bytes),
                "compile_s": compile_seconds,
            }
            if batch <= timed_batch:
                start = time.perf_counter()
                solution = jax.block_until_ready(compiled(*data))
                record["time_s"] = time.perf_counter() - start
                record["converged"] = float(np.mean(solution.converged))
            records.append(record)
    return records


def markdown(result: dict) -> str:
    s = result["stragglers"]
    lines = [
        f"# Scale ({result['backend']}, {result['date']})",
        "",
        f"## Stragglers: B={s['batch']}, n={s['n']}, one row needing {s['straggler_steps']} "
        f"L-BFGS steps (median of the others {s['median_steps']:.0f}, max {s['max_other_steps']})",
        "",
        "| loop | time without straggler (s) | time with (s) | ratio with/without | compile (s) |",
        "|---|---:|---:|---:|---:|",
    ]
    for name in ("plain", "default"):
        m = s[name]
        lines.append(
            f"| {name} | {m['time_without_s']:.4f} | {m['time_with_s']:.4f} | {m['ratio']:.2f}x"
            f" | {m['compile_s']:.2f} |"
        )
    lines += [
        "",
        "plain: `compact=False`; default: `compact=None`, which compacts from 4096 rows.",
        "",
        f"Rows whose step count differs with compaction: "
        f"{s['rows_with_other_step_counts_when_compacted']} of {s['batch']} (by at most "
        f"{s['max_step_count_difference']}; the compacted batches are other machine code, "
        "so iterates agree to rounding).",
        "",
        "## Peak memory: XLA temporary memory of the compiled batched solve (n=8)",
        "",
        "| B | chunk_size | temp memory (MiB) | arguments + outputs (MiB) | time (s) |",
        "|---:|---:|---:|---:|---:|",
    ]
    for r in result["memory"]:
        time_s = f"{r['time_s']:.2f}" if "time_s" in r else "—"
        io = (r["argument_bytes"] + r["output_bytes"]) / 2**20
        lines.append(
            f"| {r['batch']:,} | {r['chunk_size'] or 'none'} | {r['temp_bytes'] / 2**20:.1f}"
            f" | {io:.1f} | {time_s} |"
        )
    lines += [
        "",
        f"Interleaved repeats: {result['repeats']}; jax {result['jax']}. "
        "Command: `python -m benchmarks.scale`.",
    ]
    return "\n".join(lines) + "\n"


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--stragglers-only", action="store_true", help="skip peak memory")
    args = parser.parse_args(argv)
    jax.config.update("jax_enable_x64", True)
    sizes = (20_000,) if args.quick else (100_000, 300_000, 1_000_000)
    result = {
        "backend": jax.default_backend(),
        "date": datetime.date.today().isoformat(),
        "jax": jax.__version__,
        "repeats": args.repeats,
        "stragglers": stragglers(args.repeats, batch=256 if args.quick else 4096),
        "memory": []
        if args.stragglers_only
        else peak_memory(sizes, chunk_size=16_384 if not args.quick else 4096),
    }
    quick = ("-quick" if args.quick else "") + ("-stragglers" if args.stragglers_only else "")
    stem = f"{result['backend']}-scale{quick}-{result['date']}"
    save_results(stem, result, markdown(result))


if __name__ == "__main__":
    main()
