"""Levenberg-Marquardt variants on hard starts, classic problems and normal rows.

For each variant of ``lm_variants.VARIANTS`` (and the library's own solver, ``main``):

- ``single``: one row each, float64, no bounds, nothing fixed: the tail study's two far
  starts, six hard starts of our own on the same spectrum, and MGH's least-squares
  problems (``fixedopt.testing_problems.LEAST_SQUARES``) at their standard starts and
  three at 10x them. Steps, final cost (``Solution.value``, scipy's ``0.5 sum r^2``),
  status and reason. scipy's ``least_squares`` ``lm`` and ``trf`` (exact Jacobian by
  ``jax.jacfwd``) on the same rows: nfev, njev, cost, status.
- ``random``: 60 random far starts of the spectrum (one batch): steps, cost, status
  per row; summarised against the best cost any solver found for the row.
- ``normal``: the first 200 rows of the tail study's 2,000 spectra (per-row fixed sets,
  no bounds, ``curve_fit``'s defaults): steps and cost per row against ``main``'s.

    PYTHONPATH=. python studies/2026-12-05-lm_far_starts/compare.py [--only NAME,...]

Writes ``results.json`` and ``results.md`` next to this file (with ``--only``: only
prints). Steps, not seconds: one step is one evaluation of the residuals and their
Jacobian (``geodesic`` adds one second directional derivative per step).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import pathlib
import sys

import jax

jax.config.update("jax_enable_x64", True)

import numpy as np  # noqa: E402
import scipy.optimize  # noqa: E402

import fixedopt  # noqa: E402
from benchmarks import first_call as cases  # noqa: E402
from fixedopt.testing_problems import LEAST_SQUARES  # noqa: E402

HERE = pathlib.Path(__file__).parent
sys.path.insert(0, str(HERE))
import lm_variants  # noqa: E402

_spec = importlib.util.spec_from_file_location(
    "tail", HERE.parent / "2026-12-05-degenerate_tail" / "tail.py"
)
tail = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(tail)

X = cases.X_SPECTRA
TRUTH = tail.TRUTH
SOLVERS = {"main": fixedopt.LevenbergMarquardt(), **lm_variants.VARIANTS}
BOUNDED = "main+bounds"  # the library's solver with the spectra benchmark's bounds
BOUNDS = cases.SPECTRA_BOUNDS  # centres on [0, 30], widths on [0.05, 10], areas >= 0


def inside(x0):
    """A start clipped into ``BOUNDS`` (``flipped``'s negative areas become 0)."""
    return np.clip(x0, *BOUNDS)


def residual(p, y):
    return cases.spectrum(X, *p) - y


def spectrum_starts() -> dict:
    """``name: (y, p0)``: the tail study's far starts and ours, on its far-start data."""
    y, _ = tail.degenerate("far_start")  # the clean truth plus noise
    starts = {}
    for name in ("far_start", "far_apart"):
        starts[name] = tail.degenerate(name)
    own = {  # (a1, c1, s1, a2, c2, s2) replaced; slope and offset at the truth
        "left_edge": (40.0, 0.5, 0.1, 25.0, 1.0, 0.1),  # both narrow, at the left edge
        "wide": (40.0, 15.0, 8.0, 25.0, 15.0, 9.0),  # both wide (inside the bounds)
        "swapped_far": (40.0, 25.0, 1.2, 25.0, 5.0, 1.6),  # each on the wrong side
        "small_area": (1.0, 5.0, 1.2, 1.0, 25.0, 1.6),  # tiny peaks, far out
        "coincident": (30.0, 15.0, 1.0, 30.0, 15.0, 1.0),  # one peak twice (symmetric)
        "flipped": (-40.0, 11.0, 1.2, -25.0, 18.0, 1.6),  # right place, wrong sign
    }
    for name, peaks in own.items():
        p0 = TRUTH.copy()
        p0[:6] = peaks
        starts[name] = (y, p0)
    return starts


def classic_starts() -> dict:
    """``name: (residuals, x0)``: MGH's problems at the standard start, three at 10x."""
    starts = {name: (p.residuals, np.asarray(p.start, float)) for name, p in LEAST_SQUARES.items()}
    for name in ("rosenbrock", "helical_valley", "bard"):
        p = LEAST_SQUARES[name]
        starts[name + "_x10"] = (p.residuals, 10.0 * np.asarray(p.start, float))
    return starts


def random_starts(rows: int = 60, seed: int = 7):
    """``(y, p0)`` of ``rows`` random far starts on the far-start data: centres anywhere
    on [0, 30], widths 0.1 to 5, areas 5 to 80, the line at the truth."""
    y, _ = tail.degenerate("far_start")
    rng = np.random.default_rng(seed)
    p0 = np.tile(TRUTH, (rows, 1))
    p0[:, [1, 4]] = rng.uniform(0.0, 30.0, (rows, 2))
    p0[:, [2, 5]] = np.exp(rng.uniform(np.log(0.1), np.log(5.0), (rows, 2)))
    p0[:, [0, 3]] = rng.uniform(5.0, 80.0, (rows, 2))
    return np.tile(y, (rows, 1)), p0


def record(solution) -> dict:
    steps = np.atleast_1d(np.asarray(solution.steps))
    value = np.atleast_1d(np.asarray(solution.value))
    status = np.atleast_1d(np.asarray(solution.status))
    reason = np.atleast_1d(np.asarray(solution.reason))
    return {
        "steps": steps.tolist(),
        "value": value.tolist(),
        "status": [fixedopt.Status(int(s)).name for s in status],
        "reason": [fixedopt.Reason(int(r)).name for r in reason],
    }


def run_single(name, fun, x0, args=(), spectrum=False) -> dict | None:
    if name == BOUNDED and not spectrum:
        return None
    options = {"bounds": BOUNDS} if name == BOUNDED else {"solver": SOLVERS[name]}
    x0 = inside(x0) if name == BOUNDED else x0
    solution = fixedopt.least_squares(fun, x0, np.zeros(x0.shape, bool), args=args, **options)
    one = record(solution)
    return {key: values[0] for key, values in one.items()}


def run_scipy(fun, x0, args=(), spectrum=False) -> dict:
    f = jax.jit(lambda p: fun(p, *args))
    jac = jax.jit(jax.jacfwd(lambda p: fun(p, *args)))
    out = {}
    methods = {"lm": {"method": "lm"}, "trf": {"method": "trf"}}
    if spectrum:
        methods["trf_bounds"] = {"method": "trf", "bounds": BOUNDS}
    for method, options in methods.items():
        start = inside(x0) if "bounds" in options else x0
        r = scipy.optimize.least_squares(
            lambda p: np.asarray(f(p)), start, jac=lambda p: np.asarray(jac(p)), **options
        )
        out[method] = {"nfev": int(r.nfev), "njev": int(r.njev), "value": float(r.cost),
                       "status": int(r.status)}  # fmt: skip
    return out


def measure(names) -> dict:
    singles = {name: (residual, p0, (y,), True) for name, (y, p0) in spectrum_starts().items()}
    singles |= {name: (fun, x0, (), False) for name, (fun, x0) in classic_starts().items()}
    results: dict = {"single": {}, "random": {}, "normal": {}, "scipy": {}}
    for case, (fun, x0, args, spectrum) in singles.items():
        results["scipy"][case] = run_scipy(fun, x0, args, spectrum)
        results["single"][case] = {
            name: run_single(name, fun, x0, args, spectrum) for name in names
        }
        print(case, {n: r and (r["steps"], round(r["value"], 6))
                     for n, r in results["single"][case].items()}, flush=True)  # fmt: skip
    y_random, p0_random = random_starts()
    results["scipy_random"] = [run_scipy(residual, p, (y,))["lm"]
                               for y, p in zip(y_random, p0_random)]  # fmt: skip
    y, p0, fixed = tail.batch()
    y, p0, fixed = y[:200], p0[:200], fixed[:200]
    for name in names:
        options = {"bounds": BOUNDS} if name == BOUNDED else {"solver": SOLVERS[name]}
        solution = fixedopt.least_squares(
            residual, p0_random, np.zeros(p0_random.shape, bool), args=(y_random,),
            batched=True, **options,
        )  # fmt: skip
        results["random"][name] = record(solution)
        _, _, fit = fixedopt.curve_fit(cases.spectrum, X, y, p0, fixed=fixed, batched=True,
                                       result=True, **options)  # fmt: skip
        results["normal"][name] = record(fit.solution)
        print(name, "random steps mean", np.mean(results["random"][name]["steps"]),
              "normal steps mean/max", np.mean(results["normal"][name]["steps"]),
              np.max(results["normal"][name]["steps"]), flush=True)  # fmt: skip
    return results


def cell(r: dict | None) -> str:
    if r is None:
        return "-"
    status = {"CONVERGED": "C", "MAX_STEPS": "M", "STALLED": "S"}.get(r["status"], r["status"])
    return f"{r['steps']} / {r['value']:.6g} / {status}"


def markdown(results: dict) -> str:
    names = list(next(iter(results["single"].values())))
    out = ["# LM variants: measurements", ""]
    out += ["## One row each: steps / final cost / status (C converged, M max_steps)", ""]
    out += ["scipy: nfev/njev / cost (its `trf` with the bounds: spectrum rows only)", ""]
    out += ["| case | scipy lm | scipy trf | scipy trf, bounds | " + " | ".join(names) + " |"]
    out += ["|---" * (len(names) + 4) + "|"]

    def scipy_cell(r: dict | None) -> str:
        return "-" if r is None else f"{r['nfev']}/{r['njev']} / {r['value']:.6g}"

    for case, row in results["single"].items():
        sp = results["scipy"][case]
        reference = " | ".join(scipy_cell(sp.get(m)) for m in ("lm", "trf", "trf_bounds"))
        out.append(f"| {case} | {reference} | " + " | ".join(cell(row[n]) for n in names) + " |")
    out += ["", "## 60 random far starts of the spectrum (one batch)", ""]
    values = np.array([results["random"][n]["value"] for n in names])
    scipy_values = np.array([r["value"] for r in results["scipy_random"]])
    best = np.minimum(values.min(axis=0), scipy_values)
    out += ["| solver | steps mean / median / max | MAX_STEPS | rows at the best cost "
            "(1e-5 rel.) | median cost - best | mean cost |",
            "|---|---|---:|---:|---:|---:|"]  # fmt: skip
    scipy_nfev = np.array([r["nfev"] for r in results["scipy_random"]])
    scipy_limit = sum(r["status"] == 0 for r in results["scipy_random"])
    at_best = np.abs(scipy_values - best) <= 1e-5 * best
    out.append(f"| scipy lm (nfev) | {scipy_nfev.mean():.1f} / {np.median(scipy_nfev):g} / "
               f"{scipy_nfev.max()} | {scipy_limit} | {int(at_best.sum())} | "
               f"{np.median(scipy_values - best):.3g} | {scipy_values.mean():.2f} |")  # fmt: skip
    for n, v in zip(names, values):
        r = results["random"][n]
        steps = np.array(r["steps"])
        at_best = np.abs(v - best) <= 1e-5 * best
        out.append(
            f"| {n} | {steps.mean():.1f} / {np.median(steps):g} / {steps.max()} | "
            f"{r['status'].count('MAX_STEPS')} | {int(at_best.sum())} | "
            f"{np.median(v - best):.3g} | {v.mean():.2f} |"
        )
    out += ["", "Paired with `main`, rows where both end at the same cost (1e-6 rel.): their "
            "steps summed, and those of the rows where `main` took 100 steps or more.", "",
            "| solver | same-minimum rows | steps (main's) | of them main >= 100 steps | "
            "steps (main's) |", "|---|---:|---:|---:|---:|"]  # fmt: skip
    main_steps = np.array(results["random"]["main"]["steps"])
    main_values = np.array(results["random"]["main"]["value"])
    for n in names:
        steps = np.array(results["random"][n]["steps"])
        v = np.array(results["random"][n]["value"])
        same = np.abs(v - main_values) <= 1e-6 * main_values
        slow = same & (main_steps >= 100)
        out.append(f"| {n} | {same.sum()} | {steps[same].sum()} ({main_steps[same].sum()}) | "
                   f"{slow.sum()} | {steps[slow].sum()} ({main_steps[slow].sum()}) |")  # fmt: skip
    out += ["", "## 200 normal spectra (tail study's rows 0-199, per-row fixed sets)", ""]
    out += ["| solver | steps mean / max | rows with more steps than main | rows with "
            "fewer | rows costlier than main (1e-9 rel.) | not converged |",
            "|---|---|---:|---:|---:|---:|"]  # fmt: skip
    main = results["normal"]["main"]
    for n in names:
        r = results["normal"][n]
        steps, ref = np.array(r["steps"]), np.array(main["steps"])
        v, vref = np.array(r["value"]), np.array(main["value"])
        worse = int((v > vref * (1 + 1e-9)).sum())
        nc = sum(s != "CONVERGED" for s in r["status"])
        out.append(f"| {n} | {steps.mean():.2f} / {steps.max()} | {int((steps > ref).sum())} | "
                   f"{int((steps < ref).sum())} | {worse} | {nc} |")  # fmt: skip
    return "\n".join(out) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--only", help="comma-separated solver names (prints only)")
    args = parser.parse_args()
    names = args.only.split(",") if args.only else [*SOLVERS, BOUNDED]
    if "main" not in names:
        names = ["main", *names]
    results = measure(names)
    text = markdown(results)
    print(text)
    if not args.only:
        (HERE / "results.json").write_text(json.dumps(results))
        (HERE / "results.md").write_text(text)


if __name__ == "__main__":
    main()
