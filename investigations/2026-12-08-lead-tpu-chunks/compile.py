import os, time
import numpy as np, jax, jax.numpy as jnp
jax.config.update("jax_enable_x64", True)
import fixedopt
from fixedopt._driver import chunks
from fixedopt.testing_problems import gaussian_fits, gaussian_model
from benchmarks.tiny import GPUFIT
fits = gaussian_fits(2**20)
residual = lambda p, y: gaussian_model(p, jnp) - y
args = tuple(map(jnp.asarray, (fits.x0, fits.fixed, fits.data)))
for skip, again, tail in [(False, False, False), (False, False, True), (False, True, True)]:
    chunks.FLAGS.update(skip=skip, again=again, tail=tail)
    jax.clear_caches()
    f = jax.jit(lambda x0, fixed, data, c: fixedopt.least_squares(residual, x0, fixed, args=(data,), batched=True, **GPUFIT))
    # count traced (as at the top level): emulate via a traced count is internal; use jit of B=2^20 (no count)
    t = time.perf_counter(); lo = f.lower(*args, 0); t1 = time.perf_counter() - t
    t = time.perf_counter(); lo.compile(); t2 = time.perf_counter() - t
    print(f"skip={skip} again={again} tail={tail}: trace+lower {t1:.1f} s, XLA {t2:.1f} s", flush=True)
