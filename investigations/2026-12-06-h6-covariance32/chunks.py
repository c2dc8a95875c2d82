"""Per-chunk program time of the covariance's programs against the whole call's, for a
captured curve_fit solution (process CPU time, medians).
Run: PYTHONPATH=. python investigations/2026-12-06-h6-covariance32/chunks.py CASE DTYPE"""

import statistics
import sys
import time
import warnings

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, "investigations/2026-12-06-h6-covariance32")
import parts  # noqa: E402
import share  # noqa: E402
from fixedopt._numerics import buckets  # noqa: E402
from fixedopt._results import solver_covariance  # noqa: E402

CALLS = []
_in_chunks = buckets.in_chunks


def _recording(compute, leaves, flags, batch, size=None):
    def timed(chunk, rows):
        jax.block_until_ready(chunk)
        start = time.process_time()
        found = jax.block_until_ready(compute(chunk, rows))
        CALLS.append(time.process_time() - start)
        return found
    return _in_chunks(timed, leaves, flags, batch, size)


def main() -> None:
    label, dtype = sys.argv[1], getattr(jnp, sys.argv[2])
    make = {"decay": lambda: share.decay_case(10_000), "spectra": lambda: share.spectra_case(2_000),
            "gpufit": lambda: share.gpufit_case(100_000)}[label]
    call = share.ours(make(), dtype)
    solver_covariance.fit_covariance = parts._capture
    jax.block_until_ready(call())
    solution, args, kwargs = parts.CAPTURED[-1]
    jax.block_until_ready(solution)
    buckets.in_chunks = _recording
    whole, programs, counts = [], [], []
    for _ in range(7):
        CALLS.clear()
        start = time.process_time()
        jax.block_until_ready(parts._original(solution, *args, **kwargs))
        whole.append(time.process_time() - start)
        programs.append(sum(CALLS))
        counts.append(len(CALLS))
    print(f"{label} {sys.argv[2]}: whole {statistics.median(whole)*1e3:.1f} ms, programs "
          f"{statistics.median(programs)*1e3:.1f} ms in {counts[0]} chunks")


if __name__ == "__main__":
    warnings.simplefilter("ignore")
    jax.config.update("jax_enable_x64", True)
    main()
