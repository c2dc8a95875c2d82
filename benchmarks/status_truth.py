"""Do statuses tell the truth? The same fit in other units, and standard problems.

Two tables, with the library's defaults only (what a new user gets):

* units: an exponential-decay fit (4 rows, each with its own fixed parameter) with
  amplitude, offset and data in units 1e-6, 1 and 1e6 times larger (the rate keeps
  its units), and a fit whose parameters all share the data's units, in float32 and
  float64: each row's status and its correct digits against MINPACK (tolerances 1e-15).
* truth: the Moré–Garbow–Hillstrom least-squares problems (``tests/mgh_least_squares``)
  from their standard starts: is every CONVERGED row within the documented accuracy
  (relative error <= 100 sqrt(eps) in every parameter) and every row within it
  CONVERGED?

Runs against whichever fixedopt is importable (``PYTHONPATH`` picks one), so the same
command measures the library before and after a change::

    python -m benchmarks.status_truth --label after
    PYTHONPATH=<checkout of the old commit>:. python -m benchmarks.status_truth --label before
"""

from __future__ import annotations

import argparse
import json
import math
import pathlib
import sys

import jax
import jax.numpy as jnp
import numpy as np
import scipy.optimize

import fixedopt

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
from mgh_least_squares import (  # noqa: E402
    PROBLEMS,
    decay,
    decay_batch,
    hyperbola,
    hyperbola_batch,
    reference_fits,
    relative_error,
)

jax.config.update("jax_enable_x64", True)


def status_names(sol) -> list[str]:
    names = [fixedopt.Status(int(s)).name for s in np.atleast_1d(sol.status)]
    if hasattr(sol, "reason"):
        reasons = [fixedopt.Reason(int(r)).name for r in np.atleast_1d(sol.reason)]
        names = [n if r == "NONE" else f"{n} ({r})" for n, r in zip(names, reasons)]
    return names


# (label, function, model, data, units of each parameter: 1 = the data's, 0 = none)
CASES = (
    ("least_squares (LM), decay", fixedopt.least_squares, decay, decay_batch, [1, 0, 1]),
    ("minimize (LBFGS), decay", fixedopt.minimize, decay, decay_batch, [1, 0, 1]),
    ("minimize (LBFGS), hyperbola", fixedopt.minimize, hyperbola, hyperbola_batch, [1, 1, 1]),
)


def units_table() -> list[dict]:
    rows = []
    for label, call, model, batch, units in CASES:
        x0, fixed, y = batch()
        reference = reference_fits(x0, fixed, y, model)
        fun = model if call is fixedopt.least_squares else _objective(model)
        for dtype in (np.float32, np.float64):
            for scale in (1e-6, 1.0, 1e6):
                factor = np.where(np.array(units) == 1, scale, 1.0)
                args = (jnp.asarray(y * scale, dtype),)
                start = jnp.asarray(x0 * factor, dtype)
                row = {"solver": label, "dtype": np.dtype(dtype).name, "scale": scale}
                try:
                    sol = call(fun, start, fixed, args=args, batched=True)
                except Exception as error:  # the library before issue 10 crashed here
                    rows.append(row | {"statuses": [f"crash: {type(error).__name__}"]})
                    rows[-1]["digits"] = []
                    continue
                x = np.asarray(sol.x, float) / factor
                error = np.max(np.abs(x - reference) / np.abs(reference), axis=1)
                digits = [round(float(-math.log10(max(e, 1e-17))), 1) for e in error]
                rows.append(row | {"statuses": status_names(sol), "digits": digits})
    return rows


def _objective(model):
    return lambda p, y: 0.5 * jnp.sum(model(p, y) ** 2)


def refined(problem):
    out = []
    for x_star, _ in problem.minima:
        fun = lambda z: np.asarray(problem.residuals(jnp.asarray(z)))
        fit = scipy.optimize.least_squares(
            fun, np.asarray(x_star, float), method="lm", xtol=1e-15, ftol=1e-15, gtol=1e-15
        )
        out.append(fit.x)
    return out


def truth_table() -> list[dict]:
    rows = []
    solvers = {"LM": fixedopt.LevenbergMarquardt(), "GN": fixedopt.GaussNewton()}
    solvers["LBFGS"] = fixedopt.LBFGS()
    for name, problem in PROBLEMS.items():
        minimizers = refined(problem)
        fun = lambda z, problem=problem: np.asarray(problem.residuals(jnp.asarray(z)))
        reference = scipy.optimize.least_squares(fun, np.asarray(problem.start), method="lm")
        for solver_name, solver in solvers.items():
            for dtype in (np.float32, np.float64):
                x0 = jnp.asarray(problem.start, dtype)
                row = {"problem": name, "solver": solver_name, "dtype": np.dtype(dtype).name}
                try:
                    sol = fixedopt.least_squares(
                        problem.residuals, x0, jnp.zeros(x0.shape, bool), solver=solver,
                        max_steps=2000,
                    )  # fmt: skip
                except Exception as error:  # the library before issue 10 crashed here
                    status = f"crash: {type(error).__name__}"
                    rows.append(row | {"status": status, "steps": 0, "error": float("nan"),
                                       "accurate": False, "truthful": False,
                                       "minpack_nfev": int(reference.nfev)})  # fmt: skip
                    continue
                error = min(relative_error(np.asarray(sol.x, float), m) for m in minimizers)
                accurate = error <= 100 * math.sqrt(float(np.finfo(dtype).eps))
                rows.append(
                    row
                    | {
                        "status": status_names(sol)[0],
                        "steps": int(sol.steps),
                        "error": float(error),
                        "accurate": bool(accurate),
                        "truthful": bool(accurate) == bool(sol.converged),
                        "minpack_nfev": int(reference.nfev),
                    }
                )
    return rows


def markdown(label: str, units: list[dict], truth: list[dict]) -> str:
    lines = [
        f"# Status truth ({label}; fixedopt {fixedopt.__version__}, defaults only)",
        "",
        "## The same decay fit in other units (4 rows: statuses; correct digits vs MINPACK)",
        "",
        "| solver | dtype | scale | statuses | digits |",
        "|---|---|---:|---|---|",
    ]
    for r in units:
        lines.append(
            f"| {r['solver']} | {r['dtype']} | {r['scale']:g} | {', '.join(r['statuses'])} "
            f"| {', '.join(map(str, r['digits']))} |"
        )
    lines += [
        "",
        "## MGH least-squares problems from their standard starts",
        "",
        "Accurate: relative error <= 100 sqrt(eps) in every parameter (1.5e-6 in float64,",
        "3.5e-2 in float32). Truthful: CONVERGED exactly when accurate.",
        "",
        "| solver | dtype | truthful rows | converged | accurate |",
        "|---|---|---:|---:|---:|",
    ]
    for solver in ("LM", "GN", "LBFGS"):
        for dtype in ("float32", "float64"):
            rows = [r for r in truth if r["solver"] == solver and r["dtype"] == dtype]
            converged = sum(r["status"].startswith("CONVERGED") for r in rows)
            lines.append(
                f"| {solver} | {dtype} | {sum(r['truthful'] for r in rows)}/{len(rows)} "
                f"| {converged} | {sum(r['accurate'] for r in rows)} |"
            )
    lines += ["", "Rows whose status does not tell the truth:", ""]
    lines += ["| problem | solver | dtype | status | steps | error |"]
    lines += ["|---|---|---|---|---:|---:|"]
    for r in truth:
        if not r["truthful"]:
            lines.append(
                f"| {r['problem']} | {r['solver']} | {r['dtype']} | {r['status']} "
                f"| {r['steps']} | {r['error']:.1e} |"
            )
    return "\n".join(lines) + "\n"


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--label", default="after")
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results"))
    args = parser.parse_args(argv)
    units, truth = units_table(), truth_table()
    stem = pathlib.Path(args.out) / f"cpu-status-truth-{args.label}"
    stem.with_suffix(".json").write_text(json.dumps({"units": units, "truth": truth}, indent=1))
    stem.with_suffix(".md").write_text(markdown(args.label, units, truth))
    print(markdown(args.label, units, truth))


if __name__ == "__main__":
    main()
