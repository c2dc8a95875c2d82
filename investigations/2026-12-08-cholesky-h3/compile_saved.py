"""Compile a module saved by compile_parts.py --save DIR, alone: python compile_saved.py
DIR NAME [REPEATS] [OPTION=VALUE ...] (XLA options added to the saved ones); prints process CPU and wall seconds per compile."""
import sys
import time

import jax
from jax._src import compiler, xla_bridge
from jax._src.interpreters import mlir
from jax._src.lib import xla_client as xc
from jax._src.lib.mlir import ir

folder, name = sys.argv[1], sys.argv[2]
repeats = int(sys.argv[3]) if len(sys.argv) > 3 else 1
jax.config.update("jax_enable_x64", True)
backend = xla_bridge.get_backend("cpu")
devices = xc.DeviceList(tuple(backend.local_devices()[:1]))
options = xc.CompileOptions.ParseFromString(open(f"{folder}/{name}.options", "rb").read())
for pair in sys.argv[4:]:
    key, value = pair.split("=")
    parsed = {"true": True, "false": False}.get(value, value)
    if isinstance(parsed, str) and parsed.lstrip("-").isdigit():
        parsed = int(parsed)
    options.env_option_overrides = [*options.env_option_overrides, (key, parsed)]
text = open(f"{folder}/{name}.mlir").read()
for _ in range(repeats):
    with mlir.make_ir_context():
        module = ir.Module.parse(text)
        start, cpu = time.perf_counter(), time.process_time()
        executable = compiler.backend_compile_and_load(backend, module, devices, options, [])
        hlo = executable.hlo_modules()[0].to_string()
        print(f"{name} {sys.argv[4:]}: fusions {hlo.count(' fusion(')} cpu {time.process_time() - cpu:.3f} s wall {time.perf_counter() - start:.3f} s",
              flush=True)
