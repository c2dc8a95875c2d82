"""The normal sums' rule, before and after: the first call's wait and the warm call.

    git worktree add ../before <commit before the rule>
    PYTHONPATH=. python studies/2026-12-05-summed_normal_sums/measure.py --before ../before

Each case runs in fresh processes (no persistent cache: every first call compiles),
alternating the two checkouts, ``--rounds`` times; medians.
"""

import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import time

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[1]
CASES = ("spot", "decay", "poly6", "poly7", "poly8", "spectra", "models")


def polynomial(n: int):
    """A degree ``n - 1`` polynomial on 301 points, 2000 fits, from zero."""
    import jax.numpy as jnp
    import numpy as np

    import fixedopt

    x = np.linspace(-1.0, 1.0, 301)
    rng = np.random.default_rng(0)
    coefficients = rng.normal(size=(2000, n))
    data = np.polynomial.polynomial.polyval(x, coefficients.T) + 0.01 * rng.normal(size=(2000, 301))
    xs = jnp.asarray(x)

    def residual(p, d):
        return jnp.polyval(p[::-1], xs) - d

    start, fixed, data = jnp.zeros((2000, n)), jnp.zeros((2000, n), bool), jnp.asarray(data)
    return lambda: fixedopt.least_squares(residual, start, fixed, args=(data,), batched=True).x


def decay():
    import jax.numpy as jnp

    import fixedopt
    from fixedopt.testing_problems import FIT_MODELS, decay_fits

    fits = decay_fits(20_000)
    model = FIT_MODELS[fits.name][0]
    inputs = (jnp.asarray(a) for a in (fits.x0, fits.fixed, fits.data))
    x0, fixed, data = inputs
    residual = lambda p, d: model(p) - d
    return lambda: fixedopt.least_squares(residual, x0, fixed, args=(data,), batched=True).x


def build(case: str):
    if case.startswith("poly"):
        return polynomial(int(case[4:]))
    if case == "decay":
        return decay()
    if case == "models":
        from benchmarks import models_vs_lmfit

        return models_vs_lmfit.models_call(*models_vs_lmfit.spectra(2000))
    from benchmarks import first_call

    return first_call.BUILDERS[case](first_call.BATCHES[case][0])["call"]


def child(case: str) -> dict:
    import jax

    jax.config.update("jax_enable_x64", case != "spot")
    call = build(case)
    start = time.perf_counter()
    jax.block_until_ready(jax.tree.leaves(call()))
    first = time.perf_counter() - start
    warm = []
    for _ in range(7):
        start = time.perf_counter()
        jax.block_until_ready(jax.tree.leaves(call()))
        warm.append(time.perf_counter() - start)
    median = statistics.median(warm)
    return {"wait_s": first - median, "warm_s": median}


def run(root: str, case: str) -> dict:
    env = dict(os.environ, PYTHONPATH=root, FIXEDOPT_CACHE="off")
    command = [sys.executable, str(HERE / "measure.py"), "--child", case]
    done = subprocess.run(command, env=env, cwd=root, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--child")
    parser.add_argument("--before")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=pathlib.Path, default=HERE / "results.json")
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child)))
        return
    runs = {(case, side): [] for case in CASES for side in ("before", "after")}
    for _ in range(args.rounds):
        for case in CASES:
            for side, root in (("before", args.before), ("after", str(ROOT))):
                runs[case, side].append(run(root, case))
    table = []
    for case in CASES:
        row = {"case": case}
        for side in ("before", "after"):
            for key in ("wait_s", "warm_s"):
                row[f"{side}_{key}"] = statistics.median(r[key] for r in runs[case, side])
        table.append(row)
        print(" | ".join(f"{v:.3f}" if isinstance(v, float) else v for v in row.values()))
    args.out.write_text(
        json.dumps(
            {
                "rounds": args.rounds,
                "table": table,
                "runs": {f"{c}/{s}": r for (c, s), r in runs.items()},
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
