"""Command line: run a benchmark suite and save JSON records, a markdown report, plots.

Usage::

    python -m benchmarks.run --suite {solvers,cpu,gpu,micro,auto} [--quick] [--repeats N]

``auto`` is ``cpu`` on the CPU backend and ``gpu`` on any other. Results go to
``benchmarks/results/<backend>-<suite>[-quick]-<YYYY-MM-DD>.{json,md}`` and, for suites
with solver cases, ``...-{time-vs-B,time-vs-n,speedup}.png``.
"""

from __future__ import annotations

import os

# One BLAS thread for scipy's per-row solves (tiny matrices): on a loaded machine
# OpenBLAS's thread pool made the scipy loop up to 50x slower. XLA does not use it.
# Set before NumPy loads; an explicit setting in the environment wins.
for _variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_variable, "1")

import argparse  # noqa: E402
import json  # noqa: E402
import pathlib  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)  # before any array exists: float64 available

from benchmarks import micro, plots, report, strategies, timing  # noqa: E402
from benchmarks.base import Settings  # noqa: E402
from benchmarks.cases import PROBLEMS, Repeats, run_case  # noqa: E402
from benchmarks.jax_methods import fixedopt_compiles_on_new_mask  # noqa: E402
from benchmarks.suites import QUICK, SUITES, Micro, Suite  # noqa: E402

RESULTS = pathlib.Path(__file__).parent / "results"
SEED = 0


def run_cases(suite: Suite, args, env: dict) -> list[dict]:
    repeats = Repeats(least=min(3, args.repeats), most=args.repeats, loops=args.loop_repeats)
    records = []
    for case in suite.cases:
        overrides = {
            "max_steps": args.max_steps,
            "loop_rows": suite.loop_rows,
            "jaxopt_work": suite.jaxopt_work,
        }
        if args.gtol is not None and case.dtype == "float64":
            overrides["gtol"] = args.gtol
        settings = Settings.for_dtype(case.dtype, **overrides)
        for record in run_case(case, settings, repeats):
            if suite.new_mask_check and record["method"] == "fixedopt-mask":
                problem = PROBLEMS[record["problem"]](case.batch, case.n, SEED, case.dtype)
                record["new_mask_compiles"] = fixedopt_compiles_on_new_mask(
                    problem, settings, seed=SEED + 1
                )
            records.append(env | record)
    return records


def run_micro(config: Micro) -> list[dict]:
    """Every micro-benchmark, in order of increasing risk of running out of memory."""
    return [
        *strategies.new_mask_compiles(*config.compiles),
        *strategies.split_compiles(*config.compiles, config.split_free_counts),
        *micro.objective_overhead(config.objective, config.rounds),
        micro.dispatch(256, 8, config.rounds),
        *strategies.split_vs_mask(*config.strategy, rounds=max(3, config.rounds // 2)),
        micro.adam_steps(config.adam_size, config.rounds, config.adam_steps),
    ]


def parse(argv) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.run",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--suite", choices=[*SUITES, "auto"], default="solvers")
    parser.add_argument("--quick", action="store_true", help="small batches: a smoke run")
    parser.add_argument(
        "--repeats",
        type=int,
        default=7,
        help="most timed calls per compiled method (at least 3, fewer for "
        "slow calls: about 3 s of timed work per method and case)",
    )
    parser.add_argument(
        "--loop-repeats", type=int, default=3, help="timed calls of the per-row scipy/lmfit loops"
    )
    parser.add_argument(
        "--gtol",
        type=float,
        default=None,
        help="float64 tolerance (default 1e-6; float32 uses 1e-3)",
    )
    parser.add_argument("--max-steps", type=int, default=Settings.max_steps)
    parser.add_argument("--out", type=pathlib.Path, default=RESULTS, help="results folder")
    return parser.parse_args(argv)


def main(argv=None) -> None:
    args = parse(argv)
    name = args.suite
    if name == "auto":
        name = "cpu" if jax.default_backend() == "cpu" else "gpu"
    elif name == "cpu" and jax.default_backend() != "cpu":
        print("note: on an accelerator, --suite gpu (or auto) fills the device", file=sys.stderr)
    suite = (QUICK if args.quick else SUITES)[name]
    env = timing.environment() | {"suite": name, "quick": args.quick, "max_steps": args.max_steps}
    start = time.perf_counter()
    records = run_cases(suite, args, env)
    if suite.micro is not None:
        records += [env | r for r in run_micro(suite.micro)]
    elapsed = time.perf_counter() - start
    records = [r | {"suite_wall_s": elapsed} for r in records]
    stem = f"{env['backend']}-{name}{'-quick' if args.quick else ''}-{env['date']}"
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{stem}.json").write_text(json.dumps(records, indent=1) + "\n")
    (args.out / f"{stem}.md").write_text(report.markdown(records, title=stem))
    written = plots.save(records, args.out / stem) if suite.cases else []
    print(
        f"wrote {args.out / stem}.json, .md and {len(written)} plots in {elapsed:.0f} s",
        file=sys.stderr,
    )


if __name__ == "__main__":
    main()
