"""``PYTHONPATH=. python studies/2026-12-06-start_in_step/runtime_ab.py CASE REPEATS``:
one fresh process's first call and the median of ``REPEATS`` compiled calls of a
least-squares case (``gauss_100000``: Gpufit's spot at the top level, in CPU blocks;
``gauss_1000000_jit``: a million spots in the user's ``jax.jit``; ``decay``: 20,000
decay curves in ``jax.jit``; ``spectra_2000``, ``rk4_500``: ``benchmarks.first_call``'s
cases). ``RC=0.25`` sets ``LevenbergMarquardt.refill_cost``. Run from each tree in turn
(a worktree of the commit before, ``PYTHONPATH`` at it), alternating, the persistent
cache off (``FIXEDOPT_CACHE=off``)."""

import json
import os
import statistics
import sys
import time

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import fixedopt  # noqa: E402
from benchmarks.first_call import BUILDERS  # noqa: E402
from benchmarks.tiny import GPUFIT  # noqa: E402
from fixedopt.testing_problems import FIT_MODELS, decay_fits, gaussian_fits  # noqa: E402


def call_of(case: str):
    """The case's call, compiled on its first use."""
    if case.startswith(("gauss", "decay")):
        fits = gaussian_fits(int(case.split("_")[1])) if case != "decay" else decay_fits(20_000)
        model = FIT_MODELS[fits.name][0]
        options = GPUFIT if case.startswith("gauss") else {}

        def solve(x0, fixed, data):
            residual = lambda p, d: model(p) - d
            return fixedopt.least_squares(residual, x0, fixed, args=(data,), batched=True,
                                          **options)  # fmt: skip

        if case.endswith("_jit") or case == "decay":
            jitted, inputs = (
                jax.jit(solve),
                tuple(map(jnp.asarray, (fits.x0, fits.fixed, fits.data))),
            )
            return lambda: jitted(*inputs)
        return lambda: solve(fits.x0, fits.fixed, fits.data)
    name, batch = case.split("_")
    return BUILDERS[name](int(batch))["call"]


def main() -> None:
    case, repeats = sys.argv[1], int(sys.argv[2])
    if os.environ.get("RC"):
        fixedopt.LevenbergMarquardt.refill_cost = float(os.environ["RC"])
    call = call_of(case)
    start = time.perf_counter()
    out = jax.block_until_ready(call())
    first = time.perf_counter() - start
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(call())
        times.append(time.perf_counter() - start)
    x = np.asarray(out.x if hasattr(out, "x") else out[0])  # curve_fit: (popt, pcov)
    print(json.dumps({"case": case, "first": first, "median": statistics.median(times),
                      "min": min(times), "x_abs_sum": float(np.nansum(np.abs(x)))}))  # fmt: skip


if __name__ == "__main__":
    main()
