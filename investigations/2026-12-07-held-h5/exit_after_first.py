"""``python investigations/2026-12-07-held-h5/exit_after_first.py [--repeats N] [--case C]``
from a tree's root (its fixedopt first on sys.path): a process that exits right after
its first call of a new model (``benchmarks.first_call_cases``), then a new process on
the cache it left. Prints one JSON line per repeat: the first process's call (wall and
process CPU), its exit (wall from the call's return to the process's end: the compiles
ahead it waits for), the tails' marks it left, and the second process's first call
(wall, CPU, traces of a tail)."""

import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time

CHILD = """
import json, sys, time, threading
import jax
import numpy as np
from benchmarks.first_call_cases import BUILDERS
from benchmarks.first_call import BATCHES
jax.devices()
if sys.argv[1] == "quad64_slow":  # quad64, its last row ill-conditioned: a tail comes
    import fixedopt
    from benchmarks.first_call_cases import quad64_data, quad_jax, real
    x0, fixed, (diag, off, b) = quad64_data(BATCHES["quad64"][0])
    diag, off = np.array(diag), np.array(off)
    diag[-1], off[-1], fixed[-1] = np.logspace(-3, 3, 64), 0.0, False
    args = tuple(map(real, (diag, off, b)))
    call = lambda: fixedopt.minimize(quad_jax, x0, fixed, args=args, batched=True)
else:
    call = BUILDERS[sys.argv[1]](BATCHES[sys.argv[1]][0])["call"]
tails = []
def listen(event, seconds, **kwargs):
    if event.endswith("jaxpr_trace_duration") and "tail" in str(kwargs.get("fun_name")):
        tails.append(threading.current_thread().name)
jax.monitoring.register_event_duration_secs_listener(listen)
start, cpu = time.perf_counter(), time.process_time()
result = jax.block_until_ready(call())
wall, cpu = time.perf_counter() - start, time.process_time() - cpu
steps = int(np.max(np.asarray(result.steps))) if sys.argv[1] == "quad64_slow" else None
print(json.dumps({"wall_s": wall, "cpu_s": cpu, "tail_traces": list(tails), "most_steps": steps,
                  "returned": time.time()}), flush=True)
"""


def process(case: str, cache: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "JAX_COMPILATION_CACHE_DIR"}
    env["FIXEDOPT_CACHE"] = cache
    done = subprocess.run([sys.executable, "-c", CHILD, case], env=env, capture_output=True,
                          text=True, check=True)  # fmt: skip
    ended = time.time()
    record = json.loads(done.stdout.strip().splitlines()[-1])
    return {**record, "exit_s": ended - record.pop("returned")}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--case", default="quad64")
    args = parser.parse_args()
    for _ in range(args.repeats):
        with tempfile.TemporaryDirectory() as cache:
            first = process(args.case, cache)
            marks = [p.stat().st_size for p in pathlib.Path(cache).glob("fixedopt-tails/*")]
            second = process(args.case, cache)
        print(json.dumps({"case": args.case, "first": first, "marks": marks, "second": second}),
              flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
