import sys, time, resource, json
t0=time.process_time()
import jax
import nbformat
from benchmarks import ase
from benchmarks.run import main
from fixedopt.testing import no_compiles_ahead
c=[0]
jax.monitoring.register_event_duration_secs_listener(lambda e,*a,**k: c.__setitem__(0,c[0]+(e=="/jax/core/compile/backend_compile_duration")))
jax.monitoring.register_event_listener(lambda e,*a,**k: c.__setitem__(0,c[0]-(e=="/jax/compilation_cache/cache_hits")))
ase.run_notebook = lambda path: nbformat.read(path, as_version=4)
print("import", round(time.process_time()-t0,1), file=sys.stderr)
OPTIMIZED=sys.argv[2].split(",")
for suite in sys.argv[3:]:
    t=time.process_time(); p=c[0]
    jax.config.update("jax_disable_most_optimizations", suite not in OPTIMIZED)
    with no_compiles_ahead():
        main(["--suite", suite, "--quick", "--repeats", "1", "--loop-repeats", "1", "--out", sys.argv[1]])
    print("SUITE", suite, round(time.process_time()-t,1), c[0]-p, file=sys.stderr)
