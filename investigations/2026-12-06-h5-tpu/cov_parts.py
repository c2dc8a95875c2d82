"""Where a TPU's covariance compile goes (spectra, 2000 rows, float32): XLA seconds of
its parts compiled alone, and of the whole at XLA's effort -1. One process, no cache.
PYTHONPATH=. python3 investigations/2026-12-06-h5-tpu/cov_parts.py OUT.json"""

import json
import statistics
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

jax.config.update("jax_enable_compilation_cache", False)
from benchmarks import first_call_cases as fc  # noqa: E402

fc.use_float32()
import fixedopt  # noqa: E402
from fixedopt._results import covariance, small_inverse  # noqa: E402
from fixedopt._results import row_covariance as rc  # noqa: E402

out = {"backend": jax.default_backend()}
t = time.perf_counter()
jax.devices()
out["open_s"] = time.perf_counter() - t
p0, fixed, y = fc.spectra_data(int(sys.argv[2]) if len(sys.argv) > 2 else 2000, slow=True)
residual = fc.spectrum_residual
covariance.DEVICE_QR.add(jax.default_backend())


def compile_s(name, f, *args):
    t = time.perf_counter()
    compiled = jax.jit(f).lower(*args).compile()
    c = time.perf_counter() - t
    jax.block_until_ready(compiled(*args))
    runs = []
    for _ in range(5):
        t = time.perf_counter()
        jax.block_until_ready(compiled(*args))
        runs.append(time.perf_counter() - t)
    out[name] = {"compile_s": c, "run_s": statistics.median(runs)}
    print(name, out[name], flush=True)


x = jnp.asarray(p0)
jac = jax.vmap(jax.jacfwd(lambda p, y: residual(p, y)))
compile_s("jacobian", jac, x, y)
J = np.asarray(jac(x, y))
J = J / np.linalg.norm(J, axis=1, keepdims=True)
held = jnp.asarray(fixed)
compile_s("qr", jax.vmap(small_inverse.certified_inverse), jnp.asarray(J), held)
compile_s("qr_rolled", jax.vmap(lambda j, h: small_inverse.certified_inverse(j, h, True)),
          jnp.asarray(J), held)
N = J.shape[-1]


def upper_and_product(R):
    r = [[R[k, k]] + [R[k, j] for j in range(k + 1, N)] for k in range(N)]
    inverse = small_inverse._upper_inverse(r)
    return jnp.stack([jnp.stack([sum(inverse[i][k] * inverse[j][k] for k in range(max(i, j), N))
                                 for j in range(N)]) for i in range(N)])


R = np.triu(np.random.default_rng(0).random((J.shape[0], N, N)) + 3 * np.eye(N)).astype(np.float32)
compile_s("upper_and_product", jax.vmap(upper_and_product), jnp.asarray(R))
a = jax.vmap(small_inverse.certified_inverse)(jnp.asarray(J), held)
b = jax.vmap(lambda j, h: small_inverse.certified_inverse(j, h, True))(jnp.asarray(J), held)
d = np.abs(np.asarray(a[0]) - np.asarray(b[0])) / np.abs(np.asarray(a[0])).max(axis=(1, 2), keepdims=True)
out["rolled_vs_unrolled"] = {"largest": float(np.nanmax(d)), "certified_equal": bool(np.array_equal(a[1], b[1])),
                             "certified": int(np.sum(b[1]))}
print(out["rolled_vs_unrolled"], flush=True)


def whole(effort=None):
    jax.clear_caches()

    def call():
        return fixedopt.covariance(x, residual, held, args=(y,), batched=True).covariance

    context = jax._src.config.exec_time_optimization_effort
    t = time.perf_counter()
    if effort is None:
        value = call()
    else:
        with context(effort):
            value = call()
    jax.block_until_ready(value)
    first = time.perf_counter() - t
    runs = []
    for _ in range(5):
        t = time.perf_counter()
        if effort is None:
            jax.block_until_ready(call())
        else:
            with context(effort):
                jax.block_until_ready(call())
        runs.append(time.perf_counter() - t)
    return first, statistics.median(runs), np.asarray(value)


real = rc.quick_inverse
covariance.quick_inverse = lambda found, normal=False, rolled=False: (
    rc.Inverse(jnp.eye(found.jacobian.shape[-1], dtype=found.jacobian.dtype),
               found.n_free, found.zero), jnp.ones((), bool))
f, r, _ = whole()
out["pieces_and_finish"] = {"first_s": f, "run_s": r}
print("pieces_and_finish", out["pieces_and_finish"], flush=True)
covariance.quick_inverse = real
f, r, base = whole()
out["whole"] = {"first_s": f, "run_s": r}
print("whole", out["whole"], flush=True)
rolled = small_inverse._householder_rolled
small_inverse._householder_rolled = small_inverse._householder_r
f, r, unrolled = whole()
small_inverse._householder_rolled = rolled
out["whole_unrolled"] = {"first_s": f, "run_s": r}
print("whole_unrolled", out["whole_unrolled"], flush=True)
f, r, low = whole(-1.0)
scale = np.sqrt(np.abs(np.einsum("bii->bi", base)))
with np.errstate(all="ignore"):
    err = np.abs(low - base) / (scale[:, :, None] * scale[:, None, :])
out["whole_effort-1"] = {"first_s": f, "run_s": r,
                         "largest_difference": float(np.nanmax(np.where(np.isfinite(err), err, 0)))}
print("whole_effort-1", out["whole_effort-1"], flush=True)
json.dump(out, open(sys.argv[1], "w"), indent=1)
