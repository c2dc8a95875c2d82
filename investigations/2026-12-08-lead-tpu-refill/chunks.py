import os, sys, time
import numpy as np, jax, jax.numpy as jnp
jax.config.update("jax_enable_x64", True)
import fixedopt
from fixedopt._driver import lanes, packing
from benchmarks.first_call_cases import gaussian_fits, spot_residual
from benchmarks.tiny import GPUFIT
OUT = os.environ.get("OUT", "/tmp")
log = open(os.path.join(OUT, "chunk.log"), "a")
def say(*a):
    s = " ".join(str(x) for x in a); print(s, flush=True); log.write(s + "\n"); log.flush()
count = int(sys.argv[1])
fits = gaussian_fits(count)
inputs = tuple(map(jnp.asarray, (fits.x0, fits.fixed, fits.data)))
def default(x0, fixed, data):
    r = fixedopt.least_squares(spot_residual, x0, fixed, args=(data,), batched=True, **GPUFIT)
    return r.x, r.status, r.steps
def chunked(chunk):
    def solve(x0, fixed, data):
        k = x0.shape[0] // chunk
        def one(a):
            r = fixedopt.least_squares(spot_residual, a[0], a[1], args=(a[2],), batched=True, lanes=chunk, **GPUFIT)
            return r.x, r.status, r.steps
        outs = jax.lax.map(one, tuple(a.reshape(k, chunk, *a.shape[1:]) for a in (x0, fixed, data)))
        return tuple(o.reshape(k * chunk, *o.shape[2:]) for o in outs)
    return solve
variants = [("default", default, False, True)]
for spec in sys.argv[2:]:
    chunk, last = spec.split(",")
    variants.append((f"chunk{chunk}-{'last' if last == '1' else 'vmap'}", chunked(int(chunk)), last == "1", last != "1"))
progs, res = {}, {}
for name, fn, last, flat in variants:
    lanes._BATCH_LAST, packing.FLAT[0] = last, flat
    jax.clear_caches()
    t = time.perf_counter(); c = jax.jit(fn).lower(*inputs).compile(); tc = time.perf_counter() - t
    progs[name] = c; res[name] = jax.block_until_ready(c(*inputs))
    say(f"  {name}: trace+compile {tc:.1f}s")
times = {n: [] for n in progs}
for _ in range(3):
    for n, c in progs.items():
        t = time.perf_counter(); jax.block_until_ready(c(*inputs)); times[n].append(time.perf_counter() - t)
bx = np.asarray(res["default"][0], np.float64)
for n in progs:
    x, st, steps = (np.asarray(a) for a in res[n]); med = float(np.median(times[n]))
    say(f"  {n}: {med*1e3:.1f} ms ({count/med/1e6:.2f}M/s) steps {steps.mean():.3f} st {dict(zip(*[a.tolist() for a in np.unique(st, return_counts=True)]))} dx {np.max(np.abs(x-bx)/(np.abs(bx)+1)):.2g} fixed-ok {np.array_equal(x[np.asarray(inputs[1])], np.asarray(inputs[0])[np.asarray(inputs[1])])}")
