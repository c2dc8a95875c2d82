import json, os, sys, time
import numpy as np, jax, jax.numpy as jnp
jax.config.update("jax_enable_x64", True)
import fixedopt
from fixedopt._driver import lanes
from benchmarks.first_call_cases import gaussian_fits, spot_residual
from benchmarks.tiny import GPUFIT
import lane_axis_429bb32 as ref
OUT = os.environ["OUT"]
count = 10**6
fits = gaussian_fits(count)
inputs = tuple(map(jnp.asarray, (fits.x0, fits.fixed, fits.data)))
def dump(name, fn, args):
    jax.clear_caches()
    c = jax.jit(fn).lower(*args).compile()
    open(f"{OUT}/{name}.hlo.txt", "w").write(c.as_text())
    ca = c.cost_analysis()
    ca = ca[0] if isinstance(ca, list) else ca
    json.dump({k: float(v) for k, v in ca.items() if isinstance(v, (int, float))}, open(f"{OUT}/{name}.cost.json", "w"), indent=0)
    jax.block_until_ready(c(*args))
    ts = []
    for _ in range(3):
        t = time.perf_counter(); jax.block_until_ready(c(*args)); ts.append(time.perf_counter() - t)
    print(name, "median", np.median(ts), "bytes accessed", ca.get("bytes accessed"), "flops", ca.get("flops"), flush=True)
    return c
for flag in (False, True):
    lanes._BATCH_LAST = flag
    dump(f"gpufit_bl{int(flag)}", lambda x0, fixed, data: fixedopt.least_squares(spot_residual, x0, fixed, args=(data,), batched=True, **GPUFIT), inputs)
p = jnp.asarray(fits.x0.T); d = jnp.asarray(fits.data.T)
dump("plain_lm", lambda p, d: ref.reference_lm(p, d), (p, d))
# lanes = B (whole batch)
lanes._BATCH_LAST = False
dump("gpufit_whole", lambda x0, fixed, data: fixedopt.least_squares(spot_residual, x0, fixed, args=(data,), batched=True, lanes=count, **GPUFIT), inputs)
# a profile trace
try:
    c = jax.jit(lambda x0, fixed, data: fixedopt.least_squares(spot_residual, x0, fixed, args=(data,), batched=True, **GPUFIT)).lower(*inputs).compile()
    jax.block_until_ready(c(*inputs))
    jax.profiler.start_trace(f"{OUT}/trace")
    jax.block_until_ready(c(*inputs))
    jax.profiler.stop_trace()
    os.system(f"cd {OUT} && tar czf trace.tgz trace && rm -rf trace && ls -la")
except Exception as e:
    print("trace failed", e)
