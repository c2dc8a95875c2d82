"""The quick status_truth suite, testing_problems.judge's residuals eager or jitted."""
import sys, time, functools
import jax
jax.config.update("jax_enable_x64", True)
from jax import monitoring
n=[0]
monitoring.register_event_duration_secs_listener(lambda e,*a,**k: n.__setitem__(0, n[0]+(e=="/jax/core/compile/backend_compile_duration")))
from benchmarks.run import main
from fixedopt.testing import no_compiles_ahead
import fixedopt.testing_problems as known
if sys.argv[2] == "jit":
    orig = known.judge
    jitted = functools.cache(jax.jit)
    def judge(residuals, *a): return orig(jitted(residuals), *a)
    known.judge = judge
    import benchmarks.status_truth as st
    print(st.known is known or st.known, file=sys.stderr)
jax.config.update("jax_disable_most_optimizations", True)
t=time.process_time()
with no_compiles_ahead():
    main(["--suite", "status_truth", "--quick", "--repeats", "1", "--loop-repeats", "1", "--out", sys.argv[1]])
print("RESULT", sys.argv[2], round(time.process_time()-t,1), n[0], file=sys.stderr)
