"""Trace of the library's LM (``lm_variants.VariantLM()``, its step copied) from the tail
study's ``far_start``, and restarts from its own iterates.

The trace: per trial, the damping, the gain ratio, ``|D s|`` of the damped step against
``|D s_GN|`` of the Gauss-Newton step, and ``D^2 / diag(J^T J)`` per parameter (how far
Moré's running max has drifted from the current column norms). The restarts: from the
run's iterate after ``k`` trials, a fresh solve with (a) the library's fresh state
(``D^2 = diag(J^T J)`` there, damping 1e-3), (b) the run's ``D^2`` and damping at
``k``, (c) the run's ``D^2`` with damping 1e-3, (d) a fresh ``D^2`` with the run's
damping: which of the two makes the crawl.

    PYTHONPATH=. python studies/2026-12-05-lm_far_starts/trace.py

Writes ``trace.md`` next to this file.
"""

from __future__ import annotations

import dataclasses

import lm_variants
import numpy as np
from compare import HERE, residual, tail

import fixedopt

NAMES = ("a1", "c1", "s1", "a2", "c2", "s2", "slope", "offset")
SHOWN = (*range(0, 20), 30, 50, 100, 200, 300, 400, 500, 600, 700, 800, 900)
RESTARTS = (13, 20, 50, 100, 200, 400)


def run(solver, x0, y):
    solution = fixedopt.least_squares(residual, x0, np.zeros(8, bool), args=(y,), solver=solver)
    return int(solution.steps), float(solution.value), fixedopt.Status(int(solution.status)).name


def main() -> None:
    y, p0 = tail.degenerate("far_start")
    lm_variants.TRACE.clear()
    steps, value, status = run(lm_variants.VariantLM(trace=True), p0, y)
    trace = list(lm_variants.TRACE)
    out = ["# Trace: the library's LM from `far_start`", "",
           f"{steps} steps, f = {value:.6f}, {status}. Per trial k: f at the point, the "
           "damping, the gain ratio rho, accepted, |D s| (damped step) and |D s_GN| "
           "(Gauss-Newton step), the point, and D^2 / diag(J^T J) per parameter "
           f"({', '.join(NAMES)}).", "",
           "| k | f | damping | rho | acc | D s | D s_GN | x | D^2 / diag(J^T J) |",
           "|---:|---:|---:|---:|---|---:|---:|---|---|"]  # fmt: skip
    for k in SHOWN:
        if k >= len(trace):
            continue
        t = trace[k]
        x = " ".join(f"{v:.3g}" for v in t["x"])
        drift = " ".join(f"{a / b:.2g}" for a, b in zip(t["scale"], t["diagonal"]))
        out.append(
            f"| {k} | {t['value']:.6g} | {t['damping']:.2e} | {t['gain']:.3f} | "
            f"{'y' if t['accepted'] else 'n'} | {t['scaled_step']:.3g} | "
            f"{t['scaled_gauss_newton']:.3g} | {x} | {drift} |"
        )
    out += ["", "## Restarts from the run's own iterate after k trials", "",
            "Steps to stop from there (the original run: steps - k more).", "",
            "| k | f there | original: remaining | (a) fresh D^2, damping 1e-3 | "
            "(b) run's D^2 and damping | (c) run's D^2, damping 1e-3 | "
            "(d) fresh D^2, run's damping |", "|---:|---:|---:|---|---|---|---|"]  # fmt: skip
    for k in RESTARTS:
        t = trace[k]
        x0 = np.asarray(t["x"])
        scale0 = tuple(float(v) for v in t["scale"])
        base = lm_variants.VariantLM()
        solvers = (
            base,
            dataclasses.replace(base, scale0=scale0, initial_damping=t["damping"]),
            dataclasses.replace(base, scale0=scale0),
            dataclasses.replace(base, initial_damping=t["damping"]),
        )
        cells = []
        for solver in solvers:
            s, v, st = run(solver, x0, y)
            cells.append(f"{s} / {v:.6f} / {st}")
        out.append(f"| {k} | {t['value']:.6f} | {steps - k} | " + " | ".join(cells) + " |")
    text = "\n".join(out) + "\n"
    print(text)
    (HERE / "trace.md").write_text(text)


if __name__ == "__main__":
    main()
