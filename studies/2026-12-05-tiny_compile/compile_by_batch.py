"""Trace + lower + compile of the Gpufit-protocol ``least_squares`` (the 2D Gaussian,
float32) from shapes only at B = 1e3, 1e5 and 1e7, through the default lanes and as one
``vmap`` of the whole batch; prints the rows of the README's table.

    PYTHONPATH=. python studies/2026-12-05-tiny_compile/compile_by_batch.py
"""

import time

import jax
import jax.numpy as jnp

import fixedopt
from fixedopt.testing_problems import FIT_MODELS as MODELS

model = MODELS["gaussian"][0]
for label, options in (("defaults (lanes)", {}), ("whole batch", {"lanes": 1 << 30})):
    for batch in (10**3, 10**5, 10**7):
        residual = lambda p, data: model(p) - data  # a new function: traced anew

        def solve(x0, fixed, data, residual=residual, options=options):
            return fixedopt.least_squares(
                residual, x0, fixed, args=(data,), batched=True, **options
            )

        shapes = (
            jax.ShapeDtypeStruct((batch, 5), jnp.float32),
            jax.ShapeDtypeStruct((batch, 5), jnp.bool_),
            jax.ShapeDtypeStruct((batch, 25), jnp.float32),
        )
        start = time.perf_counter()
        compiled = jax.jit(solve).lower(*shapes).compile()
        seconds = time.perf_counter() - start
        hlo = compiled.as_text()
        lines, fusions = len(hlo.splitlines()), hlo.count(" fusion(")
        print(f"| {label} | {batch:.0e} | {seconds:.2f} | {lines} | {fusions} |", flush=True)
