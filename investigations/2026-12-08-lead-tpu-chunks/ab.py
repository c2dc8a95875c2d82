"""A TPU's least-squares chunks (the default) against the lanes' queue (lanes=65536, the
old default width at 1e6 rows): Gpufit's protocol by least squares and by Poisson MLE,
at the top level (the batch padded to 2^20) and inside a caller's jit (1e6 rows)."""
import os, sys, time
import numpy as np, jax, jax.numpy as jnp
jax.config.update("jax_enable_x64", True)
import fixedopt
from fixedopt.testing_problems import gaussian_fits, gaussian_model
from benchmarks.tiny import GPUFIT
OUT = os.environ.get("OUT", "/tmp")
log = open(os.path.join(OUT, "chunks-ab.log"), "a")
def say(*a):
    s = " ".join(str(x) for x in a); print(s, flush=True); log.write(s + "\n"); log.flush()
count = int(sys.argv[1]) if len(sys.argv) > 1 else 10**6
fits = gaussian_fits(count)
rng = np.random.default_rng(1)
counts = rng.poisson(gaussian_model(fits.truth.astype(np.float64), np)).astype(np.float32)
residual = lambda p, y: gaussian_model(p, jnp) - y
model = lambda p: gaussian_model(p, jnp)
x0, fixed, data, counts = map(jnp.asarray, (fits.x0, fits.fixed, fits.data, counts))
def lse(lanes=None, jit=False):
    extra = {} if lanes is None else {"lanes": lanes}
    f = lambda x0, fixed, data: fixedopt.least_squares(residual, x0, fixed, args=(data,), batched=True, **GPUFIT, **extra)
    return jax.jit(f) if jit else f
def mle(lanes=None, jit=False):
    extra = {} if lanes is None else {"lanes": lanes}
    f = lambda x0, fixed, c: fixedopt.least_squares(model, x0, fixed, estimator="poisson", counts=c, batched=True, **GPUFIT, **extra)
    return jax.jit(f) if jit else f
cases = {
    "lse chunks": (lse(), (x0, fixed, data)), "lse lanes": (lse(65536), (x0, fixed, data)),
    "lse chunks jit": (lse(jit=True), (x0, fixed, data)), "lse lanes jit": (lse(65536, True), (x0, fixed, data)),
    "mle chunks": (mle(), (x0, fixed, counts)), "mle lanes": (mle(65536), (x0, fixed, counts)),
}
wanted = sys.argv[2:]
cases = {k: v for k, v in cases.items() if not wanted or k in wanted}
out = {}
for name, (f, args) in cases.items():
    t = time.perf_counter(); r = f(*args); jax.block_until_ready(r.x); first = time.perf_counter() - t
    out[name] = r
    say(f"{name}: first call {first:.1f} s")
times = {n: [] for n in cases}
for _ in range(5):
    for name, (f, args) in cases.items():
        t = time.perf_counter(); jax.block_until_ready(f(*args).x); times[name].append(time.perf_counter() - t)
for name in cases:
    r = out[name]; med = float(np.median(times[name])); st = np.asarray(r.status)
    ref = out.get(name.replace("chunks", "lanes"), r)
    dx = np.max(np.abs(np.asarray(r.x, np.float64) - np.asarray(ref.x, np.float64)) / (np.abs(np.asarray(ref.x, np.float64)) + 1))
    say(f"{name}: {med*1e3:.1f} ms ({count/med/1e6:.2f}M fits/s) steps {np.asarray(r.steps).mean():.3f} statuses {dict(zip(*[a.tolist() for a in np.unique(st, return_counts=True)]))} vs lanes: dx {dx:.2g} status equal {np.mean(st == np.asarray(ref.status)):.5f} fixed exact {np.array_equal(np.asarray(r.x)[np.asarray(fixed)], np.asarray(x0)[np.asarray(fixed)])}")
