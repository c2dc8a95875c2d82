"""The differentiation suite as it was: ``jax.grad`` of ``sum(sin(solution.x))`` through a
batched solve, implicit (the default) vs unrolled (a scan of ``max_steps``), with XLA's
memory (``PYTHONPATH=. python studies/2026-11-29-differentiation/differentiation.py``)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from benchmarks import timing
from benchmarks.cases import SEED
from benchmarks.methods import Settings, device_inputs, fixedopt_call
from fixedopt.testing_problems import FIXED_FRACTION
from fixedopt.testing_problems import BatchedProblem as Problem


def quartic_jax(x, diag, b):
    """``0.5 x^T A x - b.x + 0.05 sum(x^4)``, ``A`` tridiagonal SPD (off-diagonal -0.5)."""
    coupling = jnp.sum(x[:-1] * x[1:])
    return 0.5 * jnp.sum(diag * x**2) - 0.5 * coupling - b @ x + 0.05 * jnp.sum(x**4)


def quartic(batch: int, n: int, seed: int = 0, dtype: str = "float64") -> Problem:
    """``quartic``: strictly convex rows, free entries starting at 0; JAX only."""
    rng = np.random.default_rng(seed)
    diag, b = rng.uniform(1.5, 50.0, (batch, n)), rng.normal(size=(batch, n))
    fixed = rng.random((batch, n)) < FIXED_FRACTION
    x0 = np.where(fixed, rng.normal(size=(batch, n)), 0.0)
    return Problem("quartic", quartic_jax, None, (diag, b), x0, fixed, dtype)


def gradient(problem, differentiate: str, max_steps: int):
    """``b -> (d sum(sin(x*)) / d b, steps)``, jitted."""
    settings = Settings(1e-10, max_steps)
    options = {"differentiate": differentiate}
    solve, (x0, fixed, bounds, diag, _) = fixedopt_call(problem, settings, **options)

    def loss(b):
        solution = solve(x0, fixed, bounds, diag, b)
        return jnp.sum(jnp.sin(solution.x)), solution.steps

    return jax.jit(jax.grad(loss, has_aux=True))


def run(quick: bool = False) -> list[dict]:
    """B=256, n=64, 100 steps at most, 5 repeats (quick: B=8, n=8, 20 steps, 2)."""
    batch, n, max_steps, repeats = (8, 8, 20, 2) if quick else (256, 64, 100, 5)
    problem = quartic(batch, n, SEED)
    b = device_inputs(problem)[-1]
    calls, records = {}, {}
    for name in ("implicit", "unroll"):
        program, stats = timing.compiled(gradient(problem, name, max_steps), b)
        grad, steps = jax.block_until_ready(program(b))
        calls[name] = lambda program=program: jax.block_until_ready(program(b))
        records[name] = {"kind": "differentiation", "method": name, "B": batch, "n": n,
                         "max_steps": max_steps, **stats, "max_steps_taken": int(jnp.max(steps)),
                         "gradient": np.asarray(grad)}  # fmt: skip
    times, _ = timing.interleaved(calls, repeats)
    implicit, unroll = (records[k].pop("gradient") for k in ("implicit", "unroll"))
    difference = float(np.max(np.abs(implicit - unroll)) / np.max(np.abs(implicit)))
    seconds, memory = np.median(times["implicit"]), max(records["implicit"]["temp_bytes"], 1)
    for name, record in records.items():
        record |= timing.summary(times[name]) | {"max_relative_gradient_difference": difference}
        record["vs_implicit"] = record["time_median_s"] / seconds
        record["memory_vs_implicit"] = record["temp_bytes"] / memory
    return list(records.values())


if __name__ == "__main__":
    jax.config.update("jax_enable_x64", True)
    for record in run():
        print(record)
