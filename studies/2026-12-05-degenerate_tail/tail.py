"""One degenerate spectrum in a batch of 2,000 (issue 45, item 3, "the tail").

The user's case: 2,000 spectra of two pseudo-Voigt peaks on a linear baseline (8
parameters, 301 points: ``benchmarks.first_call``'s model and data), fitted by
``fixedopt.curve_fit`` at its defaults (no bounds, Levenberg-Marquardt, default lanes),
with per-spectrum fixed sets. Then the same batch with ONE row replaced by a degenerate
one. For each: the degenerate row's steps and status, the batch's steps, the trips of
the lanes loop (counted through ``progress=1``, in a separate call) and the batch's wall
time with and without the row (median of interleaved repeats after a warm call).

    PYTHONPATH=. python studies/2026-12-05-degenerate_tail/tail.py [--dtype float32] \
        [--repeats 5] [--out FILE.json]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import re
import statistics

import jax

jax.config.update("jax_enable_x64", True)

import numpy as np  # noqa: E402

import fixedopt  # noqa: E402
from benchmarks import first_call as cases  # noqa: E402
from benchmarks import timing  # noqa: E402

X = cases.X_SPECTRA
BATCH, ROW = 2000, 1000  # the degenerate row replaces this one
TRUTH = np.array([40.0, 11.0, 1.2, 25.0, 18.0, 1.6, 0.05, 2.0])


def batch(seed: int = 0):
    """``(y, p0, fixed)`` of the clean batch (``benchmarks.first_call.spectra``'s data)."""
    rng = np.random.default_rng(seed)
    truth = TRUTH * rng.uniform(0.9, 1.1, size=(BATCH, 8))
    clean = np.asarray(jax.jit(jax.vmap(lambda p: cases.spectrum(X, *p)))(truth))
    y = clean + rng.normal(0.0, 0.2, size=clean.shape)
    fixed = rng.random((BATCH, 8)) < 0.25
    p0 = np.where(fixed, truth, truth * rng.uniform(0.85, 1.15, size=truth.shape))
    return y, p0, fixed


def degenerate(name: str):
    """``(y, p0)`` of one degenerate spectrum (nothing fixed)."""
    noise = np.random.default_rng(1).normal(0.0, 0.2, X.shape)
    truth, p0 = TRUTH.copy(), TRUTH * 1.05
    if name == "zero_peak":  # the second peak absent: its centre and width unknowable
        truth[3] = 0.0
    if name == "flat":  # noise on a flat baseline only
        truth[[0, 3]] = 0.0
    if name == "far_start":  # both peaks started narrow, at the right edge
        p0 = TRUTH.copy()
        p0[[1, 2, 4, 5]] = (29.0, 0.1, 29.5, 0.1)
    if name == "far_apart":  # peaks started at either edge
        p0 = TRUTH.copy()
        p0[[1, 4]] = (2.0, 28.0)
    return np.asarray(cases.spectrum(X, *truth)) + noise, p0


DEGENERATE = ("zero_peak", "flat", "far_start", "far_apart")


def inputs(name: str | None, dtype):
    """``(y, p0, fixed)`` of the batch, with row ``ROW`` the degenerate ``name`` (None: clean)."""
    y, p0, fixed = batch()
    if name is not None:
        y, p0, fixed = y.copy(), p0.copy(), fixed.copy()
        y[ROW], p0[ROW] = degenerate(name)
        fixed[ROW] = False
    return y.astype(dtype), p0.astype(dtype), fixed


BOUNDS = None  # --bounds: the first_call benchmark's (areas >= 0, centres in the data, widths)


def fit(y, p0, fixed, **options):
    """The batch's ``curve_fit`` at its defaults (no bounds, but ``--bounds``): its
    ``Solution``."""
    bounds = {} if BOUNDS is None else {"bounds": BOUNDS}
    _, _, result = fixedopt.curve_fit(
        cases.spectrum, X.astype(y.dtype), y, p0, fixed=fixed, batched=True, result=True,
        **bounds, **options,
    )  # fmt: skip
    return result.solution


def trips(y, p0, fixed) -> int:
    """The lanes loop's trips: the last step ``progress=1`` reports, plus the last trip."""
    text = io.StringIO()
    with contextlib.redirect_stdout(text):
        jax.block_until_ready(fit(y, p0, fixed, progress=1))
    steps = [int(s) for s in re.findall(r"step (\d+):", text.getvalue())]
    return max(steps, default=0) + 1


def measure(dtype, repeats: int) -> dict:
    """Per batch (clean, then each degenerate row): the row, its batch and the timing."""
    names = (None, *DEGENERATE)
    data = {name or "clean": inputs(name, dtype) for name in names}
    calls = {name: (lambda d=d: jax.block_until_ready(fit(*d))) for name, d in data.items()}
    for call in calls.values():  # compile, and warm
        call()
    times, _ = timing.interleaved(calls, repeats)
    clean = statistics.median(times["clean"])
    rows = {}
    for name, d in data.items():
        solution = fit(*d)
        steps = np.asarray(solution.steps)
        status = np.asarray(solution.status)
        seconds = statistics.median(times[name])
        rows[name] = {
            "row_steps": int(steps[ROW]),
            "row_status": fixedopt.Status(int(status[ROW])).name,
            "row_reason": fixedopt.Reason(int(solution.reason[ROW])).name,
            "steps_median": float(np.median(steps)),
            "steps_p99": float(np.percentile(steps, 99)),
            "steps_max_others": int(np.delete(steps, ROW).max()),
            "not_converged": int((status != fixedopt.Status.CONVERGED).sum()),
            "trips": trips(*d),
            "seconds": seconds,
            "ratio": seconds / clean,
        }
    return rows


def markdown(record: dict) -> str:
    """The table of one dtype's record."""
    head = ("| batch | row steps | row status (reason) | steps median / p99 / max of others "
            "| not converged | trips | seconds | ratio |")  # fmt: skip
    bounded = ", the spectra benchmark's bounds" if record.get("bounds") else ""
    lines = [f"## {record['dtype']}, B = {BATCH}{bounded}, median of {record['repeats']}", "", head,
             "|---|---:|---|---|---:|---:|---:|---:|"]  # fmt: skip
    for name, r in record["rows"].items():
        lines.append(
            f"| {name} | {r['row_steps']} | {r['row_status']} ({r['row_reason']}) | "
            f"{r['steps_median']:g} / {r['steps_p99']:g} / {r['steps_max_others']} | "
            f"{r['not_converged']} | {r['trips']} | {r['seconds']:.3f} | {r['ratio']:.2f} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    """Measure one dtype, print the table, write the record to ``--out``."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--dtype", default="float64", choices=("float64", "float32"))
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out")
    parser.add_argument("--bounds", action="store_true", help="the spectra benchmark's bounds")
    args = parser.parse_args()
    global BOUNDS
    BOUNDS = cases.SPECTRA_BOUNDS if args.bounds else None
    rows = measure(np.dtype(args.dtype), args.repeats)
    record = {"dtype": args.dtype, "repeats": args.repeats, "bounds": args.bounds, "rows": rows,
              "environment": timing.environment()}  # fmt: skip
    print(markdown(record))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(record, f, indent=1)


if __name__ == "__main__":
    main()
