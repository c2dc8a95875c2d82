"""``python investigations/2026-12-07-h2-effort/pcov_precision.py OUT``: ``Model.fit``'s
covariance on a TPU at the machine profile's precision (``"highest"``, this branch's
``machine.covariance_precision``) and at JAX's default (bfloat16 passes: what it ran at
before, here the user's own ``jax.default_matmul_precision("default")``), each against
the CPU's own fit of the same data in this process; and the fit's compiled call, each
way in turn. Cases: the chip slice's three Gaussians (``tests/test_device.py``) and
``benchmarks.first_call``'s models case (2,000 spectra, 10 parameters). Writes
``OUT/pcov_precision.json``."""

import contextlib
import json
import pathlib
import statistics
import sys
import time

import jax
import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


from benchmarks import first_call_cases  # noqa: E402
from tests import test_device  # noqa: E402

first_call_cases.use_float32()

CPU = jax.devices("cpu")[0]
WAYS = {
    "profile": contextlib.nullcontext,
    "default": lambda: jax.default_matmul_precision("default"),
}


def errors(device, cpu):
    scale = np.sqrt(np.clip(np.einsum("bii->bi", cpu), 0, None))
    scale = np.where(scale > 0, scale, 1.0)
    finite = np.isfinite(device) & np.isfinite(cpu)
    error = np.where(finite, np.abs(device - cpu), 0) / (scale[:, :, None] * scale[:, None, :])
    per_row = error.reshape(len(error), -1).max(axis=1)
    return {
        "max": float(per_row.max()),
        "median_row": float(np.median(per_row)),
        "rows_over_1e-4": int((per_row > 1e-4).sum()),
        "rows_over_1e-3": int((per_row > 1e-3).sum()),
        "rows": len(per_row),
        "finite_differ": int((np.isfinite(device) != np.isfinite(cpu)).sum()),
    }


def case_models():
    """The models case's fit, returning its result (covariance and best values)."""
    from fixedopt.models import LinearModel, PseudoVoigtModel

    p0, fixed, y = first_call_cases.spectra_data(2000, 0, slow=True)
    model = PseudoVoigtModel(prefix="p1_") + PseudoVoigtModel(prefix="p2_") + LinearModel()
    params = model.make_params()
    lower, upper = first_call_cases.SPECTRA_BOUNDS
    start = np.asarray(p0)
    for i, name in enumerate(first_call_cases.MODEL_NAMES):
        params[name].set(
            value=start[:, i].tolist(),
            vary=(~fixed[:, i]).tolist(),
            min=float(lower[i]),
            max=float(upper[i]),
        )
    for name in ("p1_fraction", "p2_fraction"):
        params[name].set(value=0.37, vary=False)
    x, y = np.asarray(first_call_cases.X_SPECTRA, np.float32), np.asarray(y, np.float32)
    return lambda: model.fit(y, params, x=x)


def timed(call, way):
    with WAYS[way]():
        start = time.perf_counter()
        result = call()
        jax.block_until_ready(result.covariance if hasattr(result, "covariance") else result)
        return time.perf_counter() - start, result


def main():
    out = pathlib.Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    found = {"backend": jax.default_backend()}
    with jax.default_device(CPU):
        cpu_peaks = np.asarray(test_device.three_peaks())
    for way in WAYS:
        with WAYS[way]():
            found[f"three_peaks_{way}"] = errors(np.asarray(test_device.three_peaks()), cpu_peaks)
    call = case_models()
    with jax.default_device(CPU):
        cpu = call()
    cpu_cov = np.asarray(cpu.covariance)
    times = {way: [] for way in WAYS}
    for way in WAYS:
        first, result = timed(call, way)
        found[f"models_{way}_first_s"] = first
        found[f"models_{way}"] = errors(np.asarray(result.covariance), cpu_cov)
        values = {k: np.asarray(v) for k, v in result.best_values.items()}
        cpu_values = {k: np.asarray(v) for k, v in cpu.best_values.items()}
        found[f"models_{way}_values_max_rel"] = max(
            float(
                np.max(np.abs(values[k] - cpu_values[k]) / np.maximum(np.abs(cpu_values[k]), 1e-3))
            )
            for k in values
        )
        print(way, json.dumps(found[f"models_{way}"]), flush=True)
    for _ in range(5):
        for way in WAYS:
            times[way].append(timed(call, way)[0])
    found["models_fit_compiled_s"] = {way: statistics.median(t) for way, t in times.items()}
    found["models_fit_compiled_all_s"] = times
    print(json.dumps(found, indent=1), flush=True)
    (out / "pcov_precision.json").write_text(json.dumps(found, indent=1))


if __name__ == "__main__":
    main()
