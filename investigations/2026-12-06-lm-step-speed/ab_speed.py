"""A/B of compiled-call speed between trees (ee5305c, main, a branch): fresh processes,
alternated. Per case the median wall and process CPU time of 7 (tiny: 5) compiled calls.

usage (quiet machine, from any checkout; TREES are worktrees of the commits compared):
  for i in 1 2 3 4 5; do for t in /tmp/base /tmp/main /tmp/h2; do
    (cd $t && PYTHONPATH=$t python ab_speed.py $(basename $t) /tmp/ab.jsonl); done; done
  python ab_speed.py --summary /tmp/ab.jsonl
Cases: quad n = 8 (16384 rows), 64 (2048), 512 (256), rosen n = 64, float64, the cpu
suite's sizes with a 30% per-row mask; tiny: Gpufit's protocol (1e5 fits, float32) and
decay curves (20,000, default tolerances)."""

import collections
import json
import statistics
import sys
import time

if sys.argv[1] == "--summary":
    runs = collections.defaultdict(list)
    with open(sys.argv[2]) as lines:
        for r in map(json.loads, lines):
            runs[(r["case"], r["label"])].append(r)
    labels = sorted({label for _, label in runs})
    for case in sorted({case for case, _ in runs}):
        first = statistics.median(r["cpu_s"] for r in runs[(case, "base")])
        for label in labels:
            rs = runs[(case, label)]
            cpu = statistics.median(r["cpu_s"] for r in rs)
            wall = statistics.median(r["s"] for r in rs)
            print(
                f"{case:16s} {label:6s} n={len(rs)} wall {wall:.4f} s cpu {cpu:.4f} s "
                f"({cpu / first - 1:+.1%} of base) steps {rs[0]['steps']:.4f}"
            )
    sys.exit(0)

import jax
import jax.numpy as jnp
import numpy as np

jax.config.update("jax_enable_x64", True)
import fixedopt  # noqa: E402
from benchmarks.methods import Settings, fixedopt_call  # noqa: E402
from fixedopt.testing_problems import BATCHED, FIT_MODELS, decay_fits, gaussian_fits  # noqa: E402

label, out = sys.argv[1], sys.argv[2]
records = []


def timed(call, repeats=7):
    jax.block_until_ready(call())
    walls, cpus = [], []
    for _ in range(repeats):
        start, cpu = time.perf_counter(), time.process_time()
        jax.block_until_ready(call())
        walls.append(time.perf_counter() - start)
        cpus.append(time.process_time() - cpu)
    return statistics.median(walls), statistics.median(cpus)


def record(case, compiled, inputs, repeats):
    seconds, cpu = timed(lambda: compiled(*inputs), repeats)
    solution = compiled(*inputs)
    records.append({"label": label, "case": case, "s": seconds, "cpu_s": cpu,
                    "steps": float(np.mean(np.asarray(solution.steps)))})  # fmt: skip


for problem_name, batch, n in (("quad", 16384, 8), ("quad", 2048, 64), ("quad", 256, 512),
                               ("rosen", 2048, 64)):  # fmt: skip
    problem = BATCHED[problem_name](batch, n, 0).with_mask(7, 0.3, False)
    call, inputs = fixedopt_call(problem, Settings())
    record(f"{problem_name}-{batch}-{n}", jax.jit(call).lower(*inputs).compile(), inputs, 7)

GPUFIT = {"ftol": 1e-4, "gtol": 0.0, "xtol": 0.0, "max_steps": 10}
for fits, options in ((gaussian_fits(100_000), GPUFIT), (decay_fits(20_000), {})):
    model = FIT_MODELS[fits.name][0]
    residual = lambda p, data, model=model: model(p) - data

    def solve(x0, fixed, data, residual=residual, options=options):
        return fixedopt.least_squares(residual, x0, fixed, args=(data,), batched=True, **options)

    inputs = (jnp.asarray(fits.x0), jnp.asarray(fits.fixed), jnp.asarray(fits.data))
    record(f"tiny-{fits.name}", jax.jit(solve).lower(*inputs).compile(), inputs, 5)

with open(out, "a") as f:
    for r in records:
        f.write(json.dumps(r) + "\n")
print(records)
