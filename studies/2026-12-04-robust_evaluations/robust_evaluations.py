"""``python -m benchmarks.robust_evaluations``: how many times a Levenberg–Marquardt
step evaluates the model, for plain least squares, a robust loss and the Poisson
likelihood, counted as the 2D Gaussian's ``exp`` operations in the program JAX traces
and in the one XLA compiles from it.

A robust or Poisson step asks for its trial value from a second evaluation of the
objective (``Problem.residual_value`` calls ``value_and_grad``: robust residuals are
rescaled, and their half sum of squares is not the cost). The traced program shows
it; the compiled one shows whether XLA merged it with the evaluation that gives the
residuals and Jacobian (common-subexpression elimination: the same operations on the
same operands). The solve: 1000 Gaussian fits (the tiny suite's, float32), the whole
batch as one ``vmap`` (``lanes`` above B: one loop, no refill) and 3 steps.

Writes ``benchmarks/results/<backend>-robust-evaluations-<date>.md``.
"""

from __future__ import annotations

import pathlib
import re

import jax
import jax.numpy as jnp

import fixedopt
from benchmarks import timing
from fixedopt.testing_problems import FIT_MODELS as MODELS

RESULTS = pathlib.Path(__file__).parent / "results"
OPTIONS = {"batched": True, "lanes": 1 << 30, "max_steps": 3}


def solves() -> dict:
    """``name: (solve, inputs)`` for the three costs of the same Gaussian fits."""
    function, _, make = MODELS["gaussian"]
    fits = make(1000)
    x0, fixed = jnp.asarray(fits.x0), jnp.asarray(fits.fixed)
    data = jnp.abs(jnp.asarray(fits.data))  # counts for the likelihood: not negative

    def fit(loss: str):
        def solve(x0, fixed, data):
            residual = lambda p, y: function(p) - y
            return fixedopt.least_squares(residual, x0, fixed, args=(data,), loss=loss, **OPTIONS)

        return solve

    def poisson(x0, fixed, counts):
        return fixedopt.least_squares(function, x0, fixed, counts=counts, estimator="poisson",
                                      **OPTIONS)  # fmt: skip

    named = {"least squares": fit("linear"), "soft_l1": fit("soft_l1"), "Poisson": poisson}
    return {name: (solve, (x0, fixed, data)) for name, solve in named.items()}


def counts(solve, inputs) -> dict:
    """``exp`` operations in the traced (StableHLO) and the compiled (HLO) program."""
    lowered = jax.jit(solve).lower(*inputs)
    traced = len(re.findall(r"stablehlo\.exponential", lowered.as_text()))
    compiled = len(re.findall(r" exponential\(", lowered.compile().as_text()))
    return {"traced": traced, "compiled": compiled}


def main() -> pathlib.Path:
    env = timing.environment()
    rows = {name: counts(*case) for name, case in solves().items()}
    stem = RESULTS / f"{env['backend']}-robust-evaluations-{env['date']}"
    lines = [f"# {stem.name}", "",
             "`exp` operations of the 2D Gaussian model in a Levenberg–Marquardt solve "
             "(1000 fits, float32, the whole batch as one vmap, 3 steps), in the program "
             "JAX traces and in the one XLA compiles; backend "
             f"{env['backend']}, jax {env['versions'].get('jax')}. "
             "`python -m benchmarks.robust_evaluations`.", "",
             "| cost | traced | compiled |", "|---|---|---|"]  # fmt: skip
    lines += [f"| {name} | {row['traced']} | {row['compiled']} |" for name, row in rows.items()]
    return timing.write_markdown(stem, lines)


if __name__ == "__main__":
    main()
