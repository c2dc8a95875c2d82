"""On a TPU: ``Model.fit``'s and ``curve_fit``'s covariance compiled ahead (fixedopt's
thread) against the same call with nothing ahead (bit for bit), and against the CPU's
own fit of the same data (JAX's CPU backend in this process: 1e-3 of
``sqrt(var_i var_j)``, the chip test's tolerance, ``tests/test_device.py``).

``python investigations/2026-12-07-h2-tpu/pcov_check.py OUT.json`` (float32, B = 2000,
``benchmarks.first_call_cases``' spectra with a slow one)."""

import json
import os
import sys
import tempfile
import time

import jax
import numpy as np
from jax.experimental.compilation_cache import compilation_cache

import fixedopt
from benchmarks import first_call_cases as cases
from fixedopt._driver import ahead
from fixedopt.testing import no_compiles_ahead

cases.use_float32()
BATCH = int(os.environ.get("BATCH", "2000"))  # smaller: a smoke run
CPU = jax.devices("cpu")[0]


def data():
    p0, fixed, y = cases.spectra_data(BATCH, slow=True)
    return np.asarray(p0), np.asarray(fixed), np.asarray(y)


def model_fit(p0, fixed, y):
    from fixedopt.models import LinearModel, PseudoVoigtModel

    model = PseudoVoigtModel(prefix="p1_") + PseudoVoigtModel(prefix="p2_") + LinearModel()
    params = model.make_params()
    lower, upper = cases.SPECTRA_BOUNDS
    for i, name in enumerate(cases.MODEL_NAMES):
        params[name].set(value=p0[:, i].tolist(), vary=(~fixed[:, i]).tolist(),
                         min=float(lower[i]), max=float(upper[i]))  # fmt: skip
    for name in ("p1_fraction", "p2_fraction"):
        params[name].set(value=0.37, vary=False)
    result = model.fit(y, params, x=cases.X_SPECTRA.astype(np.float32))
    status = np.asarray(result.solution.status)
    return np.asarray(result.covariance), status, np.asarray(result.values)


def curve_fit(p0, fixed, y):
    bounds = tuple(b.astype(np.float32) for b in cases.SPECTRA_BOUNDS)
    popt, pcov, fit = fixedopt.curve_fit(cases.spectrum, cases.X_SPECTRA.astype(np.float32), y,
                                         p0, bounds=bounds, fixed=fixed, batched=True,
                                         result=True)  # fmt: skip
    return np.asarray(pcov), np.asarray(fit.solution.status), np.asarray(popt)


def fresh_cache():
    jax.clear_caches()
    with ahead._lock:
        ahead._started.clear()
    jax.config.update("jax_compilation_cache_dir", tempfile.mkdtemp())
    compilation_cache.reset_cache()


def against_cpu(device, cpu):
    """Rows CONVERGED on both, finite: max |dev - cpu| / sqrt(var_i var_j), and how many
    rows exceed 1e-3; with the rows whose values agree to 1e-4 (relative) apart."""
    (dcov, dstatus, dx), (ccov, cstatus, cx) = device, cpu
    rows = (dstatus == 0) & (cstatus == 0)
    rows &= np.all(np.isfinite(dcov), axis=(1, 2)) & np.all(np.isfinite(ccov), axis=(1, 2))
    scale = np.sqrt(np.clip(np.einsum("bii->bi", ccov), 0, None))
    scale = np.where(scale > 0, scale, 1.0)
    error = np.abs(dcov - ccov) / (scale[:, :, None] * scale[:, None, :])
    per_row = np.max(error, axis=(1, 2))
    close_x = np.max(np.abs(dx - cx) / np.maximum(np.abs(cx), 1e-6), axis=1) <= 1e-4
    return {"rows": int(rows.sum()), "max": float(per_row[rows].max()),
            "over_1e-3": int((per_row[rows] > 1e-3).sum()),
            "rows_close_x": int((rows & close_x).sum()),
            "max_close_x": float(per_row[rows & close_x].max(initial=0.0)),
            "over_1e-3_close_x": int((per_row[rows & close_x] > 1e-3).sum())}  # fmt: skip


def main():
    """``OUT.json`` on the device (the device's fits saved beside it, ``OUT.npz``); with
    ``JAX_PLATFORMS=cpu`` and that ``OUT.npz`` as a second argument, the CPU's fits
    against them (a process of its own: the models' stored solve is named without the
    platform of ``jax.default_device``, so one process cannot run both)."""
    out, report = sys.argv[1], {"backend": jax.default_backend()}
    p0, fixed, y = data()
    saved = dict(np.load(sys.argv[2])) if len(sys.argv) > 2 else {}
    for name, fit in (("models", model_fit), ("curve_fit", curve_fit)):
        fresh_cache()
        start = time.perf_counter()
        found = fit(p0, fixed, y)
        report[name] = {"first_call_s": time.perf_counter() - start}
        if saved:
            device = tuple(saved[f"{name}_{i}"] for i in range(3))
            report[name]["device_vs_cpu"] = against_cpu(device, found)
        else:
            fresh_cache()
            with no_compiles_ahead():
                alone = fit(p0, fixed, y)
            same = bool(np.array_equal(found[0], alone[0], equal_nan=True))
            report[name]["bitwise_ahead_vs_alone"] = same
            np.savez(out.replace(".json", f"-{name}.npz"), *found)
        print(name, json.dumps(report[name]), flush=True)
    if not saved:
        parts = {f"{name}_{i}": np.load(out.replace(".json", f"-{name}.npz"))[f"arr_{i}"]
                 for name in ("models", "curve_fit") for i in range(3)}  # fmt: skip
        np.savez(out.replace(".json", ".npz"), **parts)
    with open(out, "w") as file:
        json.dump(report, file, indent=1)


if __name__ == "__main__":
    main()
