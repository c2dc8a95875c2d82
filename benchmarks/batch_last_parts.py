"""Where the batch-last Levenberg-Marquardt's time goes on a chip (issue 61 item 1),
through the public API: Gpufit's spots (float32, 1e6 by default) solved by plain calls,
one compiled program, with ``max_steps`` 0, 1, 2, 4 and 10 (data): the slope is a
trip's cost, the intercept the start's (the transposes, the first evaluation); beside
it the rows' evaluation alone (residuals, the Jacobian's columns by forward products
of the batch-last map, ``J^T J`` and ``J^T r``) against the plain LM's analytic one,
and the plain LM's loop of 1 and 10 iterations. Each program's fusions. A study for
the next session's device time (docs/decisions.md, "Levenberg-Marquardt batch-last by
construction").

    python -m benchmarks.batch_last_parts                  # on the chip: $OUT/batch_last_parts.json
    python -m benchmarks.batch_last_parts --rows 20000     # a smoke run on a CPU
"""

import argparse
import json
import os
import pathlib
import re
import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np

import fixedopt
from fixedopt.testing_problems import gaussian_fits, gaussian_model

GPUFIT = {"ftol": 1e-4, "gtol": 0.0, "xtol": 0.0}
GRID_Y, GRID_X = (a.ravel()[:, None] for a in np.mgrid[0:5, 0:5].astype(np.float32))


def compiled_of(function, *inputs):
    start = time.perf_counter()
    compiled = jax.jit(function).lower(*inputs).compile()
    fusions = len(re.findall(r"kind=k", compiled.as_text()))
    return compiled, {"compile_s": time.perf_counter() - start, "fusions": fusions}


def milliseconds(compiled, *inputs, repeats=5):
    """The median milliseconds of ``compiled(*inputs)``."""
    jax.block_until_ready(compiled(*inputs))
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(compiled(*inputs))
        times.append(time.perf_counter() - start)
    return 1e3 * statistics.median(times)


def residual(p, data):
    return gaussian_model(p) - data


def solve(x0, fixed, data, max_steps=10):
    return fixedopt.least_squares(residual, x0, fixed, args=(data,),
                                  batched=True, max_steps=max_steps, **GPUFIT)  # fmt: skip


def batch_last_evaluation(p, data):
    """The rows' evaluation as fixedopt's batch-last step makes it, for this model."""
    mapped = jax.vmap(lambda q, d: gaussian_model(q) - d, in_axes=-1, out_axes=-1)
    r, linear = jax.linearize(lambda q: mapped(q, data), p)
    units = jnp.eye(5, dtype=p.dtype)[:, :, None]
    columns = [linear(jnp.broadcast_to(units[j], p.shape)) for j in range(5)]
    normal = [jnp.sum(columns[i] * columns[j], axis=0) for i in range(5) for j in range(i + 1)]
    return jnp.sum(r * r, axis=0), normal, [jnp.sum(c * r, axis=0) for c in columns]


def plain_evaluation(p, data):
    """The plain batch-last LM's analytic evaluation."""
    a, x0, y0, w, b = p
    dx, dy = GRID_X - x0, GRID_Y - y0
    r2, inv = dx * dx + dy * dy, 1.0 / (w * w)
    e = jnp.exp(-0.5 * r2 * inv)
    ae = a * e
    r = ae + b - data
    jac = [e, ae * dx * inv, ae * dy * inv, ae * r2 * inv / w, jnp.ones_like(e)]
    normal = [jnp.sum(jac[i] * jac[j], axis=0) for i in range(5) for j in range(i + 1)]
    return jnp.sum(r * r, axis=0), normal, [jnp.sum(c * r, axis=0) for c in jac]


def repeated(evaluation, times):
    """``evaluation`` ``times`` times in a loop, each from the last one's point."""

    def run(p, data):
        def body(_, q):
            cost, normal, grad = evaluation(q, data)
            return q + 1e-6 * (jnp.stack(grad) + cost + sum(normal))

        return jax.lax.fori_loop(0, times, body, p)

    return run


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=10**6)
    args = parser.parse_args()
    fits = gaussian_fits(args.rows)
    inputs = (jnp.asarray(fits.x0), jnp.asarray(fits.fixed), jnp.asarray(fits.data))
    record = {"backend": jax.default_backend(), "rows": args.rows}
    start = time.perf_counter()
    jax.block_until_ready(solve(*inputs))
    record["solve first call s"] = time.perf_counter() - start
    for steps in (0, 1, 2, 4, 10):
        call = lambda steps=steps: solve(*inputs, max_steps=steps)
        record[f"solve ms, max_steps {steps}"] = milliseconds(call)
    p, data = jnp.asarray(fits.x0.T), jnp.asarray(fits.data.T)
    for name, evaluation in (("batch-last", batch_last_evaluation), ("plain", plain_evaluation)):
        for times in (1, 10):
            compiled, record[f"{name} evaluation x{times}"] = compiled_of(
                repeated(evaluation, times), p, data
            )
            record[f"{name} evaluation x{times}"]["ms"] = milliseconds(compiled, p, data)
        print(json.dumps(record, indent=1), flush=True)
    out = pathlib.Path(os.environ.get("OUT", "."))
    (out / "batch_last_parts.json").write_text(json.dumps(record, indent=1))


if __name__ == "__main__":
    main()
