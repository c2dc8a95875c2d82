"""One fresh process: the case's first-call wait (wall, first - median of 3 compiled), CPU."""
import os, sys, tempfile, time, statistics, json
os.environ["FIXEDOPT_CACHE"] = tempfile.mkdtemp()
import jax
jax.config.update("jax_enable_x64", True)
from benchmarks.first_call_cases import BUILDERS
from fixedopt.testing import wait_for_compiles_ahead
case = sys.argv[1]
if os.environ.get("H3_DEFER") == "1":  # the check's compile ahead started once the block is lowered
    from fixedopt._driver import after_loop, ahead
    pending = []
    real_check_ahead, real_start = after_loop._check_ahead, ahead.start
    after_loop._check_ahead = lambda *a: pending.append(a)
    def start(before, compiled, *args, export=False):
        if export and pending:
            lowered = before()
            real_check_ahead(*pending.pop())
            return real_start(lambda: lowered, compiled, *args, export=export)
        return real_start(before, compiled, *args, export=export)
    ahead.start = start
calls = BUILDERS[case]({"quad64": 16384, "spot": 100000}[case])
t, c = time.perf_counter(), time.process_time()
jax.block_until_ready(calls["call"]())
first, cpu = time.perf_counter() - t, time.process_time() - c
wait_for_compiles_ahead()
again = []
for _ in range(3):
    t = time.perf_counter(); jax.block_until_ready(calls["call"]()); again.append(time.perf_counter() - t)
print(json.dumps({"case": case, "wait": round(first - statistics.median(again), 3), "first": round(first, 3),
                  "compiled": round(statistics.median(again), 3), "cpu_first": round(cpu, 3)}))
