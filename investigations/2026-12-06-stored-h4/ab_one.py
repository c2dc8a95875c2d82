"""One process: the spectra_slow (B=2000) first call's process CPU and wall; argv: case."""
import sys, time
import jax
jax.config.update("jax_enable_x64", True)
from benchmarks import first_call_cases as c
from fixedopt.testing import wait_for_compiles_ahead
calls = c.BUILDERS[sys.argv[1]](int(sys.argv[2]), 0)
t, w = time.process_time(), time.perf_counter()
jax.block_until_ready(calls["call"]())
cpu, wall = time.process_time() - t, time.perf_counter() - w
wait_for_compiles_ahead()
after = time.process_time() - t - cpu
t = time.process_time(); jax.block_until_ready(calls["call"]()); compiled = time.process_time() - t
print(f"{cpu:.3f} {after:.3f} {compiled:.3f} {wall:.3f}")
