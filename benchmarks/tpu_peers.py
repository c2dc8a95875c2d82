"""The ``tpu_peers`` suite (issue 61, item 3): the mission's benchmark on an accelerator,
float32 (a TPU has no float64 linear algebra). fixedopt's mask against its index
splitting (``strategy="split"``: padded per-row free indices) on the same solver, beside
jaxopt's L-BFGS-B, optax's L-BFGS and TFP's batched L-BFGS, on ``quad`` and ``rosen`` at
n = 8, 64, 512 (the cpu suite's problems, methods and checks; scipy's loop on a subsample
is the reference); Gpufit's protocol by Poisson maximum likelihood; ``keep_fixed(adam)``
against plain adam. Made for one TPU v5e chip (``bash benchmarks/device.sh tpu_peers``,
jaxopt and TFP carried as wheels: ``make device-wheels DEVICE_PYTHON=3.11``); runs on any
backend (``--quick``: a smoke run on a CPU)."""

import dataclasses
import json
import os

import jax
import jax.numpy as jnp
import numpy as np
import optax

import fixedopt
from benchmarks import timing
from benchmarks.suites import Plan, grid, run_plan
from benchmarks.tiny import GPUFIT
from fixedopt.testing_problems import gaussian_fits, gaussian_model

METHODS = ("scipy-lbfgsb-loop", "jaxopt-lbfgsb-vmap", "optax-lbfgs-vmap-mask", "tfp-lbfgs-batch",
           "fixedopt-mask", "fixedopt-split")  # fmt: skip
SIZES = ((16_384, 64), (16_384, 8), (2_048, 512))
CASES = grid(("quad",), SIZES, METHODS, "float32") + grid(("rosen",), SIZES, METHODS, "float32")
FULL = Plan(CASES, loop_rows=32, jaxopt_work=2**20)
QUICK = Plan(grid(("quad", "rosen"), ((16, 8),), METHODS, "float32"), loop_rows=4, jaxopt_work=64)
# The parts to run (a device call has 10 minutes: the suite in two calls, say
# PARTS=quad,mle then PARTS=rosen,adam); all by default.
PARTS = ("quad", "rosen", "mle", "adam")
ADAM_STEPS = 100


def poisson_spots(count: int, seed: int = 1):
    """Gpufit's spots with Poisson counts (its MLE protocol): start, counts, fixed."""
    fits = gaussian_fits(count, seed)
    rng = np.random.default_rng(seed)
    counts = rng.poisson(gaussian_model(fits.truth.astype(np.float64), np)).astype(np.float32)
    return fits, counts


def gpufit_mle(count: int, repeats: int) -> dict:
    """``least_squares(estimator="poisson")`` on Gpufit's spots: fits/s, statuses."""
    fits, counts = poisson_spots(count)
    model = lambda p: gaussian_model(p, jnp)

    def solve(x0, fixed, counts):
        return fixedopt.least_squares(model, x0, fixed, estimator="poisson", counts=counts,
                                      batched=True, **GPUFIT)  # fmt: skip

    inputs = tuple(map(jnp.asarray, (fits.x0, fits.fixed, counts)))
    program, info = timing.compiled(jax.jit(solve), *inputs)
    call = lambda: jax.block_until_ready(program(*inputs))
    call()
    times, outputs = timing.interleaved({"mle": call}, repeats)
    summary = timing.summary(times["mle"])
    x = np.asarray(outputs["mle"].x, np.float64)
    error = np.median(np.abs(x[:, 1] - fits.truth[:, 1]))
    return {"kind": "tpu_gpufit_mle", "B": count, "fits_per_s": count / summary["time_median_s"],
            **summary, "compile_s": info["compile_s"], "median_abs_err_x0_px": float(error),
            "converged_frac": float(np.mean(np.asarray(outputs["mle"].converged))),
            "steps_mean": float(np.mean(np.asarray(outputs["mle"].steps)))}  # fmt: skip


def adam_run(optimizer, steps: int):
    """``steps`` of ``optimizer`` on ``sum((x - t)^2)`` in one jitted ``fori_loop``."""

    def run(x, target):
        state = optimizer.init(x)

        def body(_, carry):
            x, state = carry
            grad = 2.0 * (x - target)
            updates, state = optimizer.update(grad, state, x)
            return optax.apply_updates(x, updates), state

        return jax.lax.fori_loop(0, steps, body, (x, state))[0]

    return jax.jit(run)


def keep_fixed_adam(entries: int, repeats: int) -> dict:
    """``keep_fixed(adam)`` against plain adam, 30% of ``entries`` fixed: time a step."""
    rng = np.random.default_rng(0)
    x, target = (jnp.asarray(rng.normal(size=entries), jnp.float32) for _ in range(2))
    fixed = jnp.asarray(rng.random(entries) < 0.3)
    adam = optax.adam(1e-2)
    programs = {
        "adam": adam_run(adam, ADAM_STEPS),
        "keep_fixed_adam": adam_run(fixedopt.keep_fixed(adam, fixed), ADAM_STEPS),
    }
    calls = {k: (lambda p=p: jax.block_until_ready(p(x, target))) for k, p in programs.items()}
    record = timing.compared(calls, "adam", repeats, kind="tpu_keep_fixed", entries=entries,
                             steps=ADAM_STEPS)  # fmt: skip
    moved = np.asarray(calls["keep_fixed_adam"]())
    exact = np.array_equal(moved[np.asarray(fixed)].view(np.int32),
                           np.asarray(x)[np.asarray(fixed)].view(np.int32))  # fmt: skip
    # adam reads x, m, v, the gradient's inputs and writes x, m, v: ~8 float32 a step.
    step_s = record["adam_s"] / ADAM_STEPS if "adam_s" in record else None
    bandwidth = 8 * 4 * entries / step_s if step_s else None
    return record | {"fixed_exact": bool(exact), "adam_bytes_per_s": bandwidth}


def run(quick: bool, args=None) -> list[dict]:
    """The suite (quick: 16 rows of n = 8, 1e3 spots, 2^16 entries: a smoke run), each
    record printed as soon as it is measured; ``PARTS`` (environment) picks parts."""
    parts = os.environ.get("PARTS", ",".join(PARTS)).split(",")
    plan, records = QUICK if quick else FULL, []
    for case in plan.cases:
        if case.problems[0] in parts:
            records += shown(run_plan(dataclasses.replace(plan, cases=(case,)), args))
    if "mle" in parts:
        for count in (10**3,) if quick else (10**6, 10**7):
            records += shown([gpufit_mle(count, 1 if quick else 3)])
    if "adam" in parts:
        records += shown([keep_fixed_adam(2**16 if quick else 2**24, 3 if quick else 7)])
    return records


def shown(records: list[dict]) -> list[dict]:
    """``records``, each printed as a line of JSON (a run cut short keeps them in its log)."""
    for record in records:
        print(json.dumps(record, default=str), flush=True)
    return records
