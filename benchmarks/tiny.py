"""The ``tiny`` suite: millions of small fits (Gpufit's protocol, decay curves), the
small-n L-BFGS case against TFP and optax, and what one step costs in memory traffic;
``tiny_large``: the Gpufit protocol at 1e7 fits. (The small free blocks are solved by
fused elementwise arithmetic; its comparison with the LAPACK path it replaced, and compile
time against the batch size: ``docs/decisions.md``, "The Gpufit protocol across commits"
and "Compile time against the batch size".)
"""

import re
import resource
import statistics

import jax
import jax.numpy as jnp
import numpy as np

import fixedopt
from benchmarks import timing
from benchmarks.cases import Case, run_case
from benchmarks.methods import GTOL, Settings
from benchmarks.tiny_loops import loop_records
from fixedopt.testing_problems import FIT_MODELS, FIT_PARAMETERS, Fits, decay_fits, gaussian_fits

# Every fit runs on the default lanes. Gpufit stops a fit when the relative change of
# chi-square is below 1e-4 or after 10 iterations. fixedopt's ftol is that test
# (MINPACK's: the larger of the actual and the predicted relative reduction of
# 0.5 |r|^2, which is chi-square / 2), max_steps counts iterations (accepted or not, as
# Gpufit's); gtol and xtol are turned off (0), since Gpufit has no such tests.
GPUFIT = {"ftol": 1e-4, "gtol": 0.0, "xtol": 0.0, "max_steps": 10}
FLOOR_VALUES = {"gaussian": 25 + 5 + 5, "decay": 128 + 5 + 5}  # data + x read, x written
PUBLISHED = (  # (method, fits/s, at fits, source): cited, not measured here
    ("Cpufit, 1 CPU thread", 60_000, 10**7, "Gpufit README; Przybylski et al., Sci. Rep. 2017"),
    ("Gpufit, GTX 1080", 3_000_000, 10**7, "Gpufit README; Przybylski et al., Sci. Rep. 2017"),
    ("Cpufit built -O3 on these 2-core machines", 165_000, 10**5,
     "issue 18 (measured by another session, not in this run)"),
)  # fmt: skip


def program(fits: Fits, options: dict):
    """The jitted batched ``least_squares`` of ``fits``, compiled; its info."""
    model = FIT_MODELS[fits.name][0]
    residual = lambda p, data: model(p) - data  # a new function: each program traced anew

    def solve(x0, fixed, data):
        return fixedopt.least_squares(residual, x0, fixed, args=(data,), batched=True, **options)

    inputs = (jnp.asarray(fits.x0), jnp.asarray(fits.fixed), jnp.asarray(fits.data))
    compiled, info = timing.compiled(jax.jit(solve), *inputs)
    return compiled, inputs, info | structure(compiled, fits.x0.shape[0])


def structure(compiled, rows: int) -> dict:
    """What XLA's program holds: fusions, custom calls, dots, and bytes accessed per row
    (XLA counts a while loop's body once: setup + one iteration + finish)."""
    hlo = compiled.as_text()
    cost = compiled.cost_analysis()
    cost = cost[0] if isinstance(cost, list) else cost
    return {"fusions": len(re.findall(r" fusion\(", hlo)),
            "custom_calls": len(re.findall(r"custom_call_target=", hlo)),
            "dots": len(re.findall(r" dot\(", hlo)),
            "program_bytes_per_row": float(cost["bytes accessed"]) / rows}  # fmt: skip


def accuracy(fits: Fits, solution) -> dict:
    """Median relative error of each free parameter against the truth; convergence."""
    x = np.asarray(solution.x, np.float64)
    error = np.abs(x - fits.truth) / np.abs(fits.truth)
    names = FIT_PARAMETERS[fits.name]
    medians = {f"rel_err_{name}": float(np.median(error[~fits.fixed[:, k], k]))
               for k, name in enumerate(names)}  # fmt: skip
    exact = np.array_equal(x[fits.fixed], fits.x0[fits.fixed].astype(np.float64))
    return medians | {"converged_frac": float(np.mean(np.asarray(solution.converged))),
                      "steps_mean": float(np.mean(np.asarray(solution.steps))),
                      "fixed_exact": bool(exact)}  # fmt: skip


def fit_record(fits: Fits, options: dict, repeats: int, label: str) -> tuple[dict, object]:
    """The fits of ``fits``, timed (median of ``repeats`` compiled calls): a record and
    the solution."""
    compiled, inputs, info = program(fits, options)
    call = lambda: jax.block_until_ready(compiled(*inputs))
    call()  # warm-up
    times, outputs = timing.interleaved({"fixedopt": call}, repeats)
    seconds = statistics.median(times["fixedopt"])
    rows = fits.x0.shape[0]
    record = {"kind": "tiny_fit", "problem": fits.name, "options": label, "B": rows,
              "fits_per_s": rows / seconds, **timing.summary(times["fixedopt"]),
              "compile_s": info["compile_s"],
              **{k: info[k] for k in ("fusions", "custom_calls", "dots", "program_bytes_per_row")},
              **accuracy(fits, outputs["fixedopt"])}  # fmt: skip
    print(f"{fits.name} B={rows}: {rows / seconds:,.0f} fits/s, compile "
          f"{info['compile_s']:.2f} s", flush=True)  # fmt: skip
    return record, outputs["fixedopt"]


def step_bytes(fits: Fits, options: dict) -> dict:
    """Bytes accessed per row by one step: the program of two iterations less the program
    of one (``differentiate="unroll"``: a scan of ``max_steps``; XLA inlines a scan of one
    and keeps a loop of two), against the floor of the step."""
    costs = [program(fits, options | {"differentiate": "unroll", "max_steps": steps})[2]
             ["program_bytes_per_row"] for steps in (1, 2)]  # fmt: skip
    floor, step = 4 * FLOOR_VALUES[fits.name], costs[1] - costs[0]  # float32
    return {"kind": "tiny_bytes", "problem": fits.name, "bytes_per_row_per_step": step,
            "floor_bytes_per_row": floor, "times_floor": step / floor,
            "one_step_program_bytes_per_row": costs[0]}  # fmt: skip


def quad_records(quick: bool, args) -> list[dict]:
    """quad n = 8, B = 1024: fixedopt's L-BFGS against TFP's batched L-BFGS and optax
    (the cpu suite's methods and checks; the scipy loop is the reference)."""
    methods = ("scipy-lbfgsb-loop", "optax-lbfgs-vmap-mask", "tfp-lbfgs-batch",
               "fixedopt-mask")  # fmt: skip
    if quick:  # optax and TFP compile for ~10 s each here; the cpu suite smoke-runs them
        methods = (methods[0], methods[-1])
    case = Case(("quad",), 16 if quick else 1024, 8, methods)
    settings = Settings(GTOL["float64"], 5000, loop_rows=4 if quick else 256)
    return [r | {"max_steps": settings.max_steps} for r in run_case(case, settings, args)]


def run(quick: bool, args=None) -> list[dict]:
    """The tiny suite (quick: 1e3 Gaussian fits, 32 decays, quad B = 16; under a minute)."""
    # A small solve compiled first: a process's first compilation carries one-time costs
    # that would be charged to whichever program came first (not in the smoke, which
    # times nothing and runs the cpu suite first, tests/test_benchmarks.py).
    if not quick:
        program(gaussian_fits(8), GPUFIT)
    records = []
    for batch in (10**3,) if quick else (10**3, 10**4, 10**5, 10**6):
        fits = gaussian_fits(batch)
        repeats = 1 if quick else (7 if batch <= 10**4 else 3)
        record, outputs = fit_record(fits, GPUFIT, repeats, "gpufit")
        records.append(record)
    records += loop_records(fits.rows(20 if quick else 500), GPUFIT, outputs)
    decays = decay_fits(32 if quick else 20_000)
    record, outputs = fit_record(decays, {}, 1 if quick else 5, "defaults")
    records += [record, *loop_records(decays.rows(8 if quick else 200), {}, outputs)]
    records.append(step_bytes(gaussian_fits(1000), GPUFIT))
    if not quick:
        records.append(step_bytes(decay_fits(1000), {}))
    published = [{"kind": "tiny_published", "method": m, "fits_per_s": f, "fits": n,
                  "source": s, "measured_here": False} for m, f, n, s in PUBLISHED]  # fmt: skip
    return records + quad_records(quick, args) + published


def run_large(quick: bool, args=None) -> list[dict]:
    """The tiny_large suite: the Gpufit protocol at 1e7 fits (quick: 1e4) on the default
    path, once: fits/s, accuracy, and the process's peak memory (the lanes bound the
    loop's working memory; the data and results are O(B))."""
    record, _ = fit_record(gaussian_fits(10**4 if quick else 10**7), GPUFIT, 1, "gpufit")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: KiB
    return [record | {"process_peak_rss_bytes": peak}]
