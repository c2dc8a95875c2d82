"""The XLA compile of two saved modules in turn, in one process (A B A B ...): python
compile_ab.py DIR_A DIR_B NAME [REPEATS]. The folders are compile_parts.py --save's
(a module's MLIR and its compile options); prints each compile's process CPU and wall
seconds and the optimized HLO's fusions, then the medians."""
import statistics
import sys
import time

import jax
from jax._src import compiler, xla_bridge
from jax._src.interpreters import mlir
from jax._src.lib import xla_client as xc
from jax._src.lib.mlir import ir

first, second, name = sys.argv[1:4]
repeats = int(sys.argv[4]) if len(sys.argv) > 4 else 5
jax.config.update("jax_enable_x64", True)
backend = xla_bridge.get_backend("cpu")
devices = xc.DeviceList(tuple(backend.local_devices()[:1]))


def saved(folder):
    options = xc.CompileOptions.ParseFromString(open(f"{folder}/{name}.options", "rb").read())
    return open(f"{folder}/{name}.mlir").read(), options


modules = {"A": saved(first), "B": saved(second)}
seconds = {"A": [], "B": []}
for _ in range(repeats):
    for key, (text, options) in modules.items():
        with mlir.make_ir_context():
            module = ir.Module.parse(text)
            start, cpu = time.perf_counter(), time.process_time()
            executable = compiler.backend_compile_and_load(backend, module, devices, options, [])
            cpu, wall = time.process_time() - cpu, time.perf_counter() - start
        fusions = executable.hlo_modules()[0].to_string().count(" fusion(")
        seconds[key].append(cpu)
        print(f"{key} fusions {fusions} cpu {cpu:.3f} s wall {wall:.3f} s", flush=True)
for key, cpus in seconds.items():
    print(key, "median cpu", f"{statistics.median(cpus):.3f}", " ".join(f"{c:.2f}" for c in cpus))
