"""``PYTHONPATH=. FIXEDOPT_CACHE=<folder> python <this file> CASE [B]``:
one benchmarks.first_call case's first call in this process, its process CPU seconds and, per
program, the thread CPU seconds of each stage (trace, lowering: the caller's thread, CPU since
the previous event; XLA: the compiling thread's CPU and its wall). Run twice on one
folder: a new model, then a new process (issue 62)."""

import collections
import re
import sys
import threading
import time

import jax

jax.config.update("jax_enable_x64", True)
from benchmarks import first_call  # noqa: E402
from benchmarks.first_call_cases import BUILDERS  # noqa: E402
from fixedopt.testing import wait_for_compiles_ahead  # noqa: E402

case = sys.argv[1]
B = int(sys.argv[2]) if len(sys.argv) > 2 else first_call.BATCHES[case][0]
calls = BUILDERS[case](B)
events = {f"/jax/core/compile/{e}_duration": s for s, e in first_call.STAGES.items()}
last = {}
rows = []


def listen(event, seconds, **kw):
    if event in events:
        th = threading.current_thread().name
        now = time.thread_time()
        cpu = now - last.get(th, now0.get(th, now))
        last[th] = now
        name = re.sub(r"^jit\((.*)\)$", r"\1", str(kw.get("fun_name", "?")))
        rows.append(
            (name, "ahead" if th.startswith("fixedopt") else "caller", events[event], seconds, cpu)
        )


now0 = {}
jax.monitoring.register_event_duration_secs_listener(listen)
now0[threading.current_thread().name] = time.thread_time()
p0 = time.process_time()
w0 = time.perf_counter()
jax.block_until_ready(calls["call"]())
p1 = time.process_time()
w1 = time.perf_counter()
wait_for_compiles_ahead()
p2 = time.process_time()
print(f"{case} B={B}: wall {w1 - w0:.2f} process cpu {p1 - p0:.2f}, ahead after {p2 - p1:.2f}")
agg = collections.defaultdict(lambda: [0, 0.0, 0.0, 0.0, 0.0])
for name, th, st, sec, cpu in rows:
    a = agg[name, th]
    a[0] += st == "trace"
    if st == "trace":
        a[1] += cpu
    elif st == "lower":
        a[2] += cpu
    else:
        a[3] += cpu
        a[4] += sec
for r in rows:
    print("   ", r[0][:20], r[1], r[2], f"{r[3]:.3f} {r[4]:.3f}")
print("program thread traces | trace_cpu lower_cpu | compile_thread_cpu compile_wall")
for (name, th), a in sorted(agg.items(), key=lambda kv: -kv[1][1] - kv[1][2] - kv[1][4]):
    print(f"  {name[:32]:32s} {th:6s} {a[0]} | {a[1]:.3f} {a[2]:.3f} | {a[3]:.3f} {a[4]:.3f}")
