"""On a TPU: Gpufit's spot (100,000 fits, float32) compiled call with its rows padded in
NumPy (this tree) against the compiled pad (``buckets.mostly_on_host`` False, as
before), interleaved in one process, medians of ``REPEATS`` calls each; the solutions
compared bit for bit.

``python investigations/2026-12-07-h2-tpu/spot_pad_ab.py OUT.json``"""

import json
import statistics
import sys
import time

import jax
import numpy as np

from benchmarks import first_call_cases as cases
from fixedopt._numerics import buckets

REPEATS = 15
HOST = buckets.mostly_on_host


def timed(call):
    start = time.perf_counter()
    jax.block_until_ready(call())
    return time.perf_counter() - start


def main():
    call = cases.spot(100_000)["call"]
    ways = {"host": HOST, "compiled": lambda leaves: False}
    results, times = {}, {name: [] for name in ways}
    for name, rule in ways.items():  # each way's first call: compiles, then its result
        buckets.mostly_on_host = rule
        results[name] = jax.tree.map(np.asarray, call())
    for _ in range(REPEATS):
        for name, rule in ways.items():
            buckets.mostly_on_host = rule
            times[name].append(timed(call))
    same = all(np.array_equal(a, b, equal_nan=True)
               for a, b in zip(jax.tree.leaves(results["host"]),
                               jax.tree.leaves(results["compiled"])))  # fmt: skip
    report = {"median_s": {name: statistics.median(t) for name, t in times.items()},
              "all_s": times, "bitwise_equal": same, "repeats": REPEATS}  # fmt: skip
    print(json.dumps(report["median_s"]), "bitwise_equal", same, flush=True)
    with open(sys.argv[1], "w") as file:
        json.dump(report, file, indent=1)


if __name__ == "__main__":
    main()
