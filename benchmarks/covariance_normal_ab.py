"""curve_fit's covariance from the normal equations (A) against without them (B: the
elementwise QR, then LAPACK), interleaved in one process, by process CPU time; the
covariance's part timed as in ``benchmarks.covariance_share``. Run:
``python -m benchmarks.covariance_normal_ab [repeats] [case]``."""

import statistics
import sys
import time
import warnings

import jax
import jax.numpy as jnp

import benchmarks.covariance_share as share
import fixedopt._entry.curve_fit as entry
from fixedopt._results import normal_inverse

_PAYS = normal_inverse.pays
_SPENT: list[float] = []
_covariance = entry.covariance


def _timed(solution, *args, **kwargs):
    jax.block_until_ready(solution)
    start = time.process_time()
    found = jax.block_until_ready(_covariance(solution, *args, **kwargs))
    _SPENT.append(time.process_time() - start)
    return found


def _setting(normal: bool) -> None:
    normal_inverse.pays = _PAYS if normal else (lambda dtype, n: False)


def main() -> None:
    repeats = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    only = sys.argv[2] if len(sys.argv) > 2 else ""
    entry.covariance = _timed
    cases = {}
    for dtype in (jnp.float32, jnp.float64):
        for label, make in (("decay", lambda: share.decay_case(10_000)),
                            ("spectra", lambda: share.spectra_case(2_000)),
                            ("gpufit", lambda: share.gpufit_case(100_000))):  # fmt: skip
            if not only or only in label:
                cases[f"{label} {jnp.dtype(dtype).name}"] = share.ours(make(), dtype)
    found = {(name, side): ([], []) for name in cases for side in "AB"}
    for call in cases.values():
        for side in "AB":
            _setting(side == "A")
            jax.block_until_ready(call())  # compile
    for _ in range(repeats):
        for name, call in cases.items():
            for side in "AB":
                _setting(side == "A")
                _SPENT.clear()
                start = time.process_time()
                jax.block_until_ready(call())
                found[name, side][0].append(time.process_time() - start)
                found[name, side][1].append(sum(_SPENT))
    print(f"{'case':16} {'A fit':>7} {'A cov':>7} {'A share':>7} {'B fit':>7} {'B cov':>7} "
          f"{'B share':>7}")  # fmt: skip
    for name in cases:
        row = []
        for side in "AB":
            totals, parts = found[name, side]
            shares = statistics.median(p / t for p, t in zip(parts, totals))
            row += [statistics.median(totals), statistics.median(parts), shares]
        print(f"{name:16} {row[0]:7.3f} {row[1]:7.3f} {row[2]:7.1%} {row[3]:7.3f} "
              f"{row[4]:7.3f} {row[5]:7.1%}")  # fmt: skip


if __name__ == "__main__":
    warnings.simplefilter("ignore")
    jax.config.update("jax_enable_x64", True)
    main()
