"""``python -m benchmarks.tpu_covariance [--batch B] [--out DIR]``: a covariance's first
call and compiled call on a TPU, by the one program of every path (a ``cond`` to
LAPACK's SVD and QR: ``onechip``) against the elementwise QR on the chip with the rows
it does not certify by LAPACK on the host's CPU (``device_qr``, the TPU's profile).

One process, float32 (64-bit mode off), the persistent cache off: the spectra of
``benchmarks.first_call_cases`` (``spectra_slow``'s, with its degenerate one) fitted
once by ``least_squares``, then ``fixedopt.covariance`` of that solution by each
variant in turn (each its own program, compiled in the call): its first call per
stage (trace / lowering / XLA), its compiled call (median of 5), the rows it sent on
to LAPACK, and its covariance against the other's (largest difference over
``sqrt(var_i var_j)``). Writes ``<out>/tpu_covariance.json``.
"""

import argparse
import json
import pathlib
import statistics
import time

import jax
import numpy as np

from benchmarks import first_call, first_call_cases

RESULTS = pathlib.Path(__file__).parent / "results"


def variant(name: str) -> None:
    """The covariance's path for ``name``: the TPU's profile, or every path in one program."""
    from fixedopt._results import covariance

    if name == "onechip":
        covariance.DEVICE_QR.clear()
    else:
        covariance.DEVICE_QR.add(jax.default_backend())


def sent_on() -> list[int]:
    """Counts the rows :func:`covariance._on_device` sends to LAPACK (a list, filled)."""
    from fixedopt._results import covariance

    rows: list[int] = []
    on_host = covariance._on_host

    def counted(run, leaves, flags, batch, paths, size):
        rows.append(batch)
        return on_host(run, leaves, flags, batch, paths, size)

    covariance._on_host = counted
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch", type=int, default=2000)
    parser.add_argument("--out", type=pathlib.Path, default=RESULTS)
    args = parser.parse_args()
    jax.config.update("jax_compilation_cache_dir", None)
    jax.config.update("jax_enable_compilation_cache", False)
    first_call_cases.use_float32()
    import fixedopt

    start = time.perf_counter()
    jax.devices()
    record = {"backend": jax.default_backend(), "batch": args.batch,
              "open_s": time.perf_counter() - start}  # fmt: skip
    p0, fixed, y = first_call_cases.spectra_data(args.batch, slow=True)
    residual = first_call_cases.spectrum_residual
    solve = lambda: fixedopt.least_squares(residual, p0, fixed, args=(y,), batched=True)
    record["solve_first_s"] = first_call.timed(solve)[0]
    solution = solve()
    rows = sent_on()
    covariances = {}
    for name in ("device_qr", "onechip", "device_qr"):  # the last: compiled, read again
        variant(name)
        call = lambda: fixedopt.covariance(solution, residual, args=(y,)).covariance
        rows.clear()
        seconds, stages = first_call.timed(call)
        again = statistics.median(first_call.timed(call)[0] for _ in range(5))
        covariances[name] = np.asarray(call())
        record.setdefault(name, {"first_s": seconds, "compiled_s": again, "rows_to_lapack":
                                 list(rows), **stages})  # fmt: skip
        print(name, json.dumps(record[name]), flush=True)
    a, b = covariances["device_qr"], covariances["onechip"]
    scale = np.sqrt(np.abs(np.einsum("bii->bi", b)))
    with np.errstate(all="ignore"):
        error = np.abs(a - b) / (scale[:, :, None] * scale[:, None, :])
    record["finite_equal"] = bool(np.array_equal(np.isfinite(a), np.isfinite(b)))
    record["largest_difference"] = float(np.max(np.where(np.isfinite(error), error, 0.0)))
    print(json.dumps({k: v for k, v in record.items() if not isinstance(v, dict)}))
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "tpu_covariance.json").write_text(json.dumps(record, indent=1, default=str))


if __name__ == "__main__":
    main()
