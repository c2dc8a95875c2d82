import time, sys
import jax
jax.config.update("jax_enable_x64", True)
from benchmarks import first_call_cases as c
from fixedopt._results import solver_covariance as sc
from fixedopt._numerics import cpu_compiler
captured = []
orig = sc._compiled
def spy(rule, *rows):
    captured.append((rule, rows)); return orig(rule, *rows)
sc._compiled = spy
c.spectra(300, 0)['call']()
rule, rows = captured[0]
leaves = jax.tree.leaves(list(rows))
opts = cpu_compiler.ROW_WISE_OPTIONS
for rep in range(3):
    jax.clear_caches()
    T = time.process_time
    t0 = T(); low = jax.jit(sc._rows, static_argnums=0, compiler_options=opts).trace(rule, *rows); t1 = T(); lo = low.lower(); t2 = T(); lo.compile(); t3 = T()
    jit = (t1 - t0, t2 - t1, t3 - t2)
    jax.clear_caches()
    def flat(*ls):
        return jax.tree.leaves(sc._rows(rule, *jax.tree.unflatten(jax.tree.structure(list(rows)), ls)))
    t0 = T(); ex = jax.export.export(jax.jit(flat))(*leaves); t1 = T()
    run = jax.jit(lambda *ls: ex.call(*ls), compiler_options=opts)
    rl = run.lower(*leaves); t2 = T(); rl.compile(); t3 = T()
    print("jit trace/lower/compile %.3f %.3f %.3f | export %.3f runner lower %.3f compile %.3f" % (*jit, t1 - t0, t2 - t1, t3 - t2), flush=True)
