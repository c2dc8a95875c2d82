"""``python -m benchmarks.compiler_options [--rounds R] [--cases NAME ...]``: the XLA
options fixedopt compiles its least-squares solves with (``fixedopt.compiler_options(
fixedopt.LevenbergMarquardt())``: on the CPU, XLA's elemental code generator) against
XLA's defaults (the MLIR fusion emitters), same solve, same process, for least-squares
and ``minimize`` solves alike: the measurement behind applying them to the first only.

Each case is one batched solve, jitted twice: ``jax.jit(solve, compiler_options=...)``
and ``jax.jit(solve)``. Each is compiled ``rounds`` times from scratch
(``jax.clear_caches()``, traced and lowered anew; XLA's compile timed), the two
interleaved, then run ``rounds`` times each (interleaved, ``block_until_ready``);
medians. The answers are compared: mean steps, fraction converged, largest difference
of ``x`` relative to its scale.

Writes ``benchmarks/results/<backend>-compiler-options-<date>.{jsonl,md}``.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import re
import statistics
import time
from collections.abc import Callable

import jax

jax.config.update("jax_enable_x64", True)  # quad and rosen run in float64

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import fixedopt  # noqa: E402
from benchmarks.timing import environment  # noqa: E402
from fixedopt import testing_problems as problems  # noqa: E402
from fixedopt.testing_problems import FIT_MODELS as MODELS  # noqa: E402

RESULTS = pathlib.Path(__file__).parent / "results"
LEAST_SQUARES = fixedopt.LevenbergMarquardt()  # the solvers fixedopt compiles with options


def fit_case(model: str, batch: int):
    """``least_squares`` (Levenberg–Marquardt defaults) on ``batch`` fits of the tiny
    suite's ``model``, float32."""
    function, _, make = MODELS[model]
    fits = make(batch)

    def solve(x0, fixed, data):
        residual = lambda p, y: function(p) - y
        return fixedopt.least_squares(residual, x0, fixed, args=(data,), batched=True)

    return solve, tuple(jnp.asarray(a) for a in (fits.x0, fits.fixed, fits.data))


def minimize_case(name: str, batch: int, n: int):
    """``minimize`` (L-BFGS defaults) on ``batch`` rows of the benchmark problem ``name``."""
    problem = getattr(problems, name)(batch, n)

    def solve(x0, fixed, *args):
        return fixedopt.minimize(problem.jax_fun, x0, fixed, args=args, batched=True)

    inputs = (problem.x0, problem.fixed, *problem.args)
    return solve, tuple(jnp.asarray(a) for a in inputs)


def spectra_case(batch: int):
    """``least_squares`` (Levenberg–Marquardt, bounds) on the demo's spectra, n = 10."""
    problem = problems.spectra(batch)

    def solve(x0, fixed, observed, lower, upper):
        return fixedopt.least_squares(problem.jax_residual, x0, fixed, args=(observed,),
                                      bounds=(lower, upper), batched=True)  # fmt: skip

    inputs = (problem.x0, problem.fixed, *problem.args, *problem.bounds)
    return solve, tuple(jnp.asarray(a) for a in inputs)


def rosenbrock_residuals(x):
    """The extended Rosenbrock function's ``2 (n - 1)`` residuals."""
    return jnp.concatenate([10.0 * (x[1:] - x[:-1] ** 2), 1.0 - x[:-1]])


def rosenbrock_case(batch: int, n: int):
    """``least_squares`` (Levenberg–Marquardt defaults) on Rosenbrock's residuals."""
    problem = problems.rosen(batch, n)

    def solve(x0, fixed):
        return fixedopt.least_squares(rosenbrock_residuals, x0, fixed, batched=True)

    return solve, (jnp.asarray(problem.x0), jnp.asarray(problem.fixed))


CASES = {
    "gaussian LM, B = 1e5": lambda: fit_case("gaussian", 10**5),
    "decay LM, B = 1e4": lambda: fit_case("decay", 10**4),
    "spectra LM, n = 10, B = 2048": lambda: spectra_case(2048),
    "rosenbrock LM, n = 16, B = 256": lambda: rosenbrock_case(256, 16),
    "quad n = 8, B = 1024": lambda: minimize_case("quad", 1024, 8),
    "quad n = 64, B = 1024": lambda: minimize_case("quad", 1024, 64),
    "quad n = 512, B = 256": lambda: minimize_case("quad", 256, 512),
    "rosen n = 64, B = 2048": lambda: minimize_case("rosen", 2048, 64),
}


def measure(name: str, rounds: int) -> dict:
    """Compile and run one case with both option sets, interleaved; medians."""
    solve, inputs = CASES[name]()
    options = {"options": fixedopt.compiler_options(LEAST_SQUARES), "defaults": None}
    compile_s: dict[str, list[float]] = {key: [] for key in options}
    programs = {}
    for _ in range(rounds):
        for key, chosen in options.items():
            jax.clear_caches()  # nothing reused: traced and lowered anew, then compiled
            lowered = jax.jit(solve, compiler_options=chosen).lower(*inputs)
            tic = time.perf_counter()
            programs[key] = lowered.compile()
            compile_s[key].append(time.perf_counter() - tic)
    run_s: dict[str, list[float]] = {key: [] for key in options}
    answers = {key: jax.block_until_ready(p(*inputs)) for key, p in programs.items()}
    for _ in range(rounds):
        for key, program in programs.items():
            tic = time.perf_counter()
            jax.block_until_ready(program(*inputs))
            run_s[key].append(time.perf_counter() - tic)
    record: dict = {"case": name}
    for key in options:
        solution = answers[key]
        record |= {f"{key}_compile_s": statistics.median(compile_s[key]),
                   f"{key}_run_s": statistics.median(run_s[key]),
                   f"{key}_fusions": len(re.findall(r" fusion\(", programs[key].as_text())),
                   f"{key}_steps": float(jnp.mean(solution.steps)),
                   f"{key}_converged": float(jnp.mean(solution.converged))}  # fmt: skip
    a, b = (np.asarray(answers[k].x, np.float64) for k in options)
    record["x_difference"] = float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-300))
    record["compile_ratio"] = record["defaults_compile_s"] / record["options_compile_s"]
    record["run_ratio"] = record["defaults_run_s"] / record["options_run_s"]
    return record


def markdown(records: list[dict], title: str, env: dict, rounds: int) -> str:
    lines = [f"# {title}", "",
             "fixedopt's XLA options for least squares (on the CPU XLA's elemental code "
             "generator) against XLA's defaults, the same solve jitted "
             "both ways in one process: XLA's compile of each from scratch (traced and "
             f"lowered anew) and the compiled call, medians of {rounds} interleaved rounds; "
             f"backend {env['backend']} ({env['host_cpus']} CPUs), jax "
             f"{env['versions'].get('jax')}. Ratios: defaults over the options (above 1: "
             "faster with the options). `python -m benchmarks.compiler_options`.", "",
             "| case | compile s (options / defaults) | ratio | run ms (options / "
             "defaults) | ratio | fusions | steps | converged | largest x difference |",
             "|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for r in records:
        lines.append(
            f"| {r['case']} | {r['options_compile_s']:.2f} / {r['defaults_compile_s']:.2f} "
            f"| {r['compile_ratio']:.2f}x | {1e3 * r['options_run_s']:.1f} / "
            f"{1e3 * r['defaults_run_s']:.1f} | {r['run_ratio']:.2f}x | "
            f"{r['options_fusions']} / {r['defaults_fusions']} | {r['options_steps']:.2f} / "
            f"{r['defaults_steps']:.2f} | {r['options_converged']:.3f} / "
            f"{r['defaults_converged']:.3f} | {r['x_difference']:.1e} |"
        )
    return "\n".join(lines) + "\n"


# The command line of a study with named cases (once benchmarks/timing.py's).


def cases_to_files(
    env: dict, cases: list[str], measure: Callable[[str], dict], markdown: Callable,
    out: pathlib.Path, name: str,
) -> pathlib.Path:  # fmt: skip
    """``measure(case)`` for every case (each record printed as it comes), written as
    ``<out>/<backend>-<name>-<date>.{jsonl,md}`` (``markdown(records, title, env)`` writes
    the table); returns the files' stem."""
    records = []
    for case in cases:
        records.append(env | measure(case))
        print(json.dumps({k: records[-1][k] for k in records[-1] if k not in env}), flush=True)
    stem = out / f"{env['backend']}-{name}-{env['date']}"
    out.mkdir(parents=True, exist_ok=True)
    lines = (json.dumps(record, default=str) + "\n" for record in records)
    stem.with_suffix(".jsonl").write_text("".join(lines))
    stem.with_suffix(".md").write_text(markdown(records, stem.name, env))
    print(f"wrote {stem}.jsonl and .md")
    return stem


def run_cases(
    module: str, doc: str, cases: dict, rounds: int, results: pathlib.Path,
    measure: Callable[[str, int], dict], markdown: Callable, argv: list[str] | None = None,
) -> pathlib.Path:  # fmt: skip
    """The command ``python -m benchmarks.<module>`` of a benchmark whose ``cases`` are
    named (:func:`case_arguments`): ``measure(case, rounds)`` for each case chosen, and
    ``markdown(records, title, env, rounds)`` for its table, written by
    :func:`cases_to_files` as ``<backend>-<module, dashed>-<date>``; returns the stem."""
    args = case_arguments(module, doc, cases, rounds, results).parse_args(argv)
    env = environment() | {"suite": module}
    measured = lambda name: measure(name, args.rounds)
    written = lambda records, title, env: markdown(records, title, env, args.rounds)
    chosen = args.cases or list(cases)
    return cases_to_files(env, chosen, measured, written, args.out, module.replace("_", "-"))


def case_arguments(module: str, doc: str, cases: dict, rounds: int, results: pathlib.Path):
    """The command line of a benchmark ``python -m benchmarks.<module>`` whose ``cases``
    are named: ``--rounds`` (default ``rounds``), ``--cases``, ``--out`` (``results``);
    the parser, to add more before parsing."""
    parser = argparse.ArgumentParser(prog=f"python -m benchmarks.{module}",
                                     description=doc.split("\n\n")[0])  # fmt: skip
    parser.add_argument("--rounds", type=int, default=rounds, help="calls of each program")
    parser.add_argument("--cases", nargs="*", choices=list(cases), help="default: all")
    parser.add_argument("--out", type=pathlib.Path, default=results, help="results folder")
    return parser


def main(argv: list[str] | None = None) -> pathlib.Path:
    return run_cases("compiler_options", __doc__, CASES, 5, RESULTS, measure, markdown, argv)


if __name__ == "__main__":
    main()
