"""``minimize`` (L-BFGS defaults) on ``quad`` and ``least_squares`` (Levenberg–Marquardt
defaults) on the tiny suite's decay fit, for comparing two checkouts side by side:

    PYTHONPATH=<checkout> python benchmarks/reduce_commits.py LABEL [CASE ...]

run in alternating processes (A B A B) from this tree's ``benchmarks/``. A case is
``quad:n:B`` or ``decay:B``. Per case one JSON line: the compile time (trace + lower +
compile), the fused kernels and ``reduce-window``s of the compiled program, the median
wall seconds of 7 compiled calls, the mean steps and the fraction converged. Results:
``benchmarks/results/cpu-reduce-commits-<date>.md``.
"""

import json
import re
import statistics
import sys
import time

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import fixedopt  # noqa: E402
from fixedopt.testing_problems import FIT_MODELS as MODELS  # noqa: E402
from fixedopt.testing_problems import decay_model, quad_jax  # noqa: E402


def quad_case(n: int, batch: int):
    rng = np.random.default_rng(0)
    args = (jnp.asarray(rng.uniform(1, 10, (batch, n))),
            jnp.asarray(rng.uniform(-0.5, 0.5, (batch, n - 1))),
            jnp.asarray(rng.normal(size=(batch, n))))  # fmt: skip
    x0, fixed = jnp.zeros((batch, n)), jnp.asarray(rng.random((batch, n)) < 0.2)

    def solve(x0, fixed, *args):
        return fixedopt.minimize(quad_jax, x0, fixed, args=args, batched=True)

    return solve, (x0, fixed, *args)


def decay_case(batch: int):
    fits = MODELS["decay"][2](batch)

    def solve(x0, fixed, data):
        residual = lambda p, data: decay_model(p) - data
        return fixedopt.least_squares(residual, x0, fixed, args=(data,), batched=True)

    return solve, (jnp.asarray(fits.x0), jnp.asarray(fits.fixed), jnp.asarray(fits.data))


def measure(label: str, case: str) -> dict:
    kind, *sizes = case.split(":")
    solve, inputs = quad_case(*map(int, sizes)) if kind == "quad" else decay_case(int(sizes[0]))
    tic = time.perf_counter()
    compiled = jax.jit(solve).lower(*inputs).compile()
    compile_s = time.perf_counter() - tic
    text = compiled.as_text()
    solution = jax.block_until_ready(compiled(*inputs))
    walls = []
    for _ in range(7):
        tic = time.perf_counter()
        solution = jax.block_until_ready(compiled(*inputs))
        walls.append(time.perf_counter() - tic)
    return {"label": label, "case": case, "compile_s": compile_s,
            "fusions": len(re.findall(r" fusion\(", text)),
            "reduce_windows": len(re.findall(r"reduce-window\(", text)),
            "time_s": statistics.median(walls), "steps_mean": float(jnp.mean(solution.steps)),
            "converged": float(jnp.mean(solution.converged))}  # fmt: skip


if __name__ == "__main__":
    label, *cases = sys.argv[1:]
    warm_up, warm_inputs = quad_case(8, 8)  # one-time costs: a first compile, not counted
    jax.jit(warm_up).lower(*warm_inputs).compile()
    for case in cases or ["quad:64:1024"]:
        print(json.dumps(measure(label, case)), flush=True)
