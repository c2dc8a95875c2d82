"""curve_fit's covariance from the solver's ``J^T J`` at x (A) against from the Jacobian
evaluated again (B: ``solver_covariance.ENABLED`` False), interleaved in one process, by
process CPU time, with a vmapped jaxopt LM beside them (``benchmarks.covariance_share``'s
cases and timer). Run: ``python -m benchmarks.covariance_solver_ab [repeats] [case]``
(jaxopt on ``PYTHONPATH``)."""

import statistics
import sys
import time
import warnings

import jax
import jax.numpy as jnp

import benchmarks.covariance_share as share
from fixedopt._results import solver_covariance

_SPENT = share._SPENT


def _setting(side: str) -> None:
    solver_covariance.ENABLED = side == "A"


def main() -> None:
    repeats = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    only = sys.argv[2] if len(sys.argv) > 2 else ""
    solver_covariance.fit_covariance = share._timed_covariance
    cases = {}
    for dtype in (jnp.float32, jnp.float64):
        for label, make in (("decay", lambda: share.decay_case(10_000)),
                            ("spectra", lambda: share.spectra_case(2_000)),
                            ("gpufit", lambda: share.gpufit_case(100_000))):  # fmt: skip
            if not only or only in label:
                case = make()
                cases[f"{label} {jnp.dtype(dtype).name}"] = (share.ours(case, dtype),
                                                             share.theirs(case, dtype))  # fmt: skip
    found = {(name, side): ([], []) for name in cases for side in "ABJ"}
    for ours, theirs in cases.values():
        for side in "AB":
            _setting(side)
            jax.block_until_ready(ours())  # compile
        jax.block_until_ready(theirs())
    for repeat in range(repeats):
        for name, (ours, theirs) in cases.items():
            for side in "ABJ" if repeat % 2 == 0 else "BAJ":  # neither always first
                _setting(side)
                _SPENT.clear()
                start = time.process_time()
                jax.block_until_ready(theirs() if side == "J" else ours())
                found[name, side][0].append(time.process_time() - start)
                found[name, side][1].append(sum(_SPENT))
    print(f"{'case':16} {'A fit':>7} {'A cov':>7} {'A share':>7} {'B fit':>7} {'B cov':>7} "
          f"{'B share':>7} {'jaxopt':>7} {'A/jaxopt':>8} {'B/jaxopt':>8}")  # fmt: skip
    for name in cases:
        row = []
        for side in "AB":
            totals, parts = found[name, side]
            shares = statistics.median(p / t for p, t in zip(parts, totals))
            row += [statistics.median(totals), statistics.median(parts), shares]
        peer = found[name, "J"][0]
        ratios = [statistics.median(j / t for j, t in zip(peer, found[name, s][0])) for s in "AB"]
        print(f"{name:16} {row[0]:7.3f} {row[1]:7.3f} {row[2]:7.1%} {row[3]:7.3f} "
              f"{row[4]:7.3f} {row[5]:7.1%} {statistics.median(peer):7.3f} "
              f"{ratios[0]:7.2f}x {ratios[1]:7.2f}x")  # fmt: skip


if __name__ == "__main__":
    warnings.simplefilter("ignore")
    jax.config.update("jax_enable_x64", True)
    main()
