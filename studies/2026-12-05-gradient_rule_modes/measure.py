"""The implicit rule's gradient by forward or by reverse mode: first gradients and
batched gradients through ``least_squares``, in fresh processes, code against code.

    PYTHONPATH=. python studies/2026-12-05-gradient_rule_modes/measure.py \
        --tree after=. --tree before=../before [--rounds 3] [--out FILE]

Each tree is a checkout of fixedopt (``before``: a ``git worktree`` of the earlier
commit); every process imports fixedopt from its tree and ``benchmarks`` from this one.
Roles: ``first``: the spectra case of ``benchmarks.first_call`` (one fit's first call,
then its centre's first ``jax.grad``); ``batched``: ``jax.grad`` of a sum of fitted
parameters over a batch (its first call, then the median of 5 calls), for the spectra
(n = 8, B = 2000), ``rk4`` (the RK4 oscillators, a ``lax.scan`` written with vectors,
n = 6, B = 200) and ``gaussians-k``, a sum of ``k`` Gaussians on a line (n = 3 k + 1,
B = 500).
"""

import argparse
import json
import os
import pathlib
import resource
import statistics
import subprocess
import sys
import time

HERE = pathlib.Path(__file__).resolve()
ROOT = HERE.parents[2]


def gaussians(batch: int, k: int):
    """``k`` Gaussians and an offset (n = 3 k + 1), 301 points; noisy data, per-row
    fixed sets."""
    import jax.numpy as jnp
    import numpy as np

    x = np.linspace(0.0, 30.0, 301)

    def model(p):
        a, c, s = p[0 : 3 * k : 3], p[1 : 3 * k : 3], p[2 : 3 * k : 3]
        peaks = a[:, None] * jnp.exp(-((x[None] - c[:, None]) ** 2) / (2 * s[:, None] ** 2))
        return jnp.sum(peaks, axis=0) + p[3 * k]

    rng = np.random.default_rng(1)
    peaks = np.stack([rng.uniform(1, 2, (batch, k)),
                      np.linspace(4, 26, k) + rng.uniform(-1, 1, (batch, k)),
                      rng.uniform(0.8, 1.5, (batch, k))], axis=2)  # fmt: skip
    truth = np.concatenate([peaks.reshape(batch, 3 * k), rng.uniform(0, 1, (batch, 1))], axis=1)
    y = np.stack([np.asarray(model(jnp.asarray(p))) for p in truth[:1]] * batch)
    y = y + rng.normal(0.0, 0.05, y.shape)
    fixed = rng.random((batch, 3 * k + 1)) < 0.2
    start = np.where(fixed, truth, truth * rng.uniform(0.95, 1.05, truth.shape))
    return (lambda p, y: model(p) - y), start, fixed, y


def child(role: str) -> dict:
    import jax
    import jax.numpy as jnp

    jax.config.update("jax_enable_x64", True)
    import fixedopt
    from benchmarks import first_call

    if role == "first":
        calls = first_call.BUILDERS["spectra"](50)
        forward, gradient = first_call.timed(calls["forward"]), first_call.timed(calls["gradient"])
        return {"forward_first_s": forward[0], "gradient_first_s": gradient[0],
                "gradient_compile_s": gradient[1]["compile"]}  # fmt: skip
    if role == "spectra":
        p0, fixed, y = first_call.BUILDERS["spectra"](2000)["inputs"]
        residual = first_call.spectrum_residual
    elif role == "rk4":
        p0, fixed, y = first_call.BUILDERS["rk4"](200)["inputs"]
        residual = first_call.trajectory_residual
    else:  # gaussians-k
        residual, p0, fixed, y = gaussians(500, int(role.split("-")[1]))

    def total(y):
        solution = fixedopt.least_squares(residual, p0, fixed, args=(y,), batched=True)
        return jnp.sum(solution.x[:, 1])

    grad, y = jax.grad(total), jnp.asarray(y)
    start = time.perf_counter()
    jax.block_until_ready(grad(y))
    first = time.perf_counter() - start
    times = []
    for _ in range(5):
        start = time.perf_counter()
        jax.block_until_ready(grad(y))
        times.append(time.perf_counter() - start)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # MiB (Linux: KiB)
    return {"first_s": first, "run_s": statistics.median(times), "peak_rss_mib": peak}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--child", nargs=1)
    parser.add_argument("--tree", action="append", default=[])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--roles", default="first,spectra,gaussians-3,gaussians-5")
    parser.add_argument("--out")
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child[0])))
        return
    trees = dict(t.split("=", 1) for t in args.tree)
    records = []
    for repeat in range(args.rounds):
        for role in args.roles.split(","):
            for label, tree in trees.items():
                path = f"{pathlib.Path(tree).resolve()}{os.pathsep}{ROOT}"
                env = {**os.environ, "FIXEDOPT_CACHE": "off", "PYTHONPATH": path}
                done = subprocess.run([sys.executable, str(HERE), "--child", role], env=env,
                                      capture_output=True, text=True, check=True)  # fmt: skip
                record = {"tree": label, "role": role, "repeat": repeat,
                          **json.loads(done.stdout.strip().splitlines()[-1])}  # fmt: skip
                print(json.dumps(record), flush=True)
                records.append(record)
    if args.out:
        pathlib.Path(args.out).write_text(json.dumps(records, indent=1) + "\n")


if __name__ == "__main__":
    main()
