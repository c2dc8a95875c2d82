"""Bytes accessed per row by one L-BFGS step (XLA's cost analysis), against the floor:
``python -m benchmarks.lbfgs_bytes`` writes ``benchmarks/results/cpu-lbfgs-bytes-<date>.md``.

As ``benchmarks/tiny.py``'s ``step_bytes`` for Levenberg–Marquardt: the batched
``minimize`` of ``quad`` (L-BFGS defaults, float64, B = 1024) compiled with
``differentiate="unroll"`` (a scan of ``max_steps`` trips, no lanes) for 1 and 2 steps;
the difference of the two programs' bytes accessed is one step's. XLA counts every
kernel's operands and results, so this is the traffic of a step whose kernels each
stream their arrays through memory; and it counts a loop's body once, so the line
search's trials and the two-loop recursion's ``2 m`` trips count as one each: a lower
bound on the step's traffic. The floor: the row's loop state (the point, its
gradient, the L-BFGS memory, scalars) read and written once, and its data (the
Hessian's two diagonals and ``b``) read once.
"""

from __future__ import annotations

import datetime
import pathlib

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import fixedopt  # noqa: E402
from fixedopt.testing_problems import quad_jax  # noqa: E402

RESULTS = pathlib.Path(__file__).parent / "results"
ROWS = 1024
MEMORY = fixedopt.LBFGS().memory_size


def program_bytes(n: int, steps: int) -> float:
    """Bytes accessed per row by the compiled solve of ``steps`` steps."""
    rng = np.random.default_rng(0)
    inputs = (jnp.zeros((ROWS, n)), jnp.asarray(rng.random((ROWS, n)) < 0.2),
              jnp.asarray(rng.uniform(1, 10, (ROWS, n))),
              jnp.asarray(rng.uniform(-0.5, 0.5, (ROWS, n - 1))),
              jnp.asarray(rng.normal(size=(ROWS, n))))  # fmt: skip

    def solve(x0, fixed, *args):
        return fixedopt.minimize(quad_jax, x0, fixed, args=args, batched=True,
                                 differentiate="unroll", max_steps=steps)  # fmt: skip

    cost = jax.jit(solve).lower(*inputs).compile().cost_analysis()
    cost = cost[0] if isinstance(cost, list) else cost
    return float(cost["bytes accessed"]) / ROWS


def floor_bytes(n: int) -> int:
    """The state read and written once (x, grad, s and y histories, rho, direction,
    diagonal: ``(2 m + 4) n + m`` numbers, and ~8 scalars), the data read once
    (``3 n - 1`` numbers), float64."""
    state = (2 * MEMORY + 4) * n + MEMORY + 8
    return 8 * (2 * state + 3 * n - 1)


def main() -> None:
    lines = ["# Bytes accessed per row by one L-BFGS step, against the floor", "",
             f"`python -m benchmarks.lbfgs_bytes`; quad, float64, B = {ROWS}, L-BFGS defaults "
             f"(memory {MEMORY}), jax {jax.__version__}, backend {jax.default_backend()}. "
             "One step: the program of 2 unrolled steps less the program of 1. XLA counts each "
             "loop's body once (one line-search trial, one trip of each of the recursion's "
             "loops): a lower bound on a step's traffic.", "",
             "| n | line search | bytes per row per step | floor | times the floor | "
             "one-step program, bytes per row |", "|---|---|---|---|---|---|"]  # fmt: skip
    for n in (8, 16, 64):
        one, two = program_bytes(n, 1), program_bytes(n, 2)
        search = "Hager–Zhang" if n <= MEMORY else "backtracking"
        floor = floor_bytes(n)
        lines.append(f"| {n} | {search} | {two - one:,.0f} | {floor:,} | "
                     f"{(two - one) / floor:.1f}x | {one:,.0f} |")  # fmt: skip
        print(lines[-1], flush=True)
    path = RESULTS / f"{jax.default_backend()}-lbfgs-bytes-{datetime.date.today()}.md"
    path.write_text("\n".join(lines) + "\n")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
