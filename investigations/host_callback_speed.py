"""The host-callback path's speed against the traced path on one model: the
benchmark's bi-exponential decay (5 parameters, 128 bins), curve_fit at defaults,
one fit and a batch of 200, each timed on its second call (compiled), median of 5.
Run on a quiet machine: PYTHONPATH=. python investigations/host_callback_speed.py"""

import time
import warnings

import jax
import numpy as np

jax.config.update("jax_enable_x64", True)
import fixedopt  # noqa: E402
from benchmarks.curve_fit import BINS, decay, decay_numpy, decays  # noqa: E402

warnings.simplefilter("ignore", fixedopt.HostFunctionWarning)


def seconds(call, rounds=5):
    call()  # compile (and the host path's trial trace)
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        jax.block_until_ready(call())
        times.append(time.perf_counter() - start)
    return float(np.median(times))


_, data, sigma, fixed, start = decays(200, seed=0)
for rows in (1, 200):
    args = (BINS, data[:rows], start[:rows])
    kw = dict(sigma=sigma[:rows], fixed=fixed[:rows], batched=True, bounds=(0.0, np.inf))
    traced = seconds(lambda: fixedopt.curve_fit(decay, *args, **kw)[0])
    host = seconds(lambda: fixedopt.curve_fit(decay_numpy, *args, **kw)[0])
    print(f"B={rows:4d}  traced {traced * 1e3:8.1f} ms  host {host * 1e3:8.1f} ms  "
          f"host/traced {host / traced:6.1f}")
