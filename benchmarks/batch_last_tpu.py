"""Levenberg-Marquardt batch-last by construction on one chip (issue 61 item 1): Gpufit's
protocol (2D Gaussian 5x5, 5 parameters, float32, ``tiny.GPUFIT``) batch-last (forced; the
batch as ``(B / 128, 128)``), the batch as one axis
(``batch_last.TILE = 0``, the first try), the lanes (``rows-major``, forced), the
Poisson MLE, 1e7 fits, and a plain batch-last LM with no tests (``reference``); the
default call at the top level too, and its time at ``max_steps`` 0, 1, 2, 4, 10 (the
slope: a trip's cost). Each case: fits/s (median of 3), compile seconds, steps,
statuses, the optimized program's fusions/transposes/whiles, and steps/statuses/points
against the CPU's lanes.

    python -m benchmarks.batch_last_tpu            # on the chip; writes $OUT/batch_last.{json,md}
    python -m benchmarks.batch_last_tpu --quick    # a smoke run on the CPU

Compile times are measured without fixedopt's persistent cache (``FIXEDOPT_CACHE=off``).
"""

import argparse
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
from fixedopt.testing_problems import gaussian_fits, gaussian_model

machine = importlib.import_module("fixedopt._driver.machine")
batch_last = importlib.import_module("fixedopt._driver.batch_last")
CPU_ROWS = 4096


def solve_of(estimator):
    fun = (
        (lambda p: gaussian_model(p))
        if estimator == "poisson"
        else (lambda p, d: gaussian_model(p) - d)
    )

    def solve(x0, fixed, data):
        if estimator == "poisson":
            return fixedopt.least_squares(fun, x0, fixed, batched=True, counts=data,
                                          estimator="poisson", **GPUFIT)  # fmt: skip
        return fixedopt.least_squares(fun, x0, fixed, args=(data,), batched=True, **GPUFIT)

    return solve


def reference_lm(p, data, iterations=10):
    """Plain batch-last LM (the issue's 90 lines): p (5, N), data (25, N), no tests."""
    grid = np.mgrid[0:5, 0:5].astype(np.float32)
    py, px = (jnp.asarray(a.ravel())[:, None] for a in grid)

    def evaluate(p):
        a, x0, y0, w, b = p
        dx, dy = px - x0, py - y0
        r2, inv = dx * dx + dy * dy, 1.0 / (w * w)
        e = jnp.exp(-0.5 * r2 * inv)
        ae = a * e
        r = ae + b - data
        jac = [e, ae * dx * inv, ae * dy * inv, ae * r2 * inv / w, jnp.ones_like(e)]
        normal = [[jnp.sum(jac[i] * jac[j], axis=0) for j in range(i + 1)] for i in range(5)]
        return jnp.sum(r * r, axis=0), normal, [jnp.sum(jac[i] * r, axis=0) for i in range(5)]

    def solve(normal, grad, lam):
        low = [[None] * 5 for _ in range(5)]
        for j in range(5):
            low[j][j] = jnp.sqrt(normal[j][j] * (1.0 + lam) - sum(low[j][k] ** 2 for k in range(j)))
            for i in range(j + 1, 5):
                low[i][j] = (normal[i][j] - sum(low[i][k] * low[j][k] for k in range(j))) / low[j][
                    j
                ]
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
    """Fusions, transposes, copies and whiles of the optimized program, and those of the
    loop's body (the step): ``body_*``."""
    text = compiled.as_text()
    count = lambda pattern, t=text: len(re.findall(pattern, t))
    cost = compiled.cost_analysis()
    cost = cost[0] if isinstance(cost, list) else cost
    record = {"bytes_accessed": float(cost.get("bytes accessed", -1)),
              "flops": float(cost.get("flops", -1)), "fusions": count(r"kind=k"),
              "transposes": count(r" transpose\("),
              "copies": count(r" copy\("), "whiles": count(r" while\(")}  # fmt: skip
    computations, name = {}, None
    for line in text.splitlines():
        head = re.match(r"^(?:ENTRY )?%?([\w.\-]+) .*\{$", line)
        if head:
            name = head.group(1)
            computations[name] = []
        elif name:
            computations[name].append(line)
    body = "\n".join("\n".join(computations.get(b, ()))
                     for b in re.findall(r"body=%?([\w.\-]+)", text))  # fmt: skip
    record.update(
        body_fusions=count(r" fusion\(", body),
        body_transposes=count(r" transpose\(", body),
        body_copies=count(r" copy\(", body),
    )
    return record


def median_seconds(call, repeats=3):
    jax.block_until_ready(call())
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        out = jax.block_until_ready(call())
        times.append(time.perf_counter() - start)
    return statistics.median(times), out


def poisson_counts(fits):
    rng = np.random.default_rng(1)
    return rng.poisson(gaussian_model(fits.truth.astype(np.float64), np)).astype(np.float32)


def cpu_reference(estimator, x0, fixed, data):
    cpu = jax.devices("cpu")[0]
    with jax.default_device(cpu), machine.forced_layout("rows-major"):
        inputs = tuple(jnp.asarray(np.asarray(a)[:CPU_ROWS]) for a in (x0, fixed, data))
        s = jax.jit(solve_of(estimator))(*inputs)
        return np.asarray(s.x), np.asarray(s.steps), np.asarray(s.status)


def compared(x, steps, status, cpu) -> dict:
    cx, csteps, cstatus = cpu
    x = np.asarray(x)[:CPU_ROWS]
    scale = np.max(np.abs(cx), axis=1, keepdims=True)
    record = {"max_diff_cpu_row_scale": float(np.max(np.abs(x - cx) / scale))}
    if steps is not None:
        record["steps_equal_cpu"] = float(np.mean(np.asarray(steps)[:CPU_ROWS] == csteps))
        record["status_equal_cpu"] = float(np.mean(np.asarray(status)[:CPU_ROWS] == cstatus))
    return record


def fixedopt_case(name, estimator, fits, data, cpu, layout=None, tile=None, top=False,
                  together=None):  # fmt: skip
    inputs = tuple(jax.device_put(jnp.asarray(a)) for a in (fits.x0, fits.fixed, data))
    solve = solve_of(estimator)
    given = batch_last.TILE, batch_last.SUMMED_TOGETHER
    batch_last.TILE = given[0] if tile is None else tile
    batch_last.SUMMED_TOGETHER = given[1] if together is None else together
    forced = machine.forced_layout(layout) if layout else _Nothing()
    counts = {}
    try:
        with forced:
            start = time.perf_counter()
            if top:  # the user's plain call: buckets, the after-loop pass
                jax.block_until_ready(solve(*inputs))
                compile_s = time.perf_counter() - start
                seconds, s = median_seconds(lambda: solve(*inputs))
                compile_s -= seconds
            else:
                compiled = jax.jit(solve).lower(*inputs).compile()
                compile_s = time.perf_counter() - start
                counts = hlo_counts(compiled)
                if os.environ.get("OUT") and name == "default (jit)":
                    path = pathlib.Path(os.environ["OUT"]) / "hlo-default.txt"
                    path.write_text(compiled.as_text())
                seconds, s = median_seconds(lambda: compiled(*inputs))
    finally:
        batch_last.TILE, batch_last.SUMMED_TOGETHER = given
    status, steps, x = np.asarray(s.status), np.asarray(s.steps), np.asarray(s.x)
    rows = x.shape[0]
    statuses = " ".join(f"{c.name}:{int(np.sum(status == c))}" for c in fixedopt.Status
                        if np.any(status == c))  # fmt: skip
    return {"case": name, "estimator": estimator, "B": rows, "fits_per_s": rows / seconds,
            "seconds": seconds, "compile_s": compile_s, "steps_mean": float(np.mean(steps)),
            "steps_max": int(np.max(steps)), "statuses": statuses,
            "fixed_exact": bool(np.array_equal(x[fits.fixed], fits.x0[fits.fixed])),
            **compared(x, steps, status, cpu), **counts}  # fmt: skip


class _Nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def reference_case(fits, cpu):
    inputs = (jnp.asarray(fits.x0.T), jnp.asarray(fits.data.T))
    start = time.perf_counter()
    compiled = jax.jit(reference_lm).lower(*inputs).compile()
    compile_s = time.perf_counter() - start
    if os.environ.get("OUT"):
        (pathlib.Path(os.environ["OUT"]) / "hlo-reference.txt").write_text(compiled.as_text())
    seconds, p = median_seconds(lambda: compiled(*inputs))
    x = np.asarray(p).T
    return {"case": "reference LM (no tests)", "estimator": "lse", "B": x.shape[0],
            "fits_per_s": x.shape[0] / seconds, "seconds": seconds, "compile_s": compile_s,
            "steps_mean": 10.0, **compared(x, None, None, cpu), **hlo_counts(compiled)}  # fmt: skip


def trips(fits):
    """The default top-level call's seconds at max_steps 0, 1, 2, 4, 10 (one program:
    max_steps is an input): the slope is a trip's cost, the intercept the rest."""
    inputs = tuple(jax.device_put(jnp.asarray(a)) for a in (fits.x0, fits.fixed, fits.data))
    fun = lambda p, d: gaussian_model(p) - d
    record = {"case": "top-level call, ms at max_steps 0/1/2/4/10", "B": fits.x0.shape[0]}
    for steps in (0, 1, 2, 4, 10):
        options = GPUFIT | {"max_steps": steps}
        call = lambda options=options: fixedopt.least_squares(fun, *inputs[:2], args=(inputs[2],),
                                                              batched=True, **options)  # fmt: skip
        record[f"ms_{steps}"] = 1e3 * median_seconds(call)[0]
    record["trip_ms"] = (record["ms_10"] - record["ms_2"]) / 8
    return record


def cases(quick):
    small, large = (10**4, 3 * 10**4) if quick else (10**6, 10**7)
    fits = gaussian_fits(small)
    cpu = cpu_reference("lse", fits.x0, fits.fixed, fits.data)
    counts = poisson_counts(fits)
    pcpu = cpu_reference("poisson", fits.x0, fits.fixed, counts)
    yield lambda: fixedopt_case("default (jit)", "lse", fits, fits.data, cpu)
    yield lambda: reference_case(fits, cpu)
    yield lambda: trips(fits)
    yield lambda: fixedopt_case("poisson default (jit)", "poisson", fits, counts, pcpu)
    yield lambda: fixedopt_case("default (top-level call)", "lse", fits, fits.data, cpu, top=True)
    big = gaussian_fits(large)
    big_cpu = cpu_reference("lse", big.x0, big.fixed, big.data)
    yield lambda: fixedopt_case("default (jit) 1e7", "lse", big, big.data, big_cpu)
    yield lambda: fixedopt_case("poisson, batch one axis (TILE 0)", "poisson", fits, counts, pcpu,
                                tile=0)  # fmt: skip
    yield lambda: fixedopt_case("sums apart", "lse", fits, fits.data, cpu, together=False)
    yield lambda: fixedopt_case("batch one axis (TILE 0)", "lse", fits, fits.data, cpu, tile=0)
    yield lambda: fixedopt_case("lanes (rows-major, jit)", "lse", fits, fits.data, cpu,
                                layout="rows-major")  # fmt: skip


COLUMNS = ("case", "ms_0", "ms_1", "ms_2", "ms_4", "ms_10", "trip_ms", "estimator", "B",
           "fits_per_s", "compile_s", "steps_mean", "steps_max",
           "statuses", "fixed_exact", "steps_equal_cpu", "status_equal_cpu",
           "max_diff_cpu_row_scale", "fusions", "transposes", "copies", "whiles", "body_fusions",
           "body_transposes", "body_copies", "bytes_accessed", "flops", "error")  # fmt: skip


def markdown(records):
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    for r in records:
        cell = lambda v: f"{v:,.4g}" if isinstance(v, float) else str(v)
        lines.append("| " + " | ".join(cell(r.get(c, "")) for c in COLUMNS) + " |")
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    if not args.quick:
        assert jax.default_backend() == "tpu", jax.default_backend()
    out = pathlib.Path(os.environ.get("OUT", "."))
    records = []
    started = time.perf_counter()
    # The lanes are every backend's default: batch-last forced (the lanes' case and the
    # CPU's reference force the lanes inside).
    machine._forced_layout.append(machine.BATCH_LAST)
    for case in cases(args.quick):
        if time.perf_counter() - started > float(os.environ.get("BUDGET_S", 400)):
            break
        try:
            record = case()
        except Exception as error:  # a case's failure is a row of the table
            record = {"case": "?", "error": f"{type(error).__name__}: {str(error)[:200]}"}
        print(json.dumps(record), flush=True)
        records.append(record)
        (out / "batch_last.json").write_text(json.dumps(records, indent=1))
        (out / "batch_last.md").write_text(markdown(records))
    print(markdown(records))


if __name__ == "__main__":
    main()
