"""The ``tpu_peers`` suite (issue 61, item 3): the mission's benchmark on an accelerator,
float32 (a TPU has no float64 linear algebra). fixedopt's mask against its index
splitting (``strategy="split"``: padded per-row free indices) on the same solver, and the
whole batch as one loop (``fixedopt-mask-vmap``), beside jaxopt's L-BFGS-B, optax's and
optimistix's L-BFGS (``vmap`` over rows, the fixed entries substituted in the objective)
and TFP's batched L-BFGS, on ``quad`` and ``rosen`` at n = 8, 64, 512 with JAX's 64-bit
mode off (:func:`float32_only`; the cpu suite's problems, methods and checks; scipy's
loop on a subsample is the reference where it runs, else fixedopt-mask); Gpufit's
protocol by Poisson maximum likelihood at 1e6 and 1e7 spots (``mle``), and by least
squares at 1e6 (``gpufit``: fixedopt's matmul precision, the machine profile's, and JAX's
default traded back, ``jax.default_matmul_precision``; 1e7 fits are ``tiny_large``'s);
``keep_fixed(adam)`` against plain adam. Each fixedopt record counts its rows' statuses
and the rows that ran to ``max_steps`` (the first of them by index).

Made for one TPU v5e chip (``bash benchmarks/device.sh tpu_peers``, jaxopt, optimistix and
TFP carried as wheels: ``make device-wheels DEVICE_PYTHON=3.11``); runs on any backend
(``--quick``: a smoke run on a CPU). A device call has 10 minutes: the environment picks
a share, comma-separated, all by default: ``PARTS`` (quad, rosen, mle, gpufit, adam),
``SIZES`` (n of quad and rosen: 8, 64, 512), ``METHODS`` (those of :data:`METHODS`, in
its order; without scipy's loop the first one listed is the reference)."""

import contextlib
import dataclasses
import json
import os

import jax
import jax.numpy as jnp
import numpy as np
import optax

import fixedopt
from benchmarks import timing
from benchmarks.cases import Case
from benchmarks.methods import GTOL, WHOLE_BATCH, Settings, fixedopt_call, jitted
from benchmarks.suites import Plan, run_plan
from benchmarks.tiny import GPUFIT, fit_record
from fixedopt.testing import wait_for_compiles_ahead
from fixedopt.testing_problems import gaussian_fits, gaussian_model

METHODS = ("scipy-lbfgsb-loop", "fixedopt-mask", "fixedopt-split", "fixedopt-mask-vmap",
           "jaxopt-lbfgsb-vmap", "optax-lbfgs-vmap-mask", "optimistix-lbfgs-vmap-mask",
           "tfp-lbfgs-batch")  # fmt: skip
FIXEDOPT = {"fixedopt-mask": {}, "fixedopt-split": {"strategy": "split"},
            "fixedopt-mask-vmap": {"lanes": WHOLE_BATCH}}  # fmt: skip
PARTS = ("quad", "rosen", "mle", "gpufit", "adam")
BATCH = {8: 16_384, 64: 16_384, 512: 2_048}  # rows per n (quick: 16, 8, 4)
QUICK_BATCH = {8: 16, 64: 8, 512: 4}
FULL = Plan(loop_rows=16, jaxopt_work=2**20)
QUICK = Plan(loop_rows=4, jaxopt_work=64)
SPOTS, QUICK_SPOTS = (10**6, 10**7), (10**3,)
FITS, QUICK_FITS = 10**6, 10**4  # gpufit
ADAM_STEPS = 100
LISTED_ROWS = 32  # rows at max_steps named in a record, at most


def chosen(variable: str, choices: tuple) -> tuple:
    """The choices the environment ``variable`` names (comma-separated), in ``choices``'
    order; all of them where it is unset or empty."""
    named = [c.strip() for c in os.environ.get(variable, "").split(",") if c.strip()]
    unknown = sorted(set(named) - {str(c) for c in choices})
    if unknown:
        raise ValueError(f"{variable}: unknown {unknown}; choose from {list(choices)}")
    return tuple(c for c in choices if str(c) in named) if named else choices


@contextlib.contextmanager
def float32_only():
    """JAX's 64-bit mode off within, as a float32 user on a TPU runs (``benchmarks.run``
    turns it on): under it the peers' programs carry float64 and int64 arrays (optax's
    masked L-BFGS at rosen n = 8: 640 float64 tensors, 49 of them ``(B, n)``; jaxopt's
    1,412 int64), which a TPU emulates (optax's recipe: 25.8 s a call at quad n = 64 in
    ``tpu-tpu_peers-2026-12-06``, 96 steps at most; 8.3 s with x64 off on another batch
    of 16,384 rows of n = 64 to 500 steps, ``tpu-first_call-float32-2026-12-06``). Set
    globally: fixedopt may compile in a thread of its own, which finishes under it
    before the mode comes back."""
    enabled = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", False)
    try:
        yield
    finally:
        wait_for_compiles_ahead()
        jax.config.update("jax_enable_x64", enabled)


def outcome(solution, max_steps: int) -> dict:
    """A batched fixedopt solve's rows: statuses counted, steps, the rows at ``max_steps``."""
    codes, counts = np.unique(np.asarray(solution.status), return_counts=True)
    steps = np.asarray(solution.steps)
    capped = np.flatnonzero(steps >= max_steps)
    names = (f"{fixedopt.Status(int(c)).name}:{k}" for c, k in zip(codes, counts))
    return {"statuses": " ".join(names), "steps_median": float(np.median(steps)),
            "steps_max": int(np.max(steps)), "rows_at_max_steps": int(capped.size),
            "max_steps_rows": capped[:LISTED_ROWS].tolist()}  # fmt: skip


def with_outcomes(records: list[dict], case: Case, settings: Settings) -> list[dict]:
    """fixedopt's records of ``case`` with :func:`outcome` (one more solve each, compiled)."""
    problem = case.make(case.problems[0])
    for record in records:
        options = FIXEDOPT.get(record.get("method"))
        if options is not None and "skipped" not in record:
            call, inputs = fixedopt_call(problem, settings, **options)
            solve = call if options.get("strategy") == "split" else jitted(call)
            record |= outcome(solve(*inputs), settings.max_steps)
    return records


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
            "steps_mean": float(np.mean(np.asarray(outputs["mle"].steps))),
            **outcome(outputs["mle"], GPUFIT["max_steps"])}  # fmt: skip


def gpufit(count: int, repeats: int) -> list[dict]:
    """Gpufit's protocol by least squares (``benchmarks.tiny``'s fits) at fixedopt's
    matmul precision (``profile``: float32 products at "highest" on a TPU or GPU) and at
    JAX's default, traded back (a TPU's bfloat16 passes; on a CPU the same program)."""
    records = []
    for precision in ("profile", "default"):
        traded = precision == "default"
        with jax.default_matmul_precision("default") if traded else contextlib.nullcontext():
            record, _ = fit_record(gaussian_fits(count), GPUFIT, repeats, "gpufit")
        records.append(record | {"kind": "tpu_gpufit", "precision": precision})
    return records


def adam_step(optimizer):
    """One step of ``optimizer`` on ``sum((x - target)^2)``: ``(x, target, state)`` to
    ``(x, state)``."""

    def step(x, target, state):
        updates, state = optimizer.update(2.0 * (x - target), state, x)
        return optax.apply_updates(x, updates), state

    return step


def adam_run(optimizer, steps: int):
    """``steps`` of ``optimizer`` from ``x`` in one jitted ``fori_loop``."""

    def run(x, target):
        step = lambda _, carry: adam_step(optimizer)(carry[0], target, carry[1])
        return jax.lax.fori_loop(0, steps, step, (x, optimizer.init(x)))[0]

    return jax.jit(run)


def bytes_accessed(program) -> float:
    """XLA's count of the bytes a compiled program reads and writes (a loop's body once)."""
    cost = program.cost_analysis()
    cost = cost[0] if isinstance(cost, list) else cost or {}  # a list in older JAX
    return float(cost.get("bytes accessed", np.nan))


def keep_fixed_adam(entries: int, repeats: int) -> dict:
    """``keep_fixed(adam)`` against plain adam, 30% of ``entries`` fixed: time a step.
    Bytes an entry by XLA's count of this backend's programs: one step, buffers donated
    (adam's floor is 28: x, target, m, v read, x, m, v written; a step in several passes
    reads some again), and what the mask adds to a step of the timed loop."""
    rng = np.random.default_rng(0)
    x, target = (jnp.asarray(rng.normal(size=entries), jnp.float32) for _ in range(2))
    fixed = jnp.asarray(rng.random(entries) < 0.3)
    adam = optax.adam(1e-2)
    optimizers = {"adam": adam, "keep_fixed_adam": fixedopt.keep_fixed(adam, fixed)}
    loops = {k: adam_run(o, ADAM_STEPS).lower(x, target).compile() for k, o in optimizers.items()}
    calls = {k: (lambda p=p: jax.block_until_ready(p(x, target))) for k, p in loops.items()}
    record = timing.compared(calls, "adam", repeats, kind="tpu_keep_fixed", entries=entries,
                             steps=ADAM_STEPS)  # fmt: skip
    moved = np.asarray(calls["keep_fixed_adam"]())
    exact = np.array_equal(moved[np.asarray(fixed)].view(np.int32),
                           np.asarray(x)[np.asarray(fixed)].view(np.int32))  # fmt: skip
    for name, optimizer in optimizers.items():
        step = jax.jit(adam_step(optimizer), donate_argnums=(0, 2))
        step = step.lower(x, target, optimizer.init(x)).compile()
        record[f"{name}_bytes_per_entry"] = bytes_accessed(step) / entries
    added = bytes_accessed(loops["keep_fixed_adam"]) - bytes_accessed(loops["adam"])
    bandwidth = 28 * entries * ADAM_STEPS / record["adam_s"]  # at adam's floor
    return record | {"loop_mask_bytes_per_entry": added / entries, "fixed_exact": bool(exact),
                     "adam_floor_bytes_per_s": bandwidth}  # fmt: skip


def run(quick: bool, args=None) -> list[dict]:
    """The suite's share that ``PARTS``, ``SIZES`` and ``METHODS`` pick (quick: a smoke run,
    16 rows of n = 8 unless ``SIZES`` says otherwise (8 of 64, 4 of 512), 1e3 spots, 2^16
    entries), each record printed when measured."""
    parts, methods = chosen("PARTS", PARTS), chosen("METHODS", METHODS)
    batch = QUICK_BATCH if quick else BATCH
    sizes = chosen("SIZES", tuple(batch)) if os.environ.get("SIZES") or not quick else (8,)
    plan, records = QUICK if quick else FULL, []
    settings = Settings(GTOL["float32"], args.max_steps or 5000, plan.loop_rows, plan.jaxopt_work)
    with float32_only():
        for problem in ("quad", "rosen"):
            for n in sizes if problem in parts else ():
                case = Case((problem,), batch[n], n, methods, "float32")
                measured = run_plan(dataclasses.replace(plan, cases=(case,)), args)
                records += shown(with_outcomes(measured, case, settings))
    for count in (QUICK_SPOTS if quick else SPOTS) if "mle" in parts else ():
        records += shown([gpufit_mle(count, 1 if quick else 3)])
    if "gpufit" in parts:
        records += shown(gpufit(QUICK_FITS if quick else FITS, 1 if quick else 3))
    if "adam" in parts:
        records += shown([keep_fixed_adam(2**16 if quick else 2**24, 3 if quick else 7)])
    return records


def shown(records: list[dict]) -> list[dict]:
    """``records``, each printed as a line of JSON (a run cut short keeps them in its log)."""
    for record in records:
        print(json.dumps(record, default=str), flush=True)
    return records
