"""LLVM's optimization level for fixedopt's CPU programs: compile time against speed.

``PYTHONPATH=. python studies/2026-12-05-llvm_opt_level/measure.py [--rounds R]
[--cases NAME ...] [--out FILE]``

Each case is one batched solve, ``jax.jit``-ed with each option set below, compiled
``rounds`` times from scratch (``jax.clear_caches()``: traced and lowered anew, XLA's
compile timed), the option sets interleaved, then run ``rounds`` times each
(interleaved, ``block_until_ready``); medians, and the largest difference of ``x``.
``now`` is what fixedopt compiles the solve with on its own
(``fixedopt.compiler_options(solver)``); the others add one XLA option to it.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import time

os.environ["FIXEDOPT_CACHE"] = "0"  # every compile from scratch: no persistent cache

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import fixedopt  # noqa: E402
from benchmarks import first_call  # noqa: E402
from benchmarks.timing import environment  # noqa: E402
from fixedopt import testing_problems as problems  # noqa: E402
from fixedopt.testing_problems import FIT_MODELS  # noqa: E402

HERE = pathlib.Path(__file__).parent
LM, LBFGS = fixedopt.LevenbergMarquardt(), fixedopt.LBFGS()
EXTRA = {"now": {}, "O1": {"xla_backend_optimization_level": 1},
         "cheap passes": {"xla_llvm_disable_expensive_passes": True}}  # fmt: skip


def fit_case(model: str, batch: int):
    """``least_squares`` on ``batch`` fits of the tiny suite's ``model`` (float32)."""
    function, _, make = FIT_MODELS[model]
    fits = make(batch)

    def solve(x0, fixed, data):
        residual = lambda p, y: function(p) - y
        return fixedopt.least_squares(residual, x0, fixed, args=(data,), batched=True)

    return LM, solve, (fits.x0, fits.fixed, fits.data)


def spectra_case(batch: int):
    """``curve_fit`` of the first_call benchmark's spectra (8 parameters, bounds)."""
    calls = first_call.spectra(batch)
    p0, fixed, y = calls["inputs"]

    def solve(p0, fixed, y):
        bounds = first_call.SPECTRA_BOUNDS
        return fixedopt.curve_fit(first_call.spectrum, first_call.X_SPECTRA, y, p0,
                                  bounds=bounds, fixed=fixed, batched=True)  # fmt: skip

    return LM, solve, (p0, fixed, y)


def rk4_case(batch: int):
    """``least_squares`` of the first_call benchmark's RK4 oscillators (6 parameters)."""
    p0, fixed, y = first_call.rk4(batch)["inputs"]

    def solve(p0, fixed, y):
        return fixedopt.least_squares(first_call.trajectory_residual, p0, fixed, args=(y,),
                                      batched=True)  # fmt: skip

    return LM, solve, (p0, fixed, y)


def minimize_case(name: str, batch: int, n: int):
    """``minimize`` (L-BFGS) on ``batch`` rows of the benchmark problem ``name``."""
    problem = getattr(problems, name)(batch, n)

    def solve(x0, fixed, *args):
        return fixedopt.minimize(problem.jax_fun, x0, fixed, args=args, batched=True)

    return LBFGS, solve, (problem.x0, problem.fixed, *problem.args)


CASES = {
    "gaussian LM, B = 1e5 (f32)": lambda: fit_case("gaussian", 10**5),
    "decay LM, B = 1e4 (f32)": lambda: fit_case("decay", 10**4),
    "spectra curve_fit, B = 2000": lambda: spectra_case(2000),
    "rk4 LM, B = 500": lambda: rk4_case(500),
    "quad n = 8, B = 16384": lambda: minimize_case("quad", 16384, 8),
    "quad n = 64, B = 16384": lambda: minimize_case("quad", 16384, 64),
    "quad n = 512, B = 1024": lambda: minimize_case("quad", 1024, 512),
    "rosen n = 64, B = 2048": lambda: minimize_case("rosen", 2048, 64),
}


def measure(name: str, rounds: int, chosen: list[str]) -> dict:
    """Compile and run one case with each option set, interleaved; medians."""
    solver, solve, inputs = CASES[name]()
    inputs = tuple(jnp.asarray(a) for a in inputs)
    options = {key: fixedopt.compiler_options(solver) | EXTRA[key] for key in chosen}
    compile_s: dict[str, list[float]] = {key: [] for key in options}
    programs = {}
    for _ in range(rounds):
        for key, option in options.items():
            jax.clear_caches()
            lowered = jax.jit(solve, compiler_options=option).lower(*inputs)
            tic = time.perf_counter()
            programs[key] = lowered.compile()
            compile_s[key].append(time.perf_counter() - tic)
    answers = {key: jax.block_until_ready(p(*inputs)) for key, p in programs.items()}
    run_s: dict[str, list[float]] = {key: [] for key in options}
    for _ in range(max(rounds, 5)):
        for key, program in programs.items():
            tic = time.perf_counter()
            jax.block_until_ready(program(*inputs))
            run_s[key].append(time.perf_counter() - tic)
    record: dict = {"case": name}
    best = lambda answer: np.asarray(getattr(answer, "x", answer[0]), np.float64)  # curve_fit: popt
    reference = best(answers["now"])
    scale = max(float(np.max(np.abs(reference))), 1e-300)
    for key in options:
        x = best(answers[key])
        record[key] = {"compile_s": statistics.median(compile_s[key]),
                       "run_s": statistics.median(run_s[key]),
                       "steps": float(jnp.mean(getattr(answers[key], "steps", jnp.nan))),
                       "x_difference": float(np.max(np.abs(x - reference)) / scale)}  # fmt: skip
    return record


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--cases", nargs="*", default=list(CASES), choices=CASES)
    parser.add_argument("--options", nargs="*", default=list(EXTRA), choices=EXTRA)
    parser.add_argument("--out", type=pathlib.Path, default=HERE / "results.json")
    args = parser.parse_args()
    chosen = ["now", *[key for key in args.options if key != "now"]]
    records = []
    for name in args.cases:
        record = measure(name, args.rounds, chosen)
        records.append(record)
        now = record["now"]
        cells = [f"{key} {r['compile_s'] / now['compile_s']:.2f}x compile, "
                 f"{now['run_s'] / r['run_s']:.2f}x speed, dx {r['x_difference']:.1e}"
                 for key, r in record.items() if key not in ("case", "now")]  # fmt: skip
        head = f"{name}: now {now['compile_s']:.2f} s, {now['run_s'] * 1e3:.1f} ms; "
        print(head + "; ".join(cells), flush=True)
    found = {"environment": environment(), "records": records}
    args.out.write_text(json.dumps(found, indent=1) + "\n")


if __name__ == "__main__":
    main()
