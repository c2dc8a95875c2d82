"""tests/test_benchmarks.py's driver with each suite's CPU seconds and compiled programs."""
import sys, time, resource
import jax
import nbformat
from benchmarks import ase
from benchmarks.run import main
from fixedopt.testing import no_compiles_ahead
from jax import monitoring
n=[0]
monitoring.register_event_duration_secs_listener(lambda e,*a,**k: n.__setitem__(0, n[0]+(e=="/jax/core/compile/backend_compile_duration")))
ase.run_notebook = lambda path: nbformat.read(path, as_version=4)
OPTIMIZED=("deblur",)
for suite in sys.argv[2:]:
    t=time.process_time(); p=n[0]
    jax.config.update("jax_disable_most_optimizations", suite not in OPTIMIZED)
    with no_compiles_ahead():
        main(["--suite", suite, "--quick", "--repeats", "1", "--loop-repeats", "1",
              "--out", sys.argv[1]])
    print("SUITE", suite, round(time.process_time()-t,1), n[0]-p, file=sys.stderr, flush=True)
