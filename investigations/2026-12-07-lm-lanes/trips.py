"""Trips of the decay (or, CASE=gaussian, Gpufit) fit: one compiled call traced by jax.profiler
(perfetto); ABWIDTH=W forces the default lanes. usage: PYTHONPATH=TREE python trips.py OUT; then
python kernels.py OUT 20 (each kernel: total ms and executions in the call; the while body's
reduction runs once a trip)."""

import os
import sys

import jax
import jax.numpy as jnp

jax.config.update("jax_enable_x64", True)
import fixedopt

if os.environ.get("ABWIDTH"):
    from fixedopt._driver import machine

    machine.default_width = lambda batch, row_bytes, backend, w=int(os.environ["ABWIDTH"]): min(
        batch, w
    )
from fixedopt.testing_problems import FIT_MODELS, decay_fits, gaussian_fits

GAUSS = os.environ.get("CASE") == "gaussian"
fits = gaussian_fits(100_000) if GAUSS else decay_fits(20_000)
model = FIT_MODELS[fits.name][0]
opts = {"ftol": 1e-4, "gtol": 0.0, "xtol": 0.0, "max_steps": 10} if GAUSS else {}


def solve(x0, fixed, data):
    return fixedopt.least_squares(
        lambda p, d: model(p) - d, x0, fixed, args=(data,), batched=True, **opts
    )


inputs = (jnp.asarray(fits.x0), jnp.asarray(fits.fixed), jnp.asarray(fits.data))
c = jax.jit(solve).lower(*inputs).compile()
jax.block_until_ready(c(*inputs))
out = sys.argv[1]
jax.profiler.start_trace(out, create_perfetto_trace=True)
for _ in range(int(os.environ.get("NCALLS", "1"))):
    jax.block_until_ready(c(*inputs))
jax.profiler.stop_trace()
