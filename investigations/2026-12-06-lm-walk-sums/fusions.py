"""Fusions in the optimized HLO of the largest while-loop body of the tiny suite's
least-squares fits (Gpufit's protocol, 1e5 fits; decay curves, 20,000), and their final
x/status/steps/reason (for a bit comparison between trees).

usage (from a tree, PYTHONPATH set to it): python fusions.py LABEL [--dump OUT.npz]"""

import re
import sys

import jax
import jax.numpy as jnp
import numpy as np

jax.config.update("jax_enable_x64", True)
import fixedopt  # noqa: E402
from fixedopt.testing_problems import FIT_MODELS, decay_fits, gaussian_fits  # noqa: E402

GPUFIT = {"ftol": 1e-4, "gtol": 0.0, "xtol": 0.0, "max_steps": 10}
label, dump = sys.argv[1], {}
for make, options, size in ((gaussian_fits, GPUFIT, 100_000), (decay_fits, {}, 20_000)):
    fits = make(size)
    model = FIT_MODELS[fits.name][0]

    def solve(x0, fixed, data, model=model, options=options):
        residual = lambda p, data: model(p) - data
        return fixedopt.least_squares(residual, x0, fixed, args=(data,), batched=True, **options)

    inputs = (jnp.asarray(fits.x0), jnp.asarray(fits.fixed), jnp.asarray(fits.data))
    compiled = jax.jit(solve).lower(*inputs).compile()
    text, comps, name = compiled.as_text(), {}, None
    for line in text.splitlines():
        head = re.match(r"^(?:ENTRY )?%?([\w.\-]+) .*\{$", line)
        if head and not line.startswith(" "):
            name, comps[head.group(1)] = head.group(1), []
        elif name is not None:
            comps[name].append(line)
    body = max(set(re.findall(r"body=%?([\w.\-]+)", text)), key=lambda b: len(comps.get(b, [])))
    fusions = sum(" fusion(" in line for line in comps[body])
    print(f"{label} {fits.name}: loop body {fusions} fusions")
    solution = compiled(*inputs)
    for key in ("x", "status", "steps", "reason"):
        dump[f"{fits.name}_{key}"] = np.asarray(getattr(solution, key))
if sys.argv[2:3] == ["--dump"]:
    np.savez(sys.argv[3], **dump)
