"""The XLA compile of each program a first_call case compiles, again, alone.

Run from a checkout's root: python compile_parts.py CASE [--repeats R] [--batch B]
Captures every module the case's first call hands XLA (fixedopt's thread ahead off:
the check is then compiled by the caller, one compile at a time; --ahead: on, and its
programs waited for, the block's tail among them), then compiles each
again R times, one after the other, and prints per program its process CPU seconds
(median), wall seconds, and its optimized HLO's fusions and instructions. Prints one
JSON line last."""
import json
import re
import statistics
import sys
import time

import jax
from jax._src import compiler

from benchmarks import first_call, first_call_cases
from fixedopt.testing import no_compiles_ahead, wait_for_compiles_ahead

captured = []
original = compiler.backend_compile_and_load


def capture(backend, module, devices, options, callbacks):
    name = str(module.operation.attributes["sym_name"]).strip('"')
    text = module.operation.get_asm(enable_debug_info=True)
    captured.append((name, backend, text, devices, options, callbacks))
    return original(backend, module, devices, options, callbacks)


def compile_again(backend, text, devices, options, callbacks):
    from jax._src.interpreters import mlir
    with mlir.make_ir_context() as context:
        from jax._src.lib.mlir import ir
        module = ir.Module.parse(text)
        start, cpu = time.perf_counter(), time.process_time()
        executable = original(backend, module, devices, options, callbacks)
        return time.perf_counter() - start, time.process_time() - cpu, executable


def main():
    case = sys.argv[1]
    repeats = int(sys.argv[sys.argv.index("--repeats") + 1]) if "--repeats" in sys.argv else 3
    batch = (int(sys.argv[sys.argv.index("--batch") + 1]) if "--batch" in sys.argv
             else first_call.BATCHES[case][0])
    jax.config.update("jax_enable_x64", True)
    jax.config.update("jax_enable_compilation_cache", False)
    compiler.backend_compile_and_load = capture
    call = first_call_cases.BUILDERS[case](batch)["call"]
    if "--ahead" in sys.argv:  # the tail's program too, compiled ahead in fixedopt's thread
        jax.block_until_ready(call())
        wait_for_compiles_ahead()
    else:
        with no_compiles_ahead():
            jax.block_until_ready(call())
    compiler.backend_compile_and_load = original
    out = []
    save = sys.argv[sys.argv.index("--save") + 1] if "--save" in sys.argv else None
    for name, backend, text, devices, options, callbacks in captured:
        if "probe" in name:
            continue
        if save:
            import pathlib
            folder = pathlib.Path(save)
            folder.mkdir(parents=True, exist_ok=True)
            (folder / f"{name}.mlir").write_text(text)
            (folder / f"{name}.options").write_bytes(options.SerializeAsString())
        walls, cpus = [], []
        for _ in range(repeats):
            wall, cpu, executable = compile_again(backend, text, devices, options, callbacks)
            walls.append(wall)
            cpus.append(cpu)
        hlo = executable.hlo_modules()[0].to_string()
        fusions = len(re.findall(r" fusion\(", hlo))
        instructions = len(re.findall(r"^\s+(?:ROOT )?\S+ = ", hlo, re.M))
        whiles = len(re.findall(r" while\(", hlo))
        entry = {"program": name, "cpu_s": statistics.median(cpus), "cpus": cpus,
                 "wall_s": statistics.median(walls), "fusions": fusions,
                 "instructions": instructions, "whiles": whiles}
        out.append(entry)
        print(f"{name:40s} cpu {entry['cpu_s']:.3f} s ({', '.join(f'{c:.2f}' for c in cpus)}) "
              f"wall {entry['wall_s']:.3f}  fusions {fusions} instr {instructions} whiles {whiles}",
              flush=True)
    print(json.dumps({"case": case, "batch": batch, "programs": out}))


main()
