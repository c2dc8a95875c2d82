"""Issue 61: rows of quad(256, 64) float32 at an absolute gradient tolerance beyond their
precision (relative tests off): statuses and steps. ``PYTHONPATH=. python benchmarks/flat_steps.py``."""


import jax
import numpy as np

from benchmarks.methods import Settings, fixedopt_call
from fixedopt.testing_problems import BATCHED

problem = BATCHED["quad"](256, 64, 0, "float32")
for gtol in (1e-3, 1e-4, 1e-5, 1e-7):
    s = Settings(gtol, 2000, 32, 2**20)
    c, i = fixedopt_call(problem, s)
    a = jax.jit(c)(*i)
    st = np.asarray(a.status)
    sp = np.asarray(a.steps)
    print(
        gtol,
        "jit statuses",
        np.unique(st, return_counts=True),
        "steps max",
        sp.max(),
        "mean",
        sp.mean(),
    )
