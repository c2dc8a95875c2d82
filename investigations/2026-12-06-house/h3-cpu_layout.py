"""CPU (issue 61 item 6): rows-major (the lanes) against rows-minor (the batch on the
minor axis), process CPU time, interleaved, median of 5; steps and x compared.
Run from the repository root: PYTHONPATH=. .venv/bin/python investigations/2026-12-06-house/h3-cpu_layout.py"""
import statistics, sys, time
import jax, jax.numpy as jnp, numpy as np
import fixedopt
from fixedopt._driver import machine
from fixedopt.testing_problems import FIT_MODELS, decay_fits, gaussian_fits

GPUFIT = {"ftol": 1e-4, "gtol": 0.0, "xtol": 0.0, "max_steps": 10}

def program(fits, options, layout):
    model = FIT_MODELS[fits.name][0]
    res = lambda p, d: model(p) - d
    def solve(x0, fixed, data):
        return fixedopt.least_squares(res, x0, fixed, args=(data,), batched=True, **options)
    inputs = tuple(map(jnp.asarray, (fits.x0, fits.fixed, fits.data)))
    with machine.forced_layout(layout):
        t = time.perf_counter(); compiled = jax.jit(solve).lower(*inputs).compile(); c = time.perf_counter() - t
    return (lambda: jax.block_until_ready(compiled(*inputs))), c

cases = [("gaussian 1e5", gaussian_fits(10**5), GPUFIT), ("decay 2e4", decay_fits(20000), {})]
for name, fits, options in cases:
    calls, comp = {}, {}
    for layout in ("rows-major", "rows-minor"):
        calls[layout], comp[layout] = program(fits, options, layout)
        out = calls[layout]()
    times = {k: [] for k in calls}
    sols = {}
    for _ in range(5):
        for k, call in calls.items():
            t = time.process_time(); sols[k] = call(); times[k].append(time.process_time() - t)
    a, b = sols["rows-major"], sols["rows-minor"]
    print(name, {k: round(statistics.median(v), 3) for k, v in times.items()},
          "compile", {k: round(v, 1) for k, v in comp.items()},
          "steps eq", float(np.mean(np.asarray(a.steps) == np.asarray(b.steps))),
          "maxdx", float(np.max(np.abs(np.asarray(a.x) - np.asarray(b.x)))), flush=True)
