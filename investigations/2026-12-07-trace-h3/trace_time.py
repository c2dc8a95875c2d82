"""Process CPU of one case's block program traced again (``_solve``, JAX's caches
cleared before each trace), its lowering, and a digest of its StableHLO (source
locations dropped): ``python trace_time.py CASE B [prof]`` with ``PYTHONPATH`` the tree
to measure (``REPS`` traces, their minimum and each; ``HLO_OUT``: the module's text
there; ``prof``: a cProfile of one more trace, into ``PSTATS`` if set)."""

import cProfile
import hashlib
import os
import pstats
import re
import sys
import tempfile
import time

import jax

jax.config.update("jax_compilation_cache_dir", tempfile.mkdtemp())
case, batch = sys.argv[1], int(sys.argv[2])
mode = sys.argv[3] if len(sys.argv) > 3 else "time"
from benchmarks import first_call_cases as fc  # noqa: E402

if case != "spot":
    jax.config.update("jax_enable_x64", True)
from fixedopt._driver import ahead, engine  # noqa: E402

recorded = []


class Spy:
    """The solve's jit, its arguments recorded."""

    def __init__(self, inner):
        self.inner = inner

    def __call__(self, *a, **k):
        recorded.append((a, k))
        return self.inner(*a, **k)

    def lower(self, *a, **k):
        recorded.append((a, k))
        return self.inner.lower(*a, **k)

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def __hash__(self):
        return hash(self.inner)

    def __eq__(self, other):
        return other is self or other is self.inner


for attr in ("_compiled", "_compiled_for_cpu"):
    setattr(engine, attr, Spy(getattr(engine, attr)))
calls = fc.BUILDERS[case](batch)
jax.block_until_ready(calls["call"]())
ahead.settle()
args, kwargs = recorded[0]


def trace():
    jax.clear_caches()
    return jax.jit(engine._solve, static_argnums=(0, 1)).trace(*args, **kwargs)


trace()
seconds = []
for _ in range(int(os.environ.get("REPS", "5"))):
    start = time.process_time()
    traced = trace()
    seconds.append(time.process_time() - start)
print("trace s min", round(min(seconds), 3), [round(s, 3) for s in seconds])
start = time.process_time()
lowered = traced.lower()
print("lower s", round(time.process_time() - start, 3))
text = re.sub(r"loc\(.*?\)", "", lowered.as_text())
if os.environ.get("HLO_OUT"):
    with open(os.environ["HLO_OUT"], "w") as out:
        out.write(text)
print("hlo digest", hashlib.sha256(text.encode()).hexdigest()[:16], len(text.splitlines()))
if mode == "prof":
    profile = cProfile.Profile()
    profile.enable()
    trace()
    profile.disable()
    if os.environ.get("PSTATS"):
        profile.dump_stats(os.environ["PSTATS"])
    pstats.Stats(profile).sort_stats("cumulative").print_stats(r"fixedopt", 70)
