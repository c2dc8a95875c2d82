"""``python -m benchmarks.lanes_widths B N W[,W...]``: ``minimize`` (L-BFGS defaults) on
``quad`` (B rows of N unknowns, ``benchmarks.problems.quad``, a fresh mask) through
lanes of each width W, through the default lanes, and TFP's batched L-BFGS, interleaved
(15 calls each, after one warm-up); prints each one's median time and TFP's time over
it. For comparing widths in one process, or one width across checkouts
(``PYTHONPATH=<checkout>``, alternating processes)."""

import statistics
import sys
import time

import jax

jax.config.update("jax_enable_x64", True)

from benchmarks import methods  # noqa: E402
from fixedopt.testing_problems import quad  # noqa: E402


def main(batch: int, n: int, widths: list[int]) -> None:
    problem, settings = quad(batch, n).with_mask(1), methods.Settings()
    runners = {f"lanes{w}": methods.fixedopt_method(lanes=w)(problem, settings) for w in widths}
    runners["default"] = methods.fixedopt_method()(problem, settings)
    runners["tfp"] = methods.tfp_lbfgs(problem, settings)
    for runner in runners.values():
        runner.call()
    times: dict[str, list[float]] = {name: [] for name in runners}
    for _ in range(15):
        for name, runner in runners.items():
            tic = time.perf_counter()
            runner.call()
            times[name].append(time.perf_counter() - tic)
    tfp = statistics.median(times["tfp"])
    for name, samples in times.items():
        median = statistics.median(samples)
        print(f"{name:12s} {median * 1e3:8.2f} ms  tfp/this {tfp / median:.2f}x")


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]), [int(w) for w in sys.argv[3].split(",")])
