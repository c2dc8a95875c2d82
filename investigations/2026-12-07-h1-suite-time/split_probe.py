import time, jax
jax.config.update("jax_enable_x64", True)
jax.config.update("jax_disable_most_optimizations", True)
from fixedopt.testing import no_compiles_ahead
from benchmarks.suites import blocked_call, PATTERNS
from benchmarks.cases import SEED
from fixedopt.testing_problems import BATCHED
c=[0]
jax.monitoring.register_event_duration_secs_listener(lambda e,*a,**k: c.__setitem__(0,c[0]+(e=="/jax/core/compile/backend_compile_duration")))
with no_compiles_ahead():
  for pattern, (fraction, shared) in PATTERNS.items():
    problem = BATCHED["quad"](16, 8, SEED).with_mask(SEED + 7, fraction, shared)
    for s in ("mask","split"):
        call = blocked_call(problem, strategy=s)
        for i in range(3):
            t=time.process_time(); p=c[0]; call(); print(pattern, s, i, round(time.process_time()-t,2), c[0]-p)
