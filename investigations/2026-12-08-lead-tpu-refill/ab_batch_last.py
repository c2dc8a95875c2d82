"""Lead's A/B on a TPU: the lanes' step vmapped (rows first) against vmap_last (rows last)."""
import json, os, re, sys, time
import numpy as np, jax, jax.numpy as jnp
jax.config.update("jax_enable_x64", True)
import fixedopt
from fixedopt._driver import lanes
from benchmarks.first_call_cases import gaussian_fits, spot_residual, quad64_data
from benchmarks.tiny import GPUFIT
OUT = os.environ.get("OUT", "/tmp")
log = open(os.path.join(OUT, "bl.log"), "a")
def say(*a):
    s = " ".join(str(x) for x in a); print(s, flush=True); log.write(s + "\n"); log.flush()
say("jax", jax.__version__, jax.devices(), "x64", jax.config.jax_enable_x64)

def programs(solve, inputs):
    out = {}
    for flag in (False, True):
        lanes._BATCH_LAST = flag
        jax.clear_caches()
        t = time.perf_counter(); lowered = jax.jit(lambda *a: solve(*a)).lower(*inputs); tl = time.perf_counter() - t
        t = time.perf_counter(); compiled = lowered.compile(); tc = time.perf_counter() - t
        text = compiled.as_text()
        say(f"  batch_last={flag}: trace+lower {tl:.2f}s, compile {tc:.2f}s, transposes {text.count(' transpose(')}, fusions {text.count(' fusion(')}")
        out[flag] = compiled
    return out

def ab(name, solve, inputs, count, repeats=5):
    say(f"== {name} B={count}")
    progs = programs(solve, inputs)
    res = {f: jax.block_until_ready(p(*inputs)) for f, p in progs.items()}
    times = {False: [], True: []}
    for _ in range(repeats):
        for f, p in progs.items():
            t = time.perf_counter(); jax.block_until_ready(p(*inputs)); times[f].append(time.perf_counter() - t)
    for f in (False, True):
        r = res[f]; med = float(np.median(times[f]))
        st = np.asarray(r.status)
        say(f"  batch_last={f}: median {med*1e3:.2f} ms ({count/med/1e6:.2f}M rows/s), steps mean {np.asarray(r.steps).mean():.3f}, statuses {dict(zip(*[a.tolist() for a in np.unique(st, return_counts=True)]))}")
    a, b = res[False], res[True]
    xa, xb = np.asarray(a.x, np.float64), np.asarray(b.x, np.float64)
    say(f"  agree: x max |diff|/(|x|+1) {np.max(np.abs(xa-xb)/(np.abs(xa)+1)):.3g}, status equal {np.mean(np.asarray(a.status)==np.asarray(b.status)):.4f}, steps equal {np.mean(np.asarray(a.steps)==np.asarray(b.steps)):.4f}")
    fixed = np.asarray(inputs[1]); x0 = np.asarray(inputs[0])
    say(f"  fixed bit-identical: {np.array_equal(np.asarray(b.x)[fixed], x0[fixed])}")

parts = sys.argv[1:] or ["gpufit"]
for part in parts:
    if part.startswith("gpufit"):
        count = int(part.split(":")[1]) if ":" in part else 10**6
        fits = gaussian_fits(count)
        solve = lambda x0, fixed, data: fixedopt.least_squares(spot_residual, x0, fixed, args=(data,), batched=True, **GPUFIT)
        ab("gpufit", solve, tuple(map(jnp.asarray, (fits.x0, fits.fixed, fits.data))), count)
    if part.startswith("quad"):
        n = 8
        count = int(part.split(":")[1]) if ":" in part else 16384
        from benchmarks.first_call_cases import quad_jax
        x0, fixed, args = quad64_data(count)
        solve = lambda x0, fixed, d, o, b: fixedopt.minimize(quad_jax, x0, fixed, args=(d, o, b), batched=True)
        ab("quad64", solve, tuple(jnp.asarray(a, jnp.float32) if a.dtype.kind == "f" else jnp.asarray(a) for a in (x0, fixed, *args)), count)
