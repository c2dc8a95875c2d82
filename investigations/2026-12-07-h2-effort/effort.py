"""``python -m investigations.2026-12-07-h2-effort.effort OUT [CASE:VARIANT ...]``
(run as a file: ``python investigations/2026-12-07-h2-effort/effort.py``): a TPU's first
call at XLA's default effort and at lower ``exec_time_optimization_effort`` (issue 62),
one fresh process per case and variant (an empty persistent cache each), and whether
the two programs give the same bits on the chip.

Each child opens the backend (not timed), builds the case of
``benchmarks.first_call_cases`` (float32, B as ``benchmarks.first_call.BATCHES``), times
the first call (per program and stage), waits for fixedopt's thread, then the compiled
call (median of 7), and saves every array leaf of the call's result to
``OUT/<case>-<variant>.npz``. The parent compares each variant's leaves with the
default's (bit for bit; else how many entries differ and by how much) and writes
``OUT/effort.json``.
"""

import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[2]
EFFORTS = {"default": None, "e-1": -1.0, "e-0.5": -0.5, "e-0.25": -0.25}
# libtpu options for the whole process (LIBTPU_INIT_ARGS), by variant
LIBTPU = {
    "par": "--xla_tpu_impure_hlo_parallel_compile=true",
    "llo0": "--xla_jf_llo_level=0",
    "beo0": "--xla_backend_optimization_level=0",
    "sched0": "--xla_tpu_autotune_schedules=false",
    "win0": "--xla_tpu_autotune_windows=false",
    "fus0": "--xla_tpu_autotune_fusions=false",
    "lay0": "--xla_tpu_autotune_layouts=false",
}


def child(case: str, variant: str, out: pathlib.Path) -> dict:
    import jax

    from benchmarks import first_call, first_call_cases
    from fixedopt.testing import wait_for_compiles_ahead

    first_call_cases.use_float32()
    if EFFORTS.get(variant) is not None:
        jax.config.update("jax_exec_time_optimization_effort", EFFORTS[variant])
    start = time.perf_counter()
    jax.devices()
    opened = time.perf_counter() - start
    calls = first_call_cases.BUILDERS[case](first_call.BATCHES[case][0])
    result = {}

    def call():
        result["value"] = calls["call"]()
        return result["value"]

    first, found = first_call.timed(call)
    wait_for_compiles_ahead()
    leaves = [np.asarray(leaf) for leaf in jax.tree.leaves(result["value"])]
    np.savez(out / f"{case}-{variant}.npz", *leaves)
    again = [first_call.timed(calls["call"])[0] for _ in range(7)]
    return {
        "case": case,
        "variant": variant,
        "open_s": opened,
        "first_s": first,
        "compiled_s": statistics.median(again),
        "compiled_all_s": again,
        **found,
    }


def compare(a: np.ndarray, b: np.ndarray) -> dict:
    if a.shape != b.shape or a.dtype != b.dtype:
        return {"same": False, "why": f"{a.shape} {a.dtype} / {b.shape} {b.dtype}"}
    if a.dtype.kind != "f":
        differ = a != b
        return {"same": not differ.any(), "entries_differ": int(differ.sum()), "size": a.size}
    bits = a.view(f"u{a.dtype.itemsize}") != b.view(f"u{b.dtype.itemsize}")
    finite = np.isfinite(a) & np.isfinite(b)
    gap = np.abs(a - b)[finite]
    scale = np.maximum(np.abs(a), np.abs(b))[finite]
    rel = gap / np.where(scale > 0, scale, 1)
    return {
        "same": not bits.any(),
        "entries_differ": int(bits.sum()),
        "size": a.size,
        "rows_differ": int(bits.reshape(len(a), -1).any(1).sum()) if a.ndim else int(bits),
        "max_abs": float(gap.max(initial=0)),
        "max_rel": float(rel.max(initial=0)),
        "median_rel_of_differing": float(np.median(rel[bits[finite]])) if bits.any() else 0.0,
        "finite_differ": int((np.isfinite(a) != np.isfinite(b)).sum()),
    }


def main() -> None:
    out = pathlib.Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    runs = [spec.split(":") for spec in sys.argv[2:]]
    records = []
    for case, variant in runs:
        with tempfile.TemporaryDirectory() as cache:
            env = {k: v for k, v in os.environ.items() if k != "JAX_COMPILATION_CACHE_DIR"}
            env["FIXEDOPT_CACHE"] = cache
            if variant in LIBTPU:
                env["LIBTPU_INIT_ARGS"] = f"{env.get('LIBTPU_INIT_ARGS', '')} {LIBTPU[variant]}"
            command = [sys.executable, __file__, "--child", case, variant, str(out)]
            done = subprocess.run(command, env=env, capture_output=True, text=True, cwd=ROOT)
        if done.returncode:
            print(case, variant, done.stderr[-3000:], flush=True)
            continue
        record = json.loads(done.stdout.strip().splitlines()[-1])
        print(
            case,
            variant,
            "first %.2f compiled %.4f trace %.2f lower %.2f xla %.2f"
            % (
                record["first_s"],
                record["compiled_s"],
                record["trace"],
                record["lower"],
                record["compile"],
            ),
            flush=True,
        )
        records.append(record)
        (out / "effort.json").write_text(json.dumps({"runs": records, "same": same(out)}, indent=1))


def same(out: pathlib.Path) -> dict:
    found = {}
    for path in sorted(out.glob("*.npz")):
        case, variant = path.stem.split("-", 1)
        base = out / f"{case}-default.npz"
        if variant == "default" or not base.exists():
            continue
        a, b = np.load(base), np.load(path)
        found[path.stem] = [compare(a[k], b[k]) for k in a.files]
    return found


if __name__ == "__main__":
    if sys.argv[1] == "--child":
        sys.path.insert(0, str(ROOT))
        print(json.dumps(child(sys.argv[2], sys.argv[3], pathlib.Path(sys.argv[4]))))
    else:
        main()
