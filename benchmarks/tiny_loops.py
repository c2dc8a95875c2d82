"""The per-fit loops of the ``tiny`` suite: scipy ``curve_fit`` and lmfit, in float64
on the same float32 data, each fixed parameter left out of the fit (curve_fit) or
``vary=False`` (lmfit). Agreement with fixedopt and fits/s on a subsample."""

import time

import numpy as np
import scipy.optimize

from benchmarks.methods import load
from fixedopt.testing_problems import FIT_MODELS, FIT_PARAMETERS, Fits


def tolerances_of(options: dict) -> dict:
    """MINPACK's tolerances for fixedopt's options (Gpufit's: ftol alone; else defaults)."""
    if "ftol" in options:
        return {"ftol": options["ftol"], "xtol": 1e-15, "gtol": 0.0}
    return {}  # MINPACK's defaults (1.49e-8): a tighter reference than float32 allows


def curve_fit_row(fits: Fits, i: int, tolerances: dict) -> tuple[np.ndarray, int]:
    """One fit by ``curve_fit(method="lm")`` with the analytic Jacobian; ``(x, nfev)``."""
    model, jacobian, _ = FIT_MODELS[fits.name]
    free, full = ~fits.fixed[i], fits.x0[i].astype(np.float64)

    def expand(p):
        x = full.copy()
        x[free] = p
        return x

    f = lambda _, *p: model(expand(np.array(p)), np)
    jac = lambda _, *p: jacobian(expand(np.array(p)))[:, free]
    p, _, info, _, _ = scipy.optimize.curve_fit(
        f, None, fits.data[i].astype(np.float64), p0=full[free], jac=jac, method="lm",
        full_output=True, **tolerances,
    )  # fmt: skip
    return expand(p), int(info["nfev"])


def lmfit_row(fits: Fits, i: int, tolerances: dict, lmfit) -> tuple[np.ndarray, int]:
    """One fit by lmfit's ``leastsq`` (finite-difference Jacobian); ``(x, nfev)``."""
    model = FIT_MODELS[fits.name][0]
    names = FIT_PARAMETERS[fits.name]
    params = lmfit.Parameters()
    for k, name in enumerate(names):
        params.add(name, value=float(fits.x0[i, k]), vary=not fits.fixed[i, k])
    data = fits.data[i].astype(np.float64)
    residual = lambda p: model(np.array([p[name].value for name in names]), np) - data
    result = lmfit.minimize(residual, params, method="leastsq", calc_covar=False, **tolerances)
    return np.array([result.params[name].value for name in names]), int(result.nfev)


def loop_records(fits: Fits, options: dict, solution) -> list[dict]:
    """Both loops on ``fits``: fits/s, steps, error vs truth, difference to fixedopt."""
    tolerances = tolerances_of(options)
    ours = np.asarray(solution.x, np.float64)[: len(fits.x0)]
    loops = {"scipy-curve-fit-loop": lambda i: curve_fit_row(fits, i, tolerances)}
    try:
        lmfit = load("lmfit", "pip install lmfit")
        loops["lmfit-loop"] = lambda i: lmfit_row(fits, i, tolerances, lmfit)
    except Exception as reason:  # Skipped: recorded below
        loops["lmfit-loop"] = reason
    records = []
    for method, solve in loops.items():
        record = {"kind": "tiny_loop", "problem": fits.name, "method": method, "B": len(fits.x0),
                  "tolerances": str(tolerances or "MINPACK defaults")}  # fmt: skip
        if isinstance(solve, Exception):
            records.append(record | {"skipped": str(solve)})
            continue
        start = time.perf_counter()
        xs, evaluations = zip(*(solve(i) for i in range(len(fits.x0))))
        seconds = time.perf_counter() - start
        x, free, scale = np.array(xs), ~fits.fixed, np.abs(fits.truth)
        error = np.abs(x - fits.truth) / scale
        difference = np.where(free, np.abs(x - ours) / scale, 0.0).max(axis=1)
        records.append(record | {
            "fits_per_s": len(x) / seconds, "evaluations_mean": float(np.mean(evaluations)),
            **{f"rel_err_{n}": float(np.median(error[free[:, k], k]))
               for k, n in enumerate(FIT_PARAMETERS[fits.name])},
            "vs_fixedopt_median": float(np.median(difference)),
            "vs_fixedopt_max": float(np.max(difference)),
        })  # fmt: skip
    return records
