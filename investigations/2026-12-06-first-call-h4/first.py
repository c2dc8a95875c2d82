"""A new model's first call (process CPU, wall, stages per program and thread), its compiled
call and the hash of its outputs: python first.py CASE (from the tree measured)."""
import json, sys, time, statistics, collections, threading, hashlib
import jax
jax.config.update("jax_enable_x64", True)
import numpy as np
import fixedopt
from benchmarks import first_call_cases as c
from fixedopt.testing import wait_for_compiles_ahead
case = sys.argv[1]
def spectra_far(batch):
    p0, fixed, y = c.spectra_data(batch)
    p0, fixed = np.array(p0), np.array(fixed)
    p0[-1], fixed[-1] = [40.0, 29.0, 0.1, 25.0, 29.5, 0.1, 0.05, 2.0], False
    return {"call": lambda: fixedopt.curve_fit(c.spectrum, c.X_SPECTRA, y, p0, bounds=c.SPECTRA_BOUNDS, fixed=fixed, batched=True)}
builders = dict(c.BUILDERS, spectra_far=spectra_far)
batch = {"quad64": 16384, "spot": 100000}.get(case, 2000)
stages = collections.Counter()
def listen(event, seconds, **kw):
    if event.startswith("/jax/core/compile/") and event.endswith("_duration"):
        th = "A" if threading.current_thread().name.startswith("fixedopt-ahead") else "C"
        stages[f"{kw.get('fun_name')}|{th}|{event.split('/')[-1][:12]}"] += seconds
jax.monitoring.register_event_duration_secs_listener(listen)
call = builders[case](batch)["call"]
t, cp = time.perf_counter(), time.process_time()
out = jax.block_until_ready(call())
first, first_cpu = time.perf_counter() - t, time.process_time() - cp
wait_for_compiles_ahead()
after_cpu = time.process_time() - cp - first_cpu
runs = []
for _ in range(5):
    t, cp = time.perf_counter(), time.process_time()
    jax.block_until_ready(call()); runs.append((time.perf_counter() - t, time.process_time() - cp))
h = hashlib.sha256(b"".join(np.asarray(l).tobytes() for l in jax.tree.leaves(out))).hexdigest()[:12]
print(json.dumps(dict(case=case, first=round(first, 2), first_cpu=round(first_cpu, 2), after_cpu=round(after_cpu, 2),
   run=round(statistics.median(r[0] for r in runs), 3), run_cpu=round(statistics.median(r[1] for r in runs), 3), hash=h,
   stages={k: round(v, 2) for k, v in stages.items() if v > 0.03})))
