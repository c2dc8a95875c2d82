"""The spot's compiled call with the CPU profile's roll_above at 5 (as is) and 4, in one
process, in turn: rounds of (setting, 1 warm call, 7 timed calls); prints medians."""
import statistics, sys, time
import jax
from benchmarks.first_call import BATCHES
from benchmarks.first_call_cases import BUILDERS
from fixedopt._numerics import backends as _backends
from fixedopt._driver import engine as _engine
saved = dict(_backends.BACKENDS)
def use(roll):
    for name, backend in saved.items():
        _backends.BACKENDS[name] = backend._replace(kernels=backend.kernels._replace(roll_above=roll)) if name == "cpu" else backend
    _engine.clear_compiled()
case = sys.argv[1] if len(sys.argv) > 1 else "spot"
call = BUILDERS[case](BATCHES[case][0])["call"]
cpu = {5: [], 4: []}
for _ in range(int(sys.argv[2]) if len(sys.argv) > 2 else 3):
    for roll in (5, 4):
        use(roll)
        jax.block_until_ready(call())
        for _ in range(7):
            c = time.process_time(); jax.block_until_ready(call()); cpu[roll].append(time.process_time() - c)
        print(roll, " ".join(f"{v:.3f}" for v in cpu[roll][-7:]), flush=True)
for roll, v in cpu.items():
    print(f"roll_above={roll}: median cpu {statistics.median(v):.3f} s of {len(v)} calls")
