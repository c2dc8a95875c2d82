"""Multi-start on NIST StRD from both of NIST's starts: ``fixedopt.least_squares`` alone
(K = 1), ``fixedopt.multistart`` (K = 8), and MINPACK (``scipy.optimize.least_squares``,
``method="lm"``, default tolerances) from the same start. Digits: NIST's log relative
error of the worst parameter against the certified values (capped at 11); a row is
certified at 4 digits or more, and truthful when it reports CONVERGED only if certified.

    python studies/2026-12-04-multistart/run.py [--starts 8] [--spread 2] [--key 0]
        [--problems MGH10 MGH17] [--out studies/2026-12-04-multistart/results.json]
"""

from __future__ import annotations

import argparse
import json
import math
import pathlib
import sys

import jax

jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import scipy.optimize  # noqa: E402

import fixedopt  # noqa: E402

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from nist import PROBLEMS  # noqa: E402

# Parameters that the model cannot tell apart (the same fitted curve): the terms of a
# sum swapped, signs that only enter squared or together. A solution is judged against
# the certified values in the labelling closest to them.
LANCZOS = [[0, 1, 2, 3, 4, 5], [0, 1, 4, 5, 2, 3], [2, 3, 0, 1, 4, 5], [2, 3, 4, 5, 0, 1],
           [4, 5, 0, 1, 2, 3], [4, 5, 2, 3, 0, 1]]  # fmt: skip
SYMMETRIES = {
    "Lanczos1": LANCZOS, "Lanczos2": LANCZOS, "Lanczos3": LANCZOS,
    "Gauss1": [[0, 1, 2, 3, 4, 5, 6, 7], [0, 1, 5, 6, 7, 2, 3, 4]],
    "Gauss2": [[0, 1, 2, 3, 4, 5, 6, 7], [0, 1, 5, 6, 7, 2, 3, 4]],
    "Gauss3": [[0, 1, 2, 3, 4, 5, 6, 7], [0, 1, 5, 6, 7, 2, 3, 4]],
    "MGH17": [[0, 1, 2, 3, 4], [0, 2, 1, 4, 3]],
    "ENSO": [[0, 1, 2, 3, 4, 5, 6, 7, 8], [0, 1, 2, 6, 7, 8, 3, 4, 5]],
}  # fmt: skip
SIGNS = {"Gauss1": [4, 7], "Gauss2": [4, 7], "Gauss3": [4, 7]}  # widths enter squared


def digits(b, certified, name: str = "") -> float:
    """NIST's log relative error of the worst parameter, in [0, 11], in the labelling of
    ``b`` closest to the certified values (:data:`SYMMETRIES`)."""
    b, c = np.array(b, float), np.asarray(certified, float)
    if not np.all(np.isfinite(b)):
        return 0.0
    signs = SIGNS.get(name, [])
    b[signs] = np.abs(b[signs]) * np.sign(c[signs])
    labellings = SYMMETRIES.get(name, [list(range(len(c)))])
    error = min(np.max(np.abs(b[order] - c) / np.abs(c)) for order in labellings)
    return round(min(11.0, max(0.0, -math.log10(max(error, 1e-300)))), 1)


def verdict(x, status, certified, name) -> dict:
    return {"digits": digits(x, certified, name), "status": fixedopt.Status(int(status)).name}


def problem_rows(name: str, starts: int, spread: float, key: int) -> list[dict]:
    """Both NIST starts of one problem, as a batch of two rows: alone, multi-start, MINPACK."""
    problem = PROBLEMS[name]
    x, y = jnp.asarray(problem.x), jnp.asarray(problem.y)
    residual = lambda b, x, y: problem.model(b, x) - y
    x0 = jnp.asarray([problem.start1, problem.start2])
    shared = dict(args=(x, y), args_axes=(None, None), batched=True, max_steps=2000)
    alone = fixedopt.least_squares(residual, x0, False, **shared)
    best, every, chosen = fixedopt.multistart(
        fixedopt.least_squares, residual, x0, False, starts=starts, key=key, spread=spread,
        return_all=True, **shared,
    )  # fmt: skip
    rows = []
    for row, start in enumerate((problem.start1, problem.start2)):
        minpack = scipy.optimize.least_squares(
            lambda b: np.asarray(residual(jnp.asarray(b), x, y)), np.asarray(start, float),
            method="lm",
        )  # fmt: skip
        multi = verdict(best.x[row], best.status[row], problem.certified, name)
        multi |= {"chosen": int(chosen[row]),
                  "starts_converged": int(np.sum(np.asarray(every.converged[:, row]))),
                  "starts_certified": sum(digits(every.x[k, row], problem.certified, name) >= 4
                                          for k in range(starts))}  # fmt: skip
        rows.append({
            "problem": name, "start": row + 1,
            "K1": verdict(alone.x[row], alone.status[row], problem.certified, name) | {
                "steps": int(alone.steps[row])},
            f"K{starts}": multi,
            "minpack": {"digits": digits(minpack.x, problem.certified, name),
                        "status": int(minpack.status), "nfev": int(minpack.nfev)},
        })  # fmt: skip
    return rows


def summary(rows: list[dict], starts: int) -> dict:
    """Per method: rows certified (4 digits), CONVERGED, truthful, false CONVERGED."""
    out = {}
    for label in ("K1", f"K{starts}"):
        certified = [r[label]["digits"] >= 4 for r in rows]
        converged = [r[label]["status"] == "CONVERGED" for r in rows]
        out[label] = {
            "rows": len(rows),
            "certified": sum(certified),
            "converged": sum(converged),
            "false_converged": sum(v and not c for c, v in zip(certified, converged)),
            "truthful": sum(c or not v for c, v in zip(certified, converged)),
        }
    out["minpack"] = {"certified": sum(r["minpack"]["digits"] >= 4 for r in rows)}
    return out


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--starts", type=int, default=8)
    parser.add_argument("--spread", type=float, default=2.0)
    parser.add_argument("--key", type=int, default=0)
    parser.add_argument("--problems", nargs="*", default=list(PROBLEMS))
    parser.add_argument("--out", default=None)
    options = parser.parse_args()
    rows = []
    for name in options.problems:
        for row in problem_rows(name, options.starts, options.spread, options.key):
            print(json.dumps(row), flush=True)
            rows.append(row)
    totals = summary(rows, options.starts)
    print(json.dumps(totals))
    if options.out:
        payload = {"options": vars(options), "summary": totals, "rows": rows}
        pathlib.Path(options.out).write_text(json.dumps(payload, indent=1) + "\n")
