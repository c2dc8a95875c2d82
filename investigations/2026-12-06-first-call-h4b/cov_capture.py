"""Saves the inputs of spectra_slow's covariance program (solver_covariance._rows: one
chunk) and its outputs at this tree, for cov_compile.py."""

import pickle
import sys

import jax

jax.config.update("jax_enable_x64", True)
from benchmarks import first_call_cases  # noqa: E402
from fixedopt._results import solver_covariance  # noqa: E402

captured = []
original = solver_covariance._compiled


def capture(rule, *rows):
    out = original(rule, *rows)
    captured.append((rule, jax.tree.map(lambda a: jax.device_get(a), rows),
                     jax.tree.map(lambda a: jax.device_get(a), out)))
    return out


solver_covariance._compiled = capture
calls = first_call_cases.BUILDERS["spectra_slow"](2000)
jax.block_until_ready(calls["call"]())
with open(sys.argv[1], "wb") as f:
    pickle.dump(captured, f)
print(len(captured), [jax.tree.map(lambda a: a.shape, c[1][2]) for c in captured[:1]])
