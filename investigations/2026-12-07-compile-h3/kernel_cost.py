"""What one fused kernel costs XLA:CPU's compile: programs of k independent outputs
(k kernels: XLA:CPU fuses no two outputs into one kernel), scalars or 64 x 64,
with XLA's MLIR fusion emitters (the default) and with its elemental emitter
(``xla_cpu_use_fusion_emitters=False``); process CPU of each compile, median of 3
programs that differ only in a constant (nothing cached). python kernel_cost.py"""
import time

import jax
import jax.numpy as jnp

jax.config.update("jax_enable_x64", True)
jax.config.update("jax_enable_compilation_cache", False)


def make(k, r):
    def f(a, b):
        return [jnp.maximum(a * (i + 1.0 + r / 7.0), b) for i in range(k)]

    return f


for options in ({}, {"xla_cpu_use_fusion_emitters": False}):
    for shape in ((), (64, 64)):
        for k in (1, 81):
            a = jnp.ones(shape)
            cpus = []
            for r in range(3):
                lowered = jax.jit(make(k, r), compiler_options=options).lower(a, a)
                start = time.process_time()
                compiled = lowered.compile()
                cpus.append(time.process_time() - start)
            fusions = compiled.as_text().count(" fusion(")
            print(options, shape, k, "fusions", fusions, "cpu", round(sorted(cpus)[1], 3))
