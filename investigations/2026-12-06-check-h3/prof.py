"""Per-program, per-stage process CPU of a first call (nothing compiled ahead), fresh cache."""
import json, os, re, sys, tempfile, time, pathlib
os.environ.setdefault("FIXEDOPT_CACHE", tempfile.mkdtemp())
dump = os.environ.get("DUMP")
if dump:
    os.environ["XLA_FLAGS"] = os.environ.get("XLA_FLAGS", "") + f" --xla_dump_to={dump} --xla_dump_hlo_as_text"
import jax
jax.config.update("jax_enable_x64", True)
from benchmarks.first_call_cases import BUILDERS
from fixedopt.testing import no_compiles_ahead

case = sys.argv[1]
batch = int(sys.argv[2]) if len(sys.argv) > 2 else {"quad64": 16384, "spot": 100000}[case]
ahead = os.environ.get("AHEAD") == "1"
rows = []
last = [time.process_time()]
STAGES = {"/jax/core/compile/jaxpr_trace_duration": "trace",
          "/jax/core/compile/jaxpr_to_mlir_module_duration": "lower",
          "/jax/core/compile/backend_compile_duration": "xla"}
def listen(event, seconds, **kw):
    if event in STAGES:
        now = time.process_time()
        rows.append((str(kw.get("fun_name")), STAGES[event], seconds, now - last[0]))
        last[0] = now
jax.monitoring.register_event_duration_secs_listener(listen)
calls = BUILDERS[case](batch)
import contextlib
t0, c0 = time.perf_counter(), time.process_time()
last[0] = c0
with (contextlib.nullcontext() if ahead else no_compiles_ahead()):
    jax.block_until_ready(calls["call"]())
wall, cpu = time.perf_counter() - t0, time.process_time() - c0
jax.monitoring.unregister_event_duration_listener(listen)
from fixedopt.testing import wait_for_compiles_ahead
wait_for_compiles_ahead()
t1, c1 = time.perf_counter(), time.process_time()
jax.block_until_ready(calls["call"]())
wall2, cpu2 = time.perf_counter() - t1, time.process_time() - c1
agg = {}
for name, stage, s, c in rows:
    name = re.sub(r"^jit\((.*)\)$", r"\1", name)
    a = agg.setdefault(name, {"trace": [0, 0], "lower": [0, 0], "xla": [0, 0], "n": 0})
    a[stage][0] += s; a[stage][1] += c; a["n"] += stage == "trace"
print(f"{case} B={batch} first wall {wall:.2f} cpu {cpu:.2f}; again wall {wall2:.2f} cpu {cpu2:.2f}")
for name, a in sorted(agg.items(), key=lambda kv: -sum(v[1] for k, v in kv[1].items() if k != "n")):
    print(f"  {name:28s} traces {a['n']}  cpu trace/lower/xla {a['trace'][1]:.2f} / {a['lower'][1]:.2f} / {a['xla'][1]:.2f}   wall {a['trace'][0]:.2f} / {a['lower'][0]:.2f} / {a['xla'][0]:.2f}")
if dump:
    for p in sorted(pathlib.Path(dump).glob("*after_optimizations.txt")):
        t = p.read_text()
        f = len(re.findall(r" fusion\(", t)); w = len(re.findall(r" while\(", t))
        ins = len(re.findall(r"^\s+(?:ROOT )?\S+ = ", t, re.M))
        if ins > 50:
            print(f"  {p.name[:70]:70s} instr {ins} while {w} fusions {f}")
