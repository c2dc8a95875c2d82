"""``python -m benchmarks.normal_sums [--rounds R] [--cases NAME ...]``: a
Levenberg–Marquardt step's ``J^T J`` and ``J^T r`` as one variadic reduction (fixedopt's
CPU path up to ``small_linalg.SUMMED_N`` columns, ``reduce.together``) against the same
sums one by one (``SUMMED_N = 0``: the path before), same solves, one process: the
measurement behind ``SUMMED_N``.

Each case is traced and compiled once per variant (``SUMMED_N`` is read at trace time;
"together" raises it to the case's ``n`` where that is above it, to show what the
threshold avoids), then the compiled solves are called in interleaved rounds
(``block_until_ready``); medians. Compile time is trace + lower + compile. The answers
are compared: mean steps, fraction converged, the largest difference of ``x`` relative
to its scale (the sums round in another order: a fit stops elsewhere within its
tolerance); for the Gpufit-protocol fits, also each free parameter's median error
relative to the truth (``benchmarks.tiny.accuracy``). For the tiny suite's two fits, also
the bytes XLA accesses per row in one step (its cost analysis of two unrolled steps less
one, compiled as ``benchmarks.tiny`` compiles them), against the floor (the row's data
and parameters read, its parameters written).

Writes ``benchmarks/results/<backend>-normal-sums-<date>.{jsonl,md}``.
"""

from __future__ import annotations

import contextlib
import pathlib
import statistics
import time
from collections.abc import Iterator

import jax

jax.config.update("jax_enable_x64", True)  # rosenbrock and the spectra run in float64

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import fixedopt  # noqa: E402
from benchmarks import tiny  # noqa: E402
from benchmarks.compiler_options import fit_case, rosenbrock_case, spectra_case  # noqa: E402
from benchmarks.timing import interleaved, run_cases  # noqa: E402
from benchmarks.tiny import FLOOR_VALUES, GPUFIT  # noqa: E402
from benchmarks.tiny_problems import MODELS, PARAMETERS  # noqa: E402
from fixedopt._solvers import small_linalg  # noqa: E402

RESULTS = pathlib.Path(__file__).parent / "results"
LM = fixedopt.LevenbergMarquardt()
OPTIONS = fixedopt.compiler_options(LM)  # as a least-squares solve compiles on its own


def gpufit_case(model: str, batch: int):
    """The tiny suite's fit of ``model`` under Gpufit's protocol (float32)."""
    function, _, make = MODELS[model]
    fits = make(batch)

    def solve(x0, fixed, data):
        residual = lambda p, y: function(p) - y
        return fixedopt.least_squares(residual, x0, fixed, args=(data,), batched=True, **GPUFIT)

    return solve, tuple(jnp.asarray(a) for a in (fits.x0, fits.fixed, fits.data)), fits


CASES = {  # name: (the case's solve and inputs, its n, the tiny model for bytes or None)
    "gaussian (Gpufit protocol), n = 5, B = 1e5": (lambda: gpufit_case("gaussian", 10**5), 5,
                                                    "gaussian"),
    "gaussian (Gpufit protocol), n = 5, B = 1e6": (lambda: gpufit_case("gaussian", 10**6), 5,
                                                    None),
    "decay (Gpufit protocol), n = 5, B = 1e4": (lambda: gpufit_case("decay", 10**4), 5, "decay"),
    "gaussian (LM defaults), n = 5, B = 1e5": (lambda: fit_case("gaussian", 10**5), 5, None),
    "spectra, n = 10, B = 2048": (lambda: spectra_case(2048), 10, None),
    "rosenbrock, n = 8, B = 1024": (lambda: rosenbrock_case(1024, 8), 8, None),
    "rosenbrock, n = 12, B = 1024": (lambda: rosenbrock_case(1024, 12), 12, None),
    "rosenbrock, n = 16, B = 256": (lambda: rosenbrock_case(256, 16), 16, None),
}  # fmt: skip
VARIANTS = ("together", "apart")


@contextlib.contextmanager
def summed_up_to(n: int) -> Iterator[None]:
    """Trace with ``small_linalg.SUMMED_N = n``."""
    before = small_linalg.SUMMED_N
    small_linalg.SUMMED_N = n
    try:
        yield
    finally:
        small_linalg.SUMMED_N = before


def threshold(variant: str, n: int) -> int:
    return max(small_linalg.SUMMED_N, n) if variant == "together" else 0


def step_bytes(model: str, variant: str, n: int) -> float:
    """Bytes XLA accesses per row in one unrolled step of 1e4 fits, as the tiny suite
    counts them (``benchmarks.tiny.step_bytes``: two steps less one, XLA's defaults)."""
    fits = MODELS[model][2](10**4)
    costs = []
    for steps in (1, 2):
        with summed_up_to(threshold(variant, n)):
            options = GPUFIT | {"max_steps": steps, "differentiate": "unroll"}
            costs.append(tiny.program(fits, "unrolled", options)[2]["program_bytes_per_row"])
    return costs[1] - costs[0]


def measure(name: str, rounds: int) -> dict:
    """Compile and run one case both ways, interleaved; medians."""
    build, n, model = CASES[name]
    solve, inputs, *fits = build()  # the Gpufit-protocol fits: their truth
    programs, compile_s = {}, {}
    for variant in VARIANTS:
        with summed_up_to(threshold(variant, n)):
            jax.clear_caches()  # traced and lowered anew, then compiled
            tic = time.perf_counter()
            programs[variant] = jax.jit(solve, compiler_options=OPTIONS).lower(*inputs).compile()
            compile_s[variant] = time.perf_counter() - tic
    calls = {key: (lambda p=p: jax.block_until_ready(p(*inputs))) for key, p in programs.items()}
    for call in calls.values():
        call()  # warm-up
    run_s, answers = interleaved(calls, rounds)
    rows = inputs[0].shape[0]
    record: dict = {"case": name, "n": n, "B": rows, "default_summed_n": small_linalg.SUMMED_N}
    for key in programs:
        seconds = statistics.median(run_s[key])
        record |= {f"{key}_compile_s": compile_s[key], f"{key}_run_s": seconds,
                   f"{key}_fits_per_s": rows / seconds,
                   f"{key}_steps": float(jnp.mean(answers[key].steps)),
                   f"{key}_converged": float(jnp.mean(answers[key].converged))}  # fmt: skip
        if fits:  # each free parameter's median error relative to the truth
            errors = tiny.accuracy(fits[0], answers[key])
            names = [f"rel_err_{name}" for name in PARAMETERS[fits[0].name]]
            record[f"{key}_median_relative_error"] = [round(errors[k], 5) for k in names]
        if model is not None:
            record[f"{key}_bytes_per_row_step"] = step_bytes(model, key, n)
    if model is not None:
        record["floor_bytes_per_row"] = 4 * FLOOR_VALUES[model]  # float32
    a, b = (np.asarray(answers[k].x, np.float64) for k in VARIANTS)
    record["x_difference"] = float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-300))
    record["speedup"] = record["apart_run_s"] / record["together_run_s"]
    return record


def markdown(records: list[dict], title: str, env: dict, rounds: int) -> str:
    lines = [f"# {title}", "",
             "Levenberg–Marquardt with `J^T J` and `J^T r` summed together (one variadic "
             "reduction) against one by one, same solves, one process; compile = trace + "
             f"lower + compile; run: medians of {rounds} interleaved rounds; backend "
             f"{env['backend']} ({env['host_cpus']} CPUs), jax {env['versions'].get('jax')}. "
             "Speedup: apart's time over together's (above 1: faster together). Bytes: XLA's "
             "bytes accessed per row by one step (two unrolled steps less one), floor: the "
             "row's data and parameters read and its parameters written. "
             "`python -m benchmarks.normal_sums`.", "",
             "| case | fits/s together | fits/s apart | speedup | compile s (together / "
             "apart) | steps | converged | bytes per row per step (together / apart / floor) "
             "| largest x difference |",
             "|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for r in records:
        bytes_ = "—"
        if "floor_bytes_per_row" in r:
            bytes_ = " / ".join(f"{r[k]:,.0f}" for k in ("together_bytes_per_row_step",
                                "apart_bytes_per_row_step", "floor_bytes_per_row"))  # fmt: skip
        lines.append(
            f"| {r['case']} | {r['together_fits_per_s']:,.0f} | {r['apart_fits_per_s']:,.0f} | "
            f"{r['speedup']:.2f}x | {r['together_compile_s']:.2f} / {r['apart_compile_s']:.2f} | "
            f"{r['together_steps']:.2f} / {r['apart_steps']:.2f} | "
            f"{r['together_converged']:.3f} / {r['apart_converged']:.3f} | {bytes_} | "
            f"{r['x_difference']:.1e} |"
        )
    errors = [r for r in records if "together_median_relative_error" in r]
    if errors:
        lines += ["", "Median relative error of each free parameter against the truth (together; "
                  "apart):", ""]  # fmt: skip
        lines += [f"- {r['case']}: {r['together_median_relative_error']}; "
                  f"{r['apart_median_relative_error']}" for r in errors]  # fmt: skip
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> pathlib.Path:
    return run_cases("normal_sums", __doc__, CASES, 7, RESULTS, measure, markdown, argv)


if __name__ == "__main__":
    main()
