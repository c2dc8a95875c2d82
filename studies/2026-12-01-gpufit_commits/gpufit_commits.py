"""The Gpufit protocol at one batch size, for comparing two checkouts side by side:
``PYTHONPATH=<checkout> python benchmarks/gpufit_commits.py B [lanes|default|compact=False]``
in alternating processes (A B A B). Prints fits/s (median of 3 compiled calls), process
CPU seconds, first-call seconds (with compilation), convergence, mean steps and the
median relative error of each parameter.
Results: benchmarks/results/cpu-gpufit-commits-2026-12-01.md.
"""

import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

import fixedopt

batch, option = int(sys.argv[1]), sys.argv[2] if len(sys.argv) > 2 else "default"
rng = np.random.default_rng(0)
grid = np.arange(5.0)
yy, xx = np.meshgrid(grid, grid, indexing="ij")
truth = np.array([500.0, 2.0, 2.0, 1.0, 10.0]) * rng.uniform(0.9, 1.1, (batch, 5))


def model(p):
    amplitude, x0, y0, width, background = p
    return amplitude * jnp.exp(-((xx - x0) ** 2 + (yy - y0) ** 2) / (2 * width**2)) + background


def residual(p, y):
    return model(p).reshape(-1) - y


noise = (2 * np.pi * 500 / 4.292**2) / 10
clean = np.asarray(jax.vmap(model)(jnp.asarray(truth))).reshape(batch, 25)
data = jnp.asarray(clean + rng.normal(0, noise, clean.shape), jnp.float32)
start = jnp.asarray(truth * rng.uniform(0.9, 1.1, (batch, 5)), jnp.float32)
options = {"batched": True, "ftol": 1e-4, "max_steps": 10}
if option.startswith("compact="):  # checkouts from before the lanes
    options["compact"] = option.split("=")[1] == "True"
elif option != "default":
    options["lanes"] = int(option)


def call():
    solution = fixedopt.least_squares(residual, start, jnp.zeros((batch, 5), bool),
                                      args=(data,), **options)  # fmt: skip
    return jax.block_until_ready(solution)


tic = time.perf_counter()
solution = call()
first = time.perf_counter() - tic
walls, cpus = [], []
for _ in range(3):
    tic, cpu = time.perf_counter(), time.process_time()
    solution = call()
    walls.append(time.perf_counter() - tic)
    cpus.append(time.process_time() - cpu)
wall = float(np.median(walls))
error = np.median(np.abs(np.asarray(solution.x) - truth) / truth, axis=0)
print(f"{option} B={batch} fits/s={batch / wall:,.0f} cpu={np.median(cpus):.3f}s "
      f"first={first:.2f}s converged={np.mean(solution.converged):.3f} "
      f"steps={np.mean(solution.steps):.2f} rel_err={np.round(error, 4)}")  # fmt: skip
