"""A/B of the covariance's programs with and without XLA:CPU's parallel task assigner
(``cpu_compiler.SERIAL_ROW_WISE_OPTIONS`` against ``ROW_WISE_OPTIONS``), and of larger
chunks (16,384 rows, 16 MiB), in ``curve_fit`` on the cases of
``benchmarks.covariance_share``: process CPU time and wall time of the whole call, the
covariance's CPU time and share; interleaved, order alternated, medians. Run:
``python -m benchmarks.covariance_serial_ab [REPEATS] [big]``."""

import statistics
import sys
import time

import jax
import jax.numpy as jnp

jax.config.update("jax_enable_x64", True)
from benchmarks import covariance_share as cs
from fixedopt._numerics import cpu_compiler
from fixedopt._results import (
    covariance as cov_mod,
)
from fixedopt._results import (
    covariance_batches as cb,
)
from fixedopt._results import (
    covariance_program as cp,
)
from fixedopt._results import solver_covariance as sc

sc.fit_covariance = cs._timed_covariance

nopar = cpu_compiler.SERIAL_ROW_WISE_OPTIONS
base = cpu_compiler.ROW_WISE_OPTIONS
nopar_compiled = cpu_compiler.jit_for_cpu(cp._row_covariances, (0, 1, 2, 3, 4, 5), nopar)
base_compiled = cpu_compiler.jit_for_cpu(cp._row_covariances, (0, 1, 2, 3, 4, 5), base)
nopar_rows = cpu_compiler.jit_for_cpu(sc._rows, (0,), nopar, stored=True)
base_rows = cpu_compiler.jit_for_cpu(sc._rows, (0,), base, stored=True)


def setup(name):
    cb.LARGE_ROWS, cb.LARGE_BYTES = (16384, 1 << 24) if name == "big" else (4096, 1 << 22)
    cov_mod._compiled = nopar_compiled if name == "nopar" else base_compiled
    sc._compiled = nopar_rows if name == "nopar" else base_rows



variants = ["base", "nopar"] + (["big"] if "big" in sys.argv else [])
DTS = (jnp.float32, jnp.float64)
cases = {}
for label, make in (
    ("decay", lambda: cs.decay_case(10_000)),
    ("spectra", lambda: cs.spectra_case(2_000)),
    ("gpufit", lambda: cs.gpufit_case(100_000)),
):
    case = make()
    for DT in DTS:
        cases[f"{label} {jnp.dtype(DT).name}"] = cs.ours(case, DT)
for v in variants:
    setup(v)
    for c in cases.values():
        jax.block_until_ready(c())
R = int(sys.argv[1]) if len(sys.argv) > 1 else 5
tot = {(c, v): [] for c in cases for v in variants}
wall = {(c, v): [] for c in cases for v in variants}
part = {(c, v): [] for c in cases for v in variants}
for r in range(R):
    for c, call in cases.items():
        for v in variants if r % 2 == 0 else variants[::-1]:
            setup(v)
            cs._SPENT.clear()
            w = time.perf_counter()
            t = time.process_time()
            jax.block_until_ready(call())
            tot[c, v].append(time.process_time() - t)
            wall[c, v].append(time.perf_counter() - w)
            part[c, v].append(sum(cs._SPENT))
for c in cases:
    for v in variants:
        t = statistics.median(tot[c, v])
        p = statistics.median(part[c, v])
        sh = statistics.median(a / b for a, b in zip(part[c, v], tot[c, v]))
        print(
            f"{c:16} {v:6} curve_fit CPU {t:.3f} s wall {statistics.median(wall[c, v]):.3f} s  cov CPU {1e3 * p:6.1f} ms  share {sh:6.1%}"
        )
