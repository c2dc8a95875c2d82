"""``python -m benchmarks.first_call [--repeats N] [--cases NAME ...] [--label L] [--out DIR]``:
what a notebook user waits for before the first answer.

Each case runs in fresh Python processes, a model no process has compiled before (its
persistent compilation cache a new, empty folder); the wait beyond the compiled call's
own time of: a ``new model`` (the first call); a ``new batch`` (the same process, a tenth
of the batch) and ``5 rows`` (then a batch of 5, a program of its own); a ``new
process`` (a second process, the cache the first left); the first ``gradient``
(spectra: the first ``jax.grad`` of one fit's centre, after that fit's first forward
call: ``docs/decisions.md``, "The first gradient through a solve"). The first call's compile is
split into JAX's stages (trace, lowering, XLA); a third process dumps XLA's optimized
programs and counts what they hold (instructions, while loops, fusions: each a kernel;
XLA's passes: ``docs/decisions.md``, "Where a solve's compile goes"). Cases
(:data:`BATCHES`: B, then the new batch): ``spectra``, ``rk4``, ``spot``, ``quad64``
(float64 but ``spot``), below. Medians over ``--repeats``. Writes
``<out>/<backend>-first_call[-label]-<date>.{json,md}``.
"""

import argparse
import json
import os
import pathlib
import re
import statistics
import subprocess
import sys
import tempfile
import time

import jax

jax.config.update("jax_enable_x64", True)  # the spectra, rk4 and quad cases run in float64

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import fixedopt  # noqa: E402
from benchmarks import timing  # noqa: E402
from benchmarks.tiny import GPUFIT  # noqa: E402
from fixedopt.testing_problems import gaussian_fits, gaussian_model, quad_jax  # noqa: E402

RESULTS = pathlib.Path(__file__).parent / "results"
# B, then the new batch: a tenth of it, as in issue 40 (2000 spectra, then 200); then a
# batch of few rows (at most 8 run as one vmap: a program of their own).
BATCHES = {"spectra": (2000, 200), "rk4": (500, 50), "spot": (100_000, 10_000),
           "quad64": (16384, 1600)}  # fmt: skip
FEW_ROWS = 5
STAGES = {"trace": "jaxpr_trace", "lower": "jaxpr_to_mlir_module", "compile": "backend_compile"}


# ---------------------------------------------------------------- the cases (child side)
# Each returns its timed calls: ``call`` first (then, spectra: ``forward``, ``gradient``);
# spectra and rk4 also their ``inputs`` (p0, fixed, y) for measurements that jit the call.


X_SPECTRA = np.linspace(0.0, 30.0, 301)
SPECTRA_BOUNDS = (np.array([0.0, 0.0, 0.05, 0.0, 0.0, 0.05, -np.inf, -np.inf]),
                  np.array([np.inf, 30.0, 10.0, np.inf, 30.0, 10.0, np.inf, np.inf]))  # fmt: skip


def pvoigt(x, a, c, s):
    """lmfit's pseudo-Voigt of area ``a``, fraction 0.37 of Lorentzian."""
    g = jnp.exp(-((x - c) ** 2) / (2 * s**2)) / (s * jnp.sqrt(2 * jnp.pi))
    lorentz = s / (jnp.pi * ((x - c) ** 2 + s**2))
    return a * (0.37 * lorentz + 0.63 * g)


def spectrum(x, a1, c1, s1, a2, c2, s2, slope, offset):
    """Two pseudo-Voigt peaks on a linear baseline (8 parameters)."""
    return pvoigt(x, a1, c1, s1) + pvoigt(x, a2, c2, s2) + slope * x + offset


spectrum_residual = lambda p, y: spectrum(X_SPECTRA, *p) - y


def spectra(batch: int, seed: int = 0) -> dict:
    """``curve_fit`` of two pseudo-Voigt peaks + a line (8 parameters, 301 points, per-row
    fixed sets, bounds); ``forward`` and ``gradient``: one row's fit, its centre's gradient."""
    rng = np.random.default_rng(seed)
    truth = np.array([40.0, 11.0, 1.2, 25.0, 18.0, 1.6, 0.05, 2.0])
    truth = truth * rng.uniform(0.9, 1.1, size=(batch, 8))
    clean = np.asarray(jax.jit(jax.vmap(lambda p: spectrum(X_SPECTRA, *p)))(truth))
    y = clean + rng.normal(0.0, 0.2, size=clean.shape)
    fixed = rng.random((batch, 8)) < 0.25
    p0 = np.where(fixed, truth, truth * rng.uniform(0.85, 1.15, size=truth.shape))

    def centre(y):
        one = fixedopt.least_squares(spectrum_residual, p0[0], fixed[0], args=(y,))
        return one.x[1]

    return {"call": lambda: fixedopt.curve_fit(spectrum, X_SPECTRA, y, p0, bounds=SPECTRA_BOUNDS,
                                               fixed=fixed, batched=True),
            "forward": lambda: centre(y[0]),
            "gradient": lambda: jax.grad(centre)(jnp.asarray(y[0])),
            "inputs": (p0, fixed, y)}  # fmt: skip


RK4_STEPS, RK4_DT = 200, 0.05


def trajectory(p):
    """A damped driven oscillator's position at 200 times, integrated by RK4;
    ``p = (omega, zeta, drive, frequency, x0, v0)``."""
    omega, zeta, drive, frequency, x0, v0 = p

    def field(t, s):
        position, velocity = s
        force = drive * jnp.cos(frequency * t) - 2 * zeta * omega * velocity
        return jnp.stack([velocity, force - omega**2 * position])

    def step(s, t):
        k1 = field(t, s)
        k2 = field(t + RK4_DT / 2, s + RK4_DT / 2 * k1)
        k3 = field(t + RK4_DT / 2, s + RK4_DT / 2 * k2)
        k4 = field(t + RK4_DT, s + RK4_DT * k3)
        s = s + RK4_DT / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
        return s, s[0]

    return jax.lax.scan(step, jnp.stack([x0, v0]), jnp.arange(RK4_STEPS) * RK4_DT)[1]


trajectory_residual = lambda p, y: trajectory(p) - y


def rk4(batch: int, seed: int = 0) -> dict:
    """``least_squares`` of damped driven oscillators integrated by RK4 (6 parameters)."""
    rng = np.random.default_rng(seed)
    truth = np.array([2.0, 0.1, 1.3, 1.7, 1.0, 0.0]) * rng.uniform(0.9, 1.1, (batch, 6))
    truth[:, 5] = rng.normal(0.0, 0.1, batch)
    y = np.asarray(jax.jit(jax.vmap(trajectory))(truth))
    y = y + rng.normal(0.0, 0.02, y.shape)
    fixed = np.zeros((batch, 6), bool)
    fixed[np.arange(batch), rng.integers(0, 6, batch)] = True
    p0 = np.where(fixed, truth, truth * rng.uniform(0.95, 1.05, truth.shape))
    return {"call": lambda: fixedopt.least_squares(trajectory_residual, p0, fixed, args=(y,),
                                                   batched=True),
            "inputs": (p0, fixed, y)}  # fmt: skip


spot_residual = lambda p, y: gaussian_model(p) - y  # one function: a new batch reuses it


def spot(batch: int, seed: int = 0) -> dict:
    """Gpufit's protocol (float32, tolerance 1e-4, at most 10 steps) by ``least_squares``."""
    fits = gaussian_fits(batch, seed)
    options = dict(args=(fits.data,), batched=True, **GPUFIT)
    return {"call": lambda: fixedopt.least_squares(spot_residual, fits.x0, fits.fixed, **options)}


def quad64(batch: int, seed: int = 0) -> dict:
    """``minimize`` of per-row tridiagonal quadratics, n = 64, float64."""
    rng = np.random.default_rng(seed)
    diag, off = rng.uniform(2.0, 4.0, (batch, 64)), rng.uniform(-0.9, 0.9, (batch, 63))
    b, x0 = rng.normal(size=(batch, 64)), rng.normal(size=(batch, 64))
    fixed = rng.random((batch, 64)) < 0.3
    call = lambda: fixedopt.minimize(quad_jax, x0, fixed, args=(diag, off, b), batched=True)
    return {"call": call}


BUILDERS = {"spectra": spectra, "rk4": rk4, "spot": spot, "quad64": quad64}


def timed(call) -> tuple[float, dict]:
    """Wall seconds of ``call()`` (blocked until ready) and its compile stages."""
    with timing.compile_monitor() as found:
        start = time.perf_counter()
        jax.block_until_ready(call())
        seconds = time.perf_counter() - start
    return seconds, {stage: found[event] for stage, event in STAGES.items()}


def wait(call) -> dict:
    """The first call's wall time, its compile stages, and its wait beyond the median
    of three compiled calls."""
    first, found = timed(call)
    again = statistics.median(timed(call)[0] for _ in range(3))
    return {"first_s": first, "compiled_s": again, "wait_s": first - again, **found}


def child(case: str, role: str) -> dict:
    """One process's measurements (``role``: ``new`` or ``again``, or ``size``)."""
    batch, other = BATCHES[case]
    calls = BUILDERS[case](batch)
    if role == "size":
        jax.block_until_ready(calls["call"]())
        return {}
    first = wait(calls["call"])
    if role == "again":
        return {"new_process_s": first["wait_s"]}
    record = {"B": batch, "compiled_s": first["compiled_s"], "new_model_s": first["wait_s"],
              "new_batch_s": wait(BUILDERS[case](other)["call"])["wait_s"],
              "few_rows_s": wait(BUILDERS[case](FEW_ROWS)["call"])["wait_s"],
              **{f"{stage}_s": first[stage] for stage in STAGES}}  # fmt: skip
    if "gradient" in calls:  # one fit's first forward call, then its first gradient
        forward, gradient = wait(calls["forward"]), wait(calls["gradient"])
        record |= {"gradient_s": gradient["wait_s"], "forward_first_s": forward["first_s"],
                   "gradient_first_s": gradient["first_s"]}  # fmt: skip
    return record


# ---------------------------------------------------------------- the parent side


def run_child(case: str, role: str, cache: str, dump: str | None = None) -> dict:
    # fixedopt's default persistent cache, in a new folder (code with no default cache
    # ignores it: its new process compiles everything again, as its users' did).
    env = {k: v for k, v in os.environ.items() if k != "JAX_COMPILATION_CACHE_DIR"}
    env["FIXEDOPT_CACHE"] = cache
    if dump:
        env["XLA_FLAGS"] = f"{env.get('XLA_FLAGS', '')} --xla_dump_to={dump} --xla_dump_hlo_as_text"
    command = [sys.executable, "-m", "benchmarks.first_call", "--child", case, role]
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    if done.returncode:
        raise RuntimeError(f"{case} {role}: {done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


COUNTED = {"instructions": r"^\s+(?:ROOT )?\S+ = ", "while_loops": r" while\(",
           "fusions": r" fusion\(", "computations": r"^\S.*\{$"}  # fmt: skip


def program_size(case: str) -> dict:
    """What the optimized programs of the case's first call hold (XLA's dump)."""
    with tempfile.TemporaryDirectory() as dump, tempfile.TemporaryDirectory() as cache:
        run_child(case, "size", cache, dump)
        texts = [p.read_text() for p in sorted(pathlib.Path(dump).glob("*after_optimizations.txt"))]
    sizes = [{k: len(re.findall(pattern, text, re.MULTILINE)) for k, pattern in COUNTED.items()}
             for text in texts]  # fmt: skip
    biggest = max(sizes, key=lambda s: s["instructions"])
    return {"programs": len(sizes), **{f"largest_{k}": v for k, v in biggest.items()},
            "all_instructions": sum(s["instructions"] for s in sizes)}  # fmt: skip


def measure(case: str) -> dict:
    """One repeat of ``case``: a new-model process, then a new-process one."""
    with tempfile.TemporaryDirectory() as cache:
        return {"case": case, **run_child(case, "new", cache), **run_child(case, "again", cache)}


def row(r: dict) -> str:
    """One case's line of the table."""
    gradient = "—"
    if "gradient_s" in r:
        gradient = f"{r['gradient_s']:.2f} ({r['gradient_first_s'] / r['forward_first_s']:.1f}x)"
    return (
        f"| {r['case']} | {r['B']} | {r['compiled_s']:.2f} | {r['new_model_s']:.2f} | "
        f"{r['trace_s']:.2f} / {r['lower_s']:.2f} / {r['compile_s']:.2f} | "
        f"{r['new_batch_s']:.2f} | {r['few_rows_s']:.2f} | "
        f"{r['new_process_s']:.2f} | {gradient} | {r['programs']}: "
        f"{r['largest_instructions']}, {r['largest_while_loops']}, {r['largest_fusions']} |"
    )


def markdown(records: list[dict], environment: dict) -> list[str]:
    return [
        "# The first call: the wait beyond the compiled call (seconds)", "",
        f"{environment['backend']}, jax {environment['versions']['jax']}, {environment['date']}; "
        "medians over fresh processes (`python -m benchmarks.first_call`). "
        "Targets (issue 40): new model <= 2, new batch <= 0.5, new process <= 1, "
        "gradient <= 4 (and <= 2x the forward first call), spot and quad64 <= 1.5.", "",
        "| case | B | compiled call | new model | (trace / lower / XLA) | new batch (B/10) | "
        f"{FEW_ROWS} rows | new process | gradient (first grad / first forward) | programs, "
        "largest: instructions, while loops, fusions |",
        "|---|---:|---:|---:|---|---:|---:|---:|---|---|",
        *map(row, records),
    ]  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--child", nargs=2, metavar=("CASE", "ROLE"), help=argparse.SUPPRESS)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--cases", nargs="*", default=list(BATCHES), choices=BATCHES)
    parser.add_argument("--label", default="")
    parser.add_argument("--out", type=pathlib.Path, default=RESULTS, help="results folder")
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(*args.child)))
        return
    records = []
    for case in args.cases:
        runs = [measure(case) for _ in range(args.repeats)]
        medians = {k: statistics.median(r[k] for r in runs) for k in runs[0] if k != "case"}
        records.append({"case": case, **medians, **program_size(case), "repeats": args.repeats,
                        "runs": runs})  # fmt: skip
        print(json.dumps(records[-1] | {"runs": None}), flush=True)
    env = timing.environment()
    label = f"-{args.label}" if args.label else ""
    stem = args.out / f"{env['backend']}-first_call{label}-{env['date']}"
    timing.write_markdown(stem, markdown(records, env))
    stem.with_suffix(".json").write_text(json.dumps({"environment": env, "records": records},
                                                    indent=1))  # fmt: skip


if __name__ == "__main__":
    main()
