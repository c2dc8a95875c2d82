"""Implicit versus unrolled differentiation through a batched solve.

Usage::

    python -m benchmarks.differentiation [--batch 256] [--n 64] [--repeats 5]

For a batch of strictly convex problems (a per-row tridiagonal quadratic plus a
quartic, ~30% of each row fixed), times ``jax.grad`` of ``sum(sin(solution.x))``
with respect to the per-row linear term, differentiated implicitly (the default) and
by unrolling (``differentiate="unroll"``: every loop becomes a scan of
``max_steps``), interleaved, median of repeats, compile time apart; reads the
compiled programs' temporary memory from XLA; checks that both gradients agree.
Writes ``benchmarks/results/<backend>-differentiation-<date>.{json,md}``.
"""

from __future__ import annotations

import argparse
import datetime
import time

import jax
import jax.numpy as jnp
import numpy as np

import fixedopt
from benchmarks.base import absolute_gradient_test
from benchmarks.timing import save_results


def objective(x, diagonal, b):
    """0.5 x^T A x - b.x + 0.05 sum(x^4), A tridiagonal SPD (per-row diagonal)."""
    coupling = jnp.sum(x[:-1] * x[1:])
    return 0.5 * jnp.sum(diagonal * x**2) - 0.5 * coupling - b @ x + 0.05 * jnp.sum(x**4)


def make_problem(batch: int, n: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    diagonal = jnp.asarray(rng.uniform(1.5, 50.0, (batch, n)))
    b = jnp.asarray(rng.normal(size=(batch, n)))
    fixed = jnp.asarray(rng.random((batch, n)) < 0.3)
    x0 = jnp.where(fixed, jnp.asarray(rng.normal(size=(batch, n))), 0.0)
    return x0, fixed, diagonal, b


def gradient_function(x0, fixed, diagonal, differentiate: str, max_steps: int):
    def loss(b):
        sol = fixedopt.minimize(
            objective, x0, fixed, args=(diagonal, b), batched=True, **absolute_gradient_test(1e-10),
            max_steps=max_steps, differentiate=differentiate,
        )  # fmt: skip
        return jnp.sum(jnp.sin(sol.x)), sol.steps

    return jax.jit(jax.grad(loss, has_aux=True))


def measure(batch: int, n: int, repeats: int, max_steps: int) -> dict:
    x0, fixed, diagonal, b = make_problem(batch, n)
    methods = {name: gradient_function(x0, fixed, diagonal, name, max_steps)
               for name in ("implicit", "unroll")}  # fmt: skip
    records = {}
    for name, function in methods.items():
        start = time.perf_counter()
        compiled = function.lower(b).compile()
        compile_seconds = time.perf_counter() - start
        memory = compiled.memory_analysis()
        gradient, steps = jax.block_until_ready(compiled(b))
        records[name] = {
            "compiled": compiled,
            "compile_s": compile_seconds,
            "temp_bytes": int(getattr(memory, "temp_size_in_bytes", -1)),
            "gradient": np.asarray(gradient),
            "max_steps_taken": int(jnp.max(steps)),
            "times": [],
        }
    for _ in range(repeats):  # interleaved: A B A B ...
        for record in records.values():
            start = time.perf_counter()
            jax.block_until_ready(record["compiled"](b))
            record["times"].append(time.perf_counter() - start)
    difference = np.max(np.abs(records["implicit"]["gradient"] - records["unroll"]["gradient"]))
    scale = np.max(np.abs(records["implicit"]["gradient"]))
    return {
        "backend": jax.default_backend(),
        "device": str(jax.devices()[0]),
        "jax": jax.__version__,
        "batch": batch,
        "n": n,
        "dtype": "float64",
        "max_steps": max_steps,
        "repeats": repeats,
        "max_relative_gradient_difference": float(difference / scale),
        "methods": {
            name: {
                "time_median_s": float(np.median(r["times"])),
                "time_min_s": float(np.min(r["times"])),
                "time_max_s": float(np.max(r["times"])),
                "compile_s": r["compile_s"],
                "temp_bytes": r["temp_bytes"],
                "max_steps_taken": r["max_steps_taken"],
            }
            for name, r in records.items()
        },
    }


def markdown(result: dict) -> str:
    implicit, unroll = result["methods"]["implicit"], result["methods"]["unroll"]
    lines = [
        f"# Differentiating through a batched solve ({result['backend']}, "
        f"B={result['batch']}, n={result['n']}, float64)",
        "",
        "| method | gradient time (median s) | min–max (s) | compile (s) | XLA temp memory (MiB) |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, m in result["methods"].items():
        lines.append(
            f"| {name} | {m['time_median_s']:.4f} | {m['time_min_s']:.4f}–{m['time_max_s']:.4f}"
            f" | {m['compile_s']:.2f} | {m['temp_bytes'] / 2**20:.1f} |"
        )
    lines += [
        "",
        f"- unrolled / implicit: time {unroll['time_median_s'] / implicit['time_median_s']:.1f}x,"
        f" memory {unroll['temp_bytes'] / max(implicit['temp_bytes'], 1):.1f}x.",
        f"- max relative difference between the two gradients: "
        f"{result['max_relative_gradient_difference']:.1e}.",
        f"- the solve takes at most {implicit['max_steps_taken']} steps per row; the unrolled"
        f" gradient runs all {result['max_steps']} (a scan of max_steps, each line search"
        " a scan of its maximum trials).",
        f"- jax {result['jax']}, device {result['device']}; {result['repeats']} interleaved"
        " repeats. Command: `python -m benchmarks.differentiation`.",
    ]
    return "\n".join(lines) + "\n"


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--n", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--max-steps", type=int, default=100)
    args = parser.parse_args(argv)
    jax.config.update("jax_enable_x64", True)
    result = measure(args.batch, args.n, args.repeats, args.max_steps)
    stem = f"{result['backend']}-differentiation-{datetime.date.today().isoformat()}"
    save_results(stem, result, markdown(result))


if __name__ == "__main__":
    main()
