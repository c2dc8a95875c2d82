"""Issue 61: the quad n = 64 rows that ran to max_steps on a TPU v5e: found, saved, solved
alone. ``python3 benchmarks/tpu_stragglers.py OUT`` on the chip."""

import sys

import jax
import numpy as np

assert jax.default_backend() == "tpu", jax.default_backend()
from benchmarks.methods import Settings, fixedopt_call
from fixedopt.testing_problems import BATCHED

out = sys.argv[1]
problem = BATCHED["quad"](16384, 64, 0, "float32")
settings = Settings(1e-3, 5000, 32, 2**20)
call, inputs = fixedopt_call(problem, settings)
sol = jax.jit(call)(*inputs)
steps = np.asarray(sol.steps)
status = np.asarray(sol.status)
idx = np.flatnonzero(steps > 200)
print(
    "rows >200 steps:",
    idx.tolist(),
    "statuses",
    status[idx].tolist(),
    "steps",
    steps[idx].tolist(),
    flush=True,
)
print("status counts", np.unique(status, return_counts=True), flush=True)
np.savez(
    f"{out}/stragglers.npz",
    idx=idx,
    x0=problem.x0[idx],
    fixed=problem.fixed[idx],
    args=np.stack([a[idx] for a in problem.args])
    if all(a.shape == problem.args[0].shape for a in problem.args)
    else 0,
    x=np.asarray(sol.x)[idx],
    value=np.asarray(sol.value)[idx],
    status=status[idx],
    steps=steps[idx],
    **{f"arg{i}": a[idx] for i, a in enumerate(problem.args)},
)
sub = problem.rows(16384)
import dataclasses

sub = dataclasses.replace(
    problem, x0=problem.x0[idx], fixed=problem.fixed[idx], args=tuple(a[idx] for a in problem.args)
)
call2, inputs2 = fixedopt_call(sub, settings)
s2 = jax.jit(call2)(*inputs2)
print(
    "alone jitted: status",
    np.asarray(s2.status).tolist(),
    "steps",
    np.asarray(s2.steps).tolist(),
    flush=True,
)
s3 = call2(*inputs2)
print(
    "alone top level: status",
    np.asarray(s3.status).tolist(),
    "steps",
    np.asarray(s3.steps).tolist(),
    flush=True,
)
for ms in (50, 100, 200, 400):
    st = dataclasses.replace(settings, max_steps=ms)
    c, i = fixedopt_call(sub, st)
    s = jax.jit(c)(*i)
    g = jax.vmap(jax.grad(problem.jax_fun))(s.x, *i[3:])
    pg = np.max(np.where(np.asarray(sub.fixed), 0, np.abs(np.asarray(g))), axis=1)
    print(ms, "value", np.asarray(s.value).tolist(), "pgmax", pg.tolist(), flush=True)
