import os, sys, time
import numpy as np, jax, jax.numpy as jnp
jax.config.update("jax_enable_x64", True)
import fixedopt
from fixedopt._driver import lanes, packing
from benchmarks.first_call_cases import gaussian_fits, spot_residual, quad64_data, quad_jax
from benchmarks.tiny import GPUFIT
OUT = os.environ.get("OUT", "/tmp")
log = open(os.path.join(OUT, "ab2.log"), "a")
def say(*a):
    s = " ".join(str(x) for x in a); print(s, flush=True); log.write(s + "\n"); log.flush()
VARIANTS = {"A lanes flat vmap": (None, True, False), "B whole flat vmap": ("B", True, False),
            "C whole unflat last": ("B", False, True), "D whole unflat vmap": ("B", False, False),
            "E lanes unflat last": (None, False, True), "F lanes flat last": (None, True, True)}
def run(name, make, inputs, count, which, repeats=3):
    say(f"== {name} B={count}")
    progs, res = {}, {}
    for v in which:
        lanes_opt, flat, last = VARIANTS[v]
        lanes._BATCH_LAST, packing.FLAT[0] = last, flat
        jax.clear_caches()
        extra = {} if lanes_opt is None else {"lanes": count}
        fn = make(extra)
        t = time.perf_counter(); c = jax.jit(fn).lower(*inputs).compile(); tc = time.perf_counter() - t
        progs[v] = c; res[v] = jax.block_until_ready(c(*inputs))
        say(f"  {v}: trace+compile {tc:.1f}s")
    times = {v: [] for v in which}
    for _ in range(repeats):
        for v in which:
            t = time.perf_counter(); jax.block_until_ready(progs[v](*inputs)); times[v].append(time.perf_counter() - t)
    base = res[which[0]]
    for v in which:
        r = res[v]; med = float(np.median(times[v])); st = np.asarray(r.status)
        xa, xb = np.asarray(base.x, np.float64), np.asarray(r.x, np.float64)
        say(f"  {v}: {med*1e3:.1f} ms ({count/med/1e6:.2f}M/s) steps {np.asarray(r.steps).mean():.3f} st {dict(zip(*[a.tolist() for a in np.unique(st, return_counts=True)]))} dx {np.max(np.abs(xa-xb)/(np.abs(xa)+1)):.2g} fixed-ok {np.array_equal(np.asarray(r.x)[np.asarray(inputs[1])], np.asarray(inputs[0])[np.asarray(inputs[1])])}")
parts = sys.argv[1:]
for part in parts:
    kind, count, which = part.split(":")
    count = int(count); which = which.split(",")
    which = [next(k for k in VARIANTS if k.startswith(w)) for w in which]
    if kind == "gpufit":
        fits = gaussian_fits(count)
        make = lambda extra: (lambda x0, fixed, data: fixedopt.least_squares(spot_residual, x0, fixed, args=(data,), batched=True, **GPUFIT, **extra))
        run("gpufit", make, tuple(map(jnp.asarray, (fits.x0, fits.fixed, fits.data))), count, which)
    if kind == "quad":
        x0, fixed, args = quad64_data(count)
        make = lambda extra: (lambda x0, fixed, d, o, b: fixedopt.minimize(quad_jax, x0, fixed, args=(d, o, b), batched=True, **extra))
        run("quad64", make, tuple(jnp.asarray(a, jnp.float32) if a.dtype.kind == "f" else jnp.asarray(a) for a in (x0, fixed, *args)), count, which)
