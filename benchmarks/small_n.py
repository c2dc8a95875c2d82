"""Per-step overhead at small n: fixedopt's L-BFGS (both line searches) against TFP's
batched ``lbfgs_minimize`` on ``quad`` (n=8, ~30% fixed), B = 256 ... 16384.

Interleaved repeats (A B C A B C ...), medians, compile excluded; the table gives
the batch's time, its slowest row's steps, microseconds per batch step and the
fraction of rows whose masked gradient reached ``gtol``.

Run: ``python -m benchmarks.small_n [--n 8] [--repeats 7]``; writes
``benchmarks/results/<backend>-small-n-<date>.{json,md}``.
"""

from __future__ import annotations

import argparse

import jax
import jax.numpy as jnp
import numpy as np

from benchmarks import problems
from benchmarks.linesearch import fixedopt_runner, tfp_runner
from benchmarks.timing import environment, interleaved, save_results, summary

BATCHES = (256, 1024, 4096, 16384)


def measure(batch: int, n: int, repeats: int) -> dict:
    problem = problems.quad(batch, n)
    inputs = [jnp.asarray(problem.x0), jnp.asarray(problem.fixed),
              *map(jnp.asarray, problem.args)]  # fmt: skip
    runners = {
        "fixedopt backtracking": fixedopt_runner(problem, "backtracking"),
        "fixedopt hager-zhang": fixedopt_runner(problem, "hager-zhang"),
        "tfp": tfp_runner(problem),
    }
    calls = {name: (lambda r=r: jax.block_until_ready(r(*inputs))) for name, r in runners.items()}
    for call in calls.values():
        call()  # compile
    times, outputs = interleaved(calls, dict.fromkeys(calls, repeats))
    rows = {}
    for name, (_, steps, converged) in outputs.items():
        median = summary(times[name])["time_median_s"]
        steps = int(np.max(steps))
        rows[name] = {"time_s": median, "max_steps": steps, "us_per_step": 1e6 * median / steps,
                      "converged": float(np.mean(converged))}  # fmt: skip
    return {"B": batch, "n": n, "methods": rows}


def markdown(results: list[dict], env: dict) -> str:
    lines = [f"quad, {env['backend']} ({env['device']}), {env['date']}.", "",
             "| B x n | method | time (ms) | max steps | us / step | converged | TFP time / this |",
             "|---|---|---:|---:|---:|---:|---:|"]  # fmt: skip
    for case in results:
        tfp = case["methods"]["tfp"]["time_s"]
        for name, r in case["methods"].items():
            lines.append(
                f"| {case['B']}x{case['n']} | {name} | {1e3 * r['time_s']:.2f} | "
                f"{r['max_steps']} | {r['us_per_step']:.0f} | {r['converged']:.3f} | "
                f"{tfp / r['time_s']:.2f}x |"
            )
    return "\n".join(lines) + "\n"


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=7)
    options = parser.parse_args(argv)
    jax.config.update("jax_enable_x64", True)
    results = [measure(batch, options.n, options.repeats) for batch in BATCHES]
    env = environment()
    result = {"environment": env, "results": results}
    save_results(f"{env['backend']}-small-n-{env['date']}", result, markdown(results, env))


if __name__ == "__main__":
    main()
