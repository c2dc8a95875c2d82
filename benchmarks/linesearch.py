"""L-BFGS line searches side by side: backtracking, Hager–Zhang, and TFP's batch.

The batch pays its slowest row's step count, so the table reports the maximum steps
over rows next to the mean, and the time of the whole batched solve (interleaved
repeats, median; compile timed separately). Problems: ``illquad`` (every row a
diagonal quadratic with eigenvalues log-spaced over ``condition``, in a random order
per row, ~30% fixed), and the suite's ``quad`` and ``rosen``.

Run: ``python -m benchmarks.linesearch [--repeats 5] [--batch 256]``; writes
``benchmarks/results/cpu-linesearch-<date>.{json,md}``.
"""

from __future__ import annotations

import argparse
import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

import fixedopt
from benchmarks import problems
from benchmarks.base import absolute_gradient_test
from benchmarks.timing import environment, first_call, interleaved, save_results, summary

GTOL = {"float64": 1e-6, "float32": 1e-3}  # float32: what its rounding lets a row reach
MAX_STEPS = 2000


def illquad(batch: int, n: int, condition: float, dtype: str, seed: int = 0):
    """Every row diagonal with eigenvalues over ``condition``, permuted per row."""
    rng = np.random.default_rng(seed)
    spread = np.sqrt(condition)
    diag = np.stack([rng.permutation(np.geomspace(1 / spread, spread, n)) for _ in range(batch)])
    args = tuple(problems.rounded(a, dtype) for a in (diag, np.zeros((batch, n - 1)),
                                                      rng.normal(size=(batch, n))))  # fmt: skip
    x0 = problems.rounded(rng.normal(size=(batch, n)), dtype)
    fixed = problems.random_mask(rng, (batch, n))
    name = f"illquad cond {condition:.0e}"
    return problems.Problem(name, problems.quad_jax, problems.quad_numpy, args, x0, fixed, dtype)


def fixedopt_runner(problem, linesearch: str):
    solver = fixedopt.LBFGS(linesearch=linesearch)

    @jax.jit
    def solve(x0, fixed, *args):
        sol = fixedopt.minimize(
            problem.jax_fun, x0, fixed, args=args, batched=True, solver=solver,
            **absolute_gradient_test(GTOL[problem.dtype]), max_steps=MAX_STEPS,
        )  # fmt: skip
        return sol.value, sol.steps, sol.converged

    return solve


def tfp_runner(problem):
    from tensorflow_probability.substrates import jax as tfp

    def masked(x, x0, fixed, *args):
        return problem.jax_fun(jnp.where(fixed, jax.lax.stop_gradient(x0), x), *args)

    value_and_grad = jax.vmap(jax.value_and_grad(masked))

    @jax.jit
    def solve(x0, fixed, *args):
        result = tfp.optimizer.lbfgs_minimize(
            lambda x: value_and_grad(x, x0, fixed, *args), initial_position=x0,
            tolerance=GTOL[problem.dtype], max_iterations=MAX_STEPS, num_correction_pairs=10,
        )  # fmt: skip
        steps = jnp.broadcast_to(result.num_iterations, result.objective_value.shape)
        # TFP also reports rows "converged" whose step changed nothing (x_tolerance=0):
        # count a row converged only by the same gradient test as fixedopt.
        grad = value_and_grad(result.position, x0, fixed, *args)[1]
        return result.objective_value, steps, jnp.max(jnp.abs(grad), axis=1) <= GTOL[problem.dtype]

    return solve


def measure(problem, repeats: int, with_tfp: bool) -> dict:
    inputs = [jnp.asarray(a, problem.dtype) for a in (problem.x0, *problem.args)]
    inputs.insert(1, jnp.asarray(problem.fixed))
    runners = {name: fixedopt_runner(problem, name) for name in ("backtracking", "hager-zhang")}
    if with_tfp:
        runners["tfp"] = tfp_runner(problem)
    calls = {name: (lambda r=r: jax.block_until_ready(r(*inputs))) for name, r in runners.items()}
    compiles = {name: first_call(call) for name, call in calls.items()}
    times, outputs = interleaved(calls, dict.fromkeys(calls, repeats))
    rows = {}
    for name, (value, steps, converged) in outputs.items():
        steps = np.asarray(steps)
        rows[name] = {"max_steps": int(steps.max()), "mean_steps": float(steps.mean()),
                      "converged": float(np.mean(converged)), "value": np.asarray(value).tolist(),
                      **summary(times[name]), **compiles[name]}  # fmt: skip
    best = np.min([r["value"] for r in rows.values()], axis=0)
    for row in rows.values():
        gap = np.abs(np.asarray(row.pop("value")) - best) / np.maximum(np.abs(best), 1.0)
        row["max_rel_value_gap"] = float(gap.max())
    return {"problem": problem.name, "dtype": problem.dtype, "B": problem.batch,
            "n": problem.size, "methods": rows}  # fmt: skip


def cases(batch: int):
    for dtype in ("float64", "float32"):
        for condition in (1e4, 1e5, 1e6):
            yield illquad(batch, 32, condition, dtype)
        yield dataclasses.replace(problems.quad(batch, 64, dtype=dtype))
        yield problems.rosen(batch, 64, dtype=dtype)


def markdown(results: list[dict]) -> str:
    lines = ["| problem | dtype | B x n | method | max steps | mean steps | converged | "
             "time (s) | vs backtracking | compile (s) | max rel gap |",
             "|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|"]  # fmt: skip
    for case in results:
        base = case["methods"]["backtracking"]["time_median_s"]
        for name, row in case["methods"].items():
            lines.append(
                f"| {case['problem']} | {case['dtype']} | {case['B']}x{case['n']} | {name} | "
                f"{row['max_steps']} | {row['mean_steps']:.1f} | {row['converged']:.3f} | "
                f"{row['time_median_s']:.4f} | {row['time_median_s'] / base:.2f}x | "
                f"{row['compile_s']:.2f} | {row['max_rel_value_gap']:.1e} |"
            )
    return "\n".join(lines) + "\n"


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--no-tfp", action="store_true")
    options = parser.parse_args(argv)
    jax.config.update("jax_enable_x64", True)
    results = [measure(p, options.repeats, not options.no_tfp) for p in cases(options.batch)]
    env = environment()
    result = {"environment": env, "gtol": GTOL, "results": results}
    save_results(f"{env['backend']}-linesearch-{env['date']}", result, markdown(results))


if __name__ == "__main__":
    main()
