"""A fit's covariance compiled with XLA:CPU's elemental emitter against XLA's defaults.

``PYTHONPATH=. python studies/2026-12-05-covariance_options/measure.py [--rounds R] [--out FILE]``

Each case: ``fixedopt.covariance`` of 256 fitted rows (a chunk of the covariance's
batches on the CPU), jitted with ``fixedopt.compiler_options(LevenbergMarquardt())``
and without options; each compiled ``rounds`` times from scratch (interleaved), then
run 20 times each (interleaved); medians, and the largest difference of the
covariances relative to their largest entry.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import time

os.environ["FIXEDOPT_CACHE"] = "0"  # every compile from scratch

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import fixedopt  # noqa: E402
from benchmarks import first_call  # noqa: E402
from benchmarks.timing import environment  # noqa: E402
from fixedopt.testing_problems import gaussian_fits, gaussian_model  # noqa: E402

HERE = pathlib.Path(__file__).parent
ROWS = 256


def spectra():
    """The first_call benchmark's spectra (8 parameters, 301 points, bounds), float64."""
    p0, fixed, y = first_call.spectra(ROWS)["inputs"]
    bounds = first_call.SPECTRA_BOUNDS
    fit = fixedopt.curve_fit(first_call.spectrum, first_call.X_SPECTRA, y, p0, fixed=fixed,
                             bounds=bounds, batched=True, result=True)  # fmt: skip
    return fit[2].solution, first_call.spectrum_residual, jnp.asarray(y)


def spot():
    """Gpufit's spot (5 parameters, 25 pixels), float32."""
    fits = gaussian_fits(ROWS, 0)
    residual = lambda p, y: gaussian_model(p) - y
    solution = fixedopt.least_squares(residual, fits.x0, fits.fixed, args=(fits.data,),
                                      batched=True)  # fmt: skip
    return solution, residual, jnp.asarray(fits.data)


CASES = {"spectra (float64)": spectra, "Gaussian spot (float32)": spot}
OPTIONS = {"defaults": {}, "elemental": fixedopt.compiler_options(fixedopt.LevenbergMarquardt())}


def measure(name: str, rounds: int) -> dict:
    solution, residual, y = CASES[name]()
    covariance = lambda sol, y: fixedopt.covariance(sol, residual, args=(y,)).covariance
    compile_s: dict[str, list[float]] = {key: [] for key in OPTIONS}
    programs = {}
    for _ in range(rounds):
        for key, options in OPTIONS.items():
            jax.clear_caches()
            lowered = jax.jit(covariance, compiler_options=options).lower(solution, y)
            tic = time.perf_counter()
            programs[key] = lowered.compile()
            compile_s[key].append(time.perf_counter() - tic)
    answers = {key: np.asarray(program(solution, y)) for key, program in programs.items()}
    run_s: dict[str, list[float]] = {key: [] for key in OPTIONS}
    for _ in range(20):
        for key, program in programs.items():
            tic = time.perf_counter()
            jax.block_until_ready(program(solution, y))
            run_s[key].append(time.perf_counter() - tic)
    a, b = answers["elemental"], answers["defaults"]
    scale = np.nanmax(np.abs(b))
    record: dict = {"case": name, "difference": float(np.nanmax(np.abs(a - b)) / scale)}
    for key in OPTIONS:
        record[f"{key}_compile_s"] = statistics.median(compile_s[key])
        record[f"{key}_run_ms"] = 1e3 * statistics.median(run_s[key])
    return record


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--out", type=pathlib.Path, default=HERE / "results.json")
    args = parser.parse_args()
    records = [measure(name, args.rounds) for name in CASES]
    for r in records:
        print(r)
    found = {"environment": environment(), "records": records}
    args.out.write_text(json.dumps(found, indent=1) + "\n")


if __name__ == "__main__":
    main()
