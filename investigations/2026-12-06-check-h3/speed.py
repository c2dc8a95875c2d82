"""Compiled call of quad (n, B): median process CPU of 5 calls after the first (one process)."""
import os, sys, tempfile, time, statistics, json
os.environ.setdefault("FIXEDOPT_CACHE", tempfile.mkdtemp())
import jax
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp, numpy as np
import fixedopt
from fixedopt.testing_problems import BATCHED
from fixedopt.testing import wait_for_compiles_ahead
out = {}
for n, b in ((8, 16384), (64, 2048), (512, 256)):
    p = BATCHED["quad"](b, n, 0).with_mask(7, 0.3, False)
    call = lambda: fixedopt.minimize(p.jax_fun, p.x0, p.fixed, args=p.args, batched=True)
    jax.block_until_ready(call().x); wait_for_compiles_ahead()
    cpus = []
    for _ in range(7):
        c = time.process_time(); jax.block_until_ready(call().x); cpus.append(time.process_time() - c)
    out[f"n{n} B{b}"] = statistics.median(cpus)
print(json.dumps(out))
