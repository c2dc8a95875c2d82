"""One program for every batch size, before and after: the warm call and the wait of the
first call at each batch size, in one process per case; and the warm call against
explicit widths (``--widths``).

    git worktree add ../before <commit before the change>
    PYTHONPATH=. python studies/2026-12-05-batch_sizes/measure.py --before ../before
    PYTHONPATH=. python studies/2026-12-05-batch_sizes/measure.py --widths

Each case runs in a fresh process (no persistent cache), alternating the two checkouts,
``--rounds`` times; medians. Writes ``results.json`` (``widths.json``) beside this file.
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
# The batch sizes of each case, in the order one process calls them (the first compiles).
SIZES = {"spectra": (2000, 200, 20), "rk4": (500, 50, 5000), "spot": (100_000, 10_000),
         "quad8": (1024, 16384), "quad64": (16384, 1600)}  # fmt: skip
WIDTHS = {("rk4", 500): (0, 16, 32, 64, 128, 231), ("rk4", 5000): (0, 32, 64, 128, 231),
          ("spectra", 200): (0, 16, 32, 64, 148), ("spectra", 2000): (0, 32, 64, 148),
          ("spot", 100_000): (0, 256, 512, 1024, 1387, 2048)}  # fmt: skip


def quad(n: int, batch: int, lanes=None):
    import numpy as np

    import fixedopt
    from fixedopt.testing_problems import quad_jax

    rng = np.random.default_rng(0)
    diag, off = rng.uniform(2.0, 4.0, (batch, n)), rng.uniform(-0.9, 0.9, (batch, n - 1))
    b, x0 = rng.normal(size=(batch, n)), rng.normal(size=(batch, n))
    fixed = rng.random((batch, n)) < 0.3
    return lambda: fixedopt.minimize(quad_jax, x0, fixed, args=(diag, off, b), batched=True,
                                     lanes=lanes)  # fmt: skip


PLAIN = {}  # fixedopt's own functions, before a width is bound to them


def build(case: str, batch: int, lanes=None):
    """The case's call at ``batch`` rows (``lanes``: an explicit width; 0 or None: the
    default)."""
    import functools

    import fixedopt
    from benchmarks import first_call

    if case.startswith("quad"):
        return quad(int(case[4:]), batch, lanes or None)
    for name in ("least_squares", "curve_fit"):  # the builders call fixedopt.<name>
        plain = PLAIN.setdefault(name, getattr(fixedopt, name))
        setattr(fixedopt, name, functools.partial(plain, lanes=lanes) if lanes else plain)
    return first_call.BUILDERS[case](batch)["call"]


def warm(call, repeats: int = 5) -> tuple[float, float]:
    """The first call's seconds and the median of ``repeats`` calls after it."""
    import jax

    start = time.perf_counter()
    jax.block_until_ready(call())
    first = time.perf_counter() - start
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(call())
        times.append(time.perf_counter() - start)
    return first, statistics.median(times)


def child(mode: str, case: str) -> dict:
    import jax

    jax.config.update("jax_enable_x64", True)
    if mode == "sizes":
        out = {}
        for batch in SIZES[case]:
            first, again = warm(build(case, batch))
            out[batch] = {"warm_s": again, "wait_s": first - again}
        return out
    name, batch = case.split(":")
    return {w: warm(build(name, int(batch), w))[1] for w in WIDTHS[name, int(batch)]}


def run(tree: pathlib.Path, mode: str, case: str) -> dict:
    env = dict(os.environ, PYTHONPATH=str(tree), FIXEDOPT_CACHE="0")
    command = [sys.executable, str(HERE / "measure.py"), "--child", mode, case]
    done = subprocess.run(command, cwd=tree, env=env, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--before", type=pathlib.Path, help="a checkout of the code before")
    parser.add_argument("--widths", action="store_true", help="explicit widths, this code")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(*args.child)))
        return
    if args.widths:
        cases = [f"{name}:{batch}" for name, batch in WIDTHS]
        trees, mode, out = {"after": ROOT}, "widths", HERE / "widths.json"
    else:
        cases, mode, out = list(SIZES), "sizes", HERE / "results.json"
        trees = {"before": args.before.resolve(), "after": ROOT}
    runs = {case: {label: [] for label in trees} for case in cases}
    for _ in range(args.rounds):
        for case in cases:
            for label, tree in trees.items():
                runs[case][label].append(run(tree, mode, case))
                print(case, label, runs[case][label][-1], flush=True)
    medians = {case: {label: {key: _median([r[key] for r in found]) for key in found[0]}
                      for label, found in by_tree.items()}
               for case, by_tree in runs.items()}  # fmt: skip
    out.write_text(json.dumps({"medians": medians, "runs": runs}, indent=1))


def _median(values: list) -> object:
    if isinstance(values[0], dict):
        return {k: statistics.median(v[k] for v in values) for k in values[0]}
    return statistics.median(values)


if __name__ == "__main__":
    main()
