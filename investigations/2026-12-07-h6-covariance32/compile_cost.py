"""The covariance program's lowering and XLA compile (process CPU) for a float32 batched
fit (Gpufit's protocol, a spot of the first call's kind): the one-program path
(_refit_rows) against covariance's normal path (_row_covariances), fresh jits each time,
alternated. Run: PYTHONPATH=. python investigations/2026-12-07-h6-covariance32/compile_cost.py"""
import statistics, sys, time, warnings
sys.path.insert(0, "investigations/2026-12-07-h6-covariance32")
import jax, jax.numpy as jnp, numpy as np
jax.config.update("jax_enable_x64", True)
jax.config.update("jax_enable_compilation_cache", False)
warnings.simplefilter("ignore")
import refit_ab as ab
from fixedopt._numerics import cpu_compiler
from fixedopt._results import covariance as cov_module, solver_covariance as sc
SEEN = {}
new_jit, old_jit = sc._refitted, cov_module._compiled
def spy_new(*a):
    SEEN["new"] = a; return new_jit(*a)
def spy_old(*a):
    SEEN.setdefault("old", a); return old_jit(*a)
sc._refitted, cov_module._compiled = spy_new, spy_old
run = ab.call(ab.gpufit_case(1000), jnp.float32)
jax.block_until_ready(run())
sc._refits = lambda x: False
jax.block_until_ready(run())
programs = {"new": (sc._refit_rows, (0, 1, 2)), "old": (cov_module._row_covariances, (0, 1, 2, 3, 4, 5))}
times = {k: [] for k in programs}
for rep in range(4):
    for k in (("new", "old") if rep % 2 == 0 else ("old", "new")):
        f, static = programs[k]
        def fresh(*a, f=f):  # a new function: traced and compiled anew
            return f(*a)

        jitted = jax.jit(fresh, static_argnums=static, compiler_options=cpu_compiler.ROW_WISE_OPTIONS)
        t = time.process_time(); lowered = jitted.lower(*SEEN[k]); t1 = time.process_time()
        lowered.compile(); t2 = time.process_time()
        times[k].append((t1 - t, t2 - t1))
for k, v in times.items():
    print(k, "lower %.3f s, compile %.3f s" % (statistics.median(a for a, _ in v), statistics.median(b for _, b in v)))
