"""The batch on the lane (minor) axis, on one chip (issue 61 items 1, 6): Gpufit's
protocol (2D Gaussian on 5x5 pixels, 5 parameters, float32, max_steps 10, ftol 1e-4)
through fixedopt's layouts (``machine.forced_layout``: ``rows-major``, the lanes as
today; ``rows-minor``, the whole batch with the batch last; ``lanes-minor``, the lanes
with their step computed batch-last), beside a plain ``jax.numpy`` Levenberg-Marquardt
with the batch last and no tests (``reference``), and the Poisson MLE of the same spot.
``rows-minor`` shrinks its batch as rows stop (``minor.sizes``, once by default;
``shrinks N``: N times); ``rows-minor whole`` steps the whole batch until its last
row stops.

Each case: fits/s (median of 3 compiled calls), compile seconds, steps, statuses, the
optimized program's fusions, transposes and copies, and max |x - x_cpu| / |x_cpu| over
the first rows against fixedopt's default solve on the CPU of the same process.

    python -m benchmarks.lane_axis            # writes $OUT/lane_axis.{json,md}
    python -m benchmarks.lane_axis --quick    # 1e4 fits: a smoke run, also on a CPU
    SUITE_SECONDS=290 bash benchmarks/device.sh lane_axis   # on the chip, as a suite
"""

import argparse
import importlib
import json
import os
import pathlib
import re
import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np

import fixedopt
from benchmarks import timing
from fixedopt.testing_problems import SPOT_GRID, gaussian_fits, gaussian_model

# A study's switch: the layout forced past the machine profile (not a user's option).
machine = importlib.import_module("fixedopt._driver.machine")
minor = None
PIXEL_Y, PIXEL_X = (a.ravel() for a in np.mgrid[0:SPOT_GRID, 0:SPOT_GRID].astype(np.float32))

GPUFIT = {"ftol": 1e-4, "gtol": 0.0, "xtol": 0.0, "max_steps": 10}
CPU_ROWS = 4096  # rows compared with the CPU's solve
BUDGET_S = 270.0  # cases not started past this are skipped


def residual(p, data):
    return gaussian_model(p) - data


def expected(p):
    return gaussian_model(p)


def fixedopt_solve(estimator: str, lanes=None):
    """The jittable batched solve: least squares, or the Poisson MLE of counts."""

    # New functions: each program traced anew (a layout's constants are read in the trace).
    fun = (lambda p: expected(p)) if estimator == "poisson" else (lambda p, d: residual(p, d))

    def solve(x0, fixed, data):
        extra = {} if lanes is None else {"lanes": lanes}
        if estimator == "poisson":
            return fixedopt.least_squares(fun, x0, fixed, batched=True, counts=data,
                                          estimator="poisson", **GPUFIT, **extra)  # fmt: skip
        return fixedopt.least_squares(fun, x0, fixed, args=(data,), batched=True,
                                      **GPUFIT, **extra)  # fmt: skip

    return solve


def reference_lm(p, data, iterations=10):
    """Plain Levenberg-Marquardt, batch last: ``p (5, N)``, ``data (25, N)``; Marquardt's
    diagonal damping, x10 / x0.1, ``iterations`` trips for every row, no tests."""
    px, py = jnp.asarray(PIXEL_X)[:, None], jnp.asarray(PIXEL_Y)[:, None]

    def evaluate(p):
        a, x0, y0, w, b = p
        dx, dy = px - x0, py - y0
        r2, inv = dx * dx + dy * dy, 1.0 / (w * w)
        e = jnp.exp(-0.5 * r2 * inv)
        ae = a * e
        r = ae + b - data
        jac = [e, ae * dx * inv, ae * dy * inv, ae * r2 * inv / w, jnp.ones_like(e)]
        normal = [[jnp.sum(jac[i] * jac[j], axis=0) for j in range(i + 1)] for i in range(5)]
        grad = [jnp.sum(jac[i] * r, axis=0) for i in range(5)]
        return jnp.sum(r * r, axis=0), normal, grad

    def solve(normal, grad, lam):
        low = [[None] * 5 for _ in range(5)]
        for j in range(5):
            d = normal[j][j] * (1.0 + lam) - sum(low[j][k] ** 2 for k in range(j))
            low[j][j] = jnp.sqrt(d)
            for i in range(j + 1, 5):
                s = normal[i][j] - sum(low[i][k] * low[j][k] for k in range(j))
                low[i][j] = s / low[j][j]
        y = []
        for i in range(5):
            y.append((-grad[i] - sum(low[i][k] * y[k] for k in range(i))) / low[i][i])
        x = [None] * 5
        for i in reversed(range(5)):
            x[i] = (y[i] - sum(low[k][i] * x[k] for k in range(i + 1, 5))) / low[i][i]
        return jnp.stack(x)

    def trip(_, carry):
        p, lam, cost, normal, grad = carry
        trial = p + solve(normal, grad, lam)
        new_cost, new_normal, new_grad = evaluate(trial)
        better = new_cost < cost
        keep = lambda a, b: jax.tree.map(lambda u, v: jnp.where(better, u, v), a, b)
        lam = jnp.where(better, lam * 0.1, lam * 10.0)
        return (keep(trial, p), lam, keep(new_cost, cost), keep(new_normal, normal),
                keep(new_grad, grad))  # fmt: skip

    cost, normal, grad = evaluate(p)
    lam = jnp.full(p.shape[1:], 1e-3, p.dtype)
    return jax.lax.fori_loop(0, iterations, trip, (p, lam, cost, normal, grad))[0]


def hlo_counts(compiled) -> dict:
    text = compiled.as_text()
    count = lambda pattern: len(re.findall(pattern, text))
    return {"fusions": count(r"\bfusion\(|kind=k"), "transposes": count(r" transpose\("),
            "copies": count(r" copy\("), "whiles": count(r" while\(")}  # fmt: skip


def timed(compiled, inputs, repeats=3):
    call = lambda: jax.block_until_ready(compiled(*inputs))
    call()
    times, outputs = timing.interleaved({"call": call}, repeats)
    return statistics.median(times["call"]), outputs["call"]


def poisson_fits(count: int):
    fits = gaussian_fits(count)
    rng = np.random.default_rng(1)
    counts = rng.poisson(gaussian_model(fits.truth.astype(np.float64), np)).astype(np.float32)
    return fits, counts


def cpu_solution(estimator, x0, fixed, data):
    """fixedopt's default solve of the first rows on the CPU of this process."""
    cpu = jax.devices("cpu")[0]
    rows = slice(0, CPU_ROWS)
    with jax.default_device(cpu):
        inputs = tuple(jnp.asarray(np.asarray(a)[rows]) for a in (x0, fixed, data))
        solution = jax.jit(fixedopt_solve(estimator))(*inputs)
        return np.asarray(solution.x), np.asarray(solution.steps), np.asarray(solution.status)


def compared(x, steps, status, cpu) -> dict:
    cpu_x, cpu_steps, cpu_status = cpu
    x = np.asarray(x)[:CPU_ROWS]
    rel = np.max(np.abs(x - cpu_x) / np.maximum(np.abs(cpu_x), 1e-30))
    every = np.max(np.abs(x - cpu_x) / np.maximum(np.abs(cpu_x), 1e-30), axis=1)
    record = {"max_rel_diff_cpu": float(rel), "p999_rel_diff_cpu": float(np.quantile(every, 0.999))}
    if steps is not None:
        steps, status = np.asarray(steps)[:CPU_ROWS], np.asarray(status)[:CPU_ROWS]
        record["steps_equal_cpu"] = float(np.mean(steps == cpu_steps))
        record["status_equal_cpu"] = float(np.mean(status == cpu_status))
    return record


def fixedopt_case(estimator, layout, fits, data, cpu, lanes=None, shrinks=1) -> dict:
    """fixedopt's solve in ``layout``; ``shrinks``: rows-minor's batch shrinks this many
    times at most as rows stop (0: the whole batch to the last row)."""
    solve = fixedopt_solve(estimator, lanes)
    inputs = tuple(jnp.asarray(a) for a in (fits.x0, fits.fixed, data))
    given = minor.SHRINKS
    minor.SHRINKS = shrinks
    try:
        with machine.forced_layout(layout), timing.compile_monitor() as compiles:
            compiled = jax.jit(solve).lower(*inputs).compile()
        fewest = machine.schedule(fixedopt.LevenbergMarquardt(), None, jax.default_backend())
        # of the rows (a TPU pads them to a power of 2)
        sizes = minor.sizes(fits.x0.shape[0], fewest.defaults.fewest_lanes)
    finally:
        minor.SHRINKS = given
    seconds, solution = timed(compiled, inputs)
    status, steps = np.asarray(solution.status), np.asarray(solution.steps)
    x = np.asarray(solution.x)
    rows = fits.x0.shape[0]
    statuses = " ".join(f"{s.name}:{np.sum(status == s)}" for s in fixedopt.Status
                        if np.any(status == s))  # fmt: skip
    if layout == "rows-minor":
        layout += f" {sizes}"
    return {"method": "fixedopt", "estimator": estimator, "layout": layout,
            "lanes": lanes, "B": rows, "fits_per_s": rows / seconds, "seconds": seconds,
            "compile_s": compiles["seconds"], "steps_mean": float(np.mean(steps)),
            "steps_max": int(np.max(steps)), "statuses": statuses,
            "fixed_exact": bool(np.array_equal(x[fits.fixed], fits.x0[fits.fixed])),
            "median_rel_err_truth": float(np.median(np.abs(x - fits.truth) / fits.truth)),
            **compared(x, steps, status, cpu), **hlo_counts(compiled)}  # fmt: skip


def reference_case(fits, cpu) -> dict:
    inputs = (jnp.asarray(fits.x0.T), jnp.asarray(fits.data.T))
    with timing.compile_monitor() as compiles:
        compiled = jax.jit(reference_lm).lower(*inputs).compile()
    seconds, p = timed(compiled, inputs)
    x, rows = np.asarray(p).T, fits.x0.shape[0]
    return {"method": "reference-lm", "estimator": "least_squares", "layout": "batch-last",
            "B": rows, "fits_per_s": rows / seconds, "seconds": seconds,
            "compile_s": compiles["seconds"], "steps_mean": 10.0, "steps_max": 10,
            "median_rel_err_truth": float(np.median(np.abs(x - fits.truth) / fits.truth)),
            **compared(x, None, None, cpu), **hlo_counts(compiled)}  # fmt: skip


def cases(quick: bool):
    """(label, thunk) in the order run: the 1e6 comparison first."""
    small, large = (10**4, 2 * 10**4) if quick else (10**6, 10**7)
    fits = gaussian_fits(small)
    cpu = cpu_solution("least_squares", fits.x0, fits.fixed, fits.data)
    pfits, counts = poisson_fits(small)
    pcpu = cpu_solution("poisson", pfits.x0, pfits.fixed, counts)

    def squares(layout, fits=fits, cpu=cpu, lanes=None, shrinks=1):
        return lambda: fixedopt_case("least_squares", layout, fits, fits.data, cpu, lanes,
                                     shrinks)  # fmt: skip

    def poisson(layout):
        return lambda: fixedopt_case("poisson", layout, pfits, counts, pcpu)

    big = gaussian_fits(large)
    big_cpu = cpu_solution("least_squares", big.x0, big.fixed, big.data)
    yield "reference", lambda: reference_case(fits, cpu)
    yield "rows-minor", squares("rows-minor")
    yield "rows-minor whole", squares("rows-minor", shrinks=0)
    yield "lanes-minor", squares("lanes-minor")
    yield "rows-major", squares("rows-major")
    yield "rows-minor 1e7", squares("rows-minor", big, big_cpu)
    yield "reference 1e7", lambda: reference_case(big, big_cpu)
    yield "poisson rows-minor", poisson("rows-minor")
    yield "rows-minor 1e7 shrinks 2", squares("rows-minor", big, big_cpu, shrinks=2)
    yield "poisson lanes-minor", poisson("lanes-minor")
    yield "lanes-minor 1e7", squares("lanes-minor", big, big_cpu)
    yield "lanes-minor 2^18", squares("lanes-minor", lanes=1 << 18)
    yield "poisson rows-major", poisson("rows-major")


def markdown(records: list[dict]) -> str:
    columns = ("method", "estimator", "layout", "lanes", "B", "fits_per_s", "compile_s",
               "steps_mean", "steps_max", "statuses", "fixed_exact", "max_rel_diff_cpu",
               "p999_rel_diff_cpu", "steps_equal_cpu", "status_equal_cpu", "fusions",
               "transposes", "copies", "error")  # fmt: skip
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for r in records:
        cell = lambda v: f"{v:,.4g}" if isinstance(v, float) else str(v)
        lines.append("| " + " | ".join(cell(r.get(c, "")) for c in columns) + " |")
    return "\n".join(lines) + "\n"


def run(quick: bool, args=None, out: pathlib.Path | None = None) -> list[dict]:
    """Every case, each record printed as a line of JSON when measured (and written to
    ``out`` after each), cases not started within ``BUDGET_S`` skipped."""
    began, records = time.perf_counter(), []
    print("jax", jax.__version__, jax.devices(), flush=True)
    for label, case in cases(quick):
        if time.perf_counter() - began > BUDGET_S:
            records.append({"case": label, "error": "skipped: time budget"})
            continue
        try:
            record = {"case": label, **case()}
        except Exception as error:  # a case that fails (memory, say) is recorded
            record = {"case": label, "error": f"{type(error).__name__}: {str(error)[:300]}"}
        record["elapsed_s"] = time.perf_counter() - began
        records.append(record)
        print(json.dumps(record, default=str), flush=True)
        if out is not None:
            (out / "lane_axis.json").write_text(json.dumps(records, indent=1, default=str))
            (out / "lane_axis.md").write_text(markdown(records))
    return records


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    quick = parser.parse_args().quick
    out = pathlib.Path(os.environ.get("OUT") or "lane_axis_out")
    out.mkdir(parents=True, exist_ok=True)
    run(quick, out=out)


if __name__ == "__main__":
    main()
