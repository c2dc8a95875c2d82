"""Which rows of a case form a tail at a patience P: python lone.py P CASE..."""
import sys, jax, numpy as np
jax.config.update("jax_enable_x64", True)
from fixedopt._driver import machine, batching
from fixedopt.testing import no_compiles_ahead
P = int(sys.argv[1])
machine.BACKENDS["cpu"] = machine.BACKENDS["cpu"]._replace(tail_patience=P)
seen = []
orig = batching._put_rows
batching._put_rows = lambda a, b, rows: (seen.append(tuple(rows)), orig(a, b, rows))[1]
from benchmarks.first_call_cases import BUILDERS
with no_compiles_ahead():
    for case in sys.argv[2:]:
        seen.clear()
        out = BUILDERS[case](2000 if case != "quad64" else 16384)["call"]()
        print(case, P, "tails:", sorted(set(seen)))
