"""Where a float32/float64 curve_fit covariance's time goes: fit_covariance called again
on a captured solution (process CPU time, median of N), and cProfile of one call.
Run: PYTHONPATH=. python investigations/2026-12-06-h6-covariance32/parts.py CASE DTYPE [N]"""

import cProfile
import pstats
import statistics
import sys
import time
import warnings

import jax
import jax.numpy as jnp

sys.path.insert(0, "investigations/2026-12-06-h6-covariance32")
import share  # noqa: E402
from fixedopt._results import solver_covariance  # noqa: E402

CAPTURED = []
_original = solver_covariance.fit_covariance


def _capture(solution, *args, **kwargs):
    CAPTURED.append((solution, args, kwargs))
    return _original(solution, *args, **kwargs)


def main() -> None:
    label, dtype = sys.argv[1], getattr(jnp, sys.argv[2])
    repeats = int(sys.argv[3]) if len(sys.argv) > 3 else 5
    make = {"decay": lambda: share.decay_case(10_000), "spectra": lambda: share.spectra_case(2_000),
            "gpufit": lambda: share.gpufit_case(100_000)}[label]
    call = share.ours(make(), dtype)
    solver_covariance.fit_covariance = _capture
    jax.block_until_ready(call())
    solution, args, kwargs = CAPTURED[-1]
    jax.block_until_ready(solution)
    times = []
    for _ in range(repeats):
        start = time.process_time()
        jax.block_until_ready(_original(solution, *args, **kwargs))
        times.append(time.process_time() - start)
    totals = []
    for _ in range(3):
        start = time.process_time()
        jax.block_until_ready(call())
        totals.append(time.process_time() - start)
    print(f"{label} {sys.argv[2]}: covariance {statistics.median(times)*1e3:.1f} ms, "
          f"curve_fit {statistics.median(totals)*1e3:.1f} ms, normal {solution.normal is not None}")
    profile = cProfile.Profile(time.process_time)
    profile.enable()
    for _ in range(3):
        jax.block_until_ready(_original(solution, *args, **kwargs))
    profile.disable()
    pstats.Stats(profile).sort_stats("cumulative").print_stats(25)


if __name__ == "__main__":
    warnings.simplefilter("ignore")
    jax.config.update("jax_enable_x64", True)
    main()
