"""CPU time of one compiled tiny fit (decay: 20,000 curves, default tolerances; gaussian:
Gpufit's protocol, 1e5 fits) in one fresh process: 25 calls, their minimum and median
process CPU time appended to a jsonl. Alternate trees (worktrees of the commits
compared, the reference labelled base), then summarize:

  for i in 1 2 3; do for t in base head h1; do
    (cd ../ab-$t && PYTHONPATH=. python ab_decay.py $t ab.jsonl decay); done; done
  python ab_decay.py --summary ab.jsonl"""

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
    for (case, label), rs in sorted(runs.items()):
        base = [r for r in runs[(case, "base")]]
        first = statistics.median(r["min"] for r in base)
        low = statistics.median(r["min"] for r in rs)
        mid = statistics.median(r["median"] for r in rs)
        print(
            f"{case} {label:6s} n={len(rs)} min cpu {low:.4f} s ({low / first - 1:+.1%}) "
            f"median {mid:.4f} s ({mid / statistics.median(r['median'] for r in base) - 1:+.1%})"
        )
        if "wmin" in rs[0]:
            wl = statistics.median(r["wmin"] for r in rs)
            wb = statistics.median(r["wmin"] for r in base)
            print(f"   wall min {wl:.4f} s ({wl / wb - 1:+.1%})")
    sys.exit(0)

import jax
import jax.numpy as jnp

jax.config.update("jax_enable_x64", True)
import fixedopt  # noqa: E402
from fixedopt.testing_problems import FIT_MODELS, decay_fits, gaussian_fits  # noqa: E402

label, out = sys.argv[1], sys.argv[2]
case = sys.argv[3] if len(sys.argv) > 3 else "decay"
GPUFIT = {"ftol": 1e-4, "gtol": 0.0, "xtol": 0.0, "max_steps": 10}
fits, options = (decay_fits(20_000), {}) if case == "decay" else (gaussian_fits(100_000), GPUFIT)
model = FIT_MODELS[fits.name][0]
import os

if os.environ.get("ABWIDTH"):
    from fixedopt._driver import machine

    machine.default_width = lambda batch, row_bytes, backend, w=int(os.environ["ABWIDTH"]): min(
        batch, w
    )
if os.environ.get("ABLANES"):
    options = {**options, "lanes": int(os.environ["ABLANES"])}


def solve(x0, fixed, data):
    residual = lambda p, data: model(p) - data
    return fixedopt.least_squares(residual, x0, fixed, args=(data,), batched=True, **options)


inputs = (jnp.asarray(fits.x0), jnp.asarray(fits.fixed), jnp.asarray(fits.data))
compiled = jax.jit(solve).lower(*inputs).compile()
jax.block_until_ready(compiled(*inputs))
cpus, walls = [], []
for _ in range(25):
    start, wall = time.process_time(), time.perf_counter()
    jax.block_until_ready(compiled(*inputs))
    cpus.append(time.process_time() - start)
    walls.append(time.perf_counter() - wall)
with open(out, "a") as f:
    record = {
        "label": label,
        "case": case,
        "min": min(cpus),
        "median": statistics.median(cpus),
        "wmin": min(walls),
        "wmedian": statistics.median(walls),
    }
    f.write(json.dumps(record) + "\n")
