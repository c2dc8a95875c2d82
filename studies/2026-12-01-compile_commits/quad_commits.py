"""``minimize`` on quad n = 64 for comparing two checkouts side by side:
``PYTHONPATH=<checkout> python benchmarks/quad_commits.py B [default|LANES ...]`` in
alternating processes (A B A B). Per option: wall and process CPU seconds per solve
(median of 5 compiled calls), mean steps, fraction converged.
Results: benchmarks/results/cpu-compile_time-2026-12-01.md.
"""

import sys
import time

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import fixedopt  # noqa: E402
from fixedopt.testing_problems import quad_jax  # noqa: E402

batch, n = int(sys.argv[1]), 64
rng = np.random.default_rng(0)
diag = jnp.asarray(rng.uniform(1, 10, (batch, n)))
off = jnp.asarray(rng.uniform(-0.5, 0.5, (batch, n - 1)))
b = jnp.asarray(rng.normal(size=(batch, n)))
x0, fixed = jnp.zeros((batch, n)), jnp.asarray(rng.random((batch, n)) < 0.2)
for option in sys.argv[2:] or ["default"]:
    options = {} if option == "default" else {"lanes": int(option)}

    @jax.jit
    def solve(x0, fixed, diag, off, b, options=options):
        return fixedopt.minimize(quad_jax, x0, fixed, args=(diag, off, b), batched=True,
                                 **options)  # fmt: skip

    jax.block_until_ready(solve(x0, fixed, diag, off, b))
    walls, cpus = [], []
    for _ in range(5):
        tic, cpu = time.perf_counter(), time.process_time()
        solution = jax.block_until_ready(solve(x0, fixed, diag, off, b))
        walls.append(time.perf_counter() - tic)
        cpus.append(time.process_time() - cpu)
    print(f"{option} B={batch} wall={np.median(walls):.3f}s cpu={np.median(cpus):.3f}s "
          f"steps={float(solution.steps.mean()):.2f} "
          f"converged={float(solution.converged.mean()):.3f}", flush=True)  # fmt: skip
