"""Run hash_solves.py in this process and print, to stderr, the process's CPU seconds,
XLA's compile events (their summed wall seconds and count) and the wall time.

From a checkout's root: python investigations/2026-12-07-h1-xla-flags/measure.py
investigations/2026-12-07-h1-xla-flags/hash_solves.py > hashes.txt (the flags.sh
wrapper sets XLA_FLAGS, no persistent cache, one BLAS thread)."""

import os
import resource
import runpy
import sys
import time

sys.path.insert(0, os.getcwd())
from jax import monitoring  # noqa: E402

stages = {"xla": 0.0, "programs": 0}


def compiled(event, duration, **_):
    if event == "/jax/core/compile/backend_compile_duration":
        stages["xla"] += duration
        stages["programs"] += 1


monitoring.register_event_duration_secs_listener(compiled)
start = time.time()
sys.argv = [sys.argv[1]]
runpy.run_path(sys.argv[0], run_name="__main__")
usage = resource.getrusage(resource.RUSAGE_SELF)
print(f"MEASURE cpu={usage.ru_utime + usage.ru_stime:.1f} xla_s={stages['xla']:.1f} "
      f"programs={stages['programs']} wall={time.time() - start:.1f}", file=sys.stderr)
