import collections, glob, os, sys, time
import numpy as np, jax, jax.numpy as jnp
jax.config.update("jax_enable_x64", True)
import fixedopt
from fixedopt._driver import lanes
from benchmarks.first_call_cases import gaussian_fits, spot_residual
from benchmarks.tiny import GPUFIT
OUT = os.environ["OUT"]
fits = gaussian_fits(10**6)
inputs = tuple(map(jnp.asarray, (fits.x0, fits.fixed, fits.data)))

def profile(name, fn, args):
    jax.clear_caches()
    c = jax.jit(fn).lower(*args).compile()
    jax.block_until_ready(c(*args))
    d = f"/tmp/trace-{name}"
    jax.profiler.start_trace(d)
    t = time.perf_counter(); jax.block_until_ready(c(*args)); wall = time.perf_counter() - t
    jax.profiler.stop_trace()
    path = glob.glob(f"{d}/**/*.xplane.pb", recursive=True)[0]
    data = jax.profiler.ProfileData.from_file(path)
    out = open(f"{OUT}/{name}.prof.txt", "w")
    for plane in data.planes:
        if "TPU:0" not in plane.name:
            continue
        for line in plane.lines:
            total = collections.Counter(); count = collections.Counter()
            for ev in line.events:
                total[ev.name] += ev.duration_ns; count[ev.name] += 1
            s = sum(total.values())
            out.write(f"## {plane.name} / {line.name}: {s/1e6:.2f} ms over {sum(count.values())} events (wall {wall*1e3:.1f} ms)\n")
            for k, v in total.most_common(45):
                out.write(f"{v/1e6:9.3f} ms {count[k]:7d}x  {k[:150]}\n")
    out.close()
    print(name, "wall", wall, flush=True)

profile("gpufit", lambda x0, fixed, data: fixedopt.least_squares(spot_residual, x0, fixed, args=(data,), batched=True, **GPUFIT), inputs)
profile("gpufit_whole", lambda x0, fixed, data: fixedopt.least_squares(spot_residual, x0, fixed, args=(data,), batched=True, lanes=10**6, **GPUFIT), inputs)
