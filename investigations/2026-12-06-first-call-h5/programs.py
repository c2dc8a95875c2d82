"""``PYTHONPATH=. FIXEDOPT_CACHE=<new folder> python <this file> CASE``: a new model's first
call of a benchmarks.first_call case with nothing compiled ahead (one program at a time),
each program's stages in process CPU seconds (every thread: XLA compiles on several),
the CPU between one stage's event and the previous one's; "run" is what follows the last
compile of the call (its runs and host work)."""

import collections
import re
import sys
import time

import jax

jax.config.update("jax_enable_x64", True)
from benchmarks.first_call_cases import BUILDERS  # noqa: E402
from fixedopt.testing import no_compiles_ahead  # noqa: E402

STAGES = {"jaxpr_trace": "trace", "jaxpr_to_mlir_module": "lower", "backend_compile": "xla"}
found = collections.defaultdict(lambda: dict.fromkeys(STAGES.values(), 0.0))
last = [0.0]
traces: collections.Counter = collections.Counter()  # a program's name: its n-th trace


def listen(event, seconds, **kwargs):
    stage = next((s for e, s in STAGES.items() if event == f"/jax/core/compile/{e}_duration"), None)
    if stage is not None:
        now = time.process_time()
        name = re.sub(r"^jit\((.*)\)$", r"\1", str(kwargs.get("fun_name", "?")))
        traces[name] += stage == "trace"
        found[f"{name} #{traces[name]}"][stage] += now - last[0]
        last[0] = now


calls = BUILDERS[sys.argv[1]](int(sys.argv[2]) if len(sys.argv) > 2 else 2000)
jax.monitoring.register_event_duration_secs_listener(listen)
with no_compiles_ahead():
    start = last[0] = time.process_time()
    jax.block_until_ready(calls["call"]())
    end = time.process_time()
print(f"{sys.argv[1]}: process CPU {end - start:.2f} s, after the last compile {end - last[0]:.2f}")
for name, stages in sorted(found.items(), key=lambda kv: -sum(kv[1].values())):
    if sum(stages.values()) > 0.02:
        print(f"  {name[:28]:28s} " + " ".join(f"{k} {v:.2f}" for k, v in stages.items()))
