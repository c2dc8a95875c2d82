"""Levenberg-Marquardt batch-last against the lanes on one chip (issue 61 item 1):
Gpufit's protocol (2D Gaussian 5x5, 5 parameters, float32, ``tiny.GPUFIT``), data on the
device.

    python -m benchmarks.batch_last_tpu oneoff LAYOUT   # a fresh process's first call, 1e6
    python -m benchmarks.batch_last_tpu speed           # fits/s inside jit, both layouts
    ... --quick                                         # small sizes (a CPU smoke run)

``oneoff``: the user's plain top-level call on 1e6 fits in a new process (compile and
run, fixedopt's persistent cache off), then the same call again (run only). ``speed``:
``jax.jit`` of the call (``tiny.py``'s path): compile seconds, fits/s (median of 3), steps,
statuses, fixed entries exact, steps/statuses/points against the CPU's lanes on the first
4,096 rows, the optimized program's fusions; LSE at 1e6 and 1e7, Poisson at 1e6.
LAYOUT: ``default`` (the backend's profile), ``rows-major`` or ``batch-last`` (forced).
Results as json lines on stdout and in ``$OUT/batch_last-*.json``.
"""

import argparse
import contextlib
import importlib
import json
import os
import pathlib
import re
import statistics
import time

os.environ.setdefault("FIXEDOPT_CACHE", "off")

import jax
import jax.numpy as jnp
import numpy as np

import fixedopt
from benchmarks.tiny import GPUFIT
from fixedopt._driver import engine, machine
from fixedopt.testing_problems import gaussian_fits, gaussian_model

CPU_ROWS = 4096


def layout_of(name):
    """The forced layout's context (none for ``default``)."""
    return contextlib.nullcontext() if name == "default" else machine.forced_layout(name)


def residual(p, data):
    return gaussian_model(p) - data


def expected(p):
    return gaussian_model(p)


def solve_of(estimator):
    """The batch's call as a user writes it (LSE with the data as an argument, or the
    Poisson likelihood of counts); one function each, so that a call again reuses it."""
    if estimator == "poisson":
        return lambda x0, fixed, data: fixedopt.least_squares(
            expected, x0, fixed, batched=True, counts=data, estimator="poisson", **GPUFIT
        )
    return lambda x0, fixed, data: fixedopt.least_squares(
        residual, x0, fixed, args=(data,), batched=True, **GPUFIT
    )


def poisson_counts(fits):
    rng = np.random.default_rng(1)
    return rng.poisson(gaussian_model(fits.truth.astype(np.float64), np)).astype(np.float32)


def summary(fits, s, seconds):
    status, steps, x = np.asarray(s.status), np.asarray(s.steps), np.asarray(s.x)
    statuses = " ".join(f"{c.name}:{int(np.sum(status == c))}" for c in fixedopt.Status
                        if np.any(status == c))  # fmt: skip
    return {"B": x.shape[0], "fits_per_s": x.shape[0] / seconds, "seconds": seconds,
            "steps_mean": float(np.mean(steps)), "steps_max": int(np.max(steps)),
            "statuses": statuses,
            "fixed_exact": bool(np.array_equal(x[fits.fixed], fits.x0[fits.fixed]))}  # fmt: skip


def oneoff(layout, rows):
    fits = gaussian_fits(rows)
    inputs = [jax.device_put(jnp.asarray(a)) for a in (fits.x0, fits.fixed, fits.data)]
    jax.block_until_ready(inputs)
    solve = solve_of("lse")
    with layout_of(layout):
        start = time.perf_counter()
        s = jax.block_until_ready(solve(*inputs))
        first = time.perf_counter() - start
        start = time.perf_counter()
        s = jax.block_until_ready(solve(*inputs))
        again = time.perf_counter() - start
    return {"case": f"one-off top-level call, {layout}", "first_call_s": first,
            **summary(fits, s, again)}  # fmt: skip


def hlo_counts(compiled):
    text = compiled.as_text()
    return {"fusions": len(re.findall(r" fusion\(", text)),
            "transposes": len(re.findall(r" transpose\(", text)),
            "whiles": len(re.findall(r" while\(", text))}  # fmt: skip


def cpu_reference(estimator, fits, data):
    cpu = jax.devices("cpu")[0]
    with jax.default_device(cpu), machine.forced_layout(machine.ROWS_MAJOR):
        inputs = [jnp.asarray(np.asarray(a)[:CPU_ROWS]) for a in (fits.x0, fits.fixed, data)]
        s = jax.jit(solve_of(estimator))(*inputs)
        return np.asarray(s.x), np.asarray(s.steps), np.asarray(s.status)


def compared(s, cpu):
    cx, csteps, cstatus = cpu
    rows = cx.shape[0]
    x = np.asarray(s.x)[:rows]
    scale = np.max(np.abs(cx), axis=1, keepdims=True)
    return {"max_diff_cpu_row_scale": float(np.max(np.abs(x - cx) / scale)),
            "steps_equal_cpu": float(np.mean(np.asarray(s.steps)[:rows] == csteps)),
            "status_equal_cpu": float(np.mean(np.asarray(s.status)[:rows] == cstatus))}  # fmt: skip


def jit_case(name, layout, estimator, fits, data, cpu):
    inputs = [jax.device_put(jnp.asarray(a)) for a in (fits.x0, fits.fixed, data)]
    with layout_of(layout):
        start = time.perf_counter()
        compiled = jax.jit(solve_of(estimator)).lower(*inputs).compile()
        compile_s = time.perf_counter() - start
    jax.block_until_ready(compiled(*inputs))
    times = []
    for _ in range(3):
        start = time.perf_counter()
        s = jax.block_until_ready(compiled(*inputs))
        times.append(time.perf_counter() - start)
    return {"case": name, "layout": layout, "estimator": estimator, "compile_s": compile_s,
            **summary(fits, s, statistics.median(times)), **compared(s, cpu),
            **hlo_counts(compiled)}  # fmt: skip


@contextlib.contextmanager
def variant(**flags):
    """The batch-last module flags set (``JOBS``, ``JACOBIAN_MAPPED``, ``SOLVES_STACKED``),
    every compiled solve dropped before and after."""
    modules = [importlib.import_module(f"fixedopt._driver.{m}")
               for m in ("batch_last", "batch_last_step")]  # fmt: skip
    given = {k: getattr(m, k) for m in modules for k in flags if hasattr(m, k)}
    engine.clear_compiled()
    jax.clear_caches()
    for m in modules:
        for k, v in flags.items():
            if hasattr(m, k):
                setattr(m, k, v)
    try:
        yield
    finally:
        for m in modules:
            for k in flags:
                if k in given and hasattr(m, k):
                    setattr(m, k, given[k])
        engine.clear_compiled()
        jax.clear_caches()


def variant_case(name, fits, cpu, **flags):
    with variant(**flags):
        record = jit_case(name, "batch-last", "lse", fits, fits.data, cpu)
    return record | {"flags": json.dumps(flags)}


def speed_cases(quick):
    small, large = (4096, 16384) if quick else (10**6, 10**7)
    fits = gaussian_fits(small)
    cpu = cpu_reference("lse", fits, fits.data)
    yield lambda: jit_case("LSE 1e6, batch-last", "batch-last", "lse", fits, fits.data, cpu)
    yield lambda: jit_case("LSE 1e6, lanes", "rows-major", "lse", fits, fits.data, cpu)
    yield lambda: variant_case("LSE 1e6, batch-last, no jobs", fits, cpu, JOBS=1, LEFT_OVER=10**9)
    yield lambda: variant_case("LSE 1e6, batch-last, columns apart", fits, cpu,
                               JACOBIAN_MAPPED=False)  # fmt: skip
    counts = poisson_counts(fits)
    pcpu = cpu_reference("poisson", fits, counts)
    yield lambda: jit_case("MLE 1e6, batch-last", "batch-last", "poisson", fits, counts, pcpu)
    big = gaussian_fits(large)
    bcpu = cpu_reference("lse", big, big.data)
    yield lambda: jit_case("LSE 1e7, batch-last", "batch-last", "lse", big, big.data, bcpu)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=("oneoff", "speed"))
    parser.add_argument("layout", nargs="?", default="default")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    out = pathlib.Path(os.environ.get("OUT", "."))
    print(json.dumps({"backend": jax.default_backend(), "jax": jax.__version__}), flush=True)
    if args.mode == "oneoff":
        cases = [lambda: oneoff(args.layout, 4096 if args.quick else 10**6)]
    else:
        cases = list(speed_cases(args.quick))
    records = []
    for case in cases:
        try:
            record = case()
        except Exception as error:  # a case's failure is a row of the results
            record = {"case": "?", "error": f"{type(error).__name__}: {str(error)[:300]}"}
        print(json.dumps(record), flush=True)
        records.append(record)
        name = f"batch_last-{args.mode}-{args.layout}.json"
        (out / name).write_text(json.dumps(records, indent=1))


if __name__ == "__main__":
    main()
