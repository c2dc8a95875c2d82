"""The candidates of ``compare.py`` on larger samples: 300 random far starts (3 seeds of
100) and all 2,000 normal spectra of the tail study (float64 and float32); and the
library's solver with the spectra benchmark's bounds (``main+bounds``) or with bounds on
the centres and widths only (``main+centre_bounds``).

    PYTHONPATH=. python studies/2026-12-05-lm_far_starts/candidates.py

Writes ``candidates.json.gz`` and ``candidates.md`` next to this file.
"""

from __future__ import annotations

import gzip
import json

import numpy as np
from compare import (
    BOUNDED,
    BOUNDS,
    HERE,
    SOLVERS,
    X,
    cases,
    random_starts,
    record,
    residual,
    tail,
)

import fixedopt

CANDIDATES = ("main", "nielsen_l0=0.3", "nielsen_l0=0.1", "nielsen_l0=0.03",
              "l0=0.1,shrink=0.1", "nielsen_l0=1e-2", "minpack", "decay_D=0.9", "geodesic", BOUNDED,
              "main+centre_bounds")  # fmt: skip
# Bounds on the centres and widths only (areas free, either sign): a peak cannot run
# off the data, nor vanish at an area of 0.
CENTRE_BOUNDS = (
    np.array([-np.inf, 0.0, 0.05, -np.inf, 0.0, 0.05, -np.inf, -np.inf]),
    np.array([np.inf, 30.0, 10.0, np.inf, 30.0, 10.0, np.inf, np.inf]),
)


def options(name: str) -> dict:
    """The library's solver with bounds, or a variant without."""
    if name == BOUNDED:
        return {"bounds": BOUNDS}
    if name == "main+centre_bounds":
        return {"bounds": CENTRE_BOUNDS}
    return {"solver": SOLVERS[name]}


SEEDS = (11, 12, 13)


def measure() -> dict:
    results: dict = {"random": {}, "normal64": {}, "normal32": {}}
    starts = [random_starts(100, seed) for seed in SEEDS]
    y = np.concatenate([s[0] for s in starts])
    p0 = np.concatenate([s[1] for s in starts])
    y_normal, p0_normal, fixed = tail.batch()
    for name in CANDIDATES:
        solution = fixedopt.least_squares(residual, p0, np.zeros(p0.shape, bool), args=(y,),
                                          batched=True, **options(name))  # fmt: skip
        results["random"][name] = record(solution)
        for key, dtype in (("normal64", np.float64), ("normal32", np.float32)):
            _, _, fit = fixedopt.curve_fit(
                cases.spectrum, X.astype(dtype), y_normal.astype(dtype), p0_normal.astype(dtype),
                fixed=fixed, batched=True, result=True, **options(name),
            )  # fmt: skip
            results[key][name] = record(fit.solution)
        print(name, np.mean(results["random"][name]["steps"]),
              np.mean(results["normal64"][name]["steps"]), flush=True)  # fmt: skip
    return results


def markdown(results: dict) -> str:
    out = ["# Candidates on larger samples", ""]
    out += [f"## {len(results['random']['main']['steps'])} random far starts "
            f"(seeds {SEEDS}, 100 rows each)", "",
            "| solver | steps mean / median / p90 / max | MAX_STEPS | rows at the best cost "
            "(1e-5 rel.) | mean cost |", "|---|---|---:|---:|---:|"]  # fmt: skip
    values = np.array([results["random"][n]["value"] for n in CANDIDATES])
    best = values.min(axis=0)
    for n, v in zip(CANDIDATES, values):
        r = results["random"][n]
        s = np.array(r["steps"])
        at_best = int((np.abs(v - best) <= 1e-5 * best).sum())
        limit = r["status"].count("MAX_STEPS")
        out.append(
            f"| {n} | {s.mean():.1f} / {np.median(s):g} / {np.percentile(s, 90):g} / "
            f"{s.max()} | {limit} | {at_best} | {v.mean():.2f} |"
        )
    for key, label in (("normal64", "float64"), ("normal32", "float32")):
        title = f"## The 2,000 normal spectra, {label} (per-row fixed sets; bounds: main+ only)"
        out += ["", title, "",
                "| solver | steps mean / p99 / max | rows with more steps than main | fewer | "
                "rows costlier than main (1e-9 rel. f64, 1e-5 f32) | not converged |",
                "|---|---|---:|---:|---:|---:|"]  # fmt: skip
        main = results[key]["main"]
        tolerance = 1e-9 if key == "normal64" else 1e-5
        for n in CANDIDATES:
            r = results[key][n]
            s, ref = np.array(r["steps"]), np.array(main["steps"])
            v, vref = np.array(r["value"]), np.array(main["value"])
            worse = int((v > vref * (1 + tolerance)).sum())
            nc = sum(status != "CONVERGED" for status in r["status"])
            more, fewer = int((s > ref).sum()), int((s < ref).sum())
            out.append(
                f"| {n} | {s.mean():.2f} / {np.percentile(s, 99):g} / {s.max()} | "
                f"{more} | {fewer} | {worse} | {nc} |"
            )
    return "\n".join(out) + "\n"


def main() -> None:
    results = measure()
    text = markdown(results)
    print(text)
    (HERE / "candidates.json.gz").write_bytes(gzip.compress(json.dumps(results).encode()))
    (HERE / "candidates.md").write_text(text)


if __name__ == "__main__":
    main()
